"""``git diff --check`` of the composed tree against its base (or of every file): whitespace errors, file:line."""

from __future__ import annotations

import re

from releasekit.findings import Findings
from releasekit.git.runner import Git
from releasekit.suites.context import HygieneContext

EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
_LINE = re.compile(r"^(.+?):(\d+): (.+)$")


class DiffCheck:
    name = "git-diff-check"
    codes: tuple[str, ...] = ("WHITESPACE_ERROR",)

    def run(self, ctx: HygieneContext) -> Findings:
        found = Findings()
        if not ctx.files:
            return found
        base = ctx.base if ctx.hygiene.scope == "changed" else EMPTY_TREE
        # Through the git runner: its environment allow-list, no system or user config, no hooks.
        out = Git(ctx.tree).run(
            "-c", "core.quotePath=false", "diff", "--check", base, ctx.head, "--", *ctx.files, check=False
        )
        for text in out.splitlines():
            if text.startswith(("+", "-", " ")):
                continue
            match = _LINE.match(text)
            if match:
                found.add(
                    "WHITESPACE_ERROR",
                    match.group(3).rstrip("."),
                    component=ctx.component,
                    file=match.group(1),
                    line=int(match.group(2)),
                )
        return found
