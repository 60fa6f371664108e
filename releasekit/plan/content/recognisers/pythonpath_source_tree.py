"""``pythonpath-source-tree``: ``PYTHONPATH`` set to an absolute directory, so a copied source tree
is imported ahead of the installed package (``ENV PYTHONPATH=/opt/vllm``, ``docker commit
--change 'ENV PYTHONPATH=...'``, ``-e PYTHONPATH=...``). Relative entries (a CI job's ``..``)
and ``site-packages`` directories are not overlays of a source tree. Markdown code blocks are
read too: a document that records an image's overlay describes one."""

from __future__ import annotations

import re
from collections.abc import Iterator

from releasekit.manifest.content_rules import ContentRule
from releasekit.plan.content.interface import Hit, Kind, ScannedFile
from releasekit.plan.content.reading import expand

_SET = re.compile(r"\bPYTHONPATH(?:\s*[=:]\s*|\s+(?=/))[\"']?(?P<value>[^\s\"';&|]+)")


def _source_dirs(value: str) -> list[str]:
    return [
        part
        for part in value.split(":")
        if part.startswith("/") and "site-packages" not in part and "dist-packages" not in part
    ]


class PythonpathSourceTree:
    rule: ContentRule = "pythonpath-source-tree"
    kinds: frozenset[Kind] = frozenset({"dockerfile", "shell", "compose", "markdown"})

    def find(self, source: ScannedFile) -> Iterator[Hit]:
        for command in source.commands:
            for line, word in command.words:
                text = word if "PYTHONPATH" in word else ""
                if word == "PYTHONPATH" or word.endswith(" PYTHONPATH"):
                    continue
                for m in _SET.finditer(text):
                    dirs = _source_dirs(expand(m.group("value"), source.variables))
                    if dirs:
                        yield Hit(
                            source.path,
                            line,
                            self.rule,
                            f"PYTHONPATH={':'.join(dirs)} puts a source tree first",
                        )
            # Dockerfile 'ENV PYTHONPATH /x' and compose 'PYTHONPATH: /x' split the name from the value.
            words = [w for _, w in command.words]
            for i, word in enumerate(words[:-1]):
                if word.rstrip(":") == "PYTHONPATH" and (i == 0 or words[i - 1].upper() in ("ENV", "-")):
                    dirs = _source_dirs(expand(words[i + 1], source.variables))
                    if dirs:
                        yield Hit(
                            source.path,
                            command.words[i][0],
                            self.rule,
                            f"PYTHONPATH={':'.join(dirs)} puts a source tree first",
                        )


RECOGNISER = PythonpathSourceTree()
