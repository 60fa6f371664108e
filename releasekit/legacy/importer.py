"""Import today's tool's files (read through ``releasekit.records.legacy``) without losing a field.

Every leaf of the three files (``json_leaves``) is either carried, with where it went
(``Imported.carried``), or named by an ``IMPORT_FIELD_NOT_CARRIED`` finding:

- the merge manifest becomes the component ``--component`` (default ``vllm``): canonical
  branch = its base ref, the planned PRs with pinned heads in order; a reviewed exclusion
  whose reason says a planned PR superseded it (``Superseded by PR #280``, ``Included ...
  in PR #254``, ``consolidated in PR #229``) becomes ``supersedes:`` of that PR with its
  head and reason under ``superseded:``, not an exclusion (the newer PR may keep the older
  one's commits: plan check then sees them as carried, not as an excluded change); every
  other reviewed exclusion stays an exclusion (by PR number and head commit);
- the integration lock (``--lock``) gives the base commit (the component's pinned
  ``commit``: today's composed tree is base + plan) and must name the same manifest
  (sha256), repository, base ref, name, heads and titles; its composed tree and patch go
  into the component's ``note`` (and ``--lock-out`` writes the lock as a releasekit lock,
  ``legacy_lock_to_lock``, with that tree as ``composed_tree``);
- the validation receipt (``--receipt``): ``source_composition`` becomes components (a
  commit: a git component pinned to it, with ``package_version`` as its version; a version
  string: a wheel pin), ``runtime_packages`` the toolchain (torch, CUDA, cuDNN, NCCL) and
  runtime pins (the rest), ``checkpoint`` a pinned model, and every number of ``evidence``
  the named baseline ``validation.baselines.<receipt name>``, whose ``source`` names the
  receipt's status, purpose, image, image ID, registry digest, date and release issue.
"""

from __future__ import annotations

import hashlib
import io
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML

from releasekit.atomic import write_atomic
from releasekit.errors import InputError
from releasekit.findings import Findings, Severity
from releasekit.legacy.models import (
    LegacyIntegrationLock,
    LegacyMergeManifest,
    json_leaves,
    read_integration_lock,
    read_merge_manifest,
)
from releasekit.manifest.models import TO_BE_LOCKED
from releasekit.records.legacy import LegacyValidationReceipt, raw_tree, read_validation_receipt
from releasekit.records.lock import (
    LOCK_SCHEMA,
    Lock,
    LockedBaseImage,
    LockedGitComponent,
    LockedManifest,
    LockedPR,
    LockedToolchain,
    write_lock,
)

_DISPOSITIONS = {
    "superseded": "superseded",
    "experimental": "experimental",
    "alternative": "alternative",
    "out_of_scope": "out-of-scope",
    "out-of-scope": "out-of-scope",
    "deferred": "deferred",
}
# runtime_packages keys that are toolchain fields; every other package becomes a runtime pin.
_TOOLCHAIN_PACKAGES = {
    "torch": "pytorch",
    "pytorch": "pytorch",
    "cuda": "cuda",
    "cudnn": "cudnn",
    "nccl": "nccl",
}
_SHA1 = re.compile(r"^[0-9a-f]{40}$")
_NAME = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$")


def _slug(text: str) -> str:
    out = "".join(c if c.isalnum() else "-" for c in text.lower()).strip("-")
    while "--" in out:
        out = out.replace("--", "-")
    return out[:64] or "release"


def baseline_name(receipt_path: Path) -> str:
    """``blackwell-llm-docker.validation-receipt.gilded-gnosis-v20-r34.json`` -> ``gilded-gnosis-v20-r34``."""
    stem = receipt_path.name.removesuffix(".json")
    return _slug(stem.split("validation-receipt.", 1)[-1])


def sibling_repo(repository: str, name: str) -> str:
    """``https://github.com/org/vllm.git`` + ``b12x`` -> ``https://github.com/org/b12x.git``."""
    head, _, last = repository.rstrip("/").rpartition("/")
    return f"{head}/{name}{'.git' if last.endswith('.git') else ''}" if head else name


@dataclass
class Imported:
    """What ``import_reference`` made: the manifest data, what went where, and what did not."""

    data: dict[str, Any]
    carried: dict[str, str] = field(default_factory=dict)  # "<file>:<field path>" -> where it went
    findings: Findings = field(default_factory=Findings)


