"""The references a learner may not call, and the watch that sees a call to one.

A checker names the references its exercise asks the learner to write
(:func:`references`): the package's and torch's Python functions by their bytecode,
torch's own implementations also by name. While the learner's code runs
(``harness.call``), :class:`_Watch` notes every call of one of them, however the
learner reached it. ``harness`` re-exports what checkers use; the grader's runner
keeps its own, hardened watch (``grading.runner``) on the same tables.
"""

from __future__ import annotations

import contextlib
import hashlib
import inspect
import os
import sys
from collections.abc import Iterator, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from types import CodeType, FrameType
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

CALLED_REFERENCE = "called the reference"  # in every such verdict's message


@dataclass(frozen=True)
class Forbidden:
    """The references of one exercise: Python functions by their bytecode, and
    torch's own implementations by name, whatever door leads to them."""

    codes: dict[CodeType, str] = field(default_factory=dict)  # code -> shown name
    torch_names: tuple[str, ...] = ()  # a torch function whose name contains one
    # each torch function or code met so far -> its shown name if forbidden, else None
    judged: dict[Any, str | None] = field(default_factory=dict, compare=False)
    keys: dict[bytes, str] = field(default_factory=dict, compare=False)  # code_key

    def __post_init__(self) -> None:
        for code, name in self.codes.items():
            self.keys.setdefault(code_key(code), name)
        FORBIDDEN_SETS.append(self)


FORBIDDEN_SETS: list[Forbidden] = []  # every one made, in order: the grader sends them


def make_code_key(
    *, _sha256=hashlib.sha256, _type=type, _repr=repr, _str=str, _code=CodeType,
    _bytes=bytes, _len=len, _range=range, _ops=None,
):  # fmt: skip
    """A ``code_key`` with every name it reads bound now: the grader's runner makes
    its own before the student's code runs, which may then replace ``hashlib``'s or
    this module's names but not a closure's."""
    cache, extended, load_method, load_attr, load_global, jumps = _ops or _OPS

    def code_key(code: CodeType) -> bytes:
        digest = _sha256()
        consts = code.co_consts
        if not (consts and _type(consts[0]) is _str):
            # no docstring: a learner who types the same few lines (a listing the
            # book shows) must not pass for a copy, so the file counts
            digest.update(_str.encode(code.co_filename, "utf8", "backslashreplace"))

        def feed(c: CodeType) -> None:
            for part in (_repr(c.co_names), _str(c.co_argcount)):
                digest.update(_str.encode(part, "utf8", "backslashreplace") + b"\0")
            digest.update(_instructions(c.co_code))
            for const in c.co_consts:
                if _type(const) is _code:
                    feed(const)
                else:
                    text = _type(const).__name__ + ":" + _repr(const)
                    digest.update(_str.encode(text, "utf8", "backslashreplace") + b"\0")

        feed(code)
        return digest.digest()

    def _instructions(raw: bytes) -> bytes:
        # what the compiler chose from the rest of the file, not from the function:
        # `torch.ones(…)` compiles to LOAD_GLOBAL+NULL, LOAD_ATTR where the file
        # imports torch and to LOAD_GLOBAL, LOAD_METHOD where it does not (3.11), and
        # caches and jump distances follow; so those are left out
        out = []
        for i in _range(0, _len(raw), 2):
            op, arg = raw[i], raw[i + 1]
            if op == cache or op == extended:
                continue
            if op == load_method:
                op = load_attr
            if op == load_global or op == load_attr:
                arg &= 0xFE
            elif op in jumps:
                arg = 0
            out += (op, arg)
        return _bytes(out)

    return code_key


def _opcodes() -> tuple:
    import opcode

    def op(name: str) -> int:
        return opcode.opmap.get(name, -1)

    jumps = frozenset(opcode.hasjrel) | frozenset(opcode.hasjabs)
    return (op("CACHE"), op("EXTENDED_ARG"), op("LOAD_METHOD"), op("LOAD_ATTR"),
            op("LOAD_GLOBAL"), jumps)  # fmt: skip


_OPS = _opcodes()
code_key = make_code_key()
code_key.__doc__ = """What a function's code is, whatever it is called: a digest of
its instructions, the names it uses and its constants (nested code included, its
docstring too), not of its name or line, nor of its file when it has a docstring. A
copy of a reference's code object, or the source of a documented one compiled again
(``exec(inspect.getsource(causal_mask))``), has the reference's key; the same lines
typed into a notebook without the docstring do not."""


