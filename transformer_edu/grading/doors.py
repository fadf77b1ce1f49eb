"""The doors of the runner: the audit hook that refuses what could reach the grader,
the machine, the teacher's files or another submission, and keeps the record of
references called and the key that seals each answer; the doors no audit event guards
(threads, signals, the profiler), closed by hand.

Everything the hook reads is bound when it is made (a module's globals can be changed
later by the student's code; a closure's cannot be reached), and it runs none of the
student's code: it looks at exact builtin types only.
"""

from __future__ import annotations

import _hashlib
import _struct
import io
import os
import sys
import types
from pathlib import Path

import torch

# the checkout: <REPOSITORY>/transformer_edu/grading/doors.py (its chapters hold the
# solutions, so it is not trusted code, only the package inside it is)
REPOSITORY = Path(__file__).resolve().parents[2]
_WATCH = "transformer_edu.torch"  # audit event: the torch mode saw a torch call


def _trusted_files() -> tuple[str, ...]:
    """Where the code of Python, torch, the libraries and the package lives: any other
    code (a notebook's cells, what it compiles or writes and imports) is the
    student's."""
    root = str(REPOSITORY)
    places = {os.path.dirname(torch.__file__), str(REPOSITORY / "transformer_edu")}
    for entry in sys.path:
        if entry and os.path.isabs(entry) and os.path.isdir(entry) and entry != root:
            places.add(os.path.realpath(entry))
            places.add(entry)
    return (*sorted(p.rstrip(os.sep) + os.sep for p in places), "<frozen ")


_FUNCTION_STATE = ("__code__", "__defaults__", "__kwdefaults__", "__globals__",
                   "__closure__")  # fmt: skip
_REFUSED = (
    "os.system", "os.exec", "os.posix_spawn", "os.spawn", "os.fork", "os.forkpty",
    "subprocess.Popen", "pty.spawn", "os.kill", "os.killpg", "signal.pthread_kill",
    "gc.get_objects", "gc.get_referrers", "gc.get_referents",
    "sys._current_frames", "sys._current_exceptions", "sys.setprofile", "sys.settrace",
    "sys.addaudithook", "code.__new__", "function.__new__",
    "cpython.PyInterpreterState_New", "sqlite3.connect",
    "os.startfile", "winreg.OpenKey", "webbrowser.open",
)  # fmt: skip
_REFUSED_PREFIXES = ("ctypes.", "socket.", "_posixsubprocess.")
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_TRUNC
_PATH_EVENTS = ("os.remove", "os.unlink", "os.rmdir", "shutil.rmtree", "os.rename",
                "os.replace", "os.mkdir", "os.chmod", "os.truncate", "os.symlink",
                "os.link", "shutil.copyfile", "shutil.move", "os.chown",
                "os.mkfifo", "os.mknod", "os.utime")  # fmt: skip


def _walk(path: str, root: str):
    """Each place ``path`` passes through, as the kernel walks it part by part (made
    absolute against ``root``, "." and ".." resolved by text): the last is where it
    ends."""
    if not path.startswith("/"):
        path = root + "/" + path
    parts: list[str] = []
    for part in path.split("/"):
        if part == "..":
            if parts:
                parts.pop()
        elif part and part != ".":
            parts.append(part)
        yield "/" + "/".join(parts)


# _walk is bound as a default below: the student's code may replace this module's
# globals, not a function's defaults (changing __defaults__ is refused)
def _normal(path: str, root: str, _walk=_walk) -> str:
    """``path`` made absolute against ``root``, its "." and ".." resolved by text
    (no symlink inside the work folder can point out: os.symlink is checked)."""
    *_, here = _walk(path, root)  # where the walk ends
    return here


def _passes(path: str, root: str, places: tuple[str, ...], _walk=_walk) -> bool:
    """Whether ``path``, walked part by part as the kernel does, enters one of
    ``places`` on the way (``/dev/fd/../mem`` enters /dev/fd, a link into /proc)."""
    for here in _walk(path, root):
        for place in places:
            if here == place or here.startswith(place + "/"):
                return True
    return False


