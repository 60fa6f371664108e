"""``ruff check`` (at the pinned version) on the Python files in scope: one finding per diagnostic, file:line."""

from __future__ import annotations

import json
import os

from releasekit.findings import Findings
from releasekit.suites.checks._tool import python_files, run_tool
from releasekit.suites.context import HygieneContext


class RuffCheck:
    name = "ruff-check"
    codes: tuple[str, ...] = ("RUFF", "HYGIENE_TOOL_FAILED")

    def run(self, ctx: HygieneContext) -> Findings:
        found = Findings()
        files = python_files(ctx.files)
        if not files:
            return found
        argv = [
            str(ctx.tools["ruff"]),
            "check",
            "--no-cache",
            "--output-format",
            "json",
            *ctx.hygiene.ruff_args,
            "--",
            *files,
        ]
        code, out, err = run_tool(argv, ctx.tree)
        try:
            diagnostics = json.loads(out or "[]")
        except json.JSONDecodeError:
            diagnostics = None
        if code not in (0, 1) or not isinstance(diagnostics, list):
            found.add(
                "HYGIENE_TOOL_FAILED",
                f"ruff check exited {code}: {' '.join(err.split())[-300:]}",
                component=ctx.component,
            )
            return found
        for diag in diagnostics:
            path = os.path.relpath(diag.get("filename", ""), ctx.tree)
            location = diag.get("location") or {}
            found.add(
                "RUFF",
                f"{diag.get('code') or 'syntax'} {diag.get('message', '')}",
                component=ctx.component,
                file=path,
                line=location.get("row"),
                column=location.get("column"),
            )
        return found
