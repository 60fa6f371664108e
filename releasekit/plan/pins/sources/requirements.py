"""Requirement and constraint files (``requirements*.txt``, ``requirements/common.txt``, ``-r`` targets)."""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterator

from releasekit.plan.pins.interface import Found, InputFile, Scope
from releasekit.plan.pins.text import FILE_OPTIONS, logical_lines, tokens

_GLOBS = (
    "requirements*.txt",
    "requirements*.in",
    "*-requirements.txt",
    "constraints*.txt",
    "*-constraints.txt",
)


class RequirementsFile:
    kind = "requirements"

    def claims(self, path: str) -> bool:
        parts = path.split("/")
        name = parts[-1]
        if any(fnmatch.fnmatch(name, g) for g in _GLOBS):
            return True
        return "requirements" in parts[:-1] and name.endswith((".txt", ".in"))

    def read(self, source: InputFile) -> Iterator[Found]:
        scope: Scope = "build" if "build" in source.path.rsplit("/", 1)[-1] else "runtime"
        for logical in logical_lines(source.lines):
            words = tokens(logical)
            if not words:
                continue
            first = words[0][1]
            if first in FILE_OPTIONS or re.match(r"^(-r|-c|--requirement=|--constraint=)\S", first):
                ref = (
                    words[1][1]
                    if first in FILE_OPTIONS and len(words) > 1
                    else re.sub(r"^(-r|-c|--requirement=|--constraint=)", "", first)
                )
                source.name_file(ref)
                continue
            if first in ("-e", "--editable"):
                if len(words) > 1:
                    yield Found(source.path, words[1][0], words[1][1], scope)
                continue
            if first.startswith("-"):
                continue  # --index-url and other options
            text = " ".join(w for _, w in words)
            text = re.split(r"\s--?[a-z]", " " + text)[0].strip()  # per-requirement options (--hash=...)
            yield Found(source.path, words[0][0], text, scope)


SOURCE = RequirementsFile()
