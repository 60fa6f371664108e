"""Publish: the gate first, then a push that tags only a complete image.

Publish, in order (each step only after the previous one succeeded):
  1. gate: plan check, verify-provenance and every required receipt, for this image ID
     and this lock; a refusal touches no registry;
  2. push the image through the Docker Engine under a staging tag named after the image ID
     (``releasekit-staging-<id12>``); the engine reports the manifest digest;
  3. read that manifest back by digest and check it is the image (config digest = image ID)
     and complete (every blob present); then pull it back through the engine by digest and
     compare its image ID, digest and labels with the built image (``pull_back_check``);
  4. attach the evidence (and the release source archive, when the release directory has one)
     to the digest (``sha256-<hex>.releasekit``, see attachments.py);
  5. put the same manifest bytes under each release tag.
A failure in 2-4 leaves no release tag; a rerun resumes (blobs already there are skipped).
Steps 2-4 go through the publish target (``targets``: a ``PublishTarget``, the OCI registry
today, made by the command and passed in), step 5 is ``transaction.py``; what is attached is
``attachments.attachment_files``. The inputs (the image among them) are resolved once, into
``PublishInputs``, before the gate.

Promote (``promote.py``) runs the same gate (``gate.evaluate_gate``, ``gate.add_signed_check``) again.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from releasekit.atomic import abandon_run, begin_run, check_writable, commit_run, failpoint, write_atomic
from releasekit.bounded_read import UnsafeFileError
from releasekit.docker_engine import ImageFacts
from releasekit.errors import InputError
from releasekit.manifest import manifest_for_lock
from releasekit.publish.attachments import attachment_files
from releasekit.publish.engine import DockerEngine, staging_tag
from releasekit.publish.evidence import Evidence, load_evidence
from releasekit.publish.gate import (
    GatePolicy,
    GateReport,
    add_signed_check,
    evaluate_gate,
    policy_from_manifest,
)
from releasekit.publish.notes import release_notes
from releasekit.publish.signatures import (
    SignedVerdict,
    check_signed,
    local_envelopes,
    record_texts,
    unsigned_verdict,
)
from releasekit.publish.targets import EvidenceFiles, PublishTarget, Pushed, TargetSession
from releasekit.publish.transaction import put_tags
from releasekit.records.archive import ARCHIVE_FILE, file_sha256, read_archive, safe_entry_path
from releasekit.records.base import write_record
from releasekit.records.build import RELEASE_NOTES_FILE
from releasekit.records.gate import GateRecord, gate_text
from releasekit.records.lock import lock_file_sha256, read_lock
from releasekit.records.publish import (
    PUBLISH_FILE,
    GateCheckOutcome,
    GateOutcome,
    Published,
    PublishRecord,
)
from releasekit.records.release_dir import refuse_mixed_runs
from releasekit.records.staging import StagingRecord
from releasekit.registry import Reference
from releasekit.signing import TrustedKeys
from releasekit.signing.verify import read_signed_staging, trusted_keys

__all__ = [
    "GateRecord",
    "PublishInputs",
    "PublishResult",
    "publish",
    "publish_record",
]

RESULT_FILE = PUBLISH_FILE
NOTES_FILE = RELEASE_NOTES_FILE


class PublishResult(Published):
    gate: GateReport  # the whole report; publish.json keeps the verdict per check


@dataclass(frozen=True)
class PublishInputs:
    """What one publish acts on, resolved once before the gate: the image (its facts, by ID), the
    lock, the manifest's policy, where to push and under which tags, and the evidence."""

    image: ImageFacts
    lock_name: str
    lock_sha256: str
    manifest_sha256: str | None
    lock_manifest_sha256: str | None
    policy: GatePolicy
    target: Reference
    tags: list[str]
    evidence_dir: Path
    out_dir: Path
    evidence: Evidence
    envelopes: dict[str, bytes]
    trusted: TrustedKeys | None
    staged: StagingRecord | None = None  # publish --staged: promote this digest from the staging repository
    require_signed: bool = False  # --require-signed or publish.signed: unsigned evidence is refused


