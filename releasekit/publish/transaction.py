"""Step 5 of publish, on any target: the release tags, put only after the image was pushed,
checked and its evidence attached (steps 2-4, ``targets``). A failure before the tags leaves no
release tag; a rerun resumes.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from releasekit.atomic import failpoint
from releasekit.publish.targets.base import Pushed, TargetSession


@dataclass
class Tagged:
    moved: dict[str, str] = field(default_factory=dict)  # tag -> the digest it pointed at before


def put_tags(session: TargetSession, pushed: Pushed, tags: list[str]) -> Tagged:
    """Step 5: the same manifest bytes under each release tag; a tag that pointed elsewhere is reported."""
    out = Tagged()
    for tag in tags:
        before = session.tag_digest(tag)
        if before is not None and before != pushed.digest:
            out.moved[tag] = before
        session.put_tag(tag, pushed.blob)
        failpoint(f"publish-tagged:{tag}")
    return out
