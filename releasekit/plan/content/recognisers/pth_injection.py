"""``pth-injection``: a ``.pth`` file written or copied in (``echo /src > x.pth``, ``tee -a
x.pth``, ``COPY overlay.pth ...``): every interpreter start then imports from the named path."""

from __future__ import annotations

import re
from collections.abc import Iterator

from releasekit.manifest.content_rules import ContentRule
from releasekit.plan.content.interface import Hit, Kind, ScannedFile
from releasekit.plan.content.reading import simple_commands

_WRITE = re.compile(r"(?:>>?|\btee\b(?:\s+-a)?)\s*[\"']?(?P<file>[^\s\"';&|]*\.pth)\b")
_COPY = {"COPY", "ADD", "cp", "install", "ln", "mv"}


class PthInjection:
    rule: ContentRule = "pth-injection"
    kinds: frozenset[Kind] = frozenset({"dockerfile", "shell"})

    def find(self, source: ScannedFile) -> Iterator[Hit]:
        for command in source.commands:
            m = _WRITE.search(command.text)
            if m:
                yield Hit(source.path, command.line, self.rule, f"writes {m.group('file')}")
                continue
            for simple in simple_commands(command):
                if simple[0][1] in _COPY and any(w.endswith(".pth") for _, w in simple[1:]):
                    yield Hit(source.path, simple[0][0], self.rule, f"{simple[0][1]} of a .pth file")
                    break


RECOGNISER = PthInjection()
