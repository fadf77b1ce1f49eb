"""The process that runs one submission's code, and nothing of the grade.

The judge (``grading.judge``) has the warden fork it and talks to it over two pipes.
It reads its orders, locks itself in (``confine``, and an audit hook), loads the
notebook's definitions one by one, then runs whatever the judge asks: a call of the
student's function, class or object. It answers with what the code returned or raised
and with every reference of an exercise the code has called so far; the judge
compares and decides. Nothing here says whether an answer is right.

Load-time code runs under the same locks and the same watch as the checks. The
student's code may change anything in this process but what the judge trusts it for,
which lives where no code of the student's can reach: in the audit hook's closure
(the refusals, the record of references called, the key that seals each answer) and
in the profile function's (which feeds that record). Neither is referred to by
anything the student's code can reach once the doors close: ``gc``, ``ctypes``,
``/proc`` and ``sys.setprofile`` are refused, and ``sys.getprofile`` says None.
"""

from __future__ import annotations

import _hashlib
import _struct
import builtins
import io
import linecache
import os
import pickle
import sys
import types
from pathlib import Path

import torch

from ..harness import TORCH_OFF, WATCH_FAILED
from ..watch import make_code_key
from . import confine, wire

_WATCH = "transformer_edu.torch"  # audit event: the torch mode saw a torch call


def child(fd_in: int, fd_out: int, tables: dict, warden: int) -> int:
    """The runner's life, in the process the warden forked: read the orders, lock
    the doors, watch, load the notebook, answer the judge."""
    hello = pickle.loads(wire.read_plain(fd_in))
    key = hello.pop("key")
    problems = [confine.die_with_parent(warden)]
    codes = {i: _compile(s) for i, s in enumerate(hello["snippets"])}
    confine.limit_resources(hello["file_limit"], hello["memory_limit"])
    if not hello.get("no_seccomp"):
        problems.append(confine.seccomp())
    readable = [p[:-1] for p in _trusted_files() if p.startswith("/")]
    problems.append(confine.landlock(hello["workdir"], readable))
    os.chdir(hello["workdir"])
    limits = {"files": hello["files_limit"], "hidden": tuple(hello["hidden"]),
              "visible": tuple(readable)}  # fmt: skip
    _watch_and_lock(hello["workdir"], tables, key, limits)
    del key  # from now on only the audit hook holds it
    return _serve(fd_in, fd_out, hello, codes, [p for p in problems if p])


def _watch_and_lock(workdir: str, tables: dict, key: bytes, limits: dict) -> None:
    """Start the watch and close the doors. What they share (the record of references
    called, the key) lives only in the hook's and the profiler's closures, which
    nothing the student's code can reach refers to once this returns."""
    hits: list[tuple] = []
    state = {"quiet": False, "handling": 0, "phase": "while loading your notebook",
             "recorded": set(), "off": False}  # fmt: skip
    hook, close_doors = _audit_hook(workdir, tables, hits, state, key, limits)
    sys.addaudithook(hook)
    mode = _Mode()
    mode.__enter__()
    setprofile, getprofile = sys.setprofile, sys.getprofile
    profile = _profiler(tables, hits, state, mode, setprofile, getprofile)
    _lock_doors()
    setprofile(profile)
    close_doors()


def warm_up() -> None:
    """What torch reads or builds once (the CPU's features, its kernels) and what a
    notebook imports, before any lock: in the warden, which every runner copies."""
    torch.set_num_threads(1)  # forked runners share no thread pool
    x = torch.randn(4, 8, dtype=torch.float64)
    for t in (x, x.float()):
        (t @ t.T).softmax(-1).sum().item()
        torch.nn.functional.layer_norm(t, (8,))
    for name in ("transformer_edu", "transformer_edu.exercises", "transformer_edu.viz",
                 "transformer_edu.data", "transformer_edu.training", "numpy",
                 "plotly.graph_objects", "plotly.subplots", "IPython.display",
                 "sacrebleu", "sacrebleu.metrics"):  # fmt: skip
        try:
            __import__(name)
        except ImportError:
            pass


def _compile(snippet: dict) -> types.CodeType:
    name = f"<cell {snippet['cell']}>"
    linecache.cache[name] = (len(snippet["code"]), None, snippet["code"].splitlines(True),
                             name)  # fmt: skip
    return compile(snippet["code"], name, "exec")


