"""Linux's own locks on the process that runs a submission, set before its code loads.

- **Landlock** (Linux 5.13+, no root): the process may write, create and delete files
  only under its work folder, read only there, in the system's folders and where
  Python, its libraries and the package live (not ``/proc``, not the repository's
  chapters with their solutions, not another student's notebook), open no TCP
  connection (ABI 4+) and signal no process outside itself (ABI 6+).
- **seccomp** (no root, with ``no_new_privs``): it may start no process (fork, vfork,
  ``clone`` without ``CLONE_THREAD``, ``clone3``, exec), trace none, signal none but
  itself, and use neither user namespaces nor io_uring nor BPF.
- ``setrlimit``: no file larger than a limit, no more memory than a limit.
- ``PR_SET_PDEATHSIG``: it dies with the process that started it.
- ``PR_SET_CHILD_SUBREAPER``: for the warden, every process its child leaves behind
  becomes the warden's child, whatever session it started.

Each function returns what it could not do, in words, instead of raising: on another
system, or an older kernel, grading goes on with the locks it has and says which.
"""

from __future__ import annotations

import ctypes
import os
import platform
import resource
import signal
import struct
import sys

PR_SET_PDEATHSIG = 1
PR_SET_NO_NEW_PRIVS = 38
PR_SET_CHILD_SUBREAPER = 36

_LIBC = None


def _libc():
    global _LIBC
    if _LIBC is None:
        _LIBC = ctypes.CDLL(None, use_errno=True)
        _LIBC.syscall.restype = ctypes.c_long
        _LIBC.prctl.restype = ctypes.c_int
    return _LIBC


def _prctl(option: int, arg: int) -> str | None:
    libc = _libc()
    args = [ctypes.c_ulong(option), ctypes.c_ulong(arg)] + [ctypes.c_ulong(0)] * 3
    if libc.prctl(*args) != 0:
        return os.strerror(ctypes.get_errno())
    return None


def linux() -> bool:
    return sys.platform.startswith("linux")


def die_with_parent(parent: int) -> str | None:
    """Be killed when ``parent`` ends (and end now if it already has)."""
    if not linux():
        return "not Linux: no PR_SET_PDEATHSIG"
    problem = _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:
        os._exit(3)
    return problem


def become_subreaper() -> str | None:
    """Orphaned descendants become this process's children."""
    if not linux():
        return "not Linux: no PR_SET_CHILD_SUBREAPER"
    return _prctl(PR_SET_CHILD_SUBREAPER, 1)


