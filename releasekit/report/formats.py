"""The output formats of a command's result: one interface, ``format(result) -> str``, one class each.

A result is what a service returns: a model that carries its findings (``Findings`` is one). The
terminal format writes the findings as rich markup, one line each, and a count; JSON writes the
whole result; markdown writes the findings as a table (``report.markdown.table``), errors first.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Iterable
from typing import Any, ClassVar, Protocol

from pydantic import BaseModel
from rich.markup import escape

from releasekit.findings import Finding, Severity
from releasekit.report.markdown import table

_STYLE = {Severity.error: "bold red", Severity.warning: "yellow", Severity.info: "cyan"}


class Result(Protocol):
    """A command's result: anything with its findings."""

    @property
    def findings(self) -> Iterable[Finding]: ...


class OutputFormat(ABC):
    """One way of writing a result out."""

    name: ClassVar[str]

    @abstractmethod
    def format(self, result: Result) -> str:
        """The text to print or write, ending in a newline."""


def to_jsonable(obj: Any) -> Any:
    if isinstance(obj, BaseModel):
        return obj.model_dump(mode="json", exclude_none=False)
    if isinstance(obj, dict):
        return {k: to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [to_jsonable(v) for v in obj]
    return obj


class JsonFormat(OutputFormat):
    """The whole result, as ``--json`` prints it."""

    name = "json"

    def format(self, result: Any) -> str:
        return json.dumps(to_jsonable(result), indent=2, sort_keys=False) + "\n"


class TerminalFormat(OutputFormat):
    """The findings as rich markup, one line each (user text escaped), then the count."""

    name = "terminal"

    def __init__(self, ok_message: str = "no findings") -> None:
        self.ok_message = ok_message

    def lines(self, result: Result) -> list[str]:
        findings = list(result.findings)
        if not findings:
            return [f"[green]ok[/green]: {self.ok_message}"]
        lines = []
        for f in findings:
            where = f.location.render()
            style = _STYLE[f.severity]
            prefix = escape(where) + ": " if where else ""
            lines.append(
                f"{prefix}[{style}]{f.severity.value}[/{style}] [bold]{f.code}[/bold]: {escape(f.message)}"
            )
        errors = sum(f.severity == Severity.error for f in findings)
        lines.append(f"{errors} error(s), {len(findings) - errors} warning/info finding(s)")
        return lines

    def format(self, result: Result) -> str:
        return "\n".join(self.lines(result)) + "\n"


class MarkdownFormat(OutputFormat):
    """The findings as a table, errors first, at most ``limit`` rows (the rest counted below it),
    each cell on one line with single spaces; nothing when there are none."""

    name = "markdown"

    def __init__(self, limit: int = 30, max_cell: int | None = None) -> None:
        self.limit = limit
        self.max_cell = max_cell

    def lines(self, result: Result) -> list[str]:
        # Errors first: a long list of infos must not push the reason for a refusal out of the limit.
        ordered = sorted(
            result.findings, key=lambda f: (f.severity != Severity.error, f.severity != Severity.warning)
        )
        if not ordered:
            return []
        rows = [
            [" ".join(v.split()) for v in (f.severity.value, f.code, f.location.render(), f.message)]
            for f in ordered[: self.limit]
        ]
        lines = table(("severity", "code", "where", "message"), rows, max_cell=self.max_cell)
        if len(ordered) > self.limit:
            lines.append(f"\n… and {len(ordered) - self.limit} more (the job's log has every one)")
        return lines

    def format(self, result: Result) -> str:
        lines = self.lines(result)
        return "\n".join(lines) + "\n" if lines else ""
