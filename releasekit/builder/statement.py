"""Pieces of the build's provenance statement that only the build makes."""

from __future__ import annotations

from releasekit.records.provenance import ResourceDescriptor


def git_dependency(
    name: str, repo: str, ref: str | None, commit: str, tree: str | None = None
) -> ResourceDescriptor:
    """A git component as a resolved dependency: ``git+URL@ref`` with its ``gitCommit`` (and tree)."""
    uri = f"git+{repo}" + (f"@{ref}" if ref else "")
    annotations = {"tree": tree} if tree else None
    return ResourceDescriptor(name=name, uri=uri, digest={"gitCommit": commit}, annotations=annotations)
