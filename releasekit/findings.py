"""The one findings model every check in releasekit reports with.

A finding has a stable ``code`` (SCREAMING_SNAKE, never renamed once released),
a severity, a message for a person, and where it applies.

A ``Findings`` collection is written in one documented order, whatever order the checks
found them in (threads, sets, dict order): ``Finding.sort_key``, applied whenever the
collection is serialised (every record, every ``--json``), so the same findings are the
same bytes. The key: file, line, column, component, PR, cell, path, field, commit, image,
then code, severity and message (a missing value sorts before any value).
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, SerializerFunctionWrapHandler, WrapSerializer


class Severity(StrEnum):
    error = "error"
    warning = "warning"
    info = "info"


class Location(BaseModel):
    """Where a finding applies. Every field is optional; fill in what is known."""

    model_config = ConfigDict(extra="forbid")

    file: str | None = None
    line: int | None = None
    column: int | None = None
    field: str | None = None
    component: str | None = None
    pr: int | None = None
    commit: str | None = None
    path: str | None = None
    cell: str | None = None
    image: str | None = None

    def render(self) -> str:
        parts: list[str] = []
        if self.file:
            spot = self.file
            if self.line is not None:
                spot += f":{self.line}"
                if self.column is not None:
                    spot += f":{self.column}"
            parts.append(spot)
        if self.component:
            parts.append(self.component + (f"#{self.pr}" if self.pr is not None else ""))
        elif self.pr is not None:
            parts.append(f"#{self.pr}")
        if self.commit:
            parts.append(self.commit[:12])
        if self.cell:
            parts.append(f"cell {self.cell}")
        if self.path:
            parts.append(self.path)
        if self.field:
            parts.append(self.field)
        return " ".join(parts)


class Finding(BaseModel):
    model_config = ConfigDict(extra="forbid")

    code: str = Field(pattern=r"^[A-Z][A-Z0-9_]*$")
    severity: Severity = Severity.error
    message: str
    location: Location = Field(default_factory=Location)

    def sort_key(self) -> tuple[tuple[bool, str | int], ...]:
        """The order findings are written in (see the module docstring)."""
        loc = self.location
        values: tuple[str | int | None, ...] = (
            loc.file,
            loc.line,
            loc.column,
            loc.component,
            loc.pr,
            loc.cell,
            loc.path,
            loc.field,
            loc.commit,
            loc.image,
            self.code,
            self.severity.value,
            self.message,
        )
        return tuple((v is not None, "" if v is None else v) for v in values)

    def render(self) -> str:
        where = self.location.render()
        return f"{where + ': ' if where else ''}{self.severity.value} {self.code}: {self.message}"


def _sorted_on_write(value: list[Finding], handler: SerializerFunctionWrapHandler) -> Any:
    return handler(sorted(value, key=Finding.sort_key))


# A list of findings that is written in the documented order: ``Findings.findings`` and the
# records that hold a bare list of findings (verification summary, receipts) use it.
FindingList = Annotated[list[Finding], WrapSerializer(_sorted_on_write)]


class Findings(BaseModel):
    """An ordered collection of findings from one command."""

    model_config = ConfigDict(extra="forbid")

    findings: FindingList = Field(default_factory=list)

    def sorted(self) -> list[Finding]:
        """The findings in the order they are written (``Finding.sort_key``)."""
        return sorted(self.findings, key=Finding.sort_key)

    def add(
        self,
        code: str,
        message: str,
        *,
        severity: Severity | str = Severity.error,
        **where: Any,
    ) -> Finding:
        # ``where`` is typed loosely so callers can pass a prepared mapping (``**where``);
        # Location validates every value.
        finding = Finding(code=code, message=message, severity=Severity(severity), location=Location(**where))
        self.findings.append(finding)
        return finding

    def extend(self, other: Iterable[Finding]) -> None:
        self.findings.extend(other)

    @property
    def errors(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == Severity.error]

    @property
    def passed(self) -> bool:
        return not self.errors

    def codes(self) -> list[str]:
        return [f.code for f in self.findings]

    def __iter__(self):  # type: ignore[override]
        return iter(self.findings)

    def __len__(self) -> int:
        return len(self.findings)


def exit_code_for(findings: Findings) -> int:
    """0 when nothing is an error, 1 when a check found problems."""
    return 0 if findings.passed else 1
