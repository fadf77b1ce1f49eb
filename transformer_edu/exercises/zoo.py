"""The bug zoo: small, otherwise correct implementations with one real mistake each.

Each chapter's module defines its bugs next to the checker that catches them and
registers them with the :func:`register` decorator; ``BUG_ZOO`` maps a name to a
:class:`Bug`. Several bugs come from the source articles of this book; the rest are
the mistakes learners make most often.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from .harness import CheckResult

ARTICLE = "a source article of this book"
COMMON = "a common learner mistake"

Impl = TypeVar("Impl", bound=Callable)


@dataclass(frozen=True)
class Bug:
    """One exhibit of the zoo: a wrong implementation and the checker that catches it."""

    name: str  # its key in BUG_ZOO, e.g. "no scaling"
    implementation: Callable  # a function or class with the exercise's signature
    checker: Callable[..., CheckResult]  # the exercise's checker, which must fail it
    keyword: str  # a word the checker's hint contains
    chapter: int  # the chapter whose exercise it belongs to
    origin: str  # where this bug was seen
    description: str  # what goes wrong, in words

    @property
    def caught_by(self) -> tuple[str, ...]:
        """Names (keys of ``CHECKERS``) of the checkers that catch this bug."""
        return (self.checker.__name__,)

    def check(self, quiet: bool = True) -> dict[str, CheckResult]:
        """Run every checker that should catch this bug."""
        return {self.checker.__name__: self.checker(self.implementation, quiet=quiet)}


BUG_ZOO: dict[str, Bug] = {}


def register(
    *,
    name: str,
    checker: Callable[..., CheckResult],
    keyword: str,
    chapter: int,
    origin: str,
    description: str,
) -> Callable[[Impl], Impl]:
    """Decorator: put the function or class below into ``BUG_ZOO`` under ``name``."""

    def add(implementation: Impl) -> Impl:
        old = BUG_ZOO.get(name)
        # a module reloaded in a notebook registers its bugs again: that is fine
        if old is not None and _where(old.implementation) != _where(implementation):
            raise ValueError(
                f"the zoo already has a bug named {name!r} "
                f"({_where(old.implementation)}); {_where(implementation)} needs "
                "another name"
            )
        BUG_ZOO[name] = Bug(
            name=name,
            implementation=implementation,
            checker=checker,
            keyword=keyword,
            chapter=chapter,
            origin=origin,
            description=description,
        )
        # keep the zoo in chapter order, whatever order the modules are imported in
        for bug in sorted(BUG_ZOO.values(), key=lambda b: b.chapter):
            BUG_ZOO[bug.name] = BUG_ZOO.pop(bug.name)
        return implementation  # unchanged: the zoo only keeps a reference

    return add


def _where(obj: Callable) -> str:
    return f"{obj.__module__}.{obj.__qualname__}"