def _expand_tags(tags: list[str], *, image_id: str, lock_sha256: str, name: str) -> list[str]:
    values = {"image12": image_id.removeprefix("sha256:")[:12], "lock12": lock_sha256[:12], "name": name}
    out: list[str] = []
    for tag in tags:
        try:
            expanded = tag.format_map(values)
        except (KeyError, ValueError) as exc:
            raise InputError(f"tag {tag!r}: unknown placeholder {exc} (known: {', '.join(values)})") from None
        Reference.parse(f"localhost/x:{expanded}")  # validates the tag syntax
        if expanded not in out:
            out.append(expanded)
    return out


def _target_and_tags(to: str | None, tags: list[str] | None, manifest: object) -> tuple[Reference, list[str]]:
    """``--to`` (else ``publish.repository``) and the tags: ``--tag``, else the one in ``--to``, else ``publish.tags``."""
    publish_section = getattr(manifest, "publish", None)
    target_text = to or (publish_section.repository if publish_section else None)
    if not target_text:
        raise InputError(
            "no publish target: pass --to REGISTRY/REPO or set publish.repository in the manifest"
        )
    target = Reference.parse(target_text)
    if target.digest:
        raise InputError(f"--to {target_text!r}: a digest cannot be a publish target")
    wanted = (
        list(tags or [])
        or ([target.tag] if target.tag else [])
        or list(publish_section.tags if publish_section else [])
    )
    if not wanted:
        raise InputError("no tags: pass --tag TAG (repeatable), REGISTRY/REPO:TAG or set publish.tags")
    return Reference(host=target.host, repository=target.repository), wanted


def resolve_inputs(
    engine: DockerEngine,
    publish_target: PublishTarget,
    *,
    image: str | None,
    lock_path: Path,
    receipts_dir: Path,
    evidence_dir: Path | None,
    manifest_path: Path | None,
    to: str | None,
    tags: list[str] | None,
    out_dir: Path | None,
    trusted_key_files: list[Path] | None,
    staged_path: Path | None = None,
    require_signed: bool = False,
) -> PublishInputs:
    """Read the lock and manifest, inspect the image once, load the evidence: bad input is exit 2 here."""
    lock = read_lock(lock_path)
    lock_sha = lock_file_sha256(lock_path)
    evidence_dir = evidence_dir or lock_path.parent
    loaded = manifest_for_lock(
        lock_path, manifest_path, lock.manifest.path, sha256=lock.manifest.sha256, evidence_dir=evidence_dir
    )
    target, wanted = _target_and_tags(to, tags, loaded.manifest)
    policy = policy_from_manifest(loaded.manifest)
    required = require_signed or policy.signed
    keys = list(trusted_key_files or []) or loaded.trusted_key_files()
    # staging.json is verified before any field of it is used (its registry asked, its digest copied).
    staged = (
        read_signed_staging(staged_path, keys, required=required, what="publish").record
        if staged_path is not None
        else None
    )
    refuse_mixed_runs(evidence_dir, before="publish")  # records of two runs: exit 2, naming both files
    facts = _candidate_facts(engine, publish_target, image, staged)
    final_tags = _expand_tags(wanted, image_id=facts.id, lock_sha256=lock_sha, name=lock.name)
    evidence = load_evidence(evidence_dir, receipts_dir)
    envelopes = local_envelopes(evidence_dir, receipts_dir)
    trusted = trusted_keys(keys, signed=bool(envelopes), required=required, what="publish")
    return PublishInputs(
        image=facts,
        lock_name=lock.name,
        lock_sha256=lock_sha,
        manifest_sha256=loaded.sha256,
        lock_manifest_sha256=lock.manifest.sha256,
        policy=policy,
        target=target,
        tags=final_tags,
        evidence_dir=evidence_dir,
        out_dir=out_dir or evidence_dir / "published",
        evidence=evidence,
        envelopes=envelopes,
        trusted=trusted,
        staged=staged,
        require_signed=required,
    )


def _staged_reference(staged: StagingRecord) -> Reference:
    return Reference(host=staged.registry, repository=staged.repository, digest=staged.digest)


def _candidate_facts(
    engine: DockerEngine, publish_target: PublishTarget, image: str | None, staged: StagingRecord | None
) -> ImageFacts:
    """The local image's facts, or the staged digest's, read from the staging registry (no engine round trip)."""
    if staged is None:
        if image is None:
            raise InputError("pass --image IMAGE, or --staged staging.json to publish the staged candidate")
        return engine.inspect(image)
    source = _staged_reference(staged)
    facts = publish_target.staged_image(staged)
    if facts.id != staged.image_id:
        raise InputError(f"{source} is image {facts.id}, not the staged, verified image {staged.image_id}")
    if (
        image is not None
        and image not in (staged.image_id, str(source))
        and engine.inspect(image).id != facts.id
    ):
        raise InputError(f"--image {image} is not the staged candidate {staged.image_id}")
    return facts


