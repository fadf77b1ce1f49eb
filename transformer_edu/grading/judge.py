"""The judge's side: the warden and the runners it forks, and the proxies a checker
is given in place of the student's function or class.

The checker runs here, in the grader's own process, which never runs a line of the
student's code: it computes its expected values here and compares here. What it
calls is a proxy (``RemoteFunction``, ``RemoteClass``, or a mirror from ``mirror``):
the call goes to the runner, the runner's signed answer comes back with the
references the student's code has called so far, and ``harness.call`` fails the case
when one of them belongs to the exercise being checked.
"""

from __future__ import annotations

import os
import pickle
import secrets
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import torch

from ..exercises import harness
from . import mirror, wire
from .doors import REPOSITORY

STARTUP_S = 180.0  # for the warden to start and import torch, before any student code
FILE_LIMIT = 16 << 20  # bytes a runner may write into one file of its folder
FILES_LIMIT = 64  # files (and folders) it may make there: at most 1 GiB in all
MEMORY_LIMIT = 4 << 30  # bytes of data (heap, private mappings) a runner may hold
_NO_SECCOMP = "TRANSFORMER_EDU_GRADING_TEST_NO_SECCOMP"  # tests of the warden only
_KINDS = ("missing", "class", "function", "value")
_RNG_BYTES = torch.get_rng_state().numel()


class RunnerGone(BaseException):
    """The runner ended, ran past its time or was caught writing its own answers:
    the check stops (a BaseException: no checker may take it for a wrong answer)."""

    def __init__(self, why: str, status: str):
        super().__init__(why)
        self.why, self.status = why, status


def tables() -> list[dict]:
    """Every checker's references, for the runner: codes by key and module."""
    modules = {}
    for name, module in list(sys.modules.items()):
        path = getattr(module, "__file__", None)
        if path:
            modules.setdefault(os.path.realpath(path), name)
    out = []
    for forbidden in harness.FORBIDDEN_SETS:
        codes = [
            (harness.code_key(code), shown, modules.get(os.path.realpath(
                code.co_filename), ""))
            for code, shown in forbidden.codes.items()
        ]  # fmt: skip
        out.append({"codes": codes, "torch_names": list(forbidden.torch_names)})
    return out


class Warden:
    """The warden process (``grading.warden``): forks runners, reaps what they leave."""

    def __init__(self, hidden: list[str] = ()) -> None:
        # folders no runner may read: the repository (its chapters hold the
        # solutions), the submissions, the outputs
        root = str(REPOSITORY)
        self.hidden = [root, *(os.path.realpath(h) for h in hidden)]
        self.ctl, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        env = dict(os.environ)
        env.update(
            PYTHONPATH=os.pathsep.join(filter(None, [root, env.get("PYTHONPATH")])),
            PYTHONDONTWRITEBYTECODE="1",  # no __pycache__ written anywhere
            MPLBACKEND="Agg",
            OMP_NUM_THREADS="1",
        )
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "transformer_edu.grading.warden",
                str(theirs.fileno()),
                str(os.getpid()),
            ],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            pass_fds=[theirs.fileno()],
        )
        theirs.close()
        self.ctl.settimeout(STARTUP_S)
        self.send({"tables": tables()})
        hello = self.receive()
        self.pid = hello["pid"]
        if hello["missing"]:
            raise RuntimeError(
                f"the warden could not find these references: {hello['missing']}"
            )

    def send(self, order: dict, fds: list[int] = ()) -> None:
        socket.send_fds(self.ctl, [pickle.dumps(order)], list(fds))

    def receive(self) -> dict:
        data = self.ctl.recv(1 << 20)
        if not data:
            raise RuntimeError("the grader's warden process ended")
        return pickle.loads(data)

    def runner(self, workdir: Path, hello: dict) -> Runner:
        """A fresh runner for one submission, given its orders."""
        from_judge, to_runner = os.pipe()
        from_runner, to_judge = os.pipe()
        self.send({"op": "fork", "log": str(workdir / "runner.log")},
                  [from_judge, to_judge])  # fmt: skip
        os.close(from_judge)
        os.close(to_judge)
        pid = self.receive()["pid"]
        key = secrets.token_bytes(32)
        hello = dict(hello, key=key, workdir=str(workdir), file_limit=FILE_LIMIT,
                     files_limit=FILES_LIMIT, memory_limit=MEMORY_LIMIT,
                     hidden=self.hidden,
                     no_seccomp=bool(os.environ.get(_NO_SECCOMP)))  # fmt: skip
        wire.write_plain(to_runner, pickle.dumps(hello))
        return Runner(self, pid, to_runner, from_runner, key)

    def reap(self, pid: int, kill: bool) -> tuple[int, list[int]]:
        """Kill (if asked) and reap one runner, and whatever it left: its exit code,
        and the warden's children left (none)."""
        self.ctl.settimeout(60)
        self.send({"op": "reap", "pid": pid, "kill": kill})
        answer = self.receive()
        return answer["code"], answer["left"]

    def close(self) -> list[int]:
        """End the warden: it kills and reaps every process left first. The pids it
        could not reap (none) are returned."""
        left: list[int] = []
        try:
            self.ctl.settimeout(60)
            self.send({"op": "end"})
            left = self.receive()["left"]
        except (OSError, RuntimeError, EOFError):
            pass
        self.ctl.close()
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        return left


