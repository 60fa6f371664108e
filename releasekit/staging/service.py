"""``releasekit stage``: push the verified candidate to a staging repository, by digest.

Only an image that ``verify-provenance`` passed for this lock is staged. The push goes through
the Docker Engine under the tag ``lock-<lock sha256>`` (a registry keeps only what some tag or
referrer holds; nothing ever reads the image by that tag); the manifest is then read back from
the registry by digest (its config digest must be the image ID, every blob present) and the
digest goes into ``staging.json``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from releasekit.digests import file_sha256
from releasekit.docker_engine import Engine
from releasekit.errors import InputError
from releasekit.records.base import load_record, write_record
from releasekit.records.lock import lock_file_sha256, read_lock
from releasekit.records.staging import STAGING_FILE, StagingRecord, staging_tag
from releasekit.records.verification import VERIFICATION_SUMMARY_FILE, VerificationStatement
from releasekit.registry import Reference, RegistryClient, resolve_credentials


@dataclass(frozen=True)
class StageRequest:
    image: str
    lock_path: Path
    staging: str | None = None  # REGISTRY/REPO; default the manifest's publish.staging
    evidence_dir: Path | None = None  # where verification_summary.json is [default: the lock's directory]
    manifest_path: Path | None = None
    out: Path | None = None  # staging.json's directory [default: the evidence directory]


def staging_target(request: StageRequest) -> Reference:
    text = request.staging
    if text is None:
        from releasekit.manifest import manifest_for_lock

        lock = read_lock(request.lock_path)
        loaded = manifest_for_lock(
            request.lock_path,
            request.manifest_path,
            lock.manifest.path,
            sha256=lock.manifest.sha256,
            evidence_dir=request.evidence_dir,
        )
        section = loaded.manifest.publish
        text = section.staging if section else None
    if not text:
        raise InputError(
            "no staging repository: pass --staging REGISTRY/REPO or set publish.staging in the manifest"
        )
    target = Reference.parse(text)
    if target.tag or target.digest:
        raise InputError(f"--staging {text!r}: name a repository (REGISTRY/REPO), without a tag or digest")
    return target


def stage(request: StageRequest, engine: Engine) -> StagingRecord:
    """Push, read back, record. Bad input and an unverified image are exit 2 (``InputError``)."""
    target = staging_target(request)
    lock_sha = lock_file_sha256(request.lock_path)
    evidence = request.evidence_dir or request.lock_path.parent
    summary_path = evidence / VERIFICATION_SUMMARY_FILE
    summary = load_record(VerificationStatement, summary_path)
    image = engine.inspect(request.image)
    said = summary.summary
    if said.result != "PASSED" or not summary.names_image(image.id) or said.lock_sha256 != lock_sha:
        raise InputError(
            f"{summary_path} does not say PASSED for image {image.id[:19]} and this lock"
            f" (it says {said.result} for {said.resource_uri}, lock {said.lock_sha256[:12]})",
            hint="stage only what verify-provenance passed",
        )
    credentials = resolve_credentials(target.host)
    auth = (credentials.username, credentials.password) if credentials else None
    tag = staging_tag(lock_sha)
    digest = engine.push(image.id, target.name, tag, where=target.host, auth=auth)
    with RegistryClient(target.host, credentials) as client:
        blob = client.check_image(target.repository, digest, image.id)
    record = StagingRecord(
        image_id=image.id,
        lock_sha256=lock_sha,
        registry=target.host,
        repository=target.repository,
        digest=digest,
        tag=tag,
        media_type=blob.media_type,
        verification_summary_sha256=file_sha256(summary_path),
    )
    write_record(record, (request.out or evidence) / STAGING_FILE)
    return record
