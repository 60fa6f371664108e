"""Import today's tool's files (read through ``releasekit.records.legacy``).

- the merge manifest becomes one git component: canonical branch = its base ref, the
  planned PRs with pinned heads in order; a reviewed exclusion whose reason says a planned
  PR superseded it (``Superseded by PR #280``, ``Included ... in PR #254``, ``consolidated
  in PR #229``) becomes ``supersedes:`` of that PR, not an exclusion (the newer PR may keep
  the older one's commits: plan check then sees them as carried, not as an excluded change);
  every other reviewed exclusion stays an exclusion (by PR number and head commit);
- the integration lock (``--lock``) gives the base commit (the component's pinned
  ``commit``: today's composed tree is base + plan) and must name the same manifest
  (sha256) and the same heads; ``--lock-out`` writes it as a releasekit lock
  (``legacy_lock_to_lock``), reading the trees it does not record from the repository;
- the validation receipt (``--receipt``) becomes the named baseline
  ``validation.baselines.<receipt name>``: every number of its ``evidence``
  (``mtp0.decode_tps.c1`` ...), usable by gates; its ``source_composition`` base is the
  pinned commit when no lock is given.
"""

from __future__ import annotations

import datetime as _dt
import io
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML

from releasekit.digests import file_sha256
from releasekit.errors import InputError
from releasekit.manifest.models import TO_BE_LOCKED
from releasekit.records.legacy import (
    LegacyIntegrationLock,
    LegacyMergeManifest,
    LegacyValidationReceipt,
    read_integration_lock,
    read_merge_manifest,
    read_validation_receipt,
)
from releasekit.records.lock import (
    LOCK_SCHEMA,
    Lock,
    LockedBaseImage,
    LockedGitComponent,
    LockedManifest,
    LockedPR,
    LockedToolchain,
)

_DISPOSITIONS = {
    "superseded": "superseded",
    "experimental": "experimental",
    "alternative": "alternative",
    "out_of_scope": "out-of-scope",
    "out-of-scope": "out-of-scope",
    "deferred": "deferred",
}


def _slug(text: str) -> str:
    out = "".join(c if c.isalnum() else "-" for c in text.lower()).strip("-")
    while "--" in out:
        out = out.replace("--", "-")
    return out[:64] or "release"


def baseline_name(receipt_path: Path) -> str:
    """``blackwell-llm-docker.validation-receipt.gilded-gnosis-v20-r34.json`` -> ``gilded-gnosis-v20-r34``."""
    stem = receipt_path.name.removesuffix(".json")
    return _slug(stem.split("validation-receipt.", 1)[-1])


def receipt_baseline(receipt: LegacyValidationReceipt, receipt_path: Path) -> dict[str, Any]:
    values = receipt.metrics()
    if not values:
        raise InputError(f"{receipt_path}: the receipt's evidence holds no numbers to use as a baseline")
    return {
        "source": f"today's tool's validation receipt {receipt_path.name} ({receipt.status}, image {receipt.image_id or receipt.image})",
        "values": values,
    }


def _check_lock_matches(
    lock: LegacyIntegrationLock,
    lock_path: Path,
    manifest_path: Path,
    repository: str,
    heads: list[tuple[int, str]],
) -> None:
    digest = file_sha256(manifest_path)
    if lock.manifest.sha256 != digest:
        raise InputError(
            f"{lock_path}: locks a manifest with sha256 {lock.manifest.sha256[:12]}, not {manifest_path.name} ({digest[:12]})"
        )
    if lock.base.repository != repository:
        raise InputError(
            f"{lock_path}: base repository {lock.base.repository} is not the manifest's {repository}"
        )
    locked = [(p.number, p.head) for p in lock.pull_requests]
    if locked != heads:
        raise InputError(f"{lock_path}: its pull requests and heads differ from {manifest_path.name}'s plan")


