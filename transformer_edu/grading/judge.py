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
from .confine import proc_stat
from .doors import REPOSITORY

STARTUP_S = 180.0  # for the warden to start and import torch, before any student code
# A time limit counts the CPU time the runner uses (every thread of it), so that a
# busy machine costs no student a point. A runner that waits without computing (it
# sleeps, or blocks) is stopped once it has idled, while the judge waited for its
# answer, this many times the limit and this many seconds more; time it spent ready to
# run but waiting for a free core (the kernel's run-queue delay) is not idling.
IDLE_FACTOR, IDLE_EXTRA_S = 3.0, 5.0
_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
_CORES = os.cpu_count() or 1
FILE_LIMIT = 16 << 20  # bytes a runner may write into one file of its folder
FILES_LIMIT = 64  # files (and folders) it may make there: at most 1 GiB in all
MEMORY_LIMIT = 4 << 30  # bytes of data (heap, private mappings) a runner may hold
_NO_SECCOMP = "TRANSFORMER_EDU_GRADING_TEST_NO_SECCOMP"  # tests of the warden only
_KINDS = ("missing", "class", "function", "value")
_RNG_BYTES = torch.get_rng_state().numel()


def cpu_seconds(pid: int) -> float | None:
    """The CPU time, user and system, that process ``pid`` has used in all its
    threads; None where ``/proc`` does not tell (not Linux, or the process ended)."""
    fields = proc_stat(pid)
    if fields is None:
        return None
    try:
        return (int(fields[11]) + int(fields[12])) / _TICKS  # utime, stime
    except (ValueError, IndexError):  # a /proc/<pid>/stat this code does not know
        return None


def queue_seconds(pid: int) -> float:
    """The time the threads of process ``pid`` have spent ready to run while every
    core was busy (``/proc/<pid>/task/*/schedstat``'s run delay; 0 where unknown)."""
    total = 0
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return 0.0
    for task in tasks:
        try:
            with open(f"/proc/{pid}/task/{task}/schedstat", "rb") as f:
                total += int(f.read().split()[1])
        except (OSError, ValueError, IndexError):
            continue
    return total / 1e9


def allowance(seconds: float) -> float:
    """The wall-clock allowance of a limit of ``seconds`` of CPU time: how long a step
    may idle (wall time waited, less CPU time, less run-queue delay), and how long a
    whole submission may run on the wall clock."""
    return IDLE_FACTOR * seconds + IDLE_EXTRA_S


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
        self.limit = STARTUP_S  # on the wall clock: the grader's start, not the code
        self.deadline: float | None = time.monotonic() + STARTUP_S  # a wall-clock end
        self.start: tuple[float, float] | None = None  # CPU, queue when the step began
        self.waited = 0.0  # wall seconds the judge has waited for answers in the step
        self._asked = time.monotonic()  # when the judge began to wait for this answer
        self.cpu_spent = 0.0  # CPU seconds it had used when it ended
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

    def set_limit(self, seconds: float, wall_end: float | None = None) -> None:
        """The next step's limit: ``seconds`` of the runner's CPU time, and idling up
        to ``allowance(seconds)``; ended at ``wall_end`` on the wall clock in any
        case. Where ``/proc`` cannot tell, ``seconds`` on the wall clock."""
        now = time.monotonic()
        cpu = self.cpu_used()
        self.limit, self.waited, self.deadline = seconds, 0.0, wall_end
        self.start = None if cpu is None else (cpu, queue_seconds(self.pid))
        if self.start is None:
            self.deadline = min(wall_end or now + seconds, now + seconds)

    def cpu_used(self) -> float | None:
        """The CPU seconds this runner has used so far (None where unknown)."""
        return cpu_seconds(self.pid) if self.alive else self.cpu_spent

    def _spent(self, now: float) -> tuple[float, float] | None:
        """(CPU seconds, idle seconds) of the step so far; None where unknown."""
        cpu = self.cpu_used() if self.start is not None else None
        if cpu is None:
            return None
        used = cpu - self.start[0]
        queued = queue_seconds(self.pid) - self.start[1]
        return used, self.waited + (now - self._asked) - used - queued

    def _wait(self) -> float:
        """How long to wait yet for the answer: no longer than it would take the
        runner to use the rest of its CPU time, or to idle its allowance."""
        now = time.monotonic()
        left = float("inf") if self.deadline is None else self.deadline - now
        if self.start is None:
            return max(left, 0.0)
        # no need to read /proc before the code could have used its limit on every core
        soonest = self.limit / _CORES - (self.waited + now - self._asked)
        if soonest > 0:
            return max(min(left, soonest), 0.0)
        spent = self._spent(now)
        if spent is not None:
            used, idle = spent
            left = min(left, self.limit - used, allowance(self.limit) - idle)
        return max(left, 0.0)

    def read(self) -> tuple[dict, Any]:
        self._asked = time.monotonic()
        try:
            header, hits, value = self.reader.read(self._wait)
        except TimeoutError:
            spent = self._spent(time.monotonic())
            self.end(kill=True)
            why = f"ran past the time limit of {self.limit:g} s"
            if spent is not None and spent[0] < self.limit \
                    and spent[1] >= allowance(self.limit):  # fmt: skip
                why += (f": it waited {spent[1]:.0f} s without computing (it used "
                        f"{spent[0]:.1f} s of CPU time)")  # fmt: skip
            raise RunnerGone(why, "timed out") from None
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
        finally:
            self.waited += time.monotonic() - self._asked
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
            self.cpu_spent = cpu_seconds(self.pid) or 0.0
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
