"""The messages between the judge and the runner.

Orders (judge → runner) are pickles behind a 4-byte length: the runner trusts the
judge. Answers (runner → judge) are signed: a length, then ``seq, len(head),
len(blob)``, the head, the blob and an HMAC-SHA256 of all that under a key only the
runner's audit hook holds (it seals each answer). The head is the Python literal ``(seq, hits, header)``:
the references called so far (from the runner's private record) and the header, a
literal of its own (read with ``ast.literal_eval``, so that no text in it can pass for
the record). The blob is ``torch.save`` of plain values, read with
``weights_only=True``. An answer the submission's code wrote itself fails the check.
"""

from __future__ import annotations

import ast
import hmac
import io
import os
import select
import struct
from collections.abc import Callable
from typing import Any

import torch

TAG = 32  # bytes of HMAC-SHA256


class Tampered(Exception):
    """An answer that the runner's serving loop did not sign."""


def read_plain(fd: int) -> bytes:
    """One length-prefixed message from ``fd`` (blocking)."""
    size = struct.unpack(">I", _read_exactly(fd, 4))[0]
    return _read_exactly(fd, size)


def write_plain(fd: int, data: bytes) -> None:
    data = struct.pack(">I", len(data)) + data
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _read_exactly(fd: int, n: int) -> bytes:
    chunks, left = [], n
    while left:
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            raise EOFError("the other side closed the pipe")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


class Reader:
    """Reads the runner's signed answers, each by a deadline."""

    def __init__(self, fd: int, key: bytes):
        self.fd, self.key, self.buffer, self.seq = fd, key, b"", 0

    def read(self, wait: Callable[[], float]) -> tuple[dict, list, Any]:
        """The next answer's header, the references called so far and the decoded
        blob. ``wait()`` says how long to wait yet (asked again each time that runs
        out); raises TimeoutError once it says 0, EOFError when the runner ended,
        Tampered for a forged answer."""
        size = struct.unpack(">I", self._take(4, wait))[0]
        if size < 16 + TAG or size > 1 << 30:
            raise Tampered(f"an answer of {size} bytes")
        message = self._take(size, wait)
        body, tag = message[:-TAG], message[-TAG:]
        if not hmac.compare_digest(hmac.digest(self.key, body, "sha256"), tag):
            raise Tampered("an answer the runner did not sign")
        seq, n_head, n_blob = struct.unpack(">QII", body[:16])
        if seq != self.seq or 16 + n_head + n_blob != len(body):
            raise Tampered(f"answer {seq} where {self.seq} was due")
        self.seq += 1
        got_seq, hits, inner = ast.literal_eval(body[16 : 16 + n_head].decode("utf8"))
        if got_seq != seq:
            raise Tampered(f"answer {got_seq} framed as {seq}")
        header = ast.literal_eval(inner)
        blob = body[16 + n_head :]
        value = None
        if blob:
            try:
                value = torch.load(io.BytesIO(blob), weights_only=True)["value"]
            except Exception:  # signed, but not plain values: an odd object
                value = {"__opaque__": "an object the grader cannot read"}
        return header, hits, value

    def _take(self, n: int, wait: Callable[[], float]) -> bytes:
        while len(self.buffer) < n:
            left = wait()
            if left <= 0:
                raise TimeoutError
            ready, _, _ = select.select([self.fd], [], [], left)
            if not ready:
                continue  # ask wait() again
            chunk = os.read(self.fd, 1 << 20)
            if not chunk:
                raise EOFError("the runner ended")
            self.buffer += chunk
        data, self.buffer = self.buffer[:n], self.buffer[n:]
        return data
