"""GitHub workflow YAML (release scope): shell installs in ``run:`` steps and ``run: |`` blocks,
and ``env:`` version variables named after a pinned package (``TVM_FFI_VERSION: …``)."""

from __future__ import annotations

import re
from collections.abc import Iterator

from releasekit.plan.pins.interface import Found, InputFile
from releasekit.plan.pins.shell import shell_installs, version_variables


class Workflow:
    kind = "workflow"

    def claims(self, path: str) -> bool:
        return path.startswith(".github/workflows/") and path.endswith((".yml", ".yaml"))

    def read(self, source: InputFile) -> Iterator[Found]:
        # A step's ``run:`` key is framing; the command after it (or the block under it) is shell.
        lines = [re.sub(r"^(\s*)(?:-\s+)?run:\s*[|>]?[-+]?\s*", r"\1", raw) for raw in source.lines]
        yield from shell_installs(source, lines)
        version_variables(source, any_assignment=True)


SOURCE = Workflow()
