"""Who answers for a content-rule hit: a component's ``accepted_files`` entry (accepted, with its
reason) first, then an exclusion whose ``rules`` name the rule (reported as that exclusion's
change), else nobody (the hit is a finding of its own)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from releasekit.manifest.models import AcceptedContent, Exclusion, GitComponent, Manifest
from releasekit.manifest.path_patterns import PathPattern
from releasekit.plan.content.interface import Hit


@dataclass(frozen=True)
class HitGroup:
    """The hits of one rule in one file: reported once, at the first line."""

    first: Hit
    lines: tuple[int, ...]

    def shown(self) -> str:
        more = self.lines[1:]
        extra = f" (also line{'s' if len(more) > 1 else ''} {', '.join(map(str, more[:5]))}{', ...' if len(more) > 5 else ''})"
        return f"{self.first.file}:{self.first.line}: {self.first.rule}: {self.first.shown}" + (
            extra if more else ""
        )


def grouped(hits: tuple[Hit, ...]) -> list[HitGroup]:
    groups: dict[tuple[str, str], list[Hit]] = {}
    for hit in hits:
        groups.setdefault((hit.file, hit.rule), []).append(hit)
    return [HitGroup(found[0], tuple(h.line for h in found)) for found in groups.values()]


def accepted_by(comp: GitComponent, hit: Hit) -> AcceptedContent | None:
    for entry in comp.accepted_files:
        if (not entry.rules or hit.rule in entry.rules) and any(
            PathPattern(p).matches(hit.file) for p in entry.paths
        ):
            return entry
    return None


def claiming(manifest: Manifest, component: str, hit: Hit) -> Iterator[Exclusion]:
    """The exclusions whose content rules claim ``hit`` in ``component``."""
    for excl in manifest.exclusions:
        if hit.rule in excl.rules and excl.component in (None, component):
            yield excl
