"""The warden: one process per grading run that imports torch once and forks a fresh
runner for each submission, so that no submission waits for torch to load.

It is every runner's parent and the *subreaper* of everything a runner could leave
behind (``PR_SET_CHILD_SUBREAPER``: an orphan becomes the warden's child, whatever
session it started), so that it can kill and reap them all: after each runner, and
before it ends. It dies with the judge (``PR_SET_PDEATHSIG``), and each runner dies
with it. It runs no student code: the runner it forks does, after locking itself in.

The judge speaks to it over a ``SOCK_SEQPACKET`` pair: pickled orders, the runner's
two pipe ends passed as file descriptors (``SCM_RIGHTS``).
"""

from __future__ import annotations

import os
import pickle
import signal
import socket
import sys

from . import confine

_RUNNING: set[int] = set()  # the runners now alive
_ENDED: dict[int, int] = {}  # runner pid -> exit code, reaped, not yet asked for


def main(argv: list[str]) -> int:
    ctl = socket.socket(fileno=int(argv[0]))
    judge = int(argv[1])
    confine.die_with_parent(judge)
    confine.become_subreaper()
    from . import runner  # imports torch and the package: once for every runner

    hello = pickle.loads(ctl.recv(1 << 24))
    runner.warm_up()
    tables = runner.resolve(hello["tables"])
    ctl.send(pickle.dumps({"missing": tables["missing"], "pid": os.getpid()}))
    while True:
        try:
            data, fds, _, _ = socket.recv_fds(ctl, 1 << 20, 4)
        except OSError:
            data, fds = b"", []
        if not data:  # the judge is gone
            _sweep(kill_runners=True)
            return 0
        order = pickle.loads(data)
        if order["op"] == "fork":
            pid = _fork(ctl, fds, tables, order)
            ctl.send(pickle.dumps({"pid": pid}))
        elif order["op"] == "reap":
            pid = order["pid"]
            if order.get("kill") and pid in _RUNNING:
                _kill(pid)
            code = _wait(pid)
            _sweep(kill_runners=False)
            ctl.send(pickle.dumps({"code": code, "left": confine.children()}))
        elif order["op"] == "end":
            _sweep(kill_runners=True)
            ctl.send(pickle.dumps({"left": confine.children()}))
            return 0


def _fork(ctl: socket.socket, fds: list[int], tables: dict, order: dict) -> int:
    warden = os.getpid()
    pid = os.fork()
    if pid == 0:  # the runner: its own session, nothing of the warden's but its pipes
        code = 1
        try:
            ctl.close()
            os.setsid()
            log = os.open(order["log"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
            os.dup2(log, 1)
            os.dup2(log, 2)
            os.close(log)
            devnull = os.open(os.devnull, os.O_RDONLY)
            os.dup2(devnull, 0)
            os.close(devnull)
            from . import runner

            code = runner.child(fds[0], fds[1], tables, warden)
        except BaseException as e:  # whatever happened, the child ends here
            # (its traceback may not be read: frames are refused once the doors close)
            os.write(2, f"runner: {type(e).__name__}: {e}\n".encode("utf8", "replace"))
        finally:
            os._exit(code)
    for fd in fds:
        os.close(fd)
    _RUNNING.add(pid)
    return pid


def _kill(pid: int) -> None:
    for target in (lambda: os.killpg(pid, signal.SIGKILL),
                   lambda: os.kill(pid, signal.SIGKILL)):  # fmt: skip
        try:
            target()
        except (ProcessLookupError, PermissionError):
            pass


def _wait(pid: int) -> int:
    if pid in _ENDED:
        return _ENDED.pop(pid)
    try:
        _, status = os.waitpid(pid, 0)
    except ChildProcessError:
        return -1
    _RUNNING.discard(pid)
    return os.waitstatus_to_exitcode(status)


def _sweep(kill_runners: bool) -> None:
    """Kill and reap every child but the runners still wanted, until none is left:
    orphans that a runner left behind come here (the warden is their subreaper)."""
    for _ in range(100):
        strays = [p for p in confine.children() if kill_runners or p not in _RUNNING]
        if not strays:
            return
        for pid in strays:
            _kill(pid)
        for pid in strays:
            try:
                _, status = os.waitpid(pid, 0)
            except ChildProcessError:
                continue
            if pid in _RUNNING:
                _RUNNING.discard(pid)
                _ENDED[pid] = os.waitstatus_to_exitcode(status)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
