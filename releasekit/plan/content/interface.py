"""What a recogniser is: the file kinds it reads, and the hits it finds in one file."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from functools import cached_property
from typing import Protocol

from releasekit.manifest.content_rules import ContentRule
from releasekit.plan.content.reading import Command, Kind, commands_of, variables_of


@dataclass(frozen=True)
class Hit:
    """One place a rule recognises: the file, the line, the rule, and what was seen there."""

    file: str
    line: int
    rule: ContentRule
    shown: str  # what the finding says: 'git checkout 7bf571d5b800 (B12X_COMMIT)'


@dataclass
class ScannedFile:
    """One text file of the tree as the recognisers read it."""

    path: str
    kind: Kind
    text: str
    packages: tuple[str, ...]  # the component's import names (its installed copy is site-packages/<name>)

    @cached_property
    def lines(self) -> list[str]:
        return self.text.splitlines()

    @cached_property
    def commands(self) -> list[Command]:
        return commands_of(self.kind, self.lines)

    @cached_property
    def variables(self) -> dict[str, str]:
        return variables_of(self.kind, self.lines)


class Recogniser(Protocol):
    """One rule. A new rule is one module under ``recognisers/``, one line in ``registry.py`` and
    its name in ``releasekit/manifest/content_rules.py``."""

    rule: ContentRule
    kinds: frozenset[Kind]

    def find(self, source: ScannedFile) -> Iterator[Hit]:
        """Every place in ``source`` this rule recognises, at its own line."""
        ...


__all__ = ["Command", "Hit", "Kind", "Recogniser", "ScannedFile"]
