"""``provenance.intoto.json``: an in-toto Statement v1 with a SLSA Provenance v1 predicate.

Subjects are what the build produced (the image, by its ID, and every wheel);
``resolvedDependencies`` are what it was made from (one entry per component as
``git+URL@ref`` with its ``gitCommit``, every pinned wheel, the base image, the lock).
The build stage fills it in (``releasekit.builder.service``); ``ResourceDescriptor`` is also
what the verification summary names its policy and input attestations with.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, ClassVar, Final, Literal

from pydantic import Field

from releasekit.records.base import (
    Record,
    RecordError,
    Strict,
    bounded_json,
    load_record,
    parse_record,
    write_record,
)
from releasekit.records.intoto import STATEMENT_TYPE, ResourceDescriptor

__all__ = ["PROVENANCE_FILE", "STATEMENT_TYPE", "ResourceDescriptor", "Statement"]

PROVENANCE_FILE: Final = "provenance.intoto.json"
SLSA_PROVENANCE_V1: Final = "https://slsa.dev/provenance/v1"
BUILD_TYPE = "https://releasekit.dev/build/image/v1"


class Builder(Strict):
    id: str
    version: dict[str, str] = Field(default_factory=dict)


class BuildMetadata(Strict):
    invocationId: str | None = None  # noqa: N815 - SLSA's field names
    startedOn: str | None = None  # noqa: N815
    finishedOn: str | None = None  # noqa: N815


class RunDetails(Strict):
    builder: Builder
    metadata: BuildMetadata = Field(default_factory=BuildMetadata)
    byproducts: list[ResourceDescriptor] = Field(default_factory=list)


class BuildDefinition(Strict):
    buildType: str = BUILD_TYPE  # noqa: N815
    externalParameters: dict[str, Any]  # noqa: N815
    internalParameters: dict[str, Any] = Field(default_factory=dict)  # noqa: N815
    resolvedDependencies: list[ResourceDescriptor]  # noqa: N815


class Predicate(Strict):
    buildDefinition: BuildDefinition  # noqa: N815
    runDetails: RunDetails  # noqa: N815


class Statement(Record):
    """The schema version is the in-toto ``_type`` (with ``predicateType`` fixed too)."""

    schema_field: ClassVar[str] = "_type"
    kind = "provenance statement"

    type_: Literal["https://in-toto.io/Statement/v1"] = Field(default=STATEMENT_TYPE, alias="_type")
    subject: list[ResourceDescriptor]
    predicateType: Literal["https://slsa.dev/provenance/v1"] = SLSA_PROVENANCE_V1  # noqa: N815
    predicate: Predicate


def sha256_digest(value: str) -> dict[str, str]:
    """``sha256:abc`` or ``abc`` -> ``{"sha256": "abc"}``."""
    return {"sha256": value.removeprefix("sha256:")}


def write_statement(statement: Statement, path: Path) -> None:
    write_record(statement, path, exclude_none=True)


def read_statement(path: Path) -> Statement:
    return load_record(Statement, path)


def parse_statement_text(text: str, source: str) -> Statement:
    """A statement read from text (an attachment); not JSON or not the model: RecordError, one line."""
    try:
        data = bounded_json(text, source)
    except json.JSONDecodeError as exc:
        raise RecordError(f"{source}: not JSON ({exc})") from None
    return parse_record(Statement, data, source)
