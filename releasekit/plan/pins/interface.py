"""What a pin source is: the files it claims, and the requirements it finds in one of them."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Literal, Protocol

from releasekit.plan.pins.text import resolve

Scope = Literal["build", "runtime", "release"]


@dataclass(frozen=True)
class Found:
    """One requirement as a release input writes it."""

    file: str
    line: int
    text: str  # e.g. 'apache-tvm-ffi>=0.1.5,<=0.1.11', or a pixi 'name ==0.1.11'
    scope: Scope
    name: str | None = None  # set when the form is not PEP 508 (pixi, version variables)
    spec: str | None = None  # with ``name``: the specifier text ('' = none)
    url: str | None = None  # a URL/VCS dependency


@dataclass(frozen=True)
class Wanted:
    package: str
    version: str
    scopes: tuple[Scope, ...]
    origin: str  # "pin" or "wheel component NAME"


@dataclass(frozen=True)
class Stated:
    """A version an input states outside a requirement (``ARG X_VERSION=``, a ``FROM`` tag), judged as read."""

    found: Found
    want: Wanted
    shown: str  # how the finding names it: 'TVM_FFI_VERSION=0.1.11', 'FROM tag cu130-flashinfer-0.6.16'
    agrees: bool


@dataclass
class InputFile:
    """One release input as a source reads it, and what the source learns besides requirements."""

    files: frozenset[str]  # every path of the commit, to resolve the files this one names
    path: str
    text: str
    wanted: Sequence[Wanted]
    named: list[str] = field(default_factory=list)  # files it names (-r, open()): read next
    unreadable: list[str] = field(default_factory=list)  # why its pins could not be read
    stated: list[Stated] = field(default_factory=list)

    @cached_property
    def lines(self) -> list[str]:
        return self.text.splitlines()

    def name_file(self, ref: str) -> None:
        """Queue a file this input names, when it is one of the commit's files."""
        target = resolve(self.files, self.path, ref)
        if target:
            self.named.append(target)


class PinSource(Protocol):
    """One input format. A new format is one module under ``sources/`` and one line in ``registry.py``."""

    kind: str

    def claims(self, path: str) -> bool:
        """Whether the file at ``path`` (repository-relative) is this format."""
        ...

    def read(self, source: InputFile) -> Iterator[Found]:
        """Its requirements, each at its own file:line (``source.named``/``unreadable``/``stated`` besides)."""
        ...