def resolve(tables: list[dict]) -> dict:
    """{code object: (shown name, set ids)} and {torch name: set ids}: the judge names
    the references by code_key; here they are found among the loaded modules."""
    import importlib

    from ..harness import code_key

    wanted: dict[bytes, list] = {}
    for i, table in enumerate(tables):
        for key, shown, module in table["codes"]:
            wanted.setdefault(key, [shown, [], module])[1].append(i)
    found: dict[types.CodeType, tuple[str, tuple[int, ...]]] = {}
    keys: set[bytes] = set()
    seen: set[int] = set()

    def walk(obj, depth: int) -> None:
        if id(obj) in seen or depth > 3:
            return
        seen.add(id(obj))
        if isinstance(obj, (staticmethod, classmethod)):
            obj = obj.__func__
        code = getattr(obj, "__code__", None)
        if isinstance(code, types.CodeType):
            key = code_key(code)
            entry = wanted.get(key)
            if entry:
                found[code] = (entry[0], tuple(entry[1]))
                keys.add(key)
            wrapped = getattr(obj, "__wrapped__", None)
            if wrapped is not None:
                walk(wrapped, depth + 1)
        elif isinstance(obj, type):
            for member in vars(obj).values():
                walk(member, depth + 1)

    for module in {entry[2] for entry in wanted.values()}:
        try:
            for obj in list(vars(importlib.import_module(module)).values()):
                walk(obj, 0)
        except Exception:  # noqa: S112  a module that will not import: its codes unfound
            continue
    names: dict[str, tuple[int, ...]] = {}
    for i, table in enumerate(tables):
        for name in table["torch_names"]:
            names[name] = (*names.get(name, ()), i)
    missing = [entry[0] for key, entry in wanted.items() if key not in keys]
    by_key = {code_key(code): entry for code, entry in found.items()}
    return {"codes": found, "keys": by_key, "names": names, "missing": missing}


# --- the watch ----------------------------------------------------------------------


class _Mode(torch.overrides.TorchFunctionMode):
    """Sees every call into torch and reports it to the audit hook; holds nothing the
    student's code could change to hide a call (the profiler checks it is in place)."""

    def __torch_function__(
        self, func, types, args=(), kwargs=None, *, _audit=sys.audit, _event=_WATCH
    ):
        _audit(_event, func)
        return func(*args, **(kwargs or {}))


_HANDLER = _Mode.__dict__["__torch_function__"]


def _trusted_files() -> tuple[str, ...]:
    """Where the code of Python, torch, the libraries and the package lives: any other
    code (a notebook's cells, what it compiles or writes and imports) is the
    student's."""
    root = str(Path(__file__).resolve().parents[3])
    places = {os.path.dirname(torch.__file__), str(Path(__file__).resolve().parents[2])}
    for entry in sys.path:
        if entry and os.path.isabs(entry) and os.path.isdir(entry) and entry != root:
            places.add(os.path.realpath(entry))
            places.add(entry)
    return (*sorted(p.rstrip(os.sep) + os.sep for p in places), "<frozen ")