class _Ledger:
    """Where each field of today's files went; the rest becomes findings."""

    def __init__(self) -> None:
        self.carried: dict[str, str] = {}
        self.findings = Findings()

    def carry(self, file: Path, path: str, where: str) -> None:
        self.carried[f"{file.name}:{path}"] = where

    def not_carried(self, file: Path, raw: Any) -> None:
        for path, value in json_leaves(raw):
            if f"{file.name}:{path}" in self.carried:
                continue
            if value == {} or value == []:
                self.carry(file, path, "read (empty: nothing to carry)")
                continue
            shown = json.dumps(value, ensure_ascii=False)
            self.findings.add(
                "IMPORT_FIELD_NOT_CARRIED",
                f"{path} = {shown if len(shown) <= 60 else shown[:57] + '...'}: releasekit/v1 has no place for it",
                severity=Severity.warning,
                file=file.name,
                field=path,
            )


def _check_lock_matches(
    lock: LegacyIntegrationLock, lock_path: Path, manifest_path: Path, ref: LegacyMergeManifest
) -> None:
    digest = hashlib.sha256(manifest_path.read_bytes()).hexdigest()
    if lock.manifest.sha256 != digest:
        raise InputError(
            f"{lock_path}: locks a manifest with sha256 {lock.manifest.sha256[:12]}, not {manifest_path.name} ({digest[:12]})"
        )
    if lock.base.repository != ref.repository:
        raise InputError(
            f"{lock_path}: base repository {lock.base.repository} is not the manifest's {ref.repository}"
        )
    if lock.base.ref != ref.base_ref:
        raise InputError(f"{lock_path}: base ref {lock.base.ref} is not the manifest's {ref.base_ref}")
    if lock.name != ref.name:
        raise InputError(f"{lock_path}: locks '{lock.name}', not the manifest's '{ref.name}'")
    locked = [(p.number, p.head) for p in lock.pull_requests]
    if locked != [(p.number, p.head) for p in ref.pull_requests]:
        raise InputError(f"{lock_path}: its pull requests and heads differ from {manifest_path.name}'s plan")
    for lp, mp in zip(lock.pull_requests, ref.pull_requests, strict=True):
        if lp.title is not None and lp.title != mp.title:
            raise InputError(
                f"{lock_path}: PR #{lp.number} is titled differently than in {manifest_path.name}"
            )


