"""The release manifest: models, YAML loading with positions, and rules.

``load_manifest(path)`` is what every later stage calls: it returns a manifest that
parsed, type-checked and passed every rule, or raises ManifestError (exit 2).
``validate_manifest(path)`` is for ``manifest validate``: rule violations come back
as findings instead.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ValidationError

from releasekit.digests import file_sha256
from releasekit.errors import InputError, LockManifestMismatch
from releasekit.findings import Findings
from releasekit.git.mirrors import check_mirrors_named
from releasekit.git.remote import check_remote
from releasekit.manifest.checks import check_rules, parse_pr_reference
from releasekit.manifest.loader import (
    LoadedYaml,
    ManifestError,
    SourceMap,
    load_yaml,
    parse_yaml,
    scalar_comment_findings,
    validation_error_lines,
)
from releasekit.manifest.models import TO_BE_LOCKED, ForgeSpec, Manifest

__all__ = [
    "TO_BE_LOCKED",
    "LoadedManifest",
    "Manifest",
    "ManifestError",
    "load_manifest",
    "lock_manifest_mismatch",
    "manifest_for_lock",
    "trusted_key_files_for_lock",
    "parse_pr_reference",
    "repository_urls",
    "validate_manifest",
    "validate_manifest_bytes",
]


@dataclass
class LoadedManifest:
    manifest: Manifest
    path: Path
    sha256: str  # of the file's bytes: what the lock records
    source: SourceMap
    findings: Findings  # rule findings (empty when load_manifest returned it)

    @property
    def directory(self) -> Path:
        return self.path.parent

    def trusted_key_files(self) -> list[Path]:
        """``publish.trusted_keys``, each relative to the manifest's directory (the repository holds the
        public keys beside its manifests). Trusted only as the lock's manifest: see
        ``trusted_key_files_for_lock``."""
        section = self.manifest.publish
        return [self.directory / name for name in section.trusted_keys] if section else []


def _typed(loaded: LoadedYaml, name: str) -> Manifest:
    try:
        return Manifest.model_validate(loaded.data)
    except ValidationError as exc:
        lines = validation_error_lines(exc, loaded.source)
        raise ManifestError(
            f"{name}: {len(lines)} schema error(s): {lines[0] if lines else 'invalid manifest'}", lines
        ) from None


def validate_manifest(path: Path) -> LoadedManifest:
    """Parse and type-check (raising ManifestError), then apply the rules (as findings)."""
    loaded = load_yaml(path)
    manifest = _typed(loaded, str(path))
    findings = check_rules(manifest, loaded.data, loaded.source)
    findings.extend(scalar_comment_findings(loaded.source))
    return LoadedManifest(manifest, path, loaded.sha256, loaded.source, findings)


def validate_manifest_bytes(raw: bytes, name: str = "<manifest>") -> LoadedManifest:
    loaded = parse_yaml(raw, name)
    manifest = _typed(loaded, name)
    findings = check_rules(manifest, loaded.data, loaded.source)
    findings.extend(scalar_comment_findings(loaded.source))
    return LoadedManifest(manifest, Path(name), loaded.sha256, loaded.source, findings)


def load_manifest(path: Path, *, also_reads: Sequence[str] = ()) -> LoadedManifest:
    """A manifest every later stage can trust: any rule error makes it unusable (exit 2); so is a
    ``--mirror`` that names none of its repositories (nor ``also_reads``, URLs the command reads
    beside the manifest's)."""
    result = validate_manifest(path)
    if not result.findings.passed:
        lines = [f.render() for f in result.findings.errors]
        raise ManifestError(
            f"{path}: manifest breaks {len(lines)} rule(s); run 'releasekit manifest validate {path}': {lines[0]}",
            lines,
        )
    check_mirrors_named([*repository_urls(result), *also_reads], source=f"the manifest {path}")
    return result


def repository_urls(loaded: LoadedManifest) -> list[str]:
    """Every repository URL the manifest names (components, ``upstream:``, excluded upstream PRs,
    wherever a ``repo`` is), as the mirrors see it: a local path as its ``file://`` URL."""
    found: list[str] = []

    def walk(value: object) -> None:
        if isinstance(value, ForgeSpec):
            return  # its repo is owner/name on the forge, not a git URL
        if isinstance(value, BaseModel):
            for name in type(value).model_fields:
                item = getattr(value, name)
                if name == "repo" and isinstance(item, str):
                    found.append(_public_url(item, loaded.directory))
                else:
                    walk(item)
        elif isinstance(value, dict):
            for item in value.values():
                walk(item)
        elif isinstance(value, list | tuple):
            for item in value:
                walk(item)

    walk(loaded.manifest)
    return list(dict.fromkeys(found))


def _public_url(url: str, base_dir: Path) -> str:
    try:
        return check_remote(url, allow_local=True, base_dir=base_dir).public
    except InputError:
        return url


def _manifest_candidates(lock_path: Path, evidence_dir: Path, recorded: str) -> list[Path]:
    """Where the lock's manifest may be, as verify-provenance looks: the recorded path, beside the
    lock, the working directory, the evidence directory and its parent, and one directory below
    the lock's, the evidence directory's and its parent's (the demo's layout: ``lock.json`` beside
    ``example/manifest.yaml``)."""
    given = Path(recorded)
    if given.is_absolute():
        return [given]
    dirs = list(dict.fromkeys([lock_path.parent, Path.cwd(), evidence_dir, evidence_dir.parent]))
    out = [given, *(d / given for d in dirs), lock_path.parent / given.name]
    for d in dict.fromkeys([lock_path.parent, evidence_dir, evidence_dir.parent]):
        try:
            subdirs = sorted(p for p in d.iterdir() if p.is_dir() and not p.name.startswith("."))
        except OSError:
            continue
        out += [p / given for p in subdirs[:64]]
    return list(dict.fromkeys(out))


def manifest_for_lock(
    lock_path: Path,
    manifest_path: Path | None,
    recorded: str,
    *,
    sha256: str | None = None,
    evidence_dir: Path | None = None,
) -> LoadedManifest:
    """The manifest given, else the lock's: the first candidate whose sha256 is the lock's (``sha256``);
    else the first file at a candidate path (the gate then names the mismatch)."""
    if manifest_path is not None:
        return load_manifest(manifest_path)
    candidates = [
        p for p in _manifest_candidates(lock_path, evidence_dir or lock_path.parent, recorded) if p.is_file()
    ]
    for candidate in candidates:
        if sha256 is not None and file_sha256(candidate) == sha256:
            return load_manifest(candidate)
    if candidates:
        return load_manifest(candidates[0])
    raise InputError(
        f"cannot find the manifest {recorded!r} the lock was made from", hint="pass --manifest FILE"
    )


def lock_manifest_mismatch(manifest_sha256: str, lock_manifest_sha256: str | None) -> str | None:
    """Why a manifest is not the one the lock was made from (``LOCK_MANIFEST_MISMATCH``), or None when
    it is. The one check of publish's gate, promote, stage, ``validate --staged`` and ``test --staged``."""
    if lock_manifest_sha256 == manifest_sha256:
        return None
    return (
        f"the manifest's sha256 is {manifest_sha256[:12]}…, the lock was made from "
        f"{(lock_manifest_sha256 or 'none')[:12]}…: lock again or pass the right manifest"
    )


def trusted_key_files_for_lock(
    loaded: LoadedManifest, lock_manifest_sha256: str | None, given: list[Path], what: str
) -> list[Path]:
    """The public keys a signature is checked with: ``--trusted-key`` (``given``) when given, else the
    manifest's ``publish.trusted_keys``, and those only from the manifest whose sha256 the lock records
    (``lock_manifest_sha256``; None: no lock given). Any other manifest is ``LOCK_MANIFEST_MISMATCH``
    (exit 1), whatever the keys: its keys would be trust anchors anyone can write (issue 43)."""
    if lock_manifest_sha256 is not None:
        why = lock_manifest_mismatch(loaded.sha256, lock_manifest_sha256)
        if why is not None:
            raise LockManifestMismatch(f"{what}: LOCK_MANIFEST_MISMATCH: {why}")
        return list(given) or loaded.trusted_key_files()
    if given or not loaded.trusted_key_files():
        return list(given)
    raise InputError(
        f"{what}: the manifest's publish.trusted_keys are trusted only as the lock's manifest: "
        "pass --lock (the lock it was made from) or --trusted-key"
    )
