"""Publish and promote: the gate first, then a push that tags only a complete image.

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

Promote reads a tag's digest and its attached evidence back from the registry, runs the
same gate again, and puts the same manifest bytes under the new tag: never a rebuild.
"""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import BaseModel, Field

from releasekit.errors import EnvironmentProblem, InputError
from releasekit.findings import Findings
from releasekit.publish.attachments import (
    attach,
    attach_signed,
    fetch_attachments,
    fetch_signed,
)
from releasekit.publish.engine import DockerEngine, ImageFacts, staging_tag
from releasekit.publish.evidence import PROVENANCE_FILE, VERIFICATION_SUMMARY_FILE, Evidence, load_evidence
from releasekit.publish.gate import (
    CheckResult,
    GatePolicy,
    GateReport,
    GateSubject,
    policy_from_manifest,
    publish_gate,
)
from releasekit.publish.notes import release_notes
from releasekit.publish.registry import Reference, RegistryClient, resolve_credentials
from releasekit.publish.signatures import (
    CHECK_NAME,
    SignedVerdict,
    check_signed,
    local_envelopes,
    trusted_keys,
)
from releasekit.records.archive import ARCHIVE_FILE, file_sha256, read_archive, safe_entry_path
from releasekit.records.base import write_record
from releasekit.records.lock import lock_file_sha256, read_lock
from releasekit.records.publish import (
    GateCheckOutcome,
    GateOutcome,
    Published,
    PublishRecord,
)

RESULT_FILE = "publish.json"
NOTES_FILE = "RELEASE.md"


class PublishResult(Published):
    gate: GateReport  # the whole report; publish.json keeps the verdict per check


class PromoteResult(BaseModel):
    promoted: bool
    source: str
    target: str
    digest: str | None = None
    image_id: str | None = None
    gate: GateReport | None = None
    signed_via: str | None = None  # referrers-api or tag-fallback, when signed evidence was found
    signers: dict[str, str] = Field(default_factory=dict)  # envelope -> keyid that verified
    findings: Findings = Field(default_factory=Findings)


class GateRecord(BaseModel):
    """gate.json in the attachments: what the gate applied, so promote can apply it again."""

    image_id: str
    lock_sha256: str
    manifest_sha256: str | None
    policy: GatePolicy
    report: GateReport


def _manifest_for(lock_path: Path, manifest_path: Path | None, recorded: str):
    """The manifest the lock names (its path as recorded, then beside the lock), or the one given."""
    from releasekit.manifest import load_manifest

    if manifest_path is not None:
        return load_manifest(manifest_path)
    candidates = [Path(recorded), lock_path.parent / recorded, lock_path.parent / Path(recorded).name]
    for candidate in candidates:
        if candidate.is_file():
            return load_manifest(candidate)
    raise InputError(
        f"cannot find the manifest {recorded!r} the lock was made from", hint="pass --manifest FILE"
    )


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


def evaluate_gate(
    image: ImageFacts,
    lock_sha256: str,
    evidence: Evidence,
    policy: GatePolicy,
    *,
    manifest_sha256: str | None = None,
    lock_manifest_sha256: str | None = None,
) -> GateReport:
    subject = GateSubject(
        image=image,
        lock_sha256=lock_sha256,
        manifest_sha256=manifest_sha256,
        lock_manifest_sha256=lock_manifest_sha256,
        evidence=evidence,
        policy=policy,
    )
    return publish_gate().evaluate(subject)


def check_pushed(client: RegistryClient, target: Reference, digest: str, image_id: str):
    """The registry has exactly this image under ``digest``, every blob of it."""
    blob = client.get_manifest(target.repository, digest)
    if blob is None:
        raise EnvironmentProblem(f"registry {target.host} has no manifest {digest} after the push")
    manifest = json.loads(blob.data)
    config = manifest.get("config") or {}
    if config.get("digest") != image_id:
        raise EnvironmentProblem(
            f"registry manifest {digest} has config {config.get('digest')}, not the image {image_id}"
        )
    for item in [config, *manifest.get("layers", [])]:
        if not client.has_blob(target.repository, item["digest"]):
            raise EnvironmentProblem(f"registry {target.host} lacks blob {item['digest']} of {digest}")
    return blob


def _add_signed_check(report: GateReport, verdict: SignedVerdict) -> None:
    """The signature check joins the gate's checks, so a refusal reads like any other gate's."""
    report.checks.append(
        CheckResult(name=CHECK_NAME, passed=verdict.findings.passed, findings=verdict.findings)
    )
    report.findings.extend(verdict.findings)
    report.passed = report.passed and verdict.findings.passed


def pull_back_check(built: ImageFacts, pulled: ImageFacts, reference: str, digest: str) -> None:
    """The image pulled back by digest is the one built: same image ID, the pushed digest, same labels."""
    problems: list[str] = []
    if pulled.id != built.id:
        problems.append(f"image ID {pulled.id} is not the built {built.id}")
    if digest not in pulled.repo_digests:
        problems.append(f"the engine does not record digest {digest} for it")
    if pulled.labels != built.labels:
        changed = sorted(
            k for k in set(pulled.labels) | set(built.labels) if pulled.labels.get(k) != built.labels.get(k)
        )
        problems.append(f"labels differ ({', '.join(changed[:3])})")
    if problems:
        raise EnvironmentProblem(
            f"pull-back of {reference}: {'; '.join(problems)}", hint="nothing was tagged"
        )


