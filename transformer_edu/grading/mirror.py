"""The student's objects across the process boundary.

In the runner, a value the student's code returns is *encoded* as plain values
(tensors, numbers, strings, lists, tuples, dicts) that ``torch.load(weights_only=True)``
reads without running code; an object (an ``nn.Module``, an instance of the
student's class) stays in the runner, and what goes across is its *description*:
class name, parameters, buffers, sub-modules, plain attributes and methods.

In the judge, the description becomes a *mirror*: an object the checker can treat as
the student's own. ``isinstance(m, nn.Module)`` holds, ``m.w_q`` is an ``nn.Linear``
(torch's class, rebuilt here: its forward is torch's), the checker may write into its
parameters and call ``.eval()`` or ``.to(dtype)``; calling it (or a method the
student wrote) runs the student's code in the runner, after the mirror's tensors and
``training`` flags are copied there.
"""

from __future__ import annotations

import builtins
import io
import pickle
import sys
import traceback
import types
from collections.abc import Iterator
from typing import Any

import torch
from torch import nn

from ..exercises.harness import REMOTE, REMOTE_FRAMES

MAX_ITEMS = 100_000  # of an iterator the student returns, materialised in the runner
_MODULE_INTERNALS = frozenset(vars(nn.Module()))  # _parameters, _modules, training, …

# --- in the runner ----------------------------------------------------------------------


def kind_of(obj: Any) -> str:
    """What the judge needs to make a proxy for a name of the notebook: "missing",
    "class", "function" or "value" (the judge calls it by the exercise's name)."""
    if obj is None:
        return "missing"
    if isinstance(obj, type):
        return "class"
    return "function" if callable(obj) else "value"


def resolve(target: tuple, namespace: dict, objects: dict) -> Any:
    """The callable a request names: ("name", n), ("object", hid) or ("method", hid,
    name)."""
    if target[0] == "name":
        return namespace[target[1]]
    obj = objects[target[1]]
    return obj if target[0] == "object" else getattr(obj, target[2])


def apply_sync(sync: list, objects: dict) -> None:
    """Copy the judge's side of each mirrored object into the student's object."""
    for hid, where, name, value in sync:
        obj = objects.get(hid)
        if obj is None:
            continue
        if where == "training":
            obj.__dict__["training"] = bool(value)
        elif where == "param" and name in obj.__dict__.get("_parameters", {}):
            param = obj._parameters[name]
            if param is not None:
                param.data = value
        elif where == "buffer" and name in obj.__dict__.get("_buffers", {}):
            obj._buffers[name] = value
        elif where == "attr" and isinstance(obj.__dict__.get(name), torch.Tensor):
            obj.__dict__[name].data = value


def unpickle_args(data: bytes, objects: dict) -> tuple[tuple, dict]:
    class Loader(pickle.Unpickler):
        def persistent_load(self, pid):
            return objects[pid[1]]

    return Loader(io.BytesIO(data)).load()


def materialise(result: Any) -> Any:
    """An iterator the student returned, as a list (the checker would iterate it)."""
    if isinstance(result, Iterator) and not isinstance(result, torch.Tensor):
        items = []
        for item in result:
            items.append(item)
            if len(items) >= MAX_ITEMS:
                break
        return items
    return result


def describe_exception(e: BaseException) -> dict:
    """The exception as plain values: its type, message and the frames it passed."""
    frames: list = []
    try:
        frames = [(f.filename, f.lineno, f.name)
                  for f in traceback.extract_tb(e.__traceback__)]  # fmt: skip
    except Exception:  # noqa: S110  no frames: the verdict goes without its line
        pass
    import linecache

    cls = type(e)
    return {
        "type": cls.__name__,
        "builtin": getattr(builtins, cls.__name__, None) is cls,
        "base": not isinstance(e, Exception),
        "message": _text(e)[:2000],
        "frames": [
            (str(f), int(n), str(name), linecache.getline(str(f), int(n)))
            for f, n, name in frames[-20:]
        ],
    }


def _text(e: BaseException) -> str:
    try:
        return str(e)
    except Exception:
        return f"<{type(e).__name__} whose message cannot be read>"