def judge(inputs: PublishInputs) -> tuple[GateReport, SignedVerdict]:
    """Step 1: the gate over the local evidence, then the signatures (or the finding that there are none)."""
    report = evaluate_gate(
        inputs.image,
        inputs.lock_sha256,
        inputs.evidence,
        inputs.policy,
        manifest_sha256=inputs.manifest_sha256,
        lock_manifest_sha256=inputs.lock_manifest_sha256,
        image_digest=inputs.staged.digest if inputs.staged else None,
    )
    if inputs.trusted is None:
        verdict = unsigned_verdict(required=inputs.require_signed, image_id=inputs.image.id, where="")
    else:
        verdict = check_signed(
            inputs.envelopes,
            inputs.trusted,
            image_id=inputs.image.id,
            provenance=inputs.evidence.provenance.text,
            summary=inputs.evidence.verification_summary.text,
            where="",
            sbom=inputs.evidence.sbom_text(),
            sbom_named=inputs.evidence.sbom_named(),
            required=inputs.require_signed,
            records=record_texts(inputs.evidence),
        )
    add_signed_check(report, verdict)
    return report, verdict


def archive_files(evidence_dir: Path) -> list[str] | None:
    """The release source archive's files (relative paths), each checked against archive.json; None without one."""
    if not (evidence_dir / ARCHIVE_FILE).is_file():
        return None
    index = read_archive(evidence_dir / ARCHIVE_FILE)
    for entry in index.entries:
        path = evidence_dir / entry.path
        if not safe_entry_path(entry.path):
            raise InputError(f"{ARCHIVE_FILE}: unsafe path {entry.path!r}")
        if not os.path.lexists(path):
            raise InputError(f"{ARCHIVE_FILE} lists {entry.path}, which is missing")
        # A regular file inside the directory, of the size listed (on stat, before hashing): else exit 2.
        if file_sha256(path, max_bytes=entry.size, within=evidence_dir) != entry.sha256:
            raise InputError(
                f"{entry.path} is not the file {ARCHIVE_FILE} lists (sha256 differs); refusing to publish it"
            )
    return [e.path for e in index.entries]


def _attached_files(
    inputs: PublishInputs, report: GateReport, notes: str, archived: list[str] | None
) -> EvidenceFiles:
    """What step 4 attaches: the evidence, the gate record and the notes (and the source archive)."""
    record = GateRecord(
        image_id=inputs.image.id,
        lock_sha256=inputs.lock_sha256,
        manifest_sha256=inputs.manifest_sha256,
        policy=inputs.policy,
        report=report,
    )
    files = attachment_files(
        inputs.evidence,
        gate_json=gate_text(record).encode(),
        release_notes=notes,
        archive_dir=inputs.evidence_dir if archived is not None else None,
        archive_files=archived,
    )
    return EvidenceFiles(files=files, image_id=inputs.image.id, lock_sha256=inputs.lock_sha256)


def _attach_all(
    session: TargetSession, inputs: PublishInputs, pushed: Pushed, files: EvidenceFiles
) -> Published:
    """Step 4: the evidence files, then the envelopes, attached to the pushed digest."""
    blob = pushed.blob
    attached = session.attach(blob, files)
    signed = session.attach_signed(blob, inputs.envelopes) if inputs.envelopes else None
    return Published(
        published=True,
        image_id=inputs.image.id,
        lock_sha256=inputs.lock_sha256,
        repository=inputs.target.name,
        tags=inputs.tags,
        digest=pushed.digest,
        staging_tag=staging_tag(inputs.image.id),
        attachment=attached,
        signed=signed,
    )