def archive_files(evidence_dir: Path) -> list[str] | None:
    """The release source archive's files (relative paths), each checked against archive.json; None without one."""
    if not (evidence_dir / ARCHIVE_FILE).is_file():
        return None
    index = read_archive(evidence_dir / ARCHIVE_FILE)
    for entry in index.entries:
        path = evidence_dir / entry.path
        if not safe_entry_path(entry.path):
            raise InputError(f"{ARCHIVE_FILE}: unsafe path {entry.path!r}")
        if not path.is_file():
            raise InputError(f"{ARCHIVE_FILE} lists {entry.path}, which is missing")
        if file_sha256(path) != entry.sha256:
            raise InputError(
                f"{entry.path} is not the file {ARCHIVE_FILE} lists (sha256 differs); refusing to publish it"
            )
    return [e.path for e in index.entries]


def _mentions(evidence: Evidence, secret: str) -> bool:
    texts = [evidence.build_notes or ""]
    texts += [
        item.text or "" for item in (evidence.plan_check, evidence.verification_summary, evidence.provenance)
    ]
    texts += [item.text or "" for item in evidence.receipts]
    texts += [
        item.text or ""
        for item in [*evidence.test_receipts, *([evidence.hygiene] if evidence.hygiene else [])]
    ]
    return bool(secret) and any(secret in text for text in texts)


def publish(
    *,
    image: str,
    lock_path: Path,
    receipts_dir: Path,
    evidence_dir: Path | None = None,
    manifest_path: Path | None = None,
    to: str | None = None,
    tags: list[str] | None = None,
    out_dir: Path | None = None,
    trusted_key_files: list[Path] | None = None,
) -> PublishResult:
    lock = read_lock(lock_path)
    lock_sha = lock_file_sha256(lock_path)
    loaded = _manifest_for(lock_path, manifest_path, lock.manifest.path)
    manifest = loaded.manifest
    target_text = to or (manifest.publish.repository if manifest.publish else None)
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
        or list(manifest.publish.tags if manifest.publish else [])
    )
    if not wanted:
        raise InputError("no tags: pass --tag TAG (repeatable), REGISTRY/REPO:TAG or set publish.tags")
    target = Reference(host=target.host, repository=target.repository)
    evidence_dir = evidence_dir or lock_path.parent
    out_dir = out_dir or evidence_dir / "published"

    engine = DockerEngine()
    facts = engine.inspect(image)
    final_tags = _expand_tags(wanted, image_id=facts.id, lock_sha256=lock_sha, name=lock.name)
    policy = policy_from_manifest(manifest)
    evidence = load_evidence(evidence_dir, receipts_dir)
    envelopes = local_envelopes(evidence_dir)
    trusted = trusted_keys(
        list(trusted_key_files or []), signed=bool(envelopes), policy_signed=policy.signed, what="publish"
    )
    report = evaluate_gate(
        facts,
        lock_sha,
        evidence,
        policy,
        manifest_sha256=loaded.sha256,
        lock_manifest_sha256=lock.manifest.sha256,
    )
    verdict = SignedVerdict()
    if trusted is not None:
        verdict = check_signed(
            envelopes,
            trusted,
            image_id=facts.id,
            provenance=evidence.provenance.text,
            summary=evidence.verification_summary.text,
            where="",
        )
        _add_signed_check(report, verdict)
    result = PublishResult(
        published=False,
        image_id=facts.id,
        lock_sha256=lock_sha,
        repository=target.name,
        tags=final_tags,
        gate=report,
    )
    if not report.passed:
        return result

    archived = archive_files(evidence_dir)
    credentials = resolve_credentials(target.host)
    if credentials is not None and _mentions(evidence, credentials.password):
        raise InputError("the evidence contains the registry password; refusing to push and attach it")
    with RegistryClient(target.host, credentials) as client:
        client.ping()  # unreachable or refused: say so before anything is pushed

        def registry_still_there() -> None:
            try:
                client.ping()
            except EnvironmentProblem as exc:
                raise EnvironmentProblem(
                    f"push to {target.host} interrupted: {exc.message}",
                    hint="nothing was tagged; rerun to resume",
                ) from None

        digest = engine.push_staged(facts.id, target, credentials, on_retry=registry_still_there)
        blob = check_pushed(client, target, digest, facts.id)
        pulled = engine.pull_back(target, digest, credentials)
        pull_back_check(facts, pulled, f"{target.name}@{digest}", digest)
        notes = release_notes(
            build_notes=evidence.build_notes,
            report=report,
            policy=policy,
            repository=target.name,
            digest=digest,
            tags=final_tags,
            evidence=evidence,
        )
        record = GateRecord(
            image_id=facts.id,
            lock_sha256=lock_sha,
            manifest_sha256=loaded.sha256,
            policy=policy,
            report=report,
        )
        attached = attach(
            client,
            target.repository,
            blob,
            image_id=facts.id,
            lock_sha256=lock_sha,
            evidence=evidence,
            gate_json=record.model_dump_json(indent=2).encode(),
            release_notes=notes,
            archive_dir=evidence_dir if archived is not None else None,
            archive_files=archived,
        )
        signed = attach_signed(client, target.repository, blob, envelopes) if envelopes else None
        moved: dict[str, str] = {}
        for tag in final_tags:
            before = client.get_manifest(target.repository, tag)
            if before is not None and before.digest != digest:
                moved[tag] = before.digest
            client.put_manifest(target.repository, tag, blob.data, blob.media_type)

    out_dir.mkdir(parents=True, exist_ok=True)
    notes_path = out_dir / NOTES_FILE
    notes_path.write_text(notes, encoding="utf-8")
    result.published = True
    result.digest = digest
    result.staging_tag = staging_tag(facts.id)
    result.attachment = attached
    result.signed = signed
    result.signers = verdict.signers
    result.moved_tags = moved
    result.release_notes = str(notes_path)
    write_record(publish_record(result), out_dir / RESULT_FILE)
    return result


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