class Runner:
    """One submission's runner: orders out, signed answers in, each by a deadline."""

    def __init__(self, warden: Warden, pid: int, to_runner: int, from_runner: int,
                 key: bytes):  # fmt: skip
        self.warden, self.pid, self.to_runner = warden, pid, to_runner
        self.reader = wire.Reader(from_runner, key)
        self.from_runner = from_runner
        self.alive = True
        self.deadline = time.monotonic() + STARTUP_S
        self.limit = STARTUP_S
        self.phase = "starting"
        self.hits: list[tuple] = []
        self.reported = 0  # hits read so far
        self.watch_failed: list[tuple] = []  # (what, set ids, the judge's phase)
        self.sets_used: set[int] = set()
        self.mirrors: dict[int, Any] = {}
        self.synced: dict[tuple, tuple] = {}  # what mirror.sync_of last sent
        self.code: int | None = None
        self.printed = (
            0  # characters the student's code printed (and the runner dropped)
        )

    def set_limit(self, seconds: float) -> None:
        self.limit, self.deadline = seconds, time.monotonic() + seconds

    def read(self) -> tuple[dict, Any]:
        try:
            header, hits, value = self.reader.read(self.deadline)
        except TimeoutError:
            self.end(kill=True)
            raise RunnerGone(
                f"ran past the time limit of {self.limit:g} s", "timed out"
            ) from None
        except EOFError:
            code = self.end(kill=False)
            raise RunnerGone(
                f"ended the grader's process (exit code {code})", "error"
            ) from None
        except (wire.Tampered, ValueError, SyntaxError, RuntimeError) as e:
            self.end(kill=True)
            raise RunnerGone(
                f"wrote to the grader's channel itself ({e})", "error"
            ) from None
        if type(header) is not dict or type(header.get("status")) is not str:
            self.end(kill=True)
            raise RunnerGone("answered the grader with something that is not an "
                             "answer", "error")  # fmt: skip
        # the watch's own failures belong to the check whose answer reports them
        # first (the phase the runner wrote beside them is the student's to change)
        for shown, ids, _ in hits[self.reported :]:
            if shown.startswith(harness.WATCH_FAILED):
                self.watch_failed.append((shown, ids, self.phase))
        self.reported = len(hits)
        self.hits = [h for h in hits if not h[0].startswith(harness.WATCH_FAILED)]
        printed = header.get("printed", 0)
        self.printed += printed if type(printed) is int and printed > 0 else 0
        return header, value

    def order(self, request: dict) -> None:
        try:
            wire.write_plain(self.to_runner, pickle.dumps(request))
        except OSError:
            code = self.end(kill=False)
            raise RunnerGone(
                f"ended the grader's process (exit code {code})", "error"
            ) from None

    def describe(self, name: str) -> str:
        """What the notebook's ``name`` is: "missing", "class", "function" or
        "value"."""
        self.order({"op": "describe", "name": name, "phase": self.phase})
        header = self.read()[0]
        kind = header.get("kind")
        if header["status"] != "ok" or kind not in _KINDS:
            message = header.get("message")
            why = f": {message[:200]}" if type(message) is str else ""
            raise RuntimeError(f"the grader could not see what {name} is{why}")
        return kind

    def call(self, target: tuple, args: tuple, kwargs: dict) -> Any:
        """Run the student's callable ``target`` in the runner and return its value
        here; its exception is raised here, with the runner's frames."""
        forbidden = harness._FORBIDDEN.get()
        set_id = next((i for i, f in enumerate(harness.FORBIDDEN_SETS)
                       if f is forbidden), None)  # fmt: skip
        if set_id is not None:
            self.sets_used.add(set_id)
        self.calls += 1
        try:
            data = mirror.pickle_args(args, kwargs)
        except Exception as e:
            raise RuntimeError(f"the grader could not pass the arguments: {e}") from e
        self.order({
            "op": "call", "target": target, "args": data, "sync": mirror.sync_of(self),
            # the random state as plain bytes, as the runner sends it back (a pickled
            # tensor is rebuilt through torch's loader, 0.1 ms against 0.001 ms)
            "rng": bytes(torch.get_rng_state().numpy()),
            "grad": torch.is_grad_enabled(),
            "phase": self.phase,
        })  # fmt: skip
        header, value = self.read()
        seen = harness.REMOTE_SEEN.get()
        if seen is not None and set_id is not None:
            for name in self.called(set_id):
                if name not in seen:
                    seen.append(name)
        rng = header.get("rng")
        if type(rng) is bytes and len(rng) == _RNG_BYTES:
            torch.set_rng_state(torch.frombuffer(bytearray(rng), dtype=torch.uint8))
        if header["status"] == "raised":
            raise mirror.rebuild_exception(header)
        if header["status"] != "ok":
            message = header.get("message")
            raise RuntimeError(
                "the runner could not run it: "
                f"{message[:300] if type(message) is str else '?'}"
            )
        return mirror.decode(value, self)

    def called(self, set_id: int) -> list[str]:
        """The references of set ``set_id`` called so far, as a verdict names them:
        those of this check first, then the earlier ones, with when."""
        mine = [(shown, phase) for shown, ids, phase in self.hits if set_id in ids]
        # the watch's own failure counts for the check it happened in only
        mine += [(shown, phase) for shown, ids, phase in self.watch_failed
                 if set_id in ids and phase == self.phase]  # fmt: skip
        now = [shown for shown, phase in mine if phase == self.phase]
        return now + [f"{shown} ({phase})" for shown, phase in mine
                      if phase != self.phase]  # fmt: skip

    def end(self, kill: bool) -> int:
        """Stop the runner (or let it end) and reap it: its exit code."""
        if self.alive:
            self.alive = False
            if not kill:
                try:
                    wire.write_plain(self.to_runner, pickle.dumps({"op": "end"}))
                except OSError:
                    pass
            for fd in (self.to_runner, self.from_runner):
                try:
                    os.close(fd)
                except OSError:
                    pass
            self.code, _ = self.warden.reap(self.pid, kill=kill)
        return self.code if self.code is not None else -1


