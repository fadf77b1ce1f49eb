"""The checkers, each registered by the decorator above it: :func:`exercise` names the
exercise of chapter 11 that it grades (its id, the name the student defines, its
points), :func:`checker` a checker that chapter 11 does not grade.

``CHECKERS`` (checker name -> checker) and ``EXERCISES`` (the grader's table) are read
from here, kept in the order the grader checks the exercises whatever order the
modules are imported in: by chapter, a chapter's numbered exercises (6.1, 6.2) before
its build-it-yourself ones (A.n), then the checkers that grade no exercise.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from .harness import CheckResult

Checker = TypeVar("Checker", bound=Callable[..., CheckResult])

_ID = re.compile(r"(?P<chapter>\d+)(\.\d+[a-z]?)?|[A-Z]\.\d+")  # 6, 6.1, 5.1a, A.1


@dataclass(frozen=True)
class Exercise:
    """One graded item: the name the student defines and the checker that grades it."""

    id: str  # as numbered in chapter 11, e.g. "6.1"; 5.1a and 5.1b are 5.1's two parts
    name: str  # the function or class the student writes
    checker: str  # a key of CHECKERS
    points: int  # the exercise's stars
    kind: str | None = None  # check_score_function's kind
    chapter: int = 0  # the chapter it is graded with: 6 for 6.1 (A.n: its decorator's)

    @property
    def heading(self) -> str:
        """The id chapter 11's heading gives it: 5.1 for 5.1a (the parts share one)."""
        return self.id.rstrip("abcdefghijklmnopqrstuvwxyz")


CHECKERS: dict[str, Callable[..., CheckResult]] = {}
EXERCISES: list[Exercise] = []
_CHECKED_BY: dict[str, Callable] = {}  # exercise id -> the function registered for it


def exercise(
    id: str,
    name: str,
    *,
    points: int,
    kind: str | None = None,
    chapter: int | None = None,
) -> Callable[[Checker], Checker]:
    """Decorator: the checker below grades chapter 11's exercise ``id``, in which the
    student defines ``name``; worth ``points`` (its stars), checked with ``kind`` (the
    checker's option, if it takes one). ``chapter``: the chapter it is graded with, for
    a build-it-yourself exercise (A.n: the last chapter it draws on); a numbered
    exercise's is its number. One checker may grade several exercises (a decorator
    each)."""
    match = _ID.fullmatch(id)
    if match is None:
        raise ValueError(f"exercise id {id!r} is not numbered as chapter 11 numbers "
                         "them: 6, 6.1, 5.1a or A.1")  # fmt: skip
    number = match.group("chapter")
    if number is None and chapter is None:
        raise ValueError(f"exercise {id} needs chapter=: the chapter it is graded with")
    if number is not None and chapter not in (None, int(number)):
        raise ValueError(f"exercise {id} is chapter {number}'s, not chapter={chapter}")
    if type(points) is not int or points < 1:
        raise ValueError(f"exercise {id}: points={points!r}, expected 1, 2 or 3 stars")

    def add(fn: Checker) -> Checker:
        old = _CHECKED_BY.get(id)
        # a module reloaded in a notebook registers its checkers again: that is fine
        if old is not None and (old is fn or _where(old) != _where(fn)):
            raise ValueError(f"exercise {id} is registered twice: by {_where(old)} "
                             f"and by {_where(fn)}")  # fmt: skip
        same_name = [e.id for e in EXERCISES if e.name == name and e.id != id]
        if same_name:
            raise ValueError(f"exercise {id}: the name {name!r} is exercise "
                             f"{same_name[0]}'s already")  # fmt: skip
        _add_checker(fn)
        ex = Exercise(id, name, fn.__name__, points, kind,
                      int(number) if number is not None else chapter)  # fmt: skip
        EXERCISES[:] = [e for e in EXERCISES if e.id != id] + [ex]
        _CHECKED_BY[id] = fn
        _reorder()
        return fn  # unchanged: the registry only keeps a reference

    return add


def checker(fn: Checker) -> Checker:
    """Decorator: register a checker that grades no exercise of chapter 11 (one of
    another chapter's exercises, such as chapter 13's ``check_training_flops``)."""
    _add_checker(fn)
    _reorder()
    return fn


def _add_checker(fn: Callable) -> None:
    old = CHECKERS.get(fn.__name__)
    if old is not None and old is not fn and _where(old) != _where(fn):
        raise ValueError(f"there is a checker named {fn.__name__} already "
                         f"({_where(old)}); {_where(fn)} needs another name")  # fmt: skip
    CHECKERS[fn.__name__] = fn


def _order(ex: Exercise) -> tuple:
    """The grader's order: by chapter, numbered exercises first, then by number."""
    parts = re.findall(r"\d+|[A-Za-z]+", ex.id)
    number = [(0, int(p), "") if p.isdigit() else (1, 0, p) for p in parts]
    return ex.chapter, not ex.id[0].isdigit(), number


def _reorder() -> None:
    EXERCISES.sort(key=_order)
    first: dict[str, int] = {}
    for i, ex in enumerate(EXERCISES):
        first.setdefault(ex.checker, i)
    # each checker where its first exercise is graded; the others after, as registered
    for name in sorted(CHECKERS, key=lambda n: first.get(n, len(EXERCISES))):
        CHECKERS[name] = CHECKERS.pop(name)


def _where(obj: Callable) -> str:
    return f"{obj.__module__}.{obj.__qualname__}"