def encode(value: Any, objects: dict, memo: dict | None = None, depth: int = 0) -> Any:
    """``value`` as plain values; objects stay here, described (see module doc)."""
    memo = {} if memo is None else memo
    if value is None or isinstance(value, (bool, int, float, complex, str, bytes)):
        return _plain(value)
    if isinstance(value, (torch.dtype, torch.device)):
        return value
    if isinstance(value, torch.Tensor):
        return _tensor(value)
    if isinstance(value, torch.Size):
        return tuple(int(i) for i in value)
    if depth > 6:
        return {"__opaque__": type(value).__name__}
    if type(value) in (list, tuple):
        items = [encode(v, objects, memo, depth + 1) for v in value]
        return items if type(value) is list else tuple(items)
    if type(value) is dict:
        pairs = [(encode(k, objects, memo, depth + 1), encode(v, objects, memo, depth + 1))
                 for k, v in value.items()]  # fmt: skip
        return {"__dict__": pairs}
    if type(value).__module__ == "numpy" and hasattr(value, "dtype"):
        try:
            return {"__numpy__": torch.as_tensor(value).clone()}
        except Exception:  # noqa: S110  an array torch cannot hold: mirrored below
            pass
    return {"__mirror__": describe(value, objects, memo, depth + 1)}


def _plain(value: Any) -> Any:
    """A builtin value as its exact builtin type (a subclass's methods stay here)."""
    if isinstance(value, bool) or value is None:
        return None if value is None else bool(value)
    for kind in (int, float, complex, str, bytes):
        if isinstance(value, kind):
            return kind(value) if type(value) is not kind else value
    return value


def _tensor(t: torch.Tensor) -> torch.Tensor:
    plain = t.detach().as_subclass(torch.Tensor)
    return plain.clone() if plain.is_contiguous() else plain.contiguous()


def _torch_class(cls: type) -> tuple[str, str] | None:
    module = getattr(cls, "__module__", "") or ""
    if module.startswith("torch.") and issubclass(cls, nn.Module):
        return (module, cls.__qualname__)
    return None


def describe(obj: Any, objects: dict, memo: dict, depth: int) -> dict:
    """An object's description, registered under a handle the judge calls it by."""
    if id(obj) in memo:
        return {"hid": memo[id(obj)]}
    hid = len(objects) + 1
    objects[hid], memo[id(obj)] = obj, hid
    cls = type(obj)
    torch_class = _torch_class(cls)
    base = next((path for c in cls.__mro__ if (path := _torch_class(c))), None)
    desc: dict[str, Any] = {
        "hid": hid,
        "name": cls.__name__,
        "qualname": cls.__qualname__,
        "torch_class": torch_class,
        "torch_base": base,
        "callable": callable(obj),
        "methods": [],
        "module": isinstance(obj, nn.Module),
    }
    if torch_class is None:  # the student's class: its own methods, forwarded
        mine = [
            c
            for c in cls.__mro__
            if c is not object and not (c.__module__ or "").startswith("torch")
        ]
        own = {n for c in mine for n, v in vars(c).items()
               if callable(v) and not n.startswith("__")}  # fmt: skip
        desc["methods"] = sorted(own | ({"forward"} if desc["module"] else set()))
    state = getattr(obj, "__dict__", {})
    if desc["module"]:
        desc["training"] = bool(obj.training)
        desc["params"] = {n: None if p is None else (_tensor(p), bool(p.requires_grad))
                          for n, p in obj._parameters.items()}  # fmt: skip
        desc["buffers"] = {n: None if b is None else _tensor(b)
                           for n, b in obj._buffers.items()}  # fmt: skip
        # buffers kept out of state_dict (register_buffer(..., persistent=False))
        desc["transient"] = sorted(n for n in obj._non_persistent_buffers_set
                                   if n in obj._buffers)  # fmt: skip
        desc["modules"] = {n: None if m is None else describe(m, objects, memo, depth)
                           for n, m in obj._modules.items()}  # fmt: skip
    attrs = {}
    for name, value in list(state.items())[:200]:
        if desc["module"] and name in _MODULE_INTERNALS:
            continue
        attrs[name] = encode(value, objects, memo, depth)
    desc["attrs"] = attrs
    return desc


# --- in the judge -----------------------------------------------------------------------


class StudentExit(BaseException):
    """The student's code raised SystemExit, KeyboardInterrupt or another exception
    that is not an Exception: it ends the check, never the grader."""


