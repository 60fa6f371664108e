"""The one check shape every stage uses.

A check is a small object with a ``name``, the finding ``codes`` it may report, and
``run(context) -> Findings``. It reads its context and never changes it. ``AllOf``
composes checks into one check that runs each and concatenates their findings, so one
run reports every reason something fails, not just the first.

Two things belong to the check layer, not to the stage that runs the checks:

- **applicability**: a check may have ``applies(context) -> bool``; ``AllOf`` runs it only
  when that says yes (verify-provenance's file checks do not apply when the image's
  filesystem could not be read). A check without ``applies`` always applies.
- **the deadline**: ``AllOf.report(context, deadline=Deadline(...))`` starts no check once the
  deadline has passed and reports that, with the deadline's own code, as one more finding.

Each stage keeps its checks one per file under ``<stage>/checks/`` with a typed context.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Generic, Protocol, TypeVar

from releasekit.findings import Findings, Severity

C = TypeVar("C")
C_contra = TypeVar("C_contra", contravariant=True)


class Check(Protocol[C_contra]):
    """Anything with a name, the codes it may emit, and ``run(context) -> Findings``."""

    @property
    def name(self) -> str: ...

    @property
    def codes(self) -> tuple[str, ...]: ...

    def run(self, context: C_contra) -> Findings: ...


def applies(check: Check[C], context: C) -> bool:
    """The check's own ``applies(context)``, when it has one; else it always applies."""
    decide = getattr(check, "applies", None)
    return True if decide is None else bool(decide(context))


@dataclass(frozen=True)
class Deadline:
    """A point in ``time.monotonic()`` after which no further check starts.

    ``message`` names the check that was not started through ``{check}``.
    """

    at: float
    code: str
    message: str

    def passed(self) -> bool:
        return time.monotonic() > self.at

    def finding(self, check: Check[C]) -> Findings:
        found = Findings()
        found.add(self.code, self.message.format(check=check.name), severity=Severity.error)
        return found


@dataclass
class Report(Generic[C]):
    """What an ``AllOf`` run gave: each check that ran with its findings, in order, and the cut-off."""

    ran: list[tuple[Check[C], Findings]] = field(default_factory=list)
    cut_off: Findings = field(default_factory=Findings)  # the deadline's finding, when it stopped the run

    @property
    def findings(self) -> Findings:
        found = Findings()
        for _, got in self.ran:
            found.extend(got)
        found.extend(self.cut_off)
        return found


class AllOf(Generic[C]):
    """A check made of checks: runs every child that applies, in order, and concatenates their findings."""

    def __init__(self, *checks: Check[C], name: str = "all") -> None:
        self.checks: tuple[Check[C], ...] = checks
        self.name = name
        self.codes: tuple[str, ...] = tuple(dict.fromkeys(code for check in checks for code in check.codes))

    def report(self, context: C, *, deadline: Deadline | None = None) -> Report[C]:
        """Run each applicable child in order; stop (with the deadline's finding) once ``deadline`` passed."""
        out: Report[C] = Report()
        for check in self.checks:
            if not applies(check, context):
                continue
            if deadline is not None and deadline.passed():
                out.cut_off = deadline.finding(check)
                break
            out.ran.append((check, check.run(context)))
        return out

    def each(self, context: C) -> list[tuple[Check[C], Findings]]:
        """Every applicable child with the findings it reported, in order (for per-check outcomes)."""
        return self.report(context).ran

    def run(self, context: C, *, deadline: Deadline | None = None) -> Findings:
        return self.report(context, deadline=deadline).findings


__all__ = ["AllOf", "Check", "Deadline", "Report", "applies"]
