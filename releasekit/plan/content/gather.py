"""Which components' trees ``plan check`` scans with the content rules, read before any check runs."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from releasekit.git.mirror import Mirror
from releasekit.manifest import LoadedManifest
from releasekit.plan.content.scan import ContentScan, scan_commit


@dataclass(frozen=True)
class ComponentContent:
    """The content rules' hits at a component's checked commit and at each audited release ref."""

    checked: ContentScan
    releases: tuple[tuple[str, ContentScan], ...] = ()


def scanned_components(loaded: LoadedManifest, names: Sequence[str]) -> list[str]:
    """The components to scan: those with ``scan_content``, ``accepted_files`` or ``runtime_recipes``, or
    named by an exclusion with content ``rules`` (an exclusion without a component claims hits in the
    others). The same scan names the runtime switches of their recipes (``switches.py``)."""
    manifest = loaded.manifest
    comps = manifest.git_components()
    wanted = {
        n
        for n in names
        if comps[n].scan_content or comps[n].accepted_files or comps[n].runtime_recipes is not None
    }
    wanted.update(
        e.component for e in manifest.exclusions if e.rules and e.component and e.component in names
    )
    return [n for n in names if n in wanted]


def content_scans(
    loaded: LoadedManifest,
    trees: Mapping[str, tuple[Mirror, str]],
    audits: Sequence[tuple[str, str]],
) -> dict[str, ComponentContent]:
    """component -> its scans; ``trees``: component -> (mirror, checked commit); ``audits``: the
    (component, release ref) pairs the release-only audit reads."""
    out: dict[str, ComponentContent] = {}
    comps = loaded.manifest.git_components()
    for name in scanned_components(loaded, list(trees)):
        mirror, checked = trees[name]
        comp = comps[name]
        packages = tuple(comp.import_names) or ((comp.distribution or name).replace("-", "_"),)
        releases = tuple(
            (ref, scan_commit(mirror.git, mirror.resolve(ref), packages=packages))
            for comp_name, ref in audits
            if comp_name == name
        )
        recipes = tuple(comp.runtime_recipes) if comp.runtime_recipes is not None else None
        out[name] = ComponentContent(
            scan_commit(mirror.git, checked, packages=packages, recipes=recipes), releases
        )
    return out
