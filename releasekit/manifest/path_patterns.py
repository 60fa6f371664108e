"""Path patterns of the manifest (exclusion ``paths``, pin-input ``skip``), with gitignore semantics.

- ``*`` and ``?`` never cross ``/``; ``[...]`` is a character class (``[!...]`` negated);
- ``**`` crosses directories: ``**/x`` (x at any depth), ``a/**`` (everything inside ``a``),
  ``a/**/b`` (zero or more directories between);
- a pattern with no ``/`` (other than a trailing one) matches the file or directory name at
  any depth (``*numa*.sh`` = ``**/*numa*.sh``); one with a ``/`` at the start or in the middle
  is anchored at the repository root (``/launch*.sh``, ``scripts/run-*-vllm``);
- a trailing ``/`` matches directories only; a file matches when its path, or any directory
  above it, matches (``deploy/`` = everything under any ``deploy`` directory);
- ``\\`` escapes the next character. Negation (``!``) is not supported: a manifest lists what
  to match, and an exception belongs in a narrower pattern.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property


def _class(pattern: str, i: int) -> tuple[str, int] | None:
    """A ``[...]`` class starting at ``pattern[i]``: (regex, index after it), or None if unclosed."""
    j = i + 1
    negate = j < len(pattern) and pattern[j] in "!^"
    if negate:
        j += 1
    if j < len(pattern) and pattern[j] == "]":
        j += 1
    while j < len(pattern) and pattern[j] != "]":
        j += 1
    if j >= len(pattern):
        return None
    body = pattern[i + 1 + (1 if negate else 0) : j].replace("\\", "\\\\")
    return f"[{'^' if negate else ''}{body}]", j + 1


def translate(pattern: str) -> tuple[str, bool]:
    """(regular expression over a repository-relative path, directories only)."""
    if not pattern or pattern.strip() != pattern:
        raise ValueError(f"path pattern {pattern!r}: empty, or leading/trailing spaces")
    if pattern.startswith("!"):
        raise ValueError(f"path pattern {pattern!r}: negation ('!') is not supported")
    dir_only = pattern.endswith("/")
    body = pattern.rstrip("/")
    if not body:
        raise ValueError(f"path pattern {pattern!r} names no path")
    anchored = "/" in body
    body = body.lstrip("/")
    if not anchored:
        body = "**/" + body
    out: list[str] = []
    i = 0
    while i < len(body):
        at_segment_start = i == 0 or body[i - 1] == "/"
        if body.startswith("**/", i) and at_segment_start:
            out.append("(?:.*/)?")
            i += 3
        elif body.startswith("**", i) and at_segment_start and i + 2 == len(body):
            out.append(".*")
            i += 2
        elif body[i] == "*":
            while i < len(body) and body[i] == "*":
                i += 1
            out.append("[^/]*")
        elif body[i] == "?":
            out.append("[^/]")
            i += 1
        elif body[i] == "[" and (cls := _class(body, i)) is not None:
            out.append(f"(?!/){cls[0]}")
            i = cls[1]
        elif body[i] == "\\" and i + 1 < len(body):
            out.append(re.escape(body[i + 1]))
            i += 2
        else:
            out.append(re.escape(body[i]))
            i += 1
    return "".join(out), dir_only


@dataclass(frozen=True)
class PathPattern:
    pattern: str

    @cached_property
    def _compiled(self) -> tuple[re.Pattern[str], bool]:
        regex, dir_only = translate(self.pattern)
        return re.compile(regex), dir_only

    def matches(self, path: str) -> bool:
        """Does the file ``path`` (repository-relative, ``/``-separated) match, itself or by a directory above it?"""
        regex, dir_only = self._compiled
        parts = path.strip("/").split("/")
        candidates = ["/".join(parts[:n]) for n in range(1, len(parts) + (0 if dir_only else 1))]
        return any(regex.fullmatch(c) for c in candidates)


def check_pattern(pattern: str) -> str:
    """The pattern itself, or ValueError with the reason (for the manifest's validators)."""
    translate(pattern)
    return pattern


def matching(patterns: list[str], paths: list[str]) -> dict[str, list[str]]:
    """pattern -> the paths it matches (in the given order), for every pattern."""
    compiled = [PathPattern(p) for p in patterns]
    return {p.pattern: [path for path in paths if p.matches(path)] for p in compiled}