def promote(
    *,
    source: str,
    target: str,
    manifest_path: Path | None = None,
    trusted_key_files: list[Path] | None = None,
) -> PromoteResult:
    src = Reference.parse(source, want_tag=True)
    dst = Reference.parse(target, want_tag=True)
    if dst.digest or not dst.tag:
        raise InputError(f"--to {target!r}: expected REGISTRY/REPO:TAG")
    if (src.host, src.repository) != (dst.host, dst.repository):
        raise InputError(
            "promotion re-tags a digest within one repository: --from and --to must name the same REPO"
        )
    result = PromoteResult(promoted=False, source=str(src), target=str(dst))
    credentials = resolve_credentials(src.host)
    with RegistryClient(src.host, credentials) as client:
        client.ping()
        blob = client.get_manifest(src.repository, src.digest or src.tag or "")
        if blob is None:
            raise InputError(f"{src} does not exist in the registry")
        manifest = json.loads(blob.data)
        config_ref = manifest.get("config") or {}
        if "digest" not in config_ref:
            raise InputError(f"{src} is a manifest list or index; promote a single image")
        image_id = str(config_ref["digest"])
        config = json.loads(client.get_blob(src.repository, image_id))
        facts = ImageFacts.from_config(image_id, config.get("config") or {})
        result.digest, result.image_id = blob.digest, image_id
        fetched = fetch_attachments(client, src.repository, blob.digest)
        if fetched is None:
            result.findings.add(
                "ATTACHMENTS_MISSING",
                f"{src} ({blob.digest}) has no releasekit evidence attached: it was not published by releasekit",
                image=image_id,
            )
            return result
        try:
            record = GateRecord.model_validate_json(fetched.files.get("gate.json", ""))
        except ValueError:
            result.findings.add(
                "ATTACHMENTS_MISSING", "the attached gate.json is missing or unreadable", image=image_id
            )
            return result
        manifest_sha = record.manifest_sha256
        policy = record.policy
        if manifest_path is not None:
            from releasekit.manifest import load_manifest

            loaded = load_manifest(manifest_path)
            # Promotion may hold a release to a stricter matrix than the one it was locked
            # with, so the manifest-matches-lock check does not apply to this one.
            policy = policy_from_manifest(loaded.manifest)
            manifest_sha = None
        result.gate = evaluate_gate(
            facts,
            record.lock_sha256,
            fetched.evidence(),
            policy,
            manifest_sha256=manifest_sha,
            lock_manifest_sha256=record.manifest_sha256,
        )
        # Signed evidence: verified whenever it is there, required when the policy (as published,
        # or as --manifest says) or a --trusted-key asks for it. No key to check with: exit 2.
        signed = fetch_signed(client, src.repository, blob.digest)
        trusted = trusted_keys(
            list(trusted_key_files or []),
            signed=signed is not None,
            policy_signed=policy.signed or record.policy.signed,
            what=str(src),
        )
        if trusted is not None:
            verdict = check_signed(
                signed.files if signed else {},
                trusted,
                image_id=image_id,
                provenance=fetched.files.get(PROVENANCE_FILE),
                summary=fetched.files.get(VERIFICATION_SUMMARY_FILE),
                where="attached:",
            )
            _add_signed_check(result.gate, verdict)
            result.signers = verdict.signers
            result.signed_via = signed.method if signed else None
        result.findings.extend(result.gate.findings)
        if not result.gate.passed:
            return result
        client.put_manifest(dst.repository, dst.tag, blob.data, blob.media_type)
        check = client.get_manifest(dst.repository, dst.tag)
        if check is None or check.digest != blob.digest:
            raise EnvironmentProblem(f"{dst} does not point at {blob.digest} after promotion")
    result.promoted = True
    return result
