"""The pin sources, in the order they claim a file (the first that claims it reads it)."""

from __future__ import annotations

from collections.abc import Iterable

from releasekit.plan.pins.interface import PinSource
from releasekit.plan.pins.sources import dockerfile, pixi, pyproject, requirements, setup_py, workflow

SOURCES: tuple[PinSource, ...] = (
    pyproject.SOURCE,
    pixi.SOURCE,
    setup_py.SOURCE,
    requirements.SOURCE,
    dockerfile.SOURCE,
    workflow.SOURCE,
)
# A file another input names (``-r x.txt``, ``open("requirements/x.txt")``) is read as requirements.
NAMED_FILE_SOURCE: PinSource = requirements.SOURCE

# Vendored environments committed by mistake are not the project's inputs. ``build``/``dist``
# are: a commit holds no build output, and vLLM's requirements/build/cuda.txt is a real input.
_SKIP_DIRS = {
    ".git",
    ".venv",
    "venv",
    "node_modules",
    "__pycache__",
    "site-packages",
    ".tox",
}


def source_for(path: str) -> PinSource | None:
    return next((s for s in SOURCES if s.claims(path)), None)


def input_sources(files: Iterable[str]) -> list[tuple[str, PinSource]]:
    """(path, source) of every release input among ``files``, in path order."""
    found: list[tuple[str, PinSource]] = []
    for rel in sorted(files):
        if any(d in _SKIP_DIRS for d in rel.split("/")[:-1]):
            continue
        source = source_for(rel)
        if source is not None:
            found.append((rel, source))
    return found


def release_inputs(files: Iterable[str]) -> list[tuple[str, str]]:
    """(path, kind) of every release input among ``files``, in path order."""
    return [(rel, source.kind) for rel, source in input_sources(files)]