def _profiler(tables, hits, state, mode, setprofile, getprofile, *, _type=type,
              _get=dict.get, _any=any, _range=range, _tuple=tuple, _sorted=sorted,
              _isinstance=isinstance, _str=str, plain=str.__str__, torch_off=TORCH_OFF,
              _name=type.__dict__["__name__"].__get__,
              _quiet_errors=(RecursionError, MemoryError)):  # fmt: skip
    """The profile function: notes each reference's code called, by its code object
    or, for code compiled since (the reference's source run again: code.__new__ is
    refused), by its bytecode; torch's own Python functions by name; and checks at
    each call that the torch mode is in place.

    A reference's own calls are its business (the watch is quiet inside it), but the
    student's code that a reference or torch calls back (an ``__index__``, a
    ``__mul__``, a hook) is watched as any other: inside torch's handler, where torch
    has taken the mode off its stack, the mode goes back on for as long as the
    student's frame runs. The watch's own failure (a recursion that reaches its
    limit inside it) is recorded, and fails the check it happened in."""
    codes, names, keys = tables["codes"], tables["names"], tables["keys"]
    code_key = make_code_key()  # its names bound before the student's code runs
    torch_files = os.path.dirname(torch.__file__) + os.sep
    trusted = _trusted_files()
    handler = _HANDLER
    handlers = (handler.__code__, torch.overrides.handle_torch_function.__code__)
    all_disabled = torch._C._is_torch_function_all_disabled
    skip = torch._C._peek_should_skip_torch_function
    depth, stack_at = (
        torch._C._len_torch_function_stack,
        torch._C._get_function_stack_at,
    )
    push_mode = torch._C._push_on_torch_function_stack
    pop_mode = torch._C._pop_torch_function_stack
    mode_type, class_get = _type(mode), _type(mode).__dict__.get
    torch_sets = _tuple(_sorted({i for ids in names.values() for i in ids}))
    all_sets = _tuple(
        _sorted({*torch_sets, *(i for _, ids in codes.values() for i in ids)})
    )
    judged: dict = {}
    students: dict = {}  # code -> whether it is the student's
    stack: list = []  # (frame, kind, saved handling): 0 a reference, 1 the student's
    #                    code called back, 2 the same inside torch's handler
    failed: list = [None]  # the watch's own exception, until an answer reports it
    append, startswith, recorded = hits.append, str.startswith, state["recorded"]

    def note(shown: str, ids: tuple) -> None:
        hit = (shown, ids, state["phase"])
        if hit not in recorded:
            recorded.add(hit)
            append(hit)

    def in_place() -> bool:
        if all_disabled() or skip() or _type(mode) is not mode_type:
            return False
        if class_get("__torch_function__") is not handler:
            return False
        return _any(stack_at(i) is mode for i in _range(depth()))

    def check_mode() -> None:
        off = not in_place()
        if off and not state["off"]:
            note(torch_off, torch_sets)
        state["off"] = off

    def student(code) -> bool:
        mine = _get(students, code)
        if mine is None:
            mine = students[code] = not startswith(code.co_filename, trusted)
        return mine

    def profile(frame, event, arg):
        # an exception here would switch the profiler off: it is kept for the answer
        # to report instead (a plain store: nothing here may call anything)
        try:
            watch(frame, event)
        except BaseException as e:
            failed[0] = e

    def watch(frame, event):
        if event == "c_call":  # a builtin called: only the mode's place to check
            if not state["quiet"] and not state["handling"]:
                check_mode()
            return
        if event == "return":
            if stack and frame is stack[-1][0]:
                _, kind, saved = stack.pop()
                if kind == 2:
                    pop_mode()
                    state["handling"] = saved
                state["quiet"] = bool(stack) and stack[-1][1] == 0
            elif frame.f_code is handlers[0] or frame.f_code is handlers[1]:
                state["handling"] -= 1
            return
        if event != "call":
            return
        code = frame.f_code
        if code is handlers[0] or code is handlers[1]:  # counted inside a reference too
            state["handling"] += 1
            return
        if state["quiet"] or state["handling"]:
            if student(code):  # called back by a reference, or by torch's handler
                if state["handling"]:  # the mode goes back on while it runs
                    push_mode(mode)
                    stack.append((frame, 2, state["handling"]))
                    state["handling"] = 0
                else:
                    stack.append((frame, 1, 0))
                state["quiet"] = False
            elif state["quiet"]:
                return
        if not state["handling"]:
            check_mode()
        found = _get(judged, code, False)
        if found is False:
            found = _get(codes, code)
            torch_code = startswith(code.co_filename, torch_files)
            if found is None and not torch_code:
                found = _get(keys, code_key(code))
            if found is None and torch_code:
                qualname = code.co_qualname
                ids = _tuple(i for name, n_ids in names.items() if name in qualname
                             for i in n_ids)  # fmt: skip
                if ids:
                    module = _get(frame.f_globals, "__name__", "torch")
                    module = plain(module) if _isinstance(module, _str) else "torch"
                    found = (module + "." + plain(qualname), ids)
            judged[code] = found
        if found is not None:
            note(*found)
            stack.append((frame, 0, 0))
            state["quiet"] = True

    def at_seal() -> None:
        """Before each answer: the watch's own failure reported, the profiler still
        in place, nothing left open (every frame the watch entered has returned)."""
        e = failed[0]
        if e is not None:
            failed[0] = None
            kind = _type(e)
            text = _name(kind)
            if kind in _quiet_errors and e.args and _type(e.args[0]) is _str:
                text += ": " + plain(e.args[0])[:200]
            note(WATCH_FAILED + " (" + text + ")", all_sets)
        if getprofile() is not profile:
            setprofile(profile)
            note(WATCH_FAILED + " (the profiler was switched off)", all_sets)
        if stack:
            while stack:
                if stack.pop()[1] == 2:
                    pop_mode()
            state["quiet"], state["handling"] = False, 0
            note(WATCH_FAILED + " (a frame it watched never returned)", all_sets)

    state["at_seal"] = at_seal
    return profile


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


def _normal(path: str, root: str) -> str:
    """``path`` made absolute against ``root``, its "." and ".." resolved by text
    (no symlink inside the work folder can point out: os.symlink is checked)."""
    if not path.startswith("/"):
        path = root + "/" + path
    parts: list[str] = []
    for part in path.split("/"):
        if part == "..":
            if parts:
                parts.pop()
        elif part and part != ".":
            parts.append(part)
    return "/" + "/".join(parts)