def _plan_and_exclusions(
    ref: LegacyMergeManifest, path: Path, component: str
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The merge plan (with what each PR supersedes) and the reviewed exclusions of today's manifest."""
    planned = {p.number for p in ref.pull_requests}
    supersedes: dict[int, list[int]] = {}
    exclusions = []
    for ex in ref.reviewed_exclusions:
        disposition = _DISPOSITIONS.get(ex.disposition.lower())
        if disposition is None:
            raise InputError(f"{path}: PR #{ex.number}: unknown disposition '{ex.disposition}'")
        by = ex.superseded_by(planned)
        if by is not None:
            supersedes.setdefault(by, []).append(ex.number)
            continue
        exclusions.append(
            {
                "id": f"{component}-pr-{ex.number}",
                "description": f"{component} PR #{ex.number} (reviewed, not merged)",
                "component": component,
                "pr": ex.number,
                "commits": [ex.head],
                "disposition": disposition,
                "reason": ex.reason,
            }
        )
    plan: list[dict[str, Any]] = []
    for p in ref.pull_requests:
        entry: dict[str, Any] = {"pr": p.number, "title": p.title, "head": p.head}
        if p.number in supersedes:
            entry["supersedes"] = sorted(supersedes[p.number])
        plan.append(entry)
    return plan, exclusions


def import_reference_manifest(
    path: Path,
    *,
    component: str = "vllm",
    base_image: str,
    cuda_arch_list: list[str],
    lock_path: Path | None = None,
    receipt_path: Path | None = None,
) -> dict[str, Any]:
    """Translate today's tool's files into releasekit/v1 manifest data (a plain dict)."""
    ref = read_merge_manifest(path)
    plan, exclusions = _plan_and_exclusions(ref, path, component)
    comp: dict[str, Any] = {
        "kind": "git",
        "repo": ref.repository,
        "canonical_branch": ref.base_ref.removeprefix("refs/heads/"),
    }
    sources = [path.name]
    data: dict[str, Any] = {
        "schema": "releasekit/v1",
        "name": _slug(ref.name),
        "description": f"Imported from today's tool's files: {path.name}",
        "sources": sources,
    }
    receipt = read_validation_receipt(receipt_path) if receipt_path else None
    if lock_path is not None:
        lock = read_integration_lock(lock_path)
        _check_lock_matches(
            lock, lock_path, path, ref.repository, [(p.number, p.head) for p in ref.pull_requests]
        )
        comp["commit"] = lock.base.commit
        sources.append(lock_path.name)
    elif receipt is not None:
        base = receipt.source_composition.get(component)
        if isinstance(base, dict) and isinstance(base.get("base"), str):
            comp["commit"] = base["base"]
    comp["merge_plan"] = plan
    data["components"] = {component: comp}
    data["toolchain"] = {
        "base_image": {"name": base_image, "digest": TO_BE_LOCKED},
        "cuda_arch_list": cuda_arch_list,
    }
    data["exclusions"] = exclusions
    if receipt is not None and receipt_path is not None:
        sources.append(receipt_path.name)
        data["validation"] = {
            "baselines": {baseline_name(receipt_path): receipt_baseline(receipt, receipt_path)}
        }
    return data


def legacy_lock_to_lock(
    lock_path: Path,
    manifest_path: Path,
    manifest_sha256: str,
    manifest_name: str,
    *,
    component: str,
    mirror: Any,
    base_image: str,
    cuda_arch_list: list[str],
) -> Lock:
    """Today's integration lock as a releasekit lock for ``plan check --lock``.

    The base commit, heads and composed tree come from the legacy lock; what it does not
    record (trees of the base and heads, the base's commit time, where the branch points)
    is read from ``mirror`` (a ``releasekit.git.Mirror`` of the repository). A head the
    repository lacks is a one-line error.
    """
    legacy = read_integration_lock(lock_path)
    for sha in [legacy.base.commit, *(p.head for p in legacy.pull_requests)]:
        if not mirror.has_commit(sha):
            raise InputError(
                f"{lock_path}: commit {sha} is not in {mirror.url}; the lock cannot be checked against it"
            )
    branch = legacy.base.ref.removeprefix("refs/heads/")
    prs = [
        LockedPR(
            number=p.number,
            ref=p.ref,
            head=p.head,
            tree=mirror.tree_of(p.head),
            title=p.title,
            role="planned",
        )
        for p in legacy.pull_requests
    ]
    git = LockedGitComponent(
        name=component,
        repo=mirror.url,
        canonical_branch=branch,
        commit=legacy.base.commit,
        tree=mirror.tree_of(legacy.base.commit),
        commit_time=mirror.commit_time(legacy.base.commit),
        canonical_head=mirror.branch_head(branch),
        pull_requests=prs,
        composed_tree=legacy.result.tree,
    )
    return Lock.model_validate(
        {
            "schema": LOCK_SCHEMA,
            "name": manifest_name,
            "manifest": LockedManifest(path=str(manifest_path), sha256=manifest_sha256, name=manifest_name),
            "locked_at": _dt.datetime.now(_dt.UTC).replace(microsecond=0).isoformat(),
            "components": {component: git},
            "toolchain": LockedToolchain(
                base_image=LockedBaseImage(name=base_image), cuda_arch_list=cuda_arch_list
            ),
        }
    )


def dump_yaml(data: dict[str, Any]) -> str:
    yaml = YAML(typ="safe", pure=True)
    yaml.default_flow_style = False
    yaml.sort_base_mapping_type_on_output = False  # type: ignore[assignment]  # keep the plan's order
    buf = io.StringIO()
    yaml.dump(data, buf)
    return buf.getvalue()