def proc_stat(pid: int | str) -> list[str] | None:
    """The fields of ``/proc/<pid>/stat`` after the command name (which may hold
    spaces and parentheses): ``[0]`` the state, ``[1]`` the parent's pid, ``[11]`` and
    ``[12]`` the user and system CPU time in clock ticks. None where ``/proc`` does
    not tell (not Linux, or the process ended)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read().decode("ascii", "replace")
    except OSError:
        return None
    return stat.rsplit(")", 1)[-1].split()


def children(pid: int | None = None) -> list[int]:
    """The pids whose parent is ``pid`` (this process by default), from /proc."""
    pid = os.getpid() if pid is None else pid
    found = []
    try:
        entries = os.listdir("/proc")
    except OSError:
        return found
    for entry in entries:
        if not entry.isdigit():
            continue
        fields = proc_stat(entry)
        if fields is not None and len(fields) > 1 and fields[1] == str(pid):
            found.append(int(entry))
    return found


def limit_resources(max_file: int, max_memory: int) -> None:
    """No file written larger than ``max_file`` bytes, no more than ``max_memory``
    bytes of data (heap and private mappings: an allocation past it fails with
    MemoryError, or torch's "can't allocate memory"); no core dump."""
    limits = ((resource.RLIMIT_FSIZE, max_file), (resource.RLIMIT_CORE, 0),
              (resource.RLIMIT_DATA, max_memory))  # fmt: skip
    for what, value in limits:
        soft, hard = resource.getrlimit(what)
        cap = value if hard == resource.RLIM_INFINITY else min(value, hard)
        resource.setrlimit(what, (cap, hard))


# --- Landlock -------------------------------------------------------------------------

_LANDLOCK_CREATE_RULESET, _LANDLOCK_ADD_RULE, _LANDLOCK_RESTRICT_SELF = 444, 445, 446
_READ = (1 << 0) | (1 << 2) | (1 << 3)  # execute, read file, read dir
_READ_FILE = 1 << 2
# what torch and libc read from /proc while they run (the CPU's features); the rest of
# /proc (another process's memory and files, this one's) stays closed
_PROC_FILES = ("/proc/cpuinfo", "/proc/meminfo", "/proc/stat")
_FS_RIGHTS_BY_ABI = {1: (1 << 13) - 1, 2: (1 << 14) - 1, 3: (1 << 15) - 1}
_NET_TCP = (1 << 0) | (1 << 1)  # bind, connect
_SCOPES = (1 << 0) | (1 << 1)  # abstract unix sockets, signals


def landlock_abi() -> int:
    """Landlock's ABI version on this kernel, 0 without it."""
    if not linux():
        return 0
    libc = _libc()
    abi = libc.syscall(_LANDLOCK_CREATE_RULESET, None, ctypes.c_size_t(0), 1)
    return max(int(abi), 0)


# what a runner may read besides the places of Python, its libraries and the package
SYSTEM_DIRS = ("/usr", "/lib", "/lib32", "/lib64", "/libx32", "/bin", "/sbin", "/etc",
               "/dev", "/sys")  # fmt: skip


def landlock(workdir: str, readable: list[str]) -> str | None:
    """Write only under ``workdir``; read only there, under ``readable`` and the
    system's folders (not /proc, not the teacher's files, not another submission);
    no TCP; no outside signals."""
    abi = landlock_abi()
    if abi == 0:
        return "this kernel has no Landlock: files are guarded by an audit hook only"
    libc = _libc()
    fs = _FS_RIGHTS_BY_ABI[min(abi, 3)] | ((1 << 15) if abi >= 5 else 0)
    net = _NET_TCP if abi >= 4 else 0
    scoped = _SCOPES if abi >= 6 else 0
    attr = struct.pack("=QQQ", fs, net, scoped)
    size = 8 if abi < 4 else 16 if abi < 6 else 24
    buf = ctypes.create_string_buffer(attr[:size], size)
    ruleset = libc.syscall(_LANDLOCK_CREATE_RULESET, buf, ctypes.c_size_t(size), 0)
    if ruleset < 0:
        return f"Landlock: {os.strerror(ctypes.get_errno())}"
    try:
        rules = [(workdir, fs)]
        rules += [(path, _READ) for path in (*SYSTEM_DIRS, *readable)
                  if os.path.isdir(path)]  # fmt: skip
        rules += [(path, _READ_FILE) for path in _PROC_FILES]
        for path, rights in rules:
            try:
                fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except OSError:
                continue
            try:
                rule = ctypes.create_string_buffer(struct.pack("=Qi", rights, fd), 12)
                if libc.syscall(_LANDLOCK_ADD_RULE, ruleset, 1, rule, 0) < 0:
                    return (
                        f"Landlock rule for {path}: {os.strerror(ctypes.get_errno())}"
                    )
            finally:
                os.close(fd)
        problem = _prctl(PR_SET_NO_NEW_PRIVS, 1)
        if problem:
            return f"no_new_privs: {problem}"
        if libc.syscall(_LANDLOCK_RESTRICT_SELF, ruleset, 0) < 0:
            return f"Landlock: {os.strerror(ctypes.get_errno())}"
    finally:
        os.close(ruleset)
    return None


# --- seccomp --------------------------------------------------------------------------

_ARCH = {  # AUDIT_ARCH_*, and the syscall numbers the filter names
    "x86_64": (0xC000003E, {
        "seccomp": 317, "clone": 56, "clone3": 435, "fork": 57, "vfork": 58,
        "execve": 59, "execveat": 322, "kill": 62, "tkill": 200, "tgkill": 234,
        "ptrace": 101, "process_vm_readv": 310, "process_vm_writev": 311,
        "pidfd_send_signal": 424, "unshare": 272, "setns": 308,
        "io_uring_setup": 425, "bpf": 321,
    }),
    "aarch64": (0xC00000B7, {
        "seccomp": 277, "clone": 220, "clone3": 435, "execve": 221,
        "execveat": 281, "kill": 129, "tkill": 130, "tgkill": 131, "ptrace": 117,
        "process_vm_readv": 270, "process_vm_writev": 271, "pidfd_send_signal": 424,
        "unshare": 97, "setns": 268, "io_uring_setup": 425, "bpf": 280,
    }),
}  # fmt: skip
_DENIED = ("fork", "vfork", "execve", "execveat", "tkill", "ptrace", "process_vm_readv",
           "process_vm_writev", "pidfd_send_signal", "unshare", "setns",
           "io_uring_setup", "bpf")  # fmt: skip
_ALLOW, _EPERM, _ENOSYS = 0x7FFF0000, 0x00050000 | 1, 0x00050000 | 38
_CLONE_THREAD = 0x00010000


def _bpf(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k & 0xFFFFFFFF)


def _load(offset: int) -> bytes:
    return _bpf(0x20, offset)  # BPF_LD | BPF_W | BPF_ABS


def _ret(value: int) -> bytes:
    return _bpf(0x06, value)  # BPF_RET | BPF_K


def _if_equal(k: int, then: list[bytes]) -> list[bytes]:
    """``if A == k: then`` (``then`` ends in a return), else fall through."""
    return [_bpf(0x15, k, 0, len(then)), *then]  # BPF_JMP | BPF_JEQ | BPF_K


def seccomp_filter() -> bytes | None:
    """The filter program for this machine's architecture, or None."""
    arch = _ARCH.get(platform.machine())
    if arch is None:
        return None
    audit_arch, nr = arch
    me = os.getpid()
    arg0 = 16  # seccomp_data.args[0], its low 32 bits (little-endian)
    prog = [_load(4), _bpf(0x15, audit_arch, 1, 0), _ret(_EPERM), _load(0)]
    if audit_arch == 0xC000003E:  # the x32 ABI shares the architecture: refuse it
        prog += [_bpf(0x35, 0x40000000, 0, 1), _ret(_EPERM)]  # BPF_JGE
    for name in _DENIED:
        if name in nr:
            prog += _if_equal(nr[name], [_ret(_EPERM)])
    prog += _if_equal(nr["clone3"], [_ret(_ENOSYS)])  # libc falls back to clone
    prog += _if_equal(
        nr["clone"],
        [_load(arg0), _bpf(0x45, _CLONE_THREAD, 0, 1), _ret(_ALLOW), _ret(_EPERM)],
    )  # BPF_JSET: a thread may start, a process may not
    for name in ("kill", "tgkill"):  # only this process, or its own group
        allowed = (me, -me, 0) if name == "kill" else (me,)
        checks = []
        for pid in allowed:
            checks += [_bpf(0x15, pid, 0, 1), _ret(_ALLOW)]
        prog += _if_equal(nr[name], [_load(arg0), *checks, _ret(_EPERM)])
    prog.append(_ret(_ALLOW))
    return b"".join(prog)


def seccomp() -> str | None:
    """Start no process, signal no other, trace none (on every thread of this one)."""
    if not linux():
        return "not Linux: no seccomp"
    program = seccomp_filter()
    if program is None:
        return f"no seccomp filter for {platform.machine()}"
    problem = _prctl(PR_SET_NO_NEW_PRIVS, 1)
    if problem:
        return f"no_new_privs: {problem}"
    n = len(program) // 8
    filters = ctypes.create_string_buffer(program, len(program))

    class SockFprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    fprog = SockFprog(n, ctypes.cast(filters, ctypes.c_void_p))
    libc = _libc()
    number = _ARCH[platform.machine()][1]["seccomp"]
    # SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC
    if libc.syscall(number, 1, 1, ctypes.byref(fprog)) != 0:
        return f"seccomp: {os.strerror(ctypes.get_errno())}"
    return None
