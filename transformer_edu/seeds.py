"""The seeds of a comparison of training runs, shifted by one switch.

A short training run lands somewhere in its own noise, and another CPU, thread count or
seed moves it elsewhere. A chapter that compares two recipes therefore trains each
under several seeds (``seeds(3)``) and asserts only what holds for every one of them.
``TEDU_SEED`` (an integer, 0 unless set) shifts those seeds, so that the same chapter
can be run again under seeds it has never seen::

    TEDU_SEED=100 make test
"""

from __future__ import annotations

import os

SEED_ENV = "TEDU_SEED"


def seed_offset() -> int:
    """The shift ``TEDU_SEED`` asks for (0 when unset or empty)."""
    value = os.environ.get(SEED_ENV, "").strip()
    if not value:
        return 0
    try:
        return int(value)
    except ValueError:
        raise ValueError(f"{SEED_ENV}={value!r} is not an integer") from None


def seeds(n: int, start: int = 0) -> list[int]:
    """``n`` consecutive seeds from ``start``, shifted by ``TEDU_SEED``."""
    if n < 1:
        raise ValueError(f"n={n} seeds: need at least one")
    first = start + seed_offset()
    return list(range(first, first + n))


def spread(values) -> float:
    """Largest minus smallest of one setting's values over seeds."""
    values = [float(v) for v in values]
    return max(values) - min(values)


def beyond_spread(a, b) -> bool:
    """Whether two settings' means over seeds differ by more than the larger of their
    spreads: the words "larger than the spread between seeds" are then true, else
    "within the spread" (a difference the next seed or CPU could undo)."""
    a, b = [float(v) for v in a], [float(v) for v in b]
    difference = abs(sum(a) / len(a) - sum(b) / len(b))
    return difference > max(spread(a), spread(b))
