"""Runtime switches a component's recipes set: ``VLLM_*``, ``NCCL_*``, ``TORCH_*``, ... (issue 44).

Read in the same pass as the content rules (``scan.py``), from the text files the scan already read
at the checked commit (each at most ``MAX_FILE_BYTES``; at most ``MAX_SWITCHES_PER_FILE`` named per
file). What counts as a setting:

- a Dockerfile's ``ENV NAME=value ...`` (and the legacy ``ENV NAME value``) and ``ARG NAME=value``
  defaults (build time: they reach the engine through what the build compiles);
- a shell script's ``export NAME=value`` / ``declare -x``, ``export NAME`` of a variable the file
  assigns, and ``NAME=value command`` / ``env NAME=value command`` prefixes (``${NAME:-d}`` gives d);
- a Compose file's ``environment:`` entries (``- NAME=value`` or ``NAME: value``).

Which files: the component's ``runtime_recipes`` patterns when the manifest gives them (the recipes
the release uses), else every recipe outside ``UPSTREAM_DIRS`` at any depth: upstream's examples,
tests, CI and benchmarks are not how a release's image is made or started.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from releasekit.manifest.path_patterns import PathPattern
from releasekit.manifest.switches import is_switch
from releasekit.plan.content.interface import ScannedFile
from releasekit.plan.content.reading import SEPARATORS, expand

UPSTREAM_DIRS = frozenset(
    {"examples", "example", "tests", "test", ".buildkite", ".github", ".circleci", "benchmarks", "docs"}
)
MAX_SWITCHES_PER_FILE = 1000

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_ASSIGNMENT = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=(.*)$", re.DOTALL)
_COMPOSE_KEY = re.compile(r"^(\s*)environment\s*:\s*$")
_COMPOSE_ITEM = re.compile(r"^\s*-\s*[\"']?([A-Za-z_][A-Za-z0-9_]*)=(.*?)[\"']?\s*$")
_COMPOSE_MAP = re.compile(r"^\s*[\"']?([A-Za-z_][A-Za-z0-9_]*)[\"']?\s*:\s*(.*?)\s*$")


@dataclass(frozen=True)
class Switch:
    """One runtime switch a recipe sets: where, what, and how (``ENV``, ``ARG default``, ``export``, ...)."""

    file: str
    line: int
    name: str
    value: str
    how: str

    def shown(self) -> str:
        return f"{self.file}:{self.line}: {self.how} {self.name}={self.value}"


def in_scope(path: str, recipes: Sequence[str] | None) -> bool:
    """Whether the switches of ``path`` are the release's (see the module's docstring)."""
    if recipes is not None:
        return any(PathPattern(p).matches(path) for p in recipes)
    return not any(part in UPSTREAM_DIRS for part in path.split("/")[:-1])


def _unquote(value: str) -> str:
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        return value[1:-1]
    return value


def _dockerfile(source: ScannedFile) -> Iterator[Switch]:
    for command in source.commands:
        words = list(command.words)
        head = words[0][1].upper() if words else ""
        if head not in ("ENV", "ARG") or len(words) < 2:
            continue
        how = "ENV" if head == "ENV" else "ARG default"
        if head == "ENV" and "=" not in words[1][1]:
            line, name = words[1]
            yield Switch(source.path, line, name, " ".join(w for _, w in words[2:]), how)
            continue
        for line, word in words[1:]:
            match = _ASSIGNMENT.match(word)
            if match:
                yield Switch(source.path, line, match.group(1), match.group(2), how)


def _simple(words: list[tuple[int, str]]) -> Iterator[list[tuple[int, str]]]:
    current: list[tuple[int, str]] = []
    for line, word in words:
        if word in SEPARATORS or word in ("then", "do", "else", "{", "}", "(", ")"):
            if current:
                yield current
            current = []
        else:
            current.append((line, word))
    if current:
        yield current


def _value(value: str, name: str, variables: dict[str, str]) -> str:
    """``value`` with the file's variables expanded; ``NAME="${NAME:-d}"`` gives d, not itself."""
    if name in variables and name in value:
        variables = {k: v for k, v in variables.items() if k != name}
    return expand(value, variables)


def _exported(path: str, words: list[tuple[int, str]], variables: dict[str, str]) -> Iterator[Switch]:
    """``export A=1 B``, ``declare -x A=1``: each exported variable with its value."""
    first = words[0][1]
    if first != "export" and not any(w.startswith("-") and "x" in w for _, w in words[1:]):
        return
    for line, word in words[1:]:
        match = _ASSIGNMENT.match(word)
        if match:
            name = match.group(1)
            yield Switch(path, line, name, _value(match.group(2), name, variables), "export")
        elif _NAME.match(word) and word in variables:
            yield Switch(path, line, word, _value(variables[word], word, variables), "export")


def _prefixed(path: str, words: list[tuple[int, str]], variables: dict[str, str]) -> list[Switch]:
    """``A=1 B=2 command``, ``env A=1 command``: the command's own environment."""
    rest = words[1:] if words[0][1] == "env" else words
    prefix: list[Switch] = []
    for line, word in rest:
        match = _ASSIGNMENT.match(word)
        if not match:
            break
        name = match.group(1)
        prefix.append(Switch(path, line, name, _value(match.group(2), name, variables), "sets"))
    return prefix if len(prefix) < len(rest) else []  # a bare assignment is no environment


def _shell(source: ScannedFile) -> Iterator[Switch]:
    variables = source.variables
    for command in source.commands:
        for words in _simple(list(command.words)):
            if words[0][1] in ("export", "declare", "typeset"):
                yield from _exported(source.path, words, variables)
            else:
                yield from _prefixed(source.path, words, variables)


def _compose(source: ScannedFile) -> Iterator[Switch]:
    block: int | None = None
    for lineno, raw in enumerate(source.lines, start=1):
        if not raw.strip() or raw.lstrip().startswith("#"):
            continue
        indent = len(raw) - len(raw.lstrip())
        key = _COMPOSE_KEY.match(raw)
        if key:
            block = len(key.group(1))
            continue
        if block is None:
            continue
        if indent <= block and not raw.lstrip().startswith("-"):
            block = None
            continue
        item = _COMPOSE_ITEM.match(raw) or _COMPOSE_MAP.match(raw)
        if item:
            yield Switch(source.path, lineno, item.group(1), _unquote(item.group(2)), "Compose environment")


def switches_in(source: ScannedFile) -> list[Switch]:
    """The runtime switches ``source`` sets, in line order (at most ``MAX_SWITCHES_PER_FILE``)."""
    reader = {"dockerfile": _dockerfile, "shell": _shell, "compose": _compose}.get(source.kind)
    if reader is None:
        return []
    found: list[Switch] = []
    for switch in reader(source):
        if is_switch(switch.name):
            found.append(switch)
            if len(found) >= MAX_SWITCHES_PER_FILE:
                break
    return sorted(dict.fromkeys(found), key=lambda s: (s.line, s.name))


__all__ = ["UPSTREAM_DIRS", "Switch", "in_scope", "switches_in"]
