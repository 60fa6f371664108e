"""Promote: re-tag a published digest after judging its attached evidence again; never a rebuild.

Promote reads a tag's digest and its attached evidence back from the registry, runs the same
gate as publish (``gate.evaluate_gate``, with the attached envelopes checked by the same
``signatures`` rules), and puts the same manifest bytes under the new tag in the same
repository, then reads the tag back to check it names that digest. Everything it asks of the
registry goes through the publish target the command passed in (``targets.PublishTarget``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, Field

from releasekit.atomic import failpoint
from releasekit.docker_engine import ImageFacts
from releasekit.errors import EnvironmentProblem, InputError
from releasekit.findings import Findings
from releasekit.publish.attachments import FetchedAttachments
from releasekit.publish.gate import GateReport, add_signed_check, evaluate_gate, policy_from_manifest
from releasekit.publish.reproduction import (
    ReproductionPolicy,
    ReproductionSubject,
    add_reproduction_check,
    read_subject,
    reproducer_keys,
    reproduction_checks,
    reproduction_policy,
)
from releasekit.publish.signatures import check_signed, record_texts, unsigned_verdict
from releasekit.publish.targets import PublishTarget, TargetSession
from releasekit.records.base import RecordError
from releasekit.records.gate import GATE_FILE, GatePolicy, GateRecord, read_gate
from releasekit.records.provenance import PROVENANCE_FILE, parse_statement_text
from releasekit.records.verification import VERIFICATION_SUMMARY_FILE
from releasekit.registry import ManifestBlob, Reference
from releasekit.signing.verify import trusted_keys

__all__ = ["PromoteResult", "promote"]


class PromoteResult(BaseModel):
    promoted: bool
    source: str
    target: str
    digest: str | None = None
    image_id: str | None = None
    gate: GateReport | None = None
    signed_via: str | None = None  # referrers-api or tag-fallback, when signed evidence was found
    signers: dict[str, str] = Field(default_factory=dict)  # envelope -> keyid that verified
    reproducer: str | None = None  # the reproducer key that signed the --reproduced receipt
    findings: Findings = Field(default_factory=Findings)


def _policy(record: GateRecord, manifest_path: Path | None) -> tuple[GatePolicy, str | None, list[Path]]:
    """The policy to judge by, the manifest sha256 to hold the lock to, and the manifest's trusted keys:
    the published record's, or those of ``--manifest``."""
    if manifest_path is None:
        return record.policy, record.manifest_sha256, []
    from releasekit.errors import LockManifestMismatch
    from releasekit.manifest import load_manifest, lock_manifest_mismatch

    loaded = load_manifest(manifest_path)
    # Its trusted keys are trust anchors: only the manifest whose sha256 the lock records may name
    # them (issue 43). Any other manifest is LOCK_MANIFEST_MISMATCH, refused before anything is judged.
    why = lock_manifest_mismatch(loaded.sha256, record.manifest_sha256)
    if why is not None:
        raise LockManifestMismatch(f"promote: LOCK_MANIFEST_MISMATCH: {why}")
    return policy_from_manifest(loaded.manifest), loaded.sha256, loaded.trusted_key_files()


@dataclass(frozen=True)
class Candidate:
    """What promote judges: the source reference, the manifest and image it names, what is attached
    to that digest and the gate record among it."""

    src: Reference
    blob: ManifestBlob
    image: ImageFacts
    fetched: FetchedAttachments
    record: GateRecord


def _promote_gate(
    session: TargetSession,
    candidate: Candidate,
    *,
    manifest_path: Path | None,
    trusted_key_files: list[Path] | None,
    require_signed: bool,
    result: PromoteResult,
) -> None:
    """The same gate again over the attached evidence (and the attached envelopes): into ``result``."""
    src, blob, image, fetched, record = (
        candidate.src,
        candidate.blob,
        candidate.image,
        candidate.fetched,
        candidate.record,
    )
    policy, manifest_sha, manifest_keys = _policy(record, manifest_path)
    evidence = fetched.evidence()
    gate = evaluate_gate(
        image,
        record.lock_sha256,
        evidence,
        policy,
        manifest_sha256=manifest_sha,
        lock_manifest_sha256=record.manifest_sha256,
    )
    # Signed evidence: verified whenever it is there, required when the policy (as published,
    # or as --manifest says), --require-signed or a --trusted-key asks for it. Signed and no
    # key to check with: exit 2. Unsigned and no key: a warning, or an error when required.
    signed = session.fetch_signed(blob.digest)
    required = require_signed or policy.signed or record.policy.signed
    trusted = trusted_keys(
        list(trusted_key_files or []) or manifest_keys,
        signed=signed is not None,
        required=required,
        what=str(src),
    )
    if trusted is None:
        add_signed_check(gate, unsigned_verdict(required=required, image_id=image.id, where="attached: "))
    else:
        verdict = check_signed(
            signed.files if signed else {},
            trusted,
            image_id=image.id,
            provenance=fetched.files.get(PROVENANCE_FILE),
            summary=fetched.files.get(VERIFICATION_SUMMARY_FILE),
            where="attached:",
            sbom=evidence.sbom_text(),
            sbom_named=evidence.sbom_named(),
            required=required,
            records=record_texts(evidence),
        )
        add_signed_check(gate, verdict)
        result.signers = verdict.signers
        result.signed_via = signed.method if signed else None
    result.gate = gate
    result.findings.extend(gate.findings)