def _exception_info(info: Any) -> dict:
    """The runner's description of an exception, each field checked (the runner is
    the student's: what it sends is read as data, never trusted)."""
    if type(info) is not dict:
        info = {}
    name = info.get("type")
    name = name if type(name) is str and name.isidentifier() else "Exception"
    message = info.get("message")
    frames = info.get("frames")
    frames = frames if type(frames) is list else []
    ok = [f for f in frames[-20:] if type(f) is tuple and len(f) == 4
          and [type(x) for x in f] == [str, int, str, str]]  # fmt: skip
    return {
        "type": name[:100],
        "builtin": info.get("builtin") is True,
        "base": info.get("base") is True,
        "message": message[:2000] if type(message) is str else "",
        "frames": ok,
    }


def rebuild_exception(info: dict) -> BaseException:
    """An exception of the student's type name with its message and frames."""
    info = _exception_info(info)
    base = getattr(builtins, info["type"], None) if info["builtin"] else None
    if info["base"] or not (isinstance(base, type) and issubclass(base, Exception)):
        base = StudentExit if info["base"] else Exception
    message = info["message"]
    cls = type(info["type"], (base,), {"__str__": lambda self: message,
                                       "__module__": "builtins"})  # fmt: skip
    try:
        e = cls.__new__(cls)
        BaseException.__init__(e, message)
    except Exception:
        e = type(info["type"], (Exception,), {"__str__": lambda self: message})()
    frames = [traceback.FrameSummary(f, n, name, line=line.strip() or None)
              for f, n, name, line in info["frames"]]  # fmt: skip
    setattr(e, REMOTE_FRAMES, frames)
    return e


def decode(value: Any, client: Any) -> Any:
    """The judge's copy of an encoded value: mirrors for objects."""
    if isinstance(value, list):
        return [decode(v, client) for v in value]
    if isinstance(value, tuple):
        return tuple(decode(v, client) for v in value)
    if isinstance(value, dict):
        if "__dict__" in value:
            return {decode(k, client): decode(v, client) for k, v in value["__dict__"]}
        if "__numpy__" in value:
            return value["__numpy__"].numpy()
        if "__mirror__" in value:
            return build(value["__mirror__"], client)
        if "__opaque__" in value:
            return Opaque()
    return value


class Opaque:
    """An object the runner could not describe (nothing of it is read)."""


def _member(name: Any) -> bool:
    """A name the judge may give a mirror's member: no dunder, not the mirror's own."""
    return (type(name) is str and name.isidentifier() and not name.startswith("__")
            and name not in ("_client", "_hid"))  # fmt: skip


def _index(name: str) -> bool:
    """A sub-module's name in an nn.ModuleList or nn.Sequential: "0", "1", …"""
    return name.isascii() and name.isdigit() and len(name) <= 6


def _checked(desc: Any) -> dict:
    """A described object's fields, each of the type ``build`` reads, or ValueError."""
    if type(desc) is not dict or type(desc.get("hid")) is not int:
        raise ValueError("a described object without its handle")
    if set(desc) == {"hid"}:
        return desc
    for key, kind in (("name", str), ("qualname", str), ("callable", bool),
                      ("module", bool), ("methods", list), ("attrs", dict)):  # fmt: skip
        if type(desc.get(key)) is not kind:
            raise ValueError(f"a described object whose {key} is not a {kind.__name__}")
    if not desc["name"].isidentifier():
        raise ValueError("a described object whose class name is not a name")
    if not all(_member(m) for m in desc["methods"]):
        raise ValueError("a described object with a method the grader will not make")
    if not all(_member(a) for a in desc["attrs"]):
        raise ValueError("a described object with an attribute the grader will not set")
    for key in ("torch_class", "torch_base"):
        path = desc.get(key)
        if path is not None and not (type(path) is tuple and len(path) == 2
                                     and all(type(x) is str for x in path)):  # fmt: skip
            raise ValueError(f"a described object whose {key} is not a class path")
    if desc["module"]:
        if type(desc.get("training")) is not bool:
            raise ValueError("a described module without its training flag")
        for key in ("params", "buffers", "modules"):
            if type(desc.get(key)) is not dict or not all(
                type(k) is str and (k.isidentifier() or key == "modules" and _index(k))
                for k in desc[key]
            ):
                raise ValueError(f"a described module whose {key} are not named")
        for entry in desc["params"].values():
            if entry is not None and not (
                type(entry) is tuple and len(entry) == 2
                and isinstance(entry[0], torch.Tensor) and type(entry[1]) is bool
            ):  # fmt: skip
                raise ValueError("a described module with an odd parameter")
        if not all(b is None or isinstance(b, torch.Tensor)
                   for b in desc["buffers"].values()):  # fmt: skip
            raise ValueError("a described module with an odd buffer")
        transient = desc.get("transient", [])
        if type(transient) is not list or not all(
            type(n) is str and n in desc["buffers"] for n in transient
        ):
            raise ValueError("a described module with an odd list of buffers")
    return desc


