"""The one check shape every stage uses.

A check is a small object with a ``name``, the finding ``codes`` it may report, and
``run(context) -> Findings``. It reads its context and never changes it. ``AllOf``
composes checks into one check that runs each and concatenates their findings, so one
run reports every reason something fails, not just the first.

Each stage keeps its checks one per file under ``<stage>/checks/`` with a typed context.
"""

from __future__ import annotations

from typing import Generic, Protocol, TypeVar

from releasekit.findings import Findings

C = TypeVar("C")
C_contra = TypeVar("C_contra", contravariant=True)


class Check(Protocol[C_contra]):
    """Anything with a name, the codes it may emit, and ``run(context) -> Findings``."""

    @property
    def name(self) -> str: ...

    @property
    def codes(self) -> tuple[str, ...]: ...

    def run(self, context: C_contra) -> Findings: ...


class AllOf(Generic[C]):
    """A check made of checks: runs every child in order and concatenates their findings."""

    def __init__(self, *checks: Check[C], name: str = "all") -> None:
        self.checks: tuple[Check[C], ...] = checks
        self.name = name
        self.codes: tuple[str, ...] = tuple(dict.fromkeys(code for check in checks for code in check.codes))

    def each(self, context: C) -> list[tuple[Check[C], Findings]]:
        """Every child with the findings it reported, in order (for per-check outcomes)."""
        return [(check, check.run(context)) for check in self.checks]

    def run(self, context: C) -> Findings:
        found = Findings()
        for _, got in self.each(context):
            found.extend(got)
        return found


__all__ = ["AllOf", "Check"]