def references(*objects: Any, torch_names: Sequence[str] = ()) -> Forbidden:
    """What calling any of ``objects`` (functions, classes) or any of torch's
    functions named like ``torch_names`` looks like.

    An object may also be an ``(object, "the name to show")`` pair. A class stands for
    the functions defined in its own body (``__init__``, ``forward``, …), not the
    ones it inherits (``nn.Module.__call__`` stays free); a decorated function for
    the function inside (``@torch.no_grad()``'s wrapper is shared by many). A torch
    builtin (``F.scaled_dot_product_attention``) stands for its name.

    ``"layer_norm"`` in ``torch_names`` forbids every torch function, tensor method
    or operator whose name contains it: ``F.layer_norm``, ``torch.layer_norm``,
    ``torch.native_layer_norm``, ``torch.ops.aten.native_layer_norm.default``, …
    """
    codes: dict[CodeType, str] = {}
    names = list(torch_names)

    def add(obj: Any, name: str) -> None:
        if isinstance(obj, (staticmethod, classmethod)):
            obj = obj.__func__
        obj = inspect.unwrap(obj) if callable(obj) else obj
        code = getattr(obj, "__code__", None)
        if isinstance(code, CodeType):
            codes.setdefault(code, name)
        elif callable(obj) and not isinstance(obj, type):
            names.append(obj.__name__)  # a builtin: torch's, by its name

    for item in objects:
        obj, name = item if isinstance(item, tuple) else (item, None)
        if name is None:
            module, qualname = getattr(obj, "__module__", "?"), obj.__qualname__
            name = f"{module}.{qualname}"
        if isinstance(obj, type):
            for member in vars(obj).values():
                if isinstance(member, property):
                    continue
                if callable(member) or isinstance(member, (staticmethod, classmethod)):
                    add(member, name)
        else:
            add(obj, name)
    return Forbidden(codes, tuple(dict.fromkeys(names)))


_FORBIDDEN: ContextVar[Forbidden | None] = ContextVar("forbidden", default=None)


_ALLOWED: list[bool] = []  # non-empty inside allow_references()


@contextlib.contextmanager
def allow_references() -> Iterator[None]:
    """Let checkers pass code that calls the references: for testing a checker
    against the package itself, never for grading (the grader never looks here)."""
    _ALLOWED.append(True)
    try:
        yield
    finally:
        _ALLOWED.pop()


_TORCH_DIR = str(Path(torch.__file__).parent)
_TORCH_FILES = _TORCH_DIR + os.sep  # torch's own Python files, not torchvision's


def judge_code(forbidden: Forbidden, code: CodeType, module: str) -> str | None:
    """The shown name of the reference ``code`` is (by its bytecode, or a torch Python
    function named like a forbidden one), or None; cached in ``forbidden.judged``."""
    judged = forbidden.judged
    try:
        return judged[code]
    except KeyError:
        pass
    name = forbidden.codes.get(code) or forbidden.keys.get(code_key(code))
    if name is None and forbidden.torch_names:
        qualname = getattr(code, "co_qualname", code.co_name)  # Python 3.11+
        if code.co_filename.startswith(_TORCH_FILES) and _named(forbidden, qualname):
            name = f"{module}.{qualname}"
    judged[code] = name
    return name


def judge_torch(forbidden: Forbidden, func: Any) -> str | None:
    """The shown name of torch function ``func`` if its name is forbidden, or None."""
    try:
        return forbidden.judged[func]
    except KeyError:
        shown = forbidden.judged[func] = _judge(forbidden, func)
    except TypeError:  # unhashable: judged afresh each time
        shown = _judge(forbidden, func)
    return shown


def _named(forbidden: Forbidden, name: str) -> bool:
    return any(n in name for n in forbidden.torch_names)


def _judge(forbidden: Forbidden, func: Any) -> str | None:
    name = getattr(func, "__name__", None)
    # an operator overload's name ends with its overload: native_layer_norm.default
    if isinstance(name, str) and _named(forbidden, name.split(".")[0]):
        return _torch_name(func)
    return None


def torch_watch_off(mode: TorchFunctionMode) -> str | None:
    """How torch's function modes were switched off around ``mode``, or None."""
    if torch._C._is_torch_function_all_disabled():
        return TORCH_OFF
    if torch._C._peek_should_skip_torch_function():
        return TORCH_OFF
    stack = torch._C._get_function_stack_at
    if not any(stack(i) is mode for i in range(torch._C._len_torch_function_stack())):
        return TORCH_MODE_OFF
    return None