class _Mirror:
    """What every mirror shares: the client of its runner and its handle there."""

    _client: Any = None
    _hid: int = 0


class _CallableMirror(_Mirror):
    def __call__(self, *args, **kwargs):
        return self._client.call(("object", self._hid), args, kwargs)


setattr(_Mirror, REMOTE, True)


def _method(name: str):
    def method(self, *args, **kwargs):
        return self._client.call(("method", self._hid, name), args, kwargs)

    method.__name__ = name
    return method


def _torch_class_named(path: tuple[str, str] | None) -> type | None:
    """A torch nn.Module class by its (module, qualname), or None."""
    if not path or not path[0].startswith("torch."):
        return None
    obj: Any = sys.modules.get(path[0])  # a module torch has loaded: nothing imported
    for part in path[1].split("."):
        obj = vars(obj).get(part) if isinstance(obj, (types.ModuleType, type)) else None
    return obj if isinstance(obj, type) and issubclass(obj, nn.Module) else None


def build(desc: dict, client: Any) -> Any:
    """The mirror of a described object (the same one for the same handle)."""
    desc = _checked(desc)
    hid = desc["hid"]
    if hid in client.mirrors:
        return client.mirrors[hid]
    torch_class = _torch_class_named(desc.get("torch_class"))
    if torch_class is not None:  # torch's own class: rebuilt, it runs here
        obj = torch_class.__new__(torch_class)
    else:
        bases: tuple = (_CallableMirror if desc["callable"] else _Mirror,)
        if desc["module"]:
            bases += (_torch_class_named(desc.get("torch_base")) or nn.Module,)
        namespace = {name: _method(name) for name in desc["methods"]}
        namespace.update(__module__="__main__", __qualname__=desc["qualname"])
        cls = type(desc["name"], bases, namespace)
        obj = cls.__new__(cls)
        object.__setattr__(obj, "_client", client)
        object.__setattr__(obj, "_hid", hid)
    client.mirrors[hid] = obj
    if desc["module"]:
        nn.Module.__init__(obj)
        obj.training = desc["training"]
        for name, entry in desc["params"].items():
            param = None if entry is None else nn.Parameter(entry[0], entry[1])
            obj.register_parameter(name, param)
        transient = desc.get("transient", [])
        for name, buffer in desc["buffers"].items():
            obj.register_buffer(name, buffer, persistent=name not in transient)
        for name, sub in desc["modules"].items():
            obj._modules[name] = None if sub is None else build(sub, client)
    for name, value in desc["attrs"].items():
        object.__setattr__(obj, name, decode(value, client))
    return obj


def sync_of(client: Any) -> list:
    """(hid, where, name, tensor) of the mirrors' tensors that changed since the last
    call sent them (``client.synced``: each tensor's identity, version and storage
    when sent), and every mirror's training flag. Sending every tensor on every call
    made the runner load ~20 KB of tensors per call once a module had been checked
    (~40 ms a call)."""
    sent, out = client.synced, []

    def add(hid: int, where: str, name: str, t: torch.Tensor) -> None:
        mark = (id(t), t._version, t.data_ptr(), tuple(t.shape), t.dtype)
        if sent.get((hid, where, name)) != mark:
            sent[hid, where, name] = mark
            out.append((hid, where, name, t.detach()))

    for hid, obj in client.mirrors.items():
        state = getattr(obj, "__dict__", {})
        if isinstance(obj, nn.Module):
            out.append((hid, "training", "", bool(obj.training)))
            for name, p in obj._parameters.items():
                if p is not None:
                    add(hid, "param", name, p)
            for name, b in obj._buffers.items():
                if b is not None:
                    add(hid, "buffer", name, b)
        for name, value in state.items():
            if isinstance(value, torch.Tensor) and not name.startswith("_"):
                add(hid, "attr", name, value)
    return out


def pickle_args(args: tuple, kwargs: dict) -> bytes:
    """The checker's arguments for the runner; a mirror goes as its handle."""

    class Pickler(pickle.Pickler):
        def persistent_id(self, obj):
            if isinstance(obj, _Mirror):
                return ("object", obj._hid)
            return None

    out = io.BytesIO()
    Pickler(out, protocol=pickle.HIGHEST_PROTOCOL).dump((args, kwargs))
    return out.getvalue()
