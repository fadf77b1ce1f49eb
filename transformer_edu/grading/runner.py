"""The process that runs one submission's code, and nothing of the grade.

The judge (``grading.judge``) has the warden fork it and talks to it over two pipes.
It reads its orders, locks itself in (``confine``, and the audit hook of ``doors``),
loads the notebook's definitions one by one, then runs whatever the judge asks: a
call of the student's function, class or object. It answers with what the code
returned or raised and with every reference of an exercise the code has called so
far; the judge compares and decides. Nothing here says whether an answer is right.

Load-time code runs under the same locks and the same watch as the checks. The
student's code may change anything in this process but what the judge trusts it for,
which lives where no code of the student's can reach: in the audit hook's closure
(the refusals, the record of references called, the key that seals each answer) and
in the profile function's (which feeds that record). Neither is referred to by
anything the student's code can reach once the doors close: ``gc``, ``ctypes``,
``/proc`` and ``sys.setprofile`` are refused, and ``sys.getprofile`` says None.
"""

from __future__ import annotations

import _struct
import builtins
import io
import linecache
import os
import pickle
import sys
import types

import torch

from ..exercises.harness import TORCH_OFF, WATCH_FAILED
from ..exercises.watch import make_code_key
from . import confine, wire
from .doors import _WATCH, _audit_hook, _lock_doors, _trusted_files


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
    trusted = _trusted_files()  # once: Landlock, the hook and the watch read it
    readable = [p[:-1] for p in trusted if p.startswith("/")]
    problems.append(confine.landlock(hello["workdir"], readable))
    os.chdir(hello["workdir"])
    limits = {"files": hello["files_limit"], "hidden": tuple(hello["hidden"]),
              "visible": tuple(readable), "trusted": trusted}  # fmt: skip
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
    profile = _profiler(tables, hits, state, mode, setprofile, getprofile,
                        limits["trusted"])  # fmt: skip
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
    # an optimizer's first step imports torch._dynamo (1.4 s on a laptop): A.5's loop
    layer = torch.nn.Linear(8, 8)
    opt = torch.optim.Adam(layer.parameters(), lr=1e-3)
    layer(x.float()).sum().backward()
    torch.nn.utils.clip_grad_norm_(layer.parameters(), 1.0)
    opt.step()
    for name in ("transformer_edu", "transformer_edu.exercises", "transformer_edu.viz",
                 "transformer_edu.toy.data", "transformer_edu.toy.training", "numpy",
                 "plotly.graph_objects", "plotly.subplots", "IPython.display",
                 "sacrebleu", "sacrebleu.metrics",
                 # pyplot sets functions' defaults as it loads, which the locks refuse:
                 # a notebook's `import matplotlib.pyplot as plt` finds it loaded
                 "matplotlib.pyplot"):  # fmt: skip
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

    from ..exercises.harness import code_key

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


def _profiler(tables, hits, state, mode, setprofile, getprofile, trusted, *, _type=type,
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
    torch.set_rng_state(torch.frombuffer(bytearray(request["rng"]), dtype=torch.uint8))
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
