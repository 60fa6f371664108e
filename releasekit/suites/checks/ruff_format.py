"""``ruff format --check`` (at the pinned version): each hunk ruff would rewrite is a finding at file:line."""

from __future__ import annotations

import re

from releasekit.findings import Findings
from releasekit.suites.checks._tool import python_files, run_tool
from releasekit.suites.context import HygieneContext

_HUNK = re.compile(r"^@@ -(\d+)(?:,\d+)? \+\d+(?:,\d+)? @@")


def diff_hunks(diff: str) -> list[tuple[str, int]]:
    """(file, first changed line of the original) for each hunk of a unified diff."""
    out: list[tuple[str, int]] = []
    path: str | None = None
    line: int | None = None
    for text in diff.splitlines():
        if text.startswith("--- "):
            path = text[4:].split("\t")[0].strip()
            path = path[2:] if path.startswith(("a/", "b/")) else path
            line = None
            continue
        if text.startswith("+++ "):
            continue
        match = _HUNK.match(text)
        if match:
            line = int(match.group(1))
            continue
        if line is None or path is None:
            continue
        if not text.startswith(("-", "+")):
            line += 1
        else:
            out.append((path, line))
            line = None  # one finding per hunk
    return out


class RuffFormatCheck:
    name = "ruff-format"
    codes: tuple[str, ...] = ("RUFF_FORMAT", "HYGIENE_TOOL_FAILED")

    def run(self, ctx: HygieneContext) -> Findings:
        found = Findings()
        files = python_files(ctx.files)
        if not files:
            return found
        code, out, err = run_tool(
            [str(ctx.tools["ruff"]), "format", "--no-cache", "--diff", "--", *files], ctx.tree
        )
        if code not in (0, 1):
            found.add(
                "HYGIENE_TOOL_FAILED",
                f"ruff format exited {code}: {' '.join(err.split())[-300:]}",
                component=ctx.component,
            )
            return found
        for path, line in diff_hunks(out):
            found.add(
                "RUFF_FORMAT",
                "ruff format would rewrite this (ruff format --check fails)",
                component=ctx.component,
                file=path,
                line=line,
            )
        if code == 1 and not len(found):
            found.add(
                "RUFF_FORMAT",
                f"ruff format --check fails: {' '.join((out + err).split())[-300:]}",
                component=ctx.component,
            )
        return found
