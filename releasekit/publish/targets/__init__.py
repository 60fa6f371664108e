"""Publish targets: the places a release image goes, one file each, and the registry of them.

``PublishTarget`` (``base.py``) is everything publish and promote ask of a target; the OCI
registry (``oci.py``) is the one implementation. Adding a target is one file implementing the
interface and one entry in ``TARGETS``, keyed by the target's kind.
"""

from __future__ import annotations

from collections.abc import Callable

from releasekit.publish.targets.base import EvidenceFiles, PublishTarget, Pushed, TargetEdge, TargetSession
from releasekit.publish.targets.oci import OciTarget

__all__ = [
    "DEFAULT_KIND",
    "TARGETS",
    "EvidenceFiles",
    "PublishTarget",
    "Pushed",
    "TargetEdge",
    "TargetSession",
    "make_target",
]

# kind -> the factory that makes the target from the effects the command passes in.
TARGETS: dict[str, Callable[[TargetEdge], PublishTarget]] = {OciTarget.kind: OciTarget}

# The manifest's publish.repository and --to name an OCI repository (REGISTRY/REPO).
DEFAULT_KIND = OciTarget.kind


def make_target(edge: TargetEdge, kind: str = DEFAULT_KIND) -> PublishTarget:
    try:
        factory = TARGETS[kind]
    except KeyError:
        raise ValueError(
            f"unknown publish target kind {kind!r} (known: {', '.join(sorted(TARGETS))})"
        ) from None
    return factory(edge)
