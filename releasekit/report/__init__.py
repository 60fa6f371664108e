"""Output formats shared by every command: terminal (rich), JSON and markdown.

Services return pydantic models; these functions render them. Nothing else prints. The formats
share one interface (``report.formats.OutputFormat``); every markdown table is written by
``report.markdown.table``.
"""

from __future__ import annotations

import sys
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from releasekit.findings import Findings
from releasekit.report.formats import JsonFormat, TerminalFormat, to_jsonable

__all__ = ["findings_table", "print_json", "render_findings", "stdout_console", "to_jsonable"]


def stdout_console() -> Console:
    # Wide enough that tables are not folded into unreadable columns in CI logs.
    return Console(file=sys.stdout, width=max(120, Console().width), soft_wrap=True, highlight=False)


def print_json(obj: Any) -> None:
    sys.stdout.write(JsonFormat().format(obj))


def render_findings(
    findings: Findings, console: Console | None = None, *, ok_message: str = "no findings"
) -> None:
    console = console or stdout_console()
    lines = TerminalFormat(ok_message).lines(findings)
    if not len(findings):
        console.print(lines[0])
        return
    for line in lines[:-1]:
        # one finding, one line: never folded or cropped in logs
        console.print(line, markup=True, soft_wrap=True)
    console.print(lines[-1])


def findings_table(title: str, columns: list[str], rows: list[list[str]]) -> Table:
    table = Table(title=escape(title), show_lines=False, title_justify="left")
    for col in columns:
        table.add_column(escape(col), overflow="fold")
    for row in rows:
        # Cells hold user data (PR titles, paths): never interpret them as rich markup.
        table.add_row(*(escape(cell) for cell in row))
    return table