def _passes(path: str, root: str, places: tuple[str, ...]) -> bool:
    """Whether ``path``, walked part by part as the kernel does, enters one of
    ``places`` on the way (``/dev/fd/../mem`` enters /dev/fd, a link into /proc)."""
    if not path.startswith("/"):
        path = root + "/" + path
    parts: list[str] = []
    for part in path.split("/"):
        if part == "..":
            if parts:
                parts.pop()
        elif part and part != ".":
            parts.append(part)
        here = "/" + "/".join(parts)
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
    the folders inside those that it may read (the package, the virtualenv)."""
    limits = limits or {"files": 1 << 30, "hidden": (), "visible": ()}
    bound = dict(_refused=_REFUSED, _prefixes=_REFUSED_PREFIXES,
                 _state_names=_FUNCTION_STATE, _write_flags=_WRITE_FLAGS,
                 _path_events=_PATH_EVENTS, _watch=_WATCH,
                 _files=limits["files"], _hidden=limits["hidden"],
                 _visible=limits["visible"],
                 _trusted_names=_trusted_files())  # fmt: skip
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


# --- serving the judge ----------------------------------------------------------------


def _serve(fd_in, fd_out, hello, codes, problems, *, _read=wire.read_plain,
           _pack=_struct.pack, _len=len, _write=os.write, _repr=repr,
           _audit=sys.audit, _loads=pickle.loads, _view=memoryview):  # fmt: skip
    """Answer the judge until it says "end": each answer sealed by the audit hook."""

    def send(header: dict, blob: bytes = b"") -> None:
        sealed: list = []
        _audit("transformer_edu.seal", _repr(header), blob, sealed)
        view = _view(_pack(">I", _len(sealed[0])) + sealed[0])
        while view:
            view = view[_write(fd_out, view) :]

    out = _Counted()
    sys.stdout = sys.stderr = out
    namespace: dict = {"__name__": "__main__", "__builtins__": builtins,
                       "get_ipython": _NoIPython}  # fmt: skip
    send({"status": "ready", "problems": problems})
    for i, snippet in enumerate(hello["snippets"]):
        if i in hello["skip"]:
            continue
        _audit("transformer_edu.phase", f"while loading {snippet['label']}")
        send({"status": "loading", "snippet": i})
        raised = _run_snippet(codes[i], namespace)
        send(
            {"status": "loaded", "snippet": i, "raised": raised, "printed": out.take()}
        )
    _audit("transformer_edu.phase", "after loading")
    objects: dict[int, object] = {}
    while True:
        request = _loads(_read(fd_in))
        if request["op"] == "end":
            return 0
        _audit("transformer_edu.phase", request.get("phase", "while checking"))
        try:
            header, blob = _handle(request, namespace, objects)
        except BaseException as e:  # the request itself was odd: say so, keep serving
            header, blob = {"status": "grader", "message": _repr(e)[:500]}, b""
        header["printed"] = out.take()
        send(header, blob)


def _run_snippet(code: types.CodeType, namespace: dict) -> str:
    try:
        exec(code, namespace)  # noqa: S102  the student's definitions, under the locks
    except BaseException as e:  # a failing import or def: the rest still runs
        return f"{type(e).__name__}: {str(e)[:300]}"
    return ""


def _handle(request: dict, namespace: dict, objects: dict) -> tuple[dict, bytes]:
    from . import mirror

    op = request["op"]
    if op == "describe":
        return {
            "status": "ok",
            "kind": mirror.kind_of(namespace.get(request["name"])),
        }, b""
    target = mirror.resolve(request["target"], namespace, objects)
    mirror.apply_sync(request.get("sync", {}), objects)
    args, kwargs = mirror.unpickle_args(request["args"], objects)
    torch.set_rng_state(request["rng"])
    try:
        with torch.set_grad_enabled(request["grad"]):
            result = target(*args, **kwargs)
            result = mirror.materialise(result)
    except BaseException as e:
        header = {"status": "raised", **mirror.describe_exception(e)}
        header["rng"] = bytes(torch.get_rng_state().numpy())
        return header, b""
    blob = io.BytesIO()
    torch.save({"value": mirror.encode(result, objects)}, blob)
    return {
        "status": "ok",
        "rng": bytes(torch.get_rng_state().numpy()),
    }, blob.getvalue()


class _NoIPython:
    """``get_ipython()`` in the grader: the calls IPython makes of ``%magic`` and
    ``!shell`` lines (``get_ipython().run_line_magic(…)``) do nothing."""

    def __getattr__(self, name: str):
        return lambda *args, **kwargs: None


class _Counted(io.TextIOBase):
    """A stdout that counts what the student's code prints, and drops it."""

    def __init__(self):
        self.total = 0

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        self.total += len(text)
        return len(text)

    def take(self) -> int:
        """Characters printed since the last call."""
        total, self.total = self.total, 0
        return total