def _release(
    publish_target: PublishTarget, inputs: PublishInputs, report: GateReport, signers: dict[str, str]
) -> tuple[Published, str]:
    """Steps 2-5 against the publish target; returns what was published and the release notes."""
    archived = archive_files(inputs.evidence_dir)  # a bad archive is refused before anything is pushed
    target = inputs.target
    # The target refuses evidence that holds its own secret (the registry password) before it connects.
    with publish_target.open(target, evidence_texts=inputs.evidence.texts()) as session:
        if inputs.staged is not None:
            pushed = session.copy_staged(inputs.image, inputs.staged)
        else:
            pushed = session.push(inputs.image)
        failpoint("publish-pushed")
        notes = release_notes(
            build_notes=inputs.evidence.build_notes,
            report=report,
            policy=inputs.policy,
            repository=target.name,
            digest=pushed.digest,
            tags=inputs.tags,
            evidence=inputs.evidence,
            signers=signers,
        )
        done = _attach_all(session, inputs, pushed, _attached_files(inputs, report, notes, archived))
        failpoint("publish-attached")
        done.moved_tags = put_tags(session, pushed, inputs.tags).moved
    return done, notes


def publish(
    *,
    image: str | None,
    lock_path: Path,
    receipts_dir: Path,
    evidence_dir: Path | None = None,
    manifest_path: Path | None = None,
    to: str | None = None,
    tags: list[str] | None = None,
    out_dir: Path | None = None,
    trusted_key_files: list[Path] | None = None,
    staged: Path | None = None,
    require_signed: bool = False,
    engine: DockerEngine,
    publish_target: PublishTarget,
) -> PublishResult:
    """``engine`` (the local image's facts) and ``publish_target`` (where it goes) are made by the
    command and passed in."""
    inputs = resolve_inputs(
        engine,
        publish_target,
        staged_path=staged,
        image=image,
        lock_path=lock_path,
        receipts_dir=receipts_dir,
        evidence_dir=evidence_dir,
        manifest_path=manifest_path,
        to=to,
        tags=tags,
        out_dir=out_dir,
        trusted_key_files=trusted_key_files,
        require_signed=require_signed,
    )
    report, verdict = judge(inputs)
    result = PublishResult(
        published=False,
        image_id=inputs.image.id,
        lock_sha256=inputs.lock_sha256,
        repository=inputs.target.name,
        tags=inputs.tags,
        gate=report,
    )
    if not report.passed:
        return result
    # Every local output is checked before the first byte goes to the registry: a link planted at
    # RELEASE.md or publish.json must not be found only after the tags and attachments are pushed.
    _check_outputs(inputs.out_dir)
    done, notes = _release(publish_target, inputs, report, verdict.signers)
    notes_path = inputs.out_dir / NOTES_FILE
    result = PublishResult(
        **{**done.model_dump(), "signers": verdict.signers, "release_notes": str(notes_path)}, gate=report
    )
    _write_outputs(inputs.out_dir, notes, publish_record(result))
    return result


def _write_outputs(out_dir: Path, notes: str, record: PublishRecord) -> None:
    """RELEASE.md and publish.json committed together, publish.json last (``atomic.commit_run``): an
    interrupt leaves the earlier publish's pair or this one's, never one of each (a kill inside the
    commit: at most this one's RELEASE.md, without publish.json)."""
    work = begin_run(out_dir, "publish")
    try:
        write_atomic(work / NOTES_FILE, notes)
        write_record(record, work / RESULT_FILE)
    except BaseException:
        abandon_run(work)
        raise
    commit_run(work, out_dir, remove=[NOTES_FILE], last=RESULT_FILE)


def _check_outputs(out_dir: Path) -> None:
    """The output directory is a real directory (or not there yet) and its two files can be written."""
    if out_dir.is_symlink() or (out_dir.exists() and not out_dir.is_dir()):
        raise UnsafeFileError(
            f"{out_dir}: not a directory (a link or a file); refusing to write the release there"
        )
    for name in (NOTES_FILE, RESULT_FILE):
        check_writable(out_dir / name)


def publish_record(result: PublishResult) -> PublishRecord:
    """publish.json: the result, with the gate's verdict per check (the full report is in gate.json)."""
    report = result.gate
    return PublishRecord(
        **{name: value for name, value in result if name != "gate"},  # the Published fields, as they are
        gate=GateOutcome(
            passed=report.passed,
            checks=[
                GateCheckOutcome(name=c.name, passed=c.passed, findings=c.findings) for c in report.checks
            ],
            findings=report.findings,
            cells=sorted({r.cell for r in report.receipts if r.cell}),
        ),
    )
