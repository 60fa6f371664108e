"""``releasekit stage``: push the verified candidate to a staging repository, by digest.

Only an image that ``verify-provenance`` passed for this lock is staged. The push goes through
the Docker Engine under the tag ``lock-<lock sha256>`` (a registry keeps only what some tag or
referrer holds; nothing ever reads the image by that tag); the manifest is then read back from
the registry by digest (its config digest must be the image ID, every blob present) and the
digest goes into ``staging.json``.

With a trusted key (``--trusted-key``), or when signed evidence is required (``--require-signed``,
the manifest's ``publish.signed``), the summary must be signed: ``verification_summary.dsse.json``
verifies with a trusted key, is about this image and covers the summary byte for byte (the bytes
read once, checked, then parsed). Otherwise nothing is pushed: a one-line refusal, exit 1
(``EVIDENCE_UNSIGNED``, ``SIGNATURE_MISSING``, or the signature's own code); signed and no key
given is missing input, exit 2. Unsigned and not required: staged, with a warning.

``staging.json`` itself is signed by this host (``stage --signing-key``: ``staging.dsse.json``
beside it, the key read only after the push) so that a GPU host and publish can tell an edited
one from the one written here.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from releasekit.atomic import abandon_run, begin_run, commit_run, failpoint
from releasekit.bounded_read import TEXT_MAX_BYTES, read_bounded
from releasekit.docker_engine import Engine, EngineError, ImageFacts, NoSuchImage
from releasekit.errors import EnvironmentProblem, InputError
from releasekit.records.base import RecordError, record_from_bytes, write_record
from releasekit.records.dsse import SUMMARY_ENVELOPE_FILE
from releasekit.records.intoto import VERIFICATION_SUMMARY_TYPE
from releasekit.records.lock import lock_file_sha256, read_lock
from releasekit.records.release_dir import refuse_mixed_runs, replaced_by
from releasekit.records.staging import STAGING_ENVELOPE_FILE, STAGING_FILE, StagingRecord, staging_tag
from releasekit.records.verification import VERIFICATION_SUMMARY_FILE, VerificationStatement
from releasekit.registry import Reference, RegistryOpener, resolve_credentials
from releasekit.signing import SignatureError
from releasekit.signing.verify import trusted_keys, verify_statement_envelope

if TYPE_CHECKING:
    from releasekit.manifest import LoadedManifest


@dataclass(frozen=True)
class StageRequest:
    image: str
    lock_path: Path
    staging: str | None = None  # REGISTRY/REPO; default the manifest's publish.staging
    evidence_dir: Path | None = None  # where verification_summary.json is [default: the lock's directory]
    manifest_path: Path | None = None
    out: Path | None = None  # staging.json's directory [default: the evidence directory]
    trusted_key_files: list[Path] = field(default_factory=list)  # --trusted-key
    require_signed: bool = False  # --require-signed (the manifest's publish.signed does the same)


@dataclass(frozen=True)
class Staged:
    record: StagingRecord
    signer: str | None  # the keyid whose signature on the summary verified; None: unsigned
    warnings: list[str]
    path: Path  # the staging.json written (``signing.statements.sign_staging_file`` signs it)


def _manifest(request: StageRequest) -> tuple[LoadedManifest, list[Path]]:
    """The manifest and the keys to trust: ``--trusted-key``, else the manifest's, and only when it is
    the one the lock was made from (any other: ``LOCK_MANIFEST_MISMATCH``, before Docker is reached)."""
    from releasekit.manifest import manifest_for_lock, trusted_key_files_for_lock

    lock = read_lock(request.lock_path)
    loaded = manifest_for_lock(
        request.lock_path,
        request.manifest_path,
        lock.manifest.path,
        sha256=lock.manifest.sha256,
        evidence_dir=request.evidence_dir,
    )
    keys = trusted_key_files_for_lock(loaded, lock.manifest.sha256, request.trusted_key_files, "stage")
    return loaded, keys


def staging_target(request: StageRequest, section: object | None) -> Reference:
    text = request.staging or getattr(section, "staging", None)
    if not text:
        raise InputError(
            "no staging repository: pass --staging REGISTRY/REPO or set publish.staging in the manifest"
        )
    target = Reference.parse(text)
    if target.tag or target.digest:
        raise InputError(f"--staging {text!r}: name a repository (REGISTRY/REPO), without a tag or digest")
    return target


def _signed_summary(
    request: StageRequest,
    evidence: Path,
    raw: bytes,
    image_id: str,
    *,
    required: bool,
    keys: list[Path],
) -> str | None:
    """The keyid that signed the summary's exact bytes about ``image_id``; None when it is unsigned and
    that is allowed. Refused (``SignatureError``, exit 1) before anything is pushed otherwise."""
    envelope_path = evidence / SUMMARY_ENVELOPE_FILE
    envelope = (
        read_bounded(envelope_path, TEXT_MAX_BYTES, within=evidence)
        if os.path.lexists(envelope_path)
        else None
    )
    trusted = trusted_keys(
        keys,
        signed=envelope is not None,
        required=required,
        what="stage",
    )
    if trusted is None:
        if required:
            raise SignatureError(
                f"stage: {evidence / VERIFICATION_SUMMARY_FILE} is not signed (no {SUMMARY_ENVELOPE_FILE}) and "
                "signed evidence is required (--require-signed or publish.signed): refused, nothing pushed",
                code="EVIDENCE_UNSIGNED",
            )
        return None
    if envelope is None:
        raise SignatureError(
            f"stage: {envelope_path} is missing: the verification summary is not signed; nothing pushed",
            code="SIGNATURE_MISSING",
        )
    verified = verify_statement_envelope(
        envelope,
        trusted,
        where=f"stage: {envelope_path}",
        predicate_type=VERIFICATION_SUMMARY_TYPE,
        image_id=image_id,
        copy=raw,
        copy_name=VERIFICATION_SUMMARY_FILE,
    )
    return verified.keyid


def _inspect(engine: Engine, reference: str) -> ImageFacts:
    """The image ``--image`` names; an image the engine lacks is bad input (exit 2, one line)."""
    try:
        return engine.inspect(reference)
    except NoSuchImage:
        raise InputError(
            f"no image {reference!r} in the Docker Engine", hint="pass the image ID verify-provenance passed"
        ) from None
    except EngineError as exc:
        raise EnvironmentProblem(
            f"Docker Engine could not inspect {reference!r}: {exc.explanation}"
        ) from None


def stage(request: StageRequest, engine: Engine, open_registry: RegistryOpener) -> Staged:
    """Check, push, read back, record. Bad input and an unverified image are exit 2 (``InputError``);
    a summary that is not signed when it must be, or whose signature fails, exit 1 (``SignatureError``)."""
    loaded, keys = _manifest(request)
    section = loaded.manifest.publish
    target = staging_target(request, section)
    lock_sha = lock_file_sha256(request.lock_path)
    evidence = request.evidence_dir or request.lock_path.parent
    refuse_mixed_runs(
        evidence, before="stage"
    )  # e.g. a summary left beside a later build.json (docs/publish.md)
    summary_path = evidence / VERIFICATION_SUMMARY_FILE
    try:
        raw = read_bounded(summary_path, VerificationStatement.max_bytes, within=evidence)
    except FileNotFoundError:
        raise RecordError(f"{summary_path}: no such file (expected a verification summary)") from None
    summary = record_from_bytes(VerificationStatement, raw, str(summary_path))
    image = _inspect(engine, request.image)
    said = summary.summary
    if said.result != "PASSED" or not summary.names_image(image.id) or said.lock_sha256 != lock_sha:
        raise InputError(
            f"{summary_path} does not say PASSED for image {image.id[:19]} and this lock"
            f" (it says {said.result} for {said.resource_uri}, lock {said.lock_sha256[:12]})",
            hint="stage only what verify-provenance passed",
        )
    required = request.require_signed or bool(getattr(section, "signed", False))
    try:
        signer = _signed_summary(request, evidence, raw, image.id, required=required, keys=keys)
    except SignatureError as exc:  # the finding's code leads the one line, as in publish's findings
        raise SignatureError(f"{exc.code}: {exc.one_line()}", code=exc.code) from None
    warnings = (
        []
        if signer is not None
        else [
            f"warning: {summary_path} is NOT signed: anyone who can write it can forge it; sign it "
            "(releasekit sign DIR) and pass --trusted-key, or --require-signed to refuse this"
        ]
    )
    credentials = resolve_credentials(target.host)
    auth = (credentials.username, credentials.password) if credentials else None
    tag = staging_tag(lock_sha)
    digest = engine.push(image.id, target.name, tag, where=target.host, auth=auth)
    with open_registry(target.host, credentials) as client:
        blob = client.check_image(target.repository, digest, image.id)
    failpoint("stage-pushed")
    record = StagingRecord(
        image_id=image.id,
        lock_sha256=lock_sha,
        registry=target.host,
        repository=target.repository,
        digest=digest,
        tag=tag,
        media_type=blob.media_type,
        verification_summary_sha256=hashlib.sha256(raw).hexdigest(),
    )
    path = (request.out or evidence) / STAGING_FILE
    _commit(record, path, in_release_dir=request.out is None or request.out.resolve() == evidence.resolve())
    return Staged(record=record, signer=signer, warnings=warnings, path=path)


def _commit(record: StagingRecord, path: Path, *, in_release_dir: bool) -> None:
    """``staging.json`` in one step with the removal of what it replaces: the envelope that signed the
    earlier one and, in the release directory, publish's records of an earlier run (``published/``)."""
    work = begin_run(path.parent, "stage")
    try:
        write_record(record, work / path.name)
    except BaseException:
        abandon_run(work)
        raise
    remove = [STAGING_ENVELOPE_FILE, *(replaced_by("stage", own=False) if in_release_dir else [])]
    commit_run(work, path.parent, remove=remove, last=path.name)
