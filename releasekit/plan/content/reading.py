"""How a file is read for the content rules: its kind, its logical commands, its variables.

Kinds come from the path (``Dockerfile*``, ``*.sh``, ``*.patch``, ``*compose*.yml``, ``*.md``)
or, for a file without an extension, from a shell ``#!`` line. Markdown is read only inside
fenced code blocks; the other lines are kept blank so line numbers stay the file's own.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass
from functools import cached_property
from typing import Literal

from releasekit.plan.pins.text import logical_lines, tokens

Kind = Literal["dockerfile", "shell", "patch", "compose", "markdown"]


@dataclass(frozen=True)
class Command:
    """One logical line (``\\`` continuations joined): its words, each with the line it is on."""

    line: int
    words: tuple[tuple[int, str], ...]

    @cached_property
    def text(self) -> str:
        return " ".join(w for _, w in self.words)


_SHEBANG = re.compile(rb"^#![^\n]*\b(?:ba|z|da|k)?sh\b")
_COMPOSE = re.compile(r"^(?:docker-)?compose(?:[.-][^/]*)?\.ya?ml$|^[^/]*[.-]compose\.ya?ml$")


def kind_by_path(path: str) -> Kind | None:
    """The kind a path alone says, or None (an extensionless file may still be a shell script)."""
    name = posixpath.basename(path)
    lower = name.lower()
    if lower.startswith(("dockerfile", "containerfile")) or lower.endswith((".dockerfile", ".containerfile")):
        return "dockerfile"
    if lower.endswith((".sh", ".bash")):
        return "shell"
    if lower.endswith((".patch", ".diff")):
        return "patch"
    if _COMPOSE.match(lower):
        return "compose"
    if lower.endswith(".md"):
        return "markdown"
    return None


def maybe_script(path: str) -> bool:
    """An extensionless file (``scripts/run-glm51-vllm``): read its first line to know."""
    name = posixpath.basename(path)
    return "." not in name.lstrip(".")


def kind_of(path: str, head: bytes) -> Kind | None:
    by_path = kind_by_path(path)
    if by_path is not None:
        return by_path
    if maybe_script(path) and _SHEBANG.match(head):
        return "shell"
    return None


def _markdown_code(lines: list[str]) -> list[str]:
    """The lines inside fenced code blocks; every other line blank."""
    out: list[str] = []
    fence: str | None = None
    for line in lines:
        stripped = line.lstrip()
        marker = stripped[:3] if stripped.startswith(("```", "~~~")) else None
        if marker is not None and (fence is None or marker == fence):
            fence = None if fence else marker
            out.append("")
            continue
        out.append(line if fence else "")
    return out


def commands_of(kind: Kind, lines: list[str]) -> list[Command]:
    """The logical lines of a recipe: ``\\`` continuations joined, comments dropped."""
    lines = _markdown_code(lines) if kind == "markdown" else lines
    out: list[Command] = []
    for logical in logical_lines(lines):
        words = tokens(logical)
        if words:
            out.append(Command(logical[0][0], tuple(words)))
    return out


# NAME=value as an ARG/ENV line or a shell assignment writes it; a default ${NAME:-value} counts.
_ASSIGN = re.compile(
    r"(?:^|[\s;&(])(?:export\s+|readonly\s+|local\s+|declare\s+(?:-\w+\s+)*)?"
    r"([A-Za-z_][A-Za-z0-9_]*)=(\"[^\"]*\"|'[^']*'|[^\s;&|]*)"
)
_DOCKER_ARG = re.compile(r"^\s*(?:ARG|ENV)\s+([A-Za-z_][A-Za-z0-9_]*)(?:\s*=\s*|\s+)(\S+)\s*$", re.IGNORECASE)
_DEFAULT = re.compile(r"^\$\{([A-Za-z_][A-Za-z0-9_]*):?-([^}]*)\}$")


def _unquote(value: str) -> str:
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        return value[1:-1]
    return value


def variables_of(kind: Kind, lines: list[str]) -> dict[str, str]:
    """Every NAME=value the file sets (the first value wins; a ``${NAME:-d}`` default gives d)."""
    found: dict[str, str] = {}
    for raw in lines:
        line = raw.strip()
        pairs: list[tuple[str, str]] = []
        docker = _DOCKER_ARG.match(line) if kind == "dockerfile" else None
        if docker and "=" not in docker.group(0).split(None, 2)[1]:
            pairs.append((docker.group(1), docker.group(2)))
        else:
            pairs.extend((m.group(1), m.group(2)) for m in _ASSIGN.finditer(line))
        for name, value in pairs:
            value = _unquote(value)
            default = _DEFAULT.match(value)
            if default:
                value = default.group(2)
            if value and name not in found:
                found[name] = _unquote(value)
    return found


_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::?-([^}]*))?\}|\$([A-Za-z_][A-Za-z0-9_]*)")


def expand(word: str, variables: dict[str, str]) -> str:
    """``word`` with ``$X``/``${X}``/``${X:-d}`` replaced by the file's value (else the default)."""

    def one(m: re.Match[str]) -> str:
        name = m.group(1) or m.group(3)
        if name in variables:
            return variables[name]
        return m.group(2) if m.group(2) is not None else m.group(0)

    return _REF.sub(one, word)


_COMMIT = re.compile(r"^[0-9a-f]{7,40}$")


def is_commit(value: str) -> bool:
    """A 7-40 digit hex object name (with a digit, so an all-letter word like 'defaced' is not one)."""
    return bool(_COMMIT.match(value)) and any(c.isdigit() for c in value)


def basename(word: str) -> str:
    return word.rstrip("/").rsplit("/", 1)[-1]


_PYTHON = re.compile(r"^python(?:\d+(?:\.\d+)?)?$")


def engine_start(words: list[str]) -> int | None:
    """Where the words start the serving engine (``vllm serve``, ``python -m vllm...``), or None."""
    for i, word in enumerate(words):
        nxt = words[i + 1] if i + 1 < len(words) else ""
        if basename(word) == "vllm" and nxt == "serve":
            return i
        if _PYTHON.match(basename(word)) and nxt == "-m" and i + 2 < len(words):
            module = words[i + 2]
            if module == "vllm" or module.startswith("vllm."):
                return i
    return None


INSTALL = re.compile(r"(?:\bpip3?(?:\.\d+)?|\buv\s+pip|-m\s+pip)\s+install\b")

SEPARATORS = {"&&", "||", ";", "|", "&"}


def simple_commands(command: Command) -> list[list[tuple[int, str]]]:
    """The commands of one logical line, split at ``&&``/``||``/``;``/``|``, a Dockerfile ``RUN``
    (and its ``--mount=`` options) dropped from the first."""
    out: list[list[tuple[int, str]]] = [[]]
    for line, word in command.words:
        if word in SEPARATORS:
            out.append([])
            continue
        if word.endswith(";") and len(word) > 1:
            out[-1].append((line, word[:-1]))
            out.append([])
            continue
        out[-1].append((line, word))
    first = out[0]
    if first and first[0][1].upper() == "RUN":
        first.pop(0)
        while first and first[0][1].startswith("--"):
            first.pop(0)
    return [c for c in out if c]