def _reproduction_gate(
    candidate: Candidate,
    channel: str,
    *,
    policy: ReproductionPolicy | None,
    given: Path | None,
    release_keys: list[Path],
    result: PromoteResult,
) -> None:
    """The locked manifest's ``require_reproduced``, for a move into its stable channel: into ``result``."""
    if policy is None or not policy.required or channel not in policy.channels or result.gate is None:
        return
    keys = reproducer_keys(policy, release_keys)
    try:
        statement = parse_statement_text(
            candidate.fetched.files.get(PROVENANCE_FILE) or "", "attached provenance"
        )
        runner = statement.predicate.buildDefinition.internalParameters.get("runner")
    except RecordError:
        runner = None
    base = ReproductionSubject(
        path=str(given) if given else None,
        digest=candidate.blob.digest,
        image_id=candidate.image.id,
        build_runner=runner if isinstance(runner, str) else None,
    )
    subject = read_subject(given, keys, base)
    found = reproduction_checks().run(subject)
    add_reproduction_check(result.gate, found)
    result.findings.extend(found)
    result.reproducer = subject.signer


def _recorded_reproduction_ask(
    record: GateRecord, channel: str, image_id: str, result: PromoteResult
) -> None:
    """Without ``--manifest``: the published gate record says whether this channel needs a reproduction
    (``publish.require_reproduced``, recorded at publish). Only the locked manifest names whose
    reproduction counts, so such a move is refused here, never let through unasked."""
    if result.gate is None or channel not in record.policy.reproduced_channels:
        return
    found = Findings()
    found.add(
        "REPRODUCTION_REQUIRED",
        f"the published gate record says a move into {channel!r} needs an independent reproduction: "
        "promote with --manifest (the locked manifest, naming its reproducer_keys) and --reproduced FILE",
        image=image_id,
    )
    add_reproduction_check(result.gate, found)
    result.findings.extend(found)


def _candidate(
    session: TargetSession, src: Reference, blob: ManifestBlob, image: ImageFacts, result: PromoteResult
) -> Candidate | None:
    """What is attached to the digest and the gate record among it; None (and the finding) when absent."""
    fetched = session.fetch_attachments(blob.digest)
    if fetched is None:
        result.findings.add(
            "ATTACHMENTS_MISSING",
            f"{src} ({blob.digest}) has no releasekit evidence attached: it was not published by releasekit",
            image=image.id,
        )
        return None
    try:
        record = read_gate(fetched.files.get(GATE_FILE), f"attached {GATE_FILE}")
    except ValueError:
        result.findings.add(
            "ATTACHMENTS_MISSING", f"the attached {GATE_FILE} is missing or unreadable", image=image.id
        )
        return None
    return Candidate(src=src, blob=blob, image=image, fetched=fetched, record=record)


def promote(
    *,
    source: str,
    target: str,
    manifest_path: Path | None = None,
    trusted_key_files: list[Path] | None = None,
    require_signed: bool = False,
    reproduced: Path | None = None,
    publish_target: PublishTarget,
) -> PromoteResult:
    """``publish_target``: where ``source`` and ``target`` are, made by the command and passed in.
    ``reproduced``: a signed reproduce receipt, judged when the locked manifest requires one
    (``publish.require_reproduced``)."""
    if reproduced is not None and manifest_path is None:
        raise InputError(
            "--reproduced is judged by the locked manifest's reproducer_keys: pass --manifest too"
        )
    src = Reference.parse(source, want_tag=True)
    dst = Reference.parse(target, want_tag=True)
    if dst.digest or not dst.tag:
        raise InputError(f"--to {target!r}: expected REGISTRY/REPO:TAG")
    if (src.host, src.repository) != (dst.host, dst.repository):
        raise InputError(
            "promotion re-tags a digest within one repository: --from and --to must name the same REPO"
        )
    result = PromoteResult(promoted=False, source=str(src), target=str(dst))
    with publish_target.open(src) as session:
        blob, image = session.image(src)
        result.digest, result.image_id = blob.digest, image.id
        candidate = _candidate(session, src, blob, image, result)
        if candidate is None:
            return result
        record = candidate.record
        _promote_gate(
            session,
            candidate,
            manifest_path=manifest_path,
            trusted_key_files=trusted_key_files,
            require_signed=require_signed,
            result=result,
        )
        _reproduction_gate(
            candidate,
            dst.tag,
            policy=reproduction_policy(manifest_path, record.manifest_sha256),
            given=reproduced,
            release_keys=list(trusted_key_files or []),
            result=result,
        )
        if manifest_path is None:
            _recorded_reproduction_ask(record, dst.tag, image.id, result)
        if result.gate is None or not result.gate.passed:
            return result
        failpoint("promote-judged")
        session.put_tag(dst.tag, blob)
        failpoint("promote-tagged")
        if session.tag_digest(dst.tag) != blob.digest:
            raise EnvironmentProblem(f"{dst} does not point at {blob.digest} after promotion")
    result.promoted = True
    return result