class RemoteFunction:
    """The student's function, called in the runner."""

    def __init__(self, runner: Runner, name: str, qualname: str):
        self._runner, self.__name__, self.__qualname__ = runner, name, qualname

    def __call__(self, *args, **kwargs):
        return self._runner.call(("name", self.__name__), args, kwargs)

    def __repr__(self) -> str:
        return f"<function {self.__qualname__}>"


setattr(RemoteFunction, harness.REMOTE, True)


class _RemoteClassMeta(type):
    def __call__(cls, *args, **kwargs):
        return cls._runner.call(("name", cls._name), args, kwargs)


def remote_class(runner: Runner, name: str, qualname: str) -> type:
    """The student's class: a class here (``isinstance(x, type)`` holds) whose
    instances are made in the runner, and come back as mirrors."""
    namespace = {"_runner": runner, "_name": name, "__module__": "__main__",
                 "__qualname__": qualname, harness.REMOTE: True}  # fmt: skip
    return _RemoteClassMeta(name, (), namespace)


def proxy(runner: Runner, name: str) -> Any:
    """What the checker gets for the notebook's ``name``, or None when undefined: a
    proxy called by that name, whatever the object calls itself (``MyLayerNorm =
    make_class()``); nothing the object says of itself is read."""
    kind = runner.describe(name)
    if kind == "missing":
        return None
    if kind == "class":
        return remote_class(runner, name, name)
    return RemoteFunction(runner, name, name)