class _Watch(TorchFunctionMode):
    """Notes each forbidden call while the learner's code runs.

    Two observers, because neither sees every door alone. A profiler
    (``sys.setprofile``) sees every call of a Python function by the code it runs,
    so an alias (``from transformer_edu import causal_mask as m``), a subclass or a
    function made from a copy of the reference's code is seen too; torch's own
    Python functions are also matched by name. A torch function mode sees every
    call into torch by the function called: ``F.…``, ``torch.…``, tensor methods and
    ``torch.ops`` operators, even when no Python code calls them directly
    (``functools.partial(F.scaled_dot_product_attention)``, ``map(torch.layer_norm,
    …)``), which a profiler cannot see; the profiler checks at each call that
    nothing switched that mode off (``torch._C.DisableTorchFunction``). A forbidden
    call is noted once, by its outermost name: what it calls in turn is its own
    business.
    """

    def __init__(self, forbidden: Forbidden):
        super().__init__()
        self.forbidden = forbidden
        self.seen: list[str] = []
        self.inside: FrameType | None = None  # the forbidden frame now running
        self.handling = 0  # depth of __torch_function__ (torch pops the mode there)
        self.entered = False

    def __enter__(self):
        mode = super().__enter__()
        self.entered = True
        return mode

    def __exit__(self, *exc):
        self.entered = False
        return super().__exit__(*exc)

    def profile(self, frame: FrameType, event: str, arg: Any) -> None:
        if self.inside is not None:
            if event == "return" and frame is self.inside:
                self.inside = None
            return
        code = frame.f_code
        if code is _HANDLERS[0] or code is _HANDLERS[1]:
            self.handling += 1 if event == "call" else -1 if event == "return" else 0
            return
        if event not in ("call", "c_call"):
            return
        if self.entered and not self.handling:
            off = torch_watch_off(self)
            if off is not None:
                self._note(off)
        if event == "call":
            name = judge_code(self.forbidden, code, frame.f_globals.get("__name__", ""))
            if name is not None:
                self._note(name)
                self.inside = frame

    def _note(self, name: str) -> None:
        if name not in self.seen:
            self.seen.append(name)

    def __torch_function__(self, func, types, args=(), kwargs=None):
        # every call into torch passes here, and the profiler sees each call made here:
        # a cached verdict, looked up without calling anything
        if self.inside is None:
            shown = judge_torch(self.forbidden, func)
            if shown is not None:
                self._note(shown)
        return func(*args, **(kwargs or {}))


# where torch takes the mode off its stack to call it: not the learner's doing
_HANDLERS = (
    _Watch.__torch_function__.__code__,
    torch.overrides.handle_torch_function.__code__,
)
TORCH_OFF = "torch._C.DisableTorchFunction"  # shown when torch's modes were off
# the grader's runner: its watch itself failed (a recursion that reached Python's
# limit inside it); fails only the check it happened in
WATCH_FAILED = "the grader's watch failed"
TORCH_MODE_OFF = "torch._C._pop_torch_function_stack"  # the checker's mode taken off


def _torch_name(func: Any) -> str:
    """How the learner would write ``func``: torch.nn.functional.layer_norm, …"""
    name = func.__name__
    if isinstance(func, torch._ops.OpOverload):
        return f"torch.ops.{func.namespace}.{name}"
    for prefix, space in (
        ("torch.nn.functional", torch.nn.functional),
        ("torch", torch),
        ("torch.Tensor", torch.Tensor),
    ):
        if getattr(space, name, None) is func:
            return f"{prefix}.{name}"
    module = getattr(func, "__module__", None) or "torch"
    return f"{module.replace('torch._ops.', 'torch.ops.')}.{name}"


@contextlib.contextmanager
def _watching(seen: list[str]) -> Iterator[None]:
    """Watch the block; append to ``seen`` the name of each forbidden call.

    The previous profiler is restored afterwards; the torch function mode is
    entered only when the exercise forbids some of torch's own functions.
    """
    forbidden = None if _ALLOWED else _FORBIDDEN.get()
    if forbidden is None or not (forbidden.codes or forbidden.torch_names):
        yield
        return
    watch = _Watch(forbidden)
    profile = watch.profile
    previous = sys.getprofile()
    sys.setprofile(profile)
    try:
        with watch if forbidden.torch_names else contextlib.nullcontext():
            yield
    finally:
        switched_off = sys.getprofile() is not profile
        sys.setprofile(previous)
        seen += watch.seen
        if switched_off and not seen:
            seen.append(_SWITCHED_OFF)


_SWITCHED_OFF = "sys.setprofile"


_SWITCHES = {
    _SWITCHED_OFF: "switched off the checker's profiler (sys.setprofile)",
    TORCH_OFF: "switched off torch's function modes (torch._C.DisableTorchFunction)",
    TORCH_MODE_OFF: "took the checker's torch function mode off torch's stack",
}
