"""Image labels: OCI annotations plus one ``io.releasekit.component.<name>.*`` group per component."""

from __future__ import annotations

from releasekit.git.remote import strip_credentials
from releasekit.records.build import BaseImageRecord, ComponentRecord

NS = "io.releasekit"


UNVERIFIED = "unverified"


def source_verification_label(name: str) -> str:
    """The label that marks a pinned wheel whose ``source:`` plan lock could not read
    (``WHEEL_SOURCE_UNVERIFIED``): its repo and commit are as the manifest gave them, not checked.
    Only such a wheel carries it, so images of verified (or no) wheel sources keep their labels."""
    return f"{NS}.component.{name}.source-verification"


def source_unverified(labels: dict[str, str], name: str) -> bool:
    """Whether the labels (a build record's) mark component ``name``'s wheel source unverified."""
    return labels.get(source_verification_label(name)) == UNVERIFIED


def component_labels(comp: ComponentRecord, *, unverified: bool = False) -> dict[str, str]:
    prefix = f"{NS}.component.{comp.name}"
    values = {
        "source-verification": UNVERIFIED if unverified else None,
        "repo": strip_credentials(comp.repo) if comp.repo else None,
        "commit": comp.commit,
        "tree": comp.tree,
        "version": comp.version,
        "wheel.sha256": comp.wheel_sha256,
        "version-policy": comp.version_policy,
    }
    return {f"{prefix}.{k}": v for k, v in values.items() if v}


def primary_component(components: list[ComponentRecord]) -> ComponentRecord | None:
    """The component the image is "of" (org.opencontainers.image.source): the first built runtime one."""
    for comp in components:
        if comp.kind == "git" and comp.built and comp.role == "runtime":
            return comp
    return next((c for c in components if c.kind == "git"), None)


def image_labels(
    *,
    components: list[ComponentRecord],
    base: BaseImageRecord,
    created: str,
    lock_sha256: str,
    manifest_sha256: str,
    release_name: str,
    unverified_sources: frozenset[str] = frozenset(),
) -> dict[str, str]:
    """``unverified_sources``: the wheel components whose locked ``source`` is not verified."""
    primary = primary_component(components)
    labels = {
        "org.opencontainers.image.created": created,
        "org.opencontainers.image.title": release_name,
        "org.opencontainers.image.base.name": base.name,
        "org.opencontainers.image.base.digest": base.digest or base.image_id,
        f"{NS}.lock.sha256": lock_sha256,
        f"{NS}.manifest.sha256": manifest_sha256,
        f"{NS}.base.image_id": base.image_id,
    }
    if primary is not None:
        labels["org.opencontainers.image.source"] = strip_credentials(primary.repo or "")
        labels["org.opencontainers.image.revision"] = primary.commit or ""
        labels["org.opencontainers.image.version"] = primary.version or ""
    for comp in components:
        labels.update(component_labels(comp, unverified=comp.name in unverified_sources))
    return {k: v for k, v in sorted(labels.items()) if v}
