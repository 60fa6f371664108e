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
- **what a check examined**: a check may have ``examines(context) -> Examined``: the kind of
  thing it looks at (files, distributions, libraries, values) and each one by name. ``AllOf``
  asks before running it, and every check gets an ``Outcome`` with a status: ``passed``,
  ``failed``, ``not applicable`` (its subject is legitimately absent, ``Examined.absent`` says
  why; the check is not run) or ``not run`` (it did not apply, or the deadline came first). A
  check that must examine something and was given nothing fails with ``NOTHING_EXAMINED``: a
  pass that examined nothing is never a pass.

Each stage keeps its checks one per file under ``<stage>/checks/`` with a typed context.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Final, Generic, Literal, Protocol, TypeVar

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


NOTHING_EXAMINED: Final = "NOTHING_EXAMINED"
Status = Literal["passed", "failed", "not applicable", "not run"]


@dataclass(frozen=True)
class Examined:
    """What a check looks at in one context: a ``kind`` (``files``, ``distributions``, ...) and
    each item by name. With no items, ``absent`` says why that is expected (no native component,
    a toolchain value the lock leaves null): the check is then not applicable. With no items
    and no ``absent``, the check had something to examine and was given nothing: it fails."""

    kind: str
    items: tuple[str, ...] = ()
    absent: str | None = None

    @classmethod
    def of(cls, kind: str, items: Iterable[object], *, absent: str | None = None) -> Examined:
        """``items`` sorted and without repeats, so records are byte-stable."""
        names = sorted({str(i) for i in items})
        return cls(kind=kind, items=tuple(names), absent=None if names else absent)

    @property
    def count(self) -> int:
        return len(self.items)


def examines(check: Check[C], context: C) -> Examined | None:
    """The check's own ``examines(context)``, when it has one (None: it does not say)."""
    ask = getattr(check, "examines", None)
    return None if ask is None else ask(context)


@dataclass
class Outcome(Generic[C]):
    """One child check of an ``AllOf`` run: its status, findings, what it examined and, when it
    was not applicable or not run, why."""

    check: Check[C]
    status: Status
    findings: Findings = field(default_factory=Findings)
    examined: Examined | None = None
    reason: str | None = None


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
    outcomes: list[Outcome[C]] = field(default_factory=list)  # every child, in order, whatever happened

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
        codes = [code for check in checks for code in check.codes]
        if any(getattr(check, "examines", None) is not None for check in checks):
            codes.append(NOTHING_EXAMINED)
        self.codes: tuple[str, ...] = tuple(dict.fromkeys(codes))

    def report(self, context: C, *, deadline: Deadline | None = None) -> Report[C]:
        """Run each applicable child in order; stop (with the deadline's finding) once ``deadline`` passed.

        Every child gets an ``Outcome``; a child whose ``examines`` finds its subject absent is
        not run (``not applicable``), one that finds nothing it should have is run and fails.
        """
        out: Report[C] = Report()
        for check in self.checks:
            if out.cut_off:
                out.outcomes.append(Outcome(check, "not run", reason="the deadline passed before it started"))
                continue
            if not applies(check, context):
                why = getattr(check, "not_applied_reason", None) or "it does not apply to this context"
                out.outcomes.append(Outcome(check, "not run", reason=str(why)))
                continue
            if deadline is not None and deadline.passed():
                out.cut_off = deadline.finding(check)
                out.outcomes.append(Outcome(check, "not run", reason="the deadline passed before it started"))
                continue
            subject = examines(check, context)
            if subject is not None and subject.count == 0 and subject.absent:
                out.outcomes.append(Outcome(check, "not applicable", examined=subject, reason=subject.absent))
                continue
            found = check.run(context)
            if subject is not None and subject.count == 0:
                found.add(
                    NOTHING_EXAMINED,
                    f"the {check.name} check examined no {subject.kind}: it cannot pass on nothing",
                    severity=Severity.error,
                )
            out.ran.append((check, found))
            out.outcomes.append(Outcome(check, "passed" if found.passed else "failed", found, subject))
        return out

    def each(self, context: C) -> list[tuple[Check[C], Findings]]:
        """Every applicable child with the findings it reported, in order (for per-check outcomes)."""
        return self.report(context).ran

    def run(self, context: C, *, deadline: Deadline | None = None) -> Findings:
        return self.report(context, deadline=deadline).findings


__all__ = [
    "NOTHING_EXAMINED",
    "AllOf",
    "Check",
    "Deadline",
    "Examined",
    "Outcome",
    "Report",
    "Status",
    "applies",
    "examines",
]
