"""``patch-applied``: a recipe that applies a patch (``git apply``, ``git am``, ``patch -p1``,
``patch -i x.patch``, ``patch < x.patch``): the built tree is not the commit's tree."""

from __future__ import annotations

import re
from collections.abc import Iterator

from releasekit.manifest.content_rules import ContentRule
from releasekit.plan.content.interface import Hit, Kind, ScannedFile
from releasekit.plan.content.reading import simple_commands

_PATCH_OPTION = re.compile(r"^(?:-p\d+|-i|--input(?:=.*)?|--strip(?:=.*)?|-N|--forward|-R|--reverse)$")


class PatchApplied:
    rule: ContentRule = "patch-applied"
    kinds: frozenset[Kind] = frozenset({"dockerfile", "shell"})

    def find(self, source: ScannedFile) -> Iterator[Hit]:
        for command in source.commands:
            for simple in simple_commands(command):
                words = [w for _, w in simple]
                for i, word in enumerate(words):
                    nxt = words[i + 1 :]
                    applied = (word == "git" and any(w in ("apply", "am") for w in nxt[:3])) or (
                        word.rsplit("/", 1)[-1] == "patch"
                        and (any(_PATCH_OPTION.match(w) for w in nxt) or "<" in nxt)
                    )
                    if applied:
                        shown = " ".join(words[i : i + 4])
                        yield Hit(source.path, simple[i][0], self.rule, f"applies a patch: {shown}")
                        break


RECOGNISER = PatchApplied()
