"""Line-level reading that several formats share: comments, ``\\`` continuations, words, file references."""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterator

from packaging.version import InvalidVersion, Version

# pip options whose value is another requirement file, in a requirement file or on a command line.
FILE_OPTIONS = {"-r", "--requirement", "-c", "--constraint", "--constraints"}


def strip_comment(line: str) -> str:
    # A '#' that starts a comment follows whitespace or starts the line (URLs keep their fragments).
    match = re.search(r"(^|\s)#", line)
    return line[: match.start()] if match else line


def logical_lines(lines: list[str], strip_comments: bool = True) -> Iterator[list[tuple[int, str]]]:
    """Physical lines joined at a trailing backslash: [(lineno, text without the backslash)]."""
    current: list[tuple[int, str]] = []
    for lineno, raw in enumerate(lines, start=1):
        text = strip_comment(raw) if strip_comments else raw
        stripped = text.rstrip()
        if stripped.endswith("\\"):
            current.append((lineno, stripped[:-1] + " "))
            continue
        current.append((lineno, text))
        yield current
        current = []
    if current:
        yield current


def tokens(logical: list[tuple[int, str]]) -> list[tuple[int, str]]:
    """Shell-ish words of a logical line, each with the line it starts on (quotes removed)."""
    out: list[tuple[int, str]] = []
    for lineno, text in logical:
        for m in re.finditer(r"\"[^\"]*\"|'[^']*'|[^\s\"']+(?:\"[^\"]*\"|'[^']*'|[^\s\"']*)*", text):
            word = m.group(0)
            if len(word) >= 2 and word[0] == word[-1] and word[0] in "\"'":
                word = word[1:-1]
            else:
                word = word.replace('"', "").replace("'", "")
            out.append((lineno, word))
    return out


def resolve(files: frozenset[str], base_rel: str, ref: str) -> str | None:
    """A file named from another (``-r x.txt``, ``open("requirements/x.txt")``), relative to the repo."""
    ref = ref.strip().strip("'\"")
    if not ref or "$" in ref or "://" in ref or ref.startswith("/"):
        return None
    for candidate in (posixpath.join(posixpath.dirname(base_rel), ref), ref):
        rel = posixpath.normpath(candidate)
        if not rel.startswith("../") and rel in files:
            return rel
    return None


def same_version(value: str, version: str) -> bool:
    """A version an input states equals the pin by PEP 440, or by text when it is no PEP 440 version."""
    try:
        return Version(value) == Version(version)
    except InvalidVersion:
        return value == version