def _merge_manifest(
    ref: LegacyMergeManifest, path: Path, component: str, ledger: _Ledger
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The component (repo, branch, plan with supersessions) and the exclusions."""
    where = f"components.{component}"
    ledger.carry(path, "schema_version", "read (schema_version 1 is today's merge manifest format)")
    ledger.carry(path, "name", "name")
    ledger.carry(path, "repository", f"{where}.repo")
    ledger.carry(path, "base_ref", f"{where}.canonical_branch")
    planned = {p.number: i for i, p in enumerate(ref.pull_requests)}
    superseded: dict[int, list[dict[str, Any]]] = {}
    exclusions: list[dict[str, Any]] = []
    for i, ex in enumerate(ref.reviewed_exclusions):
        disposition = _DISPOSITIONS.get(ex.disposition.lower())
        if disposition is None:
            raise InputError(f"{path}: PR #{ex.number}: unknown disposition '{ex.disposition}'")
        at = f"reviewed_exclusions.{i}"
        by = ex.superseded_by(set(planned))
        if by is not None:
            entries = superseded.setdefault(by, [])
            dest = f"{where}.merge_plan.{planned[by]}"
            ledger.carry(path, f"{at}.number", f"{dest}.supersedes, {dest}.superseded.{len(entries)}.pr")
            ledger.carry(path, f"{at}.head", f"{dest}.superseded.{len(entries)}.head")
            ledger.carry(path, f"{at}.reason", f"{dest}.superseded.{len(entries)}.reason")
            ledger.carry(path, f"{at}.disposition", f"{dest}.supersedes")
            entries.append({"pr": ex.number, "head": ex.head, "reason": ex.reason})
            continue
        dest = f"exclusions.{len(exclusions)}"
        for key, to in (
            ("number", "pr"),
            ("head", "commits.0"),
            ("disposition", "disposition"),
            ("reason", "reason"),
        ):
            ledger.carry(path, f"{at}.{key}", f"{dest}.{to}")
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
    plan = _merge_plan(ref, path, where, superseded, ledger)
    comp: dict[str, Any] = {
        "kind": "git",
        "repo": ref.repository,
        "canonical_branch": ref.base_ref.removeprefix("refs/heads/"),
        "merge_plan": plan,
    }
    return comp, exclusions


def _merge_plan(
    ref: LegacyMergeManifest,
    path: Path,
    where: str,
    superseded: dict[int, list[dict[str, Any]]],
    ledger: _Ledger,
) -> list[dict[str, Any]]:
    """The planned PRs in the reference's order, each with the reviewed PRs it supersedes (by number)."""
    plan: list[dict[str, Any]] = []
    for i, p in enumerate(ref.pull_requests):
        for key, to in (("number", "pr"), ("head", "head"), ("title", "title")):
            ledger.carry(path, f"pull_requests.{i}.{key}", f"{where}.merge_plan.{i}.{to}")
        entry: dict[str, Any] = {"pr": p.number, "title": p.title, "head": p.head}
        if p.number in superseded:
            olds = sorted(superseded[p.number], key=lambda e: e["pr"])
            entry["supersedes"] = [e["pr"] for e in olds]
            entry["superseded"] = olds
        plan.append(entry)
    return plan


def _integration_lock(
    lock: LegacyIntegrationLock, path: Path, component: str, ledger: _Ledger, notes: list[str]
) -> str:
    """Check and carry the lock's fields; returns the base commit."""
    where = f"components.{component}"
    ledger.carry(path, "schema_version", "read (schema_version 1 is today's integration lock format)")
    ledger.carry(path, "name", "checked: equals the merge manifest's name")
    ledger.carry(path, "manifest.sha256", "checked: the merge manifest's sha256 (also in sources)")
    ledger.carry(path, "base.repository", f"checked: equals {where}.repo")
    ledger.carry(path, "base.ref", f"checked: equals {where}.canonical_branch")
    ledger.carry(path, "base.commit", f"{where}.commit")
    for i, p in enumerate(lock.pull_requests):
        at = f"pull_requests.{i}"
        for key in ("number", "head", "title"):
            ledger.carry(
                path,
                f"{at}.{key}",
                f"checked: equals {where}.merge_plan.{i}.{'pr' if key == 'number' else key}",
            )
        if p.disposition == "merged":
            ledger.carry(path, f"{at}.disposition", f"checked: merged, as {where}.merge_plan.{i} says")
        if p.ref == f"refs/pull/{p.number}/head":
            ledger.carry(
                path,
                f"{at}.ref",
                f"checked: the PR's head ref, which plan lock reads for {where}.merge_plan.{i}",
            )
    result = lock.result
    text = f"today's integration lock {path.name}: base {lock.base.commit} + the plan composes tree {result.tree}"
    ledger.carry(path, "result.tree", f"{where}.note (and composed_tree with --lock-out)")
    if result.patch is not None:
        text += f", as the patch {result.patch}"
        ledger.carry(path, "result.patch", f"{where}.note")
    if result.patch_sha256 is not None:
        text += f" (sha256 {result.patch_sha256})"
        ledger.carry(path, "result.patch_sha256", f"{where}.note")
    notes.append(text)
    return lock.base.commit


@dataclass(frozen=True)
class _Entry:
    """One ``source_composition`` entry of the validation receipt: the receipt, the entry's field,
    the name of the component it becomes and its value."""

    receipt_path: Path
    at: str
    name: str
    value: Any


def _composition_component(
    entry: _Entry, repository: str, repos: dict[str, str], ledger: _Ledger
) -> dict[str, Any] | None:
    """One ``source_composition`` entry other than the manifest's component, as a component."""
    name, value, at, receipt_path = entry.name, entry.value, entry.at, entry.receipt_path
    where = f"components.{name}"
    if isinstance(value, str) and not _SHA1.match(value):
        ledger.carry(receipt_path, at, f"{where}.requirement")
        return {"kind": "wheel", "requirement": f"{name}=={value}", "sha256": TO_BE_LOCKED}
    comp: dict[str, Any] = {"kind": "git"}
    if name in repos:
        comp["repo"] = repos[name]
    else:
        comp["repo"] = sibling_repo(repository, name)
        ledger.findings.add(
            "IMPORT_REPO_GUESSED",
            f"the receipt names no repository for '{name}': guessed {comp['repo']} (the merge manifest's "
            f"owner); give the right one with --component-repo {name}=URL",
            severity=Severity.warning,
            file=receipt_path.name,
            field=at,
            component=name,
        )
    if isinstance(value, str):
        comp["commit"] = value
        ledger.carry(receipt_path, at, f"{where}.commit")
        return comp
    if not isinstance(value, dict):
        return None
    base = value.get("base")
    if isinstance(base, str) and _SHA1.match(base):
        comp["commit"] = base
        ledger.carry(receipt_path, f"{at}.base", f"{where}.commit")
    version = value.get("package_version")
    if isinstance(version, str):
        comp["version"] = version
        ledger.carry(receipt_path, f"{at}.package_version", f"{where}.version")
    if "commit" not in comp:
        comp["commit"] = TO_BE_LOCKED
    _patch_note(entry, comp, ledger)
    return comp


def _patch_note(entry: _Entry, comp: dict[str, Any], ledger: _Ledger) -> None:
    """Released as base + a patch: noted and warned, since no file says which pull requests the patch is."""
    name, value, at, receipt_path = entry.name, entry.value, entry.at, entry.receipt_path
    where = f"components.{name}"
    tree, patch = value.get("tree"), value.get("patch_sha256")
    if isinstance(tree, str) or isinstance(patch, str):
        comp["note"] = (
            f"today's validation receipt {receipt_path.name}: released as base {comp['commit']} + a patch"
            + (f" (sha256 {patch})" if isinstance(patch, str) else "")
            + (f", tree {tree}" if isinstance(tree, str) else "")
        )
        for key in ("tree", "patch_sha256"):
            if isinstance(value.get(key), str):
                ledger.carry(receipt_path, f"{at}.{key}", f"{where}.note")
        ledger.findings.add(
            "IMPORT_PATCH_PLAN_UNKNOWN",
            f"'{name}' was released as its base commit plus a patch whose pull requests today's files do not "
            f"name: write its merge_plan, or the build will use the base commit alone",
            severity=Severity.warning,
            file=receipt_path.name,
            field=at,
            component=name,
        )


def _receipt(
    receipt: LegacyValidationReceipt,
    raw: dict[str, Any],
    path: Path,
    *,
    component: str,
    comp: dict[str, Any],
    repository: str,
    repos: dict[str, str],
    data: dict[str, Any],
    ledger: _Ledger,
    notes: list[str],
) -> None:
    """Carry the receipt: composition, runtime packages, checkpoint and the baseline."""
    ledger.carry(path, "schema_version", "read (schema_version 1 is today's validation receipt format)")
    components: dict[str, Any] = data["components"]
    for name, value in receipt.source_composition.items():
        at = f"source_composition.{name}"
        if name == component:
            _own_base(_Entry(path, at, component, value), comp, ledger, notes)
            continue
        key = _slug(name) if not _NAME.match(name) else name
        made = _composition_component(_Entry(path, at, key, value), repository, repos, ledger)
        if made is not None:
            components[key] = made
    _runtime_packages(receipt, path, data, ledger)
    validation: dict[str, Any] = {}
    checkpoint = raw.get("checkpoint")
    if isinstance(checkpoint, dict) and isinstance(checkpoint.get("repository"), str):
        model = _checkpoint_model(checkpoint, path, ledger)
        if model is not None:
            key, ref = model
            validation["models"] = {key: ref}
    values: dict[str, float] = {}
    for field_path, metric, value in receipt.metric_leaves():
        values[metric] = value
        ledger.carry(path, field_path, f"validation.baselines.{baseline_name(path)}.values.{metric}")
    if values:
        validation["baselines"] = {
            baseline_name(path): {"source": _baseline_source(raw, path, ledger), "values": values}
        }
    if validation:
        data["validation"] = validation


def _own_base(entry: _Entry, comp: dict[str, Any], ledger: _Ledger, notes: list[str]) -> None:
    """The receipt's base for the fork itself: it must be the integration lock's, or it becomes the commit."""
    value, at, path, component = entry.value, entry.at, entry.receipt_path, entry.name
    own = value if isinstance(value, dict) else {"base": value}
    key = f"{at}.base" if isinstance(value, dict) else at
    base = own.get("base")
    if "commit" in comp:
        if base != comp["commit"]:
            raise InputError(f"{path}: {at}: base {base} is not the integration lock's base {comp['commit']}")
        ledger.carry(path, key, f"checked: equals components.{component}.commit")
    elif isinstance(base, str) and _SHA1.match(base):
        comp["commit"] = base
        ledger.carry(path, key, f"components.{component}.commit")
    extra = [f"{k} {own[k]}" for k in ("tree", "patch_sha256") if isinstance(own.get(k), str)]
    if extra:
        notes.append(f"today's validation receipt {path.name}: " + ", ".join(extra))
        for k in ("tree", "patch_sha256"):
            if isinstance(own.get(k), str):
                ledger.carry(path, f"{at}.{k}", f"components.{component}.note")


def _runtime_packages(
    receipt: LegacyValidationReceipt, path: Path, data: dict[str, Any], ledger: _Ledger
) -> None:
    """Runtime packages: a toolchain slot when one is free (torch, CUDA), else a runtime pin."""
    toolchain: dict[str, Any] = data["toolchain"]
    pins: list[dict[str, Any]] = []
    for package, version in receipt.runtime_packages.items():
        at = f"runtime_packages.{package}"
        slot = _TOOLCHAIN_PACKAGES.get(package.lower())
        if slot is not None and slot not in toolchain:
            toolchain[slot] = version
            ledger.carry(path, at, f"toolchain.{slot}")
        else:
            ledger.carry(path, at, f"pins.{len(pins)}")
            pins.append(
                {
                    "package": package,
                    "version": version,
                    "scopes": ["runtime"],
                    "reason": f"runtime_packages of today's validation receipt {path.name}",
                }
            )
    if pins:
        data["pins"] = pins


def _checkpoint_model(
    checkpoint: dict[str, Any], path: Path, ledger: _Ledger
) -> tuple[str, dict[str, Any]] | None:
    repo = checkpoint["repository"]
    if not re.match(r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*$", repo):
        return None
    key = _slug(repo.rpartition("/")[2])
    where = f"validation.models.{key}"
    model: dict[str, Any] = {"name": repo, "hub": repo}
    ledger.carry(path, "checkpoint.repository", f"{where}.hub")
    revision = checkpoint.get("revision")
    if isinstance(revision, str) and _SHA1.match(revision):
        model["revision"] = revision
        ledger.carry(path, "checkpoint.revision", f"{where}.revision")
    shard, digest = checkpoint.get("shared_bf16_shard"), checkpoint.get("shared_bf16_shard_sha256")
    if isinstance(shard, str) and isinstance(digest, str) and re.match(r"^[0-9a-f]{64}$", digest):
        model["files"] = [{"path": shard, "sha256": digest}]
        ledger.carry(path, "checkpoint.shared_bf16_shard", f"{where}.files.0.path")
        ledger.carry(path, "checkpoint.shared_bf16_shard_sha256", f"{where}.files.0.sha256")
    if isinstance(checkpoint.get("role"), str):
        model["note"] = checkpoint["role"]
        ledger.carry(path, "checkpoint.role", f"{where}.note")
    return key, model


def _baseline_source(raw: dict[str, Any], path: Path, ledger: _Ledger) -> str:
    """Which measurement the numbers are: the receipt's identity, in words."""
    where = f"validation.baselines.{baseline_name(path)}.source"
    parts = [f"today's tool's validation receipt {path.name}"]
    for key, label in (
        ("status", "status"),
        ("purpose", "purpose"),
        ("image", "image"),
        ("image_id", "image ID"),
        ("registry_digest", "registry digest"),
        ("validated_at", "validated at"),
        ("release_issue", "release issue"),
    ):
        value = raw.get(key)
        if isinstance(value, str):
            parts.append(f"{label}: {value}")
            ledger.carry(path, key, where)
    return "; ".join(parts)


# Keys in the manifest's usual order (components, toolchain, pins, exclusions, validation).
_KEY_ORDER = (
    "schema",
    "name",
    "description",
    "sources",
    "components",
    "toolchain",
    "pins",
    "exclusions",
    "validation",
)


def import_reference(
    path: Path,
    *,
    component: str = "vllm",
    base_image: str,
    cuda_arch_list: list[str],
    lock_path: Path | None = None,
    receipt_path: Path | None = None,
    component_repos: dict[str, str] | None = None,
) -> Imported:
    """Translate today's tool's files into releasekit/v1 manifest data, accounting for every field."""
    ledger = _Ledger()
    ref = read_merge_manifest(path)
    lock = read_integration_lock(lock_path) if lock_path is not None else None
    receipt = read_validation_receipt(receipt_path) if receipt_path is not None else None
    comp, exclusions = _merge_manifest(ref, path, component, ledger)
    sources = [f"{path.name} (sha256 {hashlib.sha256(path.read_bytes()).hexdigest()})"]
    data: dict[str, Any] = {
        "schema": "releasekit/v1",
        "name": _slug(ref.name),
        "description": f"Imported from today's tool's files: {path.name}",
        "sources": sources,
        "components": {component: comp},
        "toolchain": {"base_image": {"name": base_image, "digest": TO_BE_LOCKED}},
    }
    notes: list[str] = []
    if lock is not None and lock_path is not None:
        _check_lock_matches(lock, lock_path, path, ref)
        comp["commit"] = _integration_lock(lock, lock_path, component, ledger, notes)
        sources.append(f"{lock_path.name} (sha256 {hashlib.sha256(lock_path.read_bytes()).hexdigest()})")
    if receipt is not None and receipt_path is not None:
        _receipt(
            receipt,
            raw_tree(receipt_path),
            receipt_path,
            component=component,
            comp=comp,
            repository=ref.repository,
            repos=component_repos or {},
            data=data,
            ledger=ledger,
            notes=notes,
        )
        sources.append(
            f"{receipt_path.name} (sha256 {hashlib.sha256(receipt_path.read_bytes()).hexdigest()})"
        )
    if notes:
        comp["note"] = "; ".join(notes)
    data["toolchain"]["cuda_arch_list"] = cuda_arch_list
    data["exclusions"] = exclusions
    data = {k: data[k] for k in _KEY_ORDER if k in data}
    ledger.not_carried(path, raw_tree(path))
    if lock_path is not None:
        ledger.not_carried(lock_path, raw_tree(lock_path))
    if receipt_path is not None:
        ledger.not_carried(receipt_path, raw_tree(receipt_path))
    return Imported(data=data, carried=ledger.carried, findings=ledger.findings)


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
            "manifest": LockedManifest(path=manifest_path.name, sha256=manifest_sha256, name=manifest_name),
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


@dataclass
class ImportResult:
    """What ``import_release`` wrote."""

    output: Path
    sha256: str
    lock: Path | None
    imported: Imported
    loaded: Any  # releasekit.manifest.LoadedManifest of the written text
    findings: Findings  # the import's findings, then the written manifest's rule findings


def _write_atomically(path: Path, text: str) -> None:
    write_atomic(path, text)


def import_release(
    path: Path,
    output: Path,
    *,
    component: str,
    base_image: str,
    cuda_arch_list: list[str],
    lock_path: Path | None = None,
    lock_out: Path | None = None,
    receipt_path: Path | None = None,
    component_repos: dict[str, str] | None = None,
    repo: str | None = None,
    allow_local: bool = False,
) -> ImportResult:
    """Import, validate, and only then write ``output`` (and ``lock_out``): nothing is written on an error."""
    from releasekit.manifest import validate_manifest_bytes

    if lock_out is not None and lock_path is None:
        raise InputError("--lock-out needs --lock (today's integration lock)")
    imported = import_reference(
        path,
        component=component,
        base_image=base_image,
        cuda_arch_list=cuda_arch_list,
        lock_path=lock_path,
        receipt_path=receipt_path,
        component_repos=component_repos,
    )
    text = dump_yaml(imported.data)
    checked = validate_manifest_bytes(text.encode(), str(output))
    converted: Lock | None = None
    if lock_path is not None and lock_out is not None:
        from releasekit.git import Mirror

        mirror = Mirror(
            repo or imported.data["components"][component]["repo"], allow_local=allow_local
        ).ensure()
        converted = legacy_lock_to_lock(
            lock_path,
            output,
            checked.sha256,
            checked.manifest.name,
            component=component,
            mirror=mirror,
            base_image=base_image,
            cuda_arch_list=cuda_arch_list,
        )
    _write_atomically(output, text)
    if converted is not None and lock_out is not None:
        write_lock(converted, lock_out)
    findings = Findings()
    findings.extend(imported.findings)
    findings.extend(checked.findings)
    return ImportResult(output, checked.sha256, lock_out if converted else None, imported, checked, findings)
