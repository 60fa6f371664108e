"""``patch-file``: a unified diff committed as a file (``*.patch``/``*.diff`` whose text has a
``---``/``+++`` pair and an ``@@`` hunk): a change to some source kept outside its history."""

from __future__ import annotations

import re
from collections.abc import Iterator

from releasekit.manifest.content_rules import ContentRule
from releasekit.plan.content.interface import Hit, Kind, ScannedFile

_HUNK = re.compile(r"^@@ -\d+(?:,\d+)? \+\d+(?:,\d+)? @@")


class PatchFile:
    rule: ContentRule = "patch-file"
    kinds: frozenset[Kind] = frozenset({"patch"})

    def find(self, source: ScannedFile) -> Iterator[Hit]:
        lines = source.lines
        for i, line in enumerate(lines[:-2]):
            if line.startswith("--- ") and lines[i + 1].startswith("+++ ") and _HUNK.match(lines[i + 2]):
                target = lines[i + 1][4:].split("\t", 1)[0].strip()
                target = target[2:] if target.startswith("b/") else target
                yield Hit(source.path, i + 1, self.rule, f"a patch of {target}")
                return


RECOGNISER = PatchFile()