def _audit_hook(workdir: str, tables: dict, hits: list, state: dict, key: bytes,
                limits: dict | None = None, **constants):  # fmt: skip
    """The hook, with every constant it reads bound now (a module's globals can be
    changed later by the student's code; a closure's cannot be reached).

    ``limits``: "files", how many files the submission may create or rename in its
    folder; "hidden", folders it may not read (the repository, the submissions;
    Landlock closes them where the kernel has it, this where it has not); "visible",
    the folders inside those that it may read (the package, the virtualenv);
    "trusted", ``_trusted_files()``."""
    if limits is None:
        limits = {"files": 1 << 30, "hidden": (), "visible": (),
                  "trusted": _trusted_files()}  # fmt: skip
    bound = dict(_refused=_REFUSED, _prefixes=_REFUSED_PREFIXES,
                 _state_names=_FUNCTION_STATE, _write_flags=_WRITE_FLAGS,
                 _path_events=_PATH_EVENTS, _watch=_WATCH,
                 _files=limits["files"], _hidden=limits["hidden"],
                 _visible=limits["visible"],
                 _trusted_names=limits["trusted"])  # fmt: skip
    return _make_hook(workdir, tables, hits, state, key, **bound, **constants)


def _make_hook(workdir: str, tables: dict, hits: list, state: dict, key: bytes, *,
                _type=type, _str=str, _bytes=bytes, _int=int, _list=list,
                _normal=_normal, _passes=_passes, _getattr=getattr, _tb=types.TracebackType,
                _function=types.FunctionType, _builtin=types.BuiltinFunctionType,
                _descriptor=types.MethodDescriptorType, _any=any, _tuple=tuple,
                _len=len, _isinstance=isinstance, _refused=None, _prefixes=None,
                _state_names=None, _write_flags=0, _path_events=None,
                _watch=None, _error=PermissionError, _pack=_struct.pack,
                _hmac=_hashlib.hmac_digest, _repr=repr, _bytes_=bytes, _files=0,
                _hidden=(), _visible=(), _trusted_names=(), _open=io.open_code):  # fmt: skip
    """Refuse what could reach the grader or the machine; keep the record of torch
    functions the torch mode reports. Nothing outside this closure can reach it, and
    it runs none of the student's code: it looks at exact builtin types only."""
    root = os.path.realpath(workdir)
    names = tables["names"]
    op_overload = torch._ops.OpOverload
    trusted = (_function, _builtin, _descriptor, op_overload,
               types.WrapperDescriptorType, types.MethodWrapperType)  # fmt: skip
    spaces = (("torch.nn.functional", torch.nn.functional), ("torch", torch),
              ("torch.Tensor", torch.Tensor))  # fmt: skip
    busy, on, seq = [False], [False], [0]  # on: the doors are closed (see enable)
    created = [0]  # files and folders made, renamed or linked in the work folder
    # /proc, and the links into it (checked by text: Landlock, where the kernel has
    # it, refuses /proc whatever the path)
    _private = ("/proc", "/dev/fd", "/dev/stdin", "/dev/stdout", "/dev/stderr")
    plain = _str.__str__  # an exact str, even from a subclass, without its methods

    def inside(path) -> bool:
        kind = _type(path)
        if kind is _int:
            return True  # an open file descriptor: checked when it was opened
        if kind is _bytes:
            path = _bytes.decode(path, "utf8", "surrogateescape")
        elif kind is not _str:
            return False  # a path object the hook will not call into
        full = _normal(path, root)
        return full == root or full.startswith(root + "/")

    def refuse(what: str):
        raise _error("the grader does not let submissions use " + what)

    def count_file() -> None:
        created[0] += 1
        if created[0] > _files:
            raise _error(f"the grader lets a submission make at most {_files} files "
                         "in its folder")  # fmt: skip

    def hidden(path) -> bool:
        """A path in a folder the submission may not read (checked by text)."""
        kind = _type(path)
        if kind is _bytes:
            path = _bytes.decode(path, "utf8", "surrogateescape")
        elif kind is not _str:
            return False
        full = _normal(path, root) + "/"
        return _any(full.startswith(h + "/") for h in _hidden) and not _any(
            full.startswith(v + "/") for v in _visible
        )

    def same_file(source, filename: str) -> bool:
        """Whether ``source`` is the file's own text (a library module compiled
        from its source), not code compiled under a library's name."""
        if _type(source) is _str:
            source = _str.encode(source, "utf8")
        if _type(source) is not _bytes and _type(source) is not bytearray:
            return False
        try:
            with _open(filename) as f:
                return f.read() == _bytes(source)
        except OSError:
            return False

    def judge(func) -> None:
        if state["quiet"] or _type(func) not in trusted:
            return
        name = _getattr(func, "__name__", None)
        if _type(name) is not _str:
            return
        base = name.split(".")[0]
        ids = _tuple(i for n, n_ids in names.items() if n in base for i in n_ids)
        if not ids:
            return
        module = _getattr(func, "__module__", None)
        shown = (plain(module) if _isinstance(module, _str) else "torch") + "." + name
        if _type(func) is op_overload:
            shown = f"torch.ops.{plain(func.namespace)}.{name}"
        else:
            for prefix, space in spaces:
                if _getattr(space, name, None) is func:
                    shown = f"{prefix}.{name}"
                    break
        hit = (shown.replace("torch._ops.", "torch.ops."), ids, state["phase"])
        if hit not in state["recorded"]:
            state["recorded"].add(hit)
            hits.append(hit)

    def seal(inner: str, blob: bytes, out: list) -> None:
        """One signed answer: the record of references called so far, beside the
        header as a string of its own (no text in it can pass for the record)."""
        state["at_seal"]()
        head = _bytes_(_repr((seq[0], _list(hits), inner)), "utf8")
        body = _pack(">QII", seq[0], _len(head), _len(blob)) + head + blob
        out.append(body + _hmac(key, body, "sha256"))
        seq[0] += 1

    def check(event: str, args: tuple) -> None:
        if event == _watch:
            judge(args[0])
        elif event == "transformer_edu.seal":
            if (
                _type(args[0]) is _str
                and _type(args[1]) is _bytes
                and (_type(args[2]) is _list)
            ):
                seal(args[0], args[1], args[2])
        elif not on[0]:
            return
        elif event == "transformer_edu.phase":
            if _type(args[0]) is _str:
                state["phase"] = plain(args[0])[:200]
        elif event in _refused or event.startswith(_prefixes):
            refuse(event)
        elif event in ("object.__setattr__", "object.__delattr__"):
            if _type(args[1]) is not _str or args[1] in _state_names:
                refuse("changing a function's code or defaults")
        elif event == "open":
            path, mode, flags = args
            text = _bytes.decode(path, "utf8", "surrogateescape") if (
                _type(path) is _bytes) else path  # fmt: skip
            if _type(text) is _str and _passes(text, root, _private):
                refuse(f"open {path!r} (the grader's process is its own)")
            if _type(mode) is _str:
                writes = _any(c in mode for c in "wax+")
            else:
                writes = _type(flags) is not _int or bool(flags & _write_flags)
            if writes and path is not None and not inside(path):
                refuse("open for writing outside its folder")
            if writes and _type(path) is not _int:
                count_file()
            if hidden(path):
                refuse("reading the grader's files or another submission")
        elif event in ("os.listdir", "os.scandir"):
            if args and hidden(args[0]):
                refuse("reading the grader's files or another submission")
        elif event == "compile":
            source, filename = args[0], args[1]
            if _type(filename) is _bytes:
                filename = _bytes.decode(filename, "utf8", "surrogateescape")
            if (
                _type(filename) is _str
                and _any(filename.startswith(t) for t in _trusted_names)
                and not same_file(source, filename)
            ):
                refuse("compiling code under the name of a library's file")
        elif event in _path_events:
            for p in args[:2]:
                if p is not None and not inside(p):
                    refuse(f"{event} outside its folder")
            if event in ("os.mkdir", "os.rename", "os.replace", "os.link",
                         "os.symlink", "shutil.copyfile", "shutil.move",
                         "os.mkfifo", "os.mknod"):  # fmt: skip
                count_file()

    def hook(event, args) -> None:
        if busy[0] or _type(event) is not _str:
            return
        busy[0] = True
        try:
            check(event, args)
        finally:
            busy[0] = False

    def enable() -> None:
        on[0] = True

    return hook, enable


def _refused(what: str):
    def refuse(*args, **kwargs):
        raise PermissionError(f"the grader does not let submissions use {what}")

    return refuse


def _lock_doors() -> None:
    """Doors no audit event guards: threads escape the profiler, signal handlers get
    the running frame, and the profile function would be reachable."""
    import _signal
    import _thread
    import signal
    import threading

    for module in (_thread, threading):
        for name in ("start_new_thread", "start_new", "_start_new_thread"):
            if hasattr(module, name):
                setattr(module, name, _refused(f"threads ({name})"))
    for module in (_signal, signal):
        for name in ("signal", "setitimer", "alarm", "set_wakeup_fd", "sigwait"):
            if hasattr(module, name):
                setattr(module, name, _refused(f"signal.{name}"))
    sys.getprofile = lambda: None
    threading.getprofile = lambda: None
    sys.settrace = sys.setprofile = _refused("the profiler")
