"""The build's provenance: an in-toto Statement v1 with a SLSA Provenance v1 predicate.

Subjects are what the build produced (the image, by its ID, and every wheel);
``resolvedDependencies`` are what it was made from (one entry per component as
``git+URL@ref`` with its ``gitCommit``, every pinned wheel, the base image, the lock).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
SLSA_PROVENANCE_V1 = "https://slsa.dev/provenance/v1"
BUILD_TYPE = "https://releasekit.dev/build/image/v1"


class ResourceDescriptor(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str | None = None
    uri: str | None = None
    digest: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, Any] | None = None


class Builder(BaseModel):
    id: str
    version: dict[str, str] = Field(default_factory=dict)


class BuildMetadata(BaseModel):
    invocationId: str | None = None  # noqa: N815 - SLSA's field names
    startedOn: str | None = None  # noqa: N815
    finishedOn: str | None = None  # noqa: N815


class RunDetails(BaseModel):
    builder: Builder
    metadata: BuildMetadata = Field(default_factory=BuildMetadata)
    byproducts: list[ResourceDescriptor] = Field(default_factory=list)


class BuildDefinition(BaseModel):
    buildType: str = BUILD_TYPE  # noqa: N815
    externalParameters: dict[str, Any]  # noqa: N815
    internalParameters: dict[str, Any] = Field(default_factory=dict)  # noqa: N815
    resolvedDependencies: list[ResourceDescriptor]  # noqa: N815


class Predicate(BaseModel):
    buildDefinition: BuildDefinition  # noqa: N815
    runDetails: RunDetails  # noqa: N815


class Statement(BaseModel):
    model_config = ConfigDict(populate_by_name=True)

    type_: str = Field(default=STATEMENT_TYPE, alias="_type")
    subject: list[ResourceDescriptor]
    predicateType: str = SLSA_PROVENANCE_V1  # noqa: N815
    predicate: Predicate


def sha256_digest(value: str) -> dict[str, str]:
    """``sha256:abc`` or ``abc`` -> ``{"sha256": "abc"}``."""
    return {"sha256": value.removeprefix("sha256:")}


def git_dependency(name: str, repo: str, ref: str | None, commit: str, tree: str | None = None) -> ResourceDescriptor:
    uri = f"git+{repo}" + (f"@{ref}" if ref else "")
    annotations = {"tree": tree} if tree else None
    return ResourceDescriptor(name=name, uri=uri, digest={"gitCommit": commit}, annotations=annotations)


def write_statement(statement: Statement, path: Path) -> None:
    data = statement.model_dump(mode="json", by_alias=True, exclude_none=True)
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def read_statement(path: Path) -> Statement:
    return Statement.model_validate_json(path.read_text(encoding="utf-8"))
