"""Output formats shared by every command: terminal (rich) and JSON.

Services return pydantic models; these functions render them. Nothing else prints.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from pydantic import BaseModel
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from releasekit.findings import Findings, Severity

_STYLE = {Severity.error: "bold red", Severity.warning: "yellow", Severity.info: "cyan"}


def stdout_console() -> Console:
    # Wide enough that tables are not folded into unreadable columns in CI logs.
    return Console(file=sys.stdout, width=max(120, Console().width), soft_wrap=True, highlight=False)


def to_jsonable(obj: Any) -> Any:
    if isinstance(obj, BaseModel):
        return obj.model_dump(mode="json", exclude_none=False)
    if isinstance(obj, dict):
        return {k: to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [to_jsonable(v) for v in obj]
    return obj


def print_json(obj: Any) -> None:
    sys.stdout.write(json.dumps(to_jsonable(obj), indent=2, sort_keys=False) + "\n")


def render_findings(
    findings: Findings, console: Console | None = None, *, ok_message: str = "no findings"
) -> None:
    console = console or stdout_console()
    if not len(findings):
        console.print(f"[green]ok[/green]: {ok_message}")
        return
    for f in findings:
        where = f.location.render()
        style = _STYLE[f.severity]
        prefix = escape(where) + ": " if where else ""
        console.print(
            f"{prefix}[{style}]{f.severity.value}[/{style}] [bold]{f.code}[/bold]: {escape(f.message)}",
            markup=True,
            soft_wrap=True,  # one finding, one line: never folded or cropped in logs
        )
    errors = len(findings.errors)
    others = len(findings) - errors
    console.print(f"{errors} error(s), {others} warning/info finding(s)")


def findings_table(title: str, columns: list[str], rows: list[list[str]]) -> Table:
    table = Table(title=escape(title), show_lines=False, title_justify="left")
    for col in columns:
        table.add_column(escape(col), overflow="fold")
    for row in rows:
        # Cells hold user data (PR titles, paths): never interpret them as rich markup.
        table.add_row(*(escape(cell) for cell in row))
    return table
