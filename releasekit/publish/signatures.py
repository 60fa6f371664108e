"""Signed evidence at publish and promote: the envelopes must verify, name this image, match the files.

For each envelope (``provenance.intoto.dsse.json`` from build, ``verification_summary.dsse.json``
from verify-provenance):
  * a signature by a trusted key verifies over the payload (DSSE PAE)  -> else SIGNATURE_INVALID
    (altered bytes) or SIGNER_UNTRUSTED (signed, but not by a key given with --trusted-key);
  * the payload is an in-toto Statement of the expected predicate type whose subject digest is
    the image being published or promoted (its image ID, the config digest that the registry
    manifest commits to)                                                  -> else SIGNED_SUBJECT_MISMATCH;
  * the unsigned copy the gate reads says the same as the signed one      -> else SIGNED_EVIDENCE_MISMATCH.
A required envelope that is absent is SIGNATURE_MISSING.

Receipts (``receipts/<cell>.json``, from validate) and test receipts (``tests/<c>.<s>.json``, from
test) are signed by the host that ran them: ``<name>.dsse.json`` beside each (attached under the same
title), over the file's exact bytes with a payload type of its kind. With a trusted key, each one:
  * verifies by a trusted key (else SIGNER_UNTRUSTED / SIGNATURE_INVALID) and is the file beside it
    byte for byte (else SIGNED_EVIDENCE_MISMATCH);
  * with no envelope is RECEIPT_UNSIGNED / TEST_RECEIPT_UNSIGNED: an error under ``--require-signed``
    (or ``publish.signed``), a warning otherwise. Which image a receipt is about is the gate's rule
    (its ``image_id``), read from the bytes just checked.
``publish --staged`` verifies ``staging.json`` first (``signing.verify.read_signed_staging``):
STAGING_UNSIGNED, SIGNED_EVIDENCE_MISMATCH, SIGNER_UNTRUSTED refuse it before any registry is asked.

The SBOM (``sbom.cdx.json``, when there is one) is CycloneDX, not a statement: ``sbom.cdx.dsse.json``
signs its exact bytes (payload type ``application/vnd.cyclonedx+json``), and the signed summary names
its sha256 (the gate's SBOM rule refuses any other document: SBOM_MISMATCH). With a trusted key:
  * the envelope verifies and its payload is the SBOM byte for byte -> else the codes above;
  * an SBOM with no envelope, or one the signed summary does not name, is SBOM_UNSIGNED: an error
    under ``--require-signed`` (or ``publish.signed``), a warning otherwise.

Evidence with no envelope at all, read without ``--trusted-key``, is unsigned: anyone who can
write the release directory (or push to the repository) can forge it. It is accepted only
out loud: an ``EVIDENCE_UNSIGNED`` warning in the gate (publish.json, promote's result) and a
``warning:`` line on stderr. ``--require-signed`` (or ``publish.signed`` in the manifest) makes
the same finding an error: the release is refused (exit 1).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, Field

from releasekit.bounded_read import TEXT_MAX_BYTES, read_bounded
from releasekit.findings import Findings, Severity
from releasekit.publish.evidence import Evidence
from releasekit.records.dsse import ENVELOPE_SUFFIX, envelope_name
from releasekit.records.dsse import PROVENANCE_ENVELOPE_FILE as PROVENANCE_ENVELOPE
from releasekit.records.dsse import SBOM_ENVELOPE_FILE as SBOM_ENVELOPE
from releasekit.records.dsse import SUMMARY_ENVELOPE_FILE as SUMMARY_ENVELOPE
from releasekit.records.provenance import SLSA_PROVENANCE_V1 as SLSA_PROVENANCE
from releasekit.records.receipt import RECEIPT_PAYLOAD_TYPE
from releasekit.records.sbom import SBOM_FILE as SBOM_FILE_NAME
from releasekit.records.test_receipt import TEST_RECEIPT_PAYLOAD_TYPE, TESTS_DIR
from releasekit.signing import SignatureError, TrustedKeys, verify_envelope
from releasekit.signing.statements import SBOM_PAYLOAD_TYPE, VERIFICATION_SUMMARY_TYPE
from releasekit.signing.verify import verify_record_envelope, verify_statement_envelope

STATEMENT_ENVELOPES = (PROVENANCE_ENVELOPE, SUMMARY_ENVELOPE)  # always required when signed
ENVELOPES = (*STATEMENT_ENVELOPES, SBOM_ENVELOPE)  # what is read beside the evidence and attached
CHECK_NAME = "signed evidence"


def local_envelopes(evidence_dir: Path, receipts_dir: Path | None = None) -> dict[str, bytes]:
    """The envelopes beside the evidence, and beside each receipt and test receipt, by the title
    they are attached under (``receipts/<cell>.dsse.json``, ``tests/<c>.<s>.dsse.json``); a FIFO, a
    link out or an oversized one: exit 2 (``bounded_read``)."""
    found = {
        name: read_bounded(evidence_dir / name, TEXT_MAX_BYTES, within=evidence_dir)
        for name in ENVELOPES
        if os.path.lexists(evidence_dir / name)
    }
    for prefix, directory in (
        (RECEIPT_PREFIX, receipts_dir),
        (TEST_RECEIPT_PREFIX, evidence_dir / TESTS_DIR),
    ):
        if directory is None or not directory.is_dir():
            continue
        for path in sorted(directory.glob("*" + ENVELOPE_SUFFIX)):
            found[prefix + path.name] = read_bounded(path, TEXT_MAX_BYTES, within=directory)
    return found


# Each link of the chain a host signs besides the statements: its title prefix, payload type, and
# the finding when it has no envelope.
RECEIPT_PREFIX = "receipts/"
TEST_RECEIPT_PREFIX = TESTS_DIR + "/"
LINKS = {
    RECEIPT_PREFIX: (RECEIPT_PAYLOAD_TYPE, "RECEIPT_UNSIGNED", "receipt", "validate"),
    TEST_RECEIPT_PREFIX: (TEST_RECEIPT_PAYLOAD_TYPE, "TEST_RECEIPT_UNSIGNED", "test receipt", "test"),
}


UNSIGNED_CODE = "EVIDENCE_UNSIGNED"


def unsigned_verdict(*, required: bool, image_id: str, where: str) -> SignedVerdict:
    """No envelope and no key: a warning (accepted, said out loud) or, when signing is required, an error."""
    verdict = SignedVerdict(checked=False)
    if required:
        message = (
            f"{where}the evidence is not signed (no DSSE envelope) and signed evidence is required "
            "(--require-signed or publish.signed): refused"
        )
    else:
        message = (
            f"{where}the evidence is NOT signed: nothing shows who made it, and anyone who can write "
            "it can forge it; sign it (releasekit sign DIR) and pass --trusted-key, or --require-signed to refuse this"
        )
    verdict.findings.add(
        UNSIGNED_CODE, message, severity=Severity.error if required else Severity.warning, image=image_id
    )
    return verdict


UNSIGNED_CODES = frozenset({UNSIGNED_CODE, "SBOM_UNSIGNED", "RECEIPT_UNSIGNED", "TEST_RECEIPT_UNSIGNED"})


def unsigned_warnings(findings: Findings) -> list[str]:
    """The warnings that something is unsigned, as the lines a command prints on stderr."""
    return [
        f"warning: {f.message}"
        for f in findings
        if f.code in UNSIGNED_CODES and f.severity == Severity.warning
    ]


def record_texts(evidence: Evidence) -> dict[str, str | None]:
    """Each receipt and test receipt by the title it is attached under, with its exact text."""
    return {
        **{RECEIPT_PREFIX + _basename(r.path): r.text for r in evidence.receipts},
        **{TEST_RECEIPT_PREFIX + _basename(t.path): t.text for t in evidence.test_receipts},
    }


def _basename(path: str) -> str:
    return path.replace("\\", "/").rsplit("/", 1)[-1]


@dataclass(frozen=True)
class SignedCheck:
    """What every envelope of one check is judged by: the trusted keys, whether signing is required,
    the image it must be about, and where the files were read (a label prefix: ``attached:``)."""

    trusted: TrustedKeys
    required: bool
    image_id: str
    where: str


class SignedVerdict(BaseModel):
    checked: bool = False
    signers: dict[str, str] = Field(default_factory=dict)  # envelope -> keyid that verified
    findings: Findings = Field(default_factory=Findings)


def check_signed(
    envelopes: dict[str, bytes],
    trusted: TrustedKeys,
    *,
    image_id: str,
    provenance: str | None,
    summary: str | None,
    where: str,
    sbom: str | None = None,
    sbom_named: str | None = None,
    required: bool = False,
    records: dict[str, str | None] | None = None,
) -> SignedVerdict:
    """``sbom``: the SBOM's text (None: there is none); ``sbom_named``: the sha256 the summary names;
    ``records``: each receipt and test receipt by its title (``receipts/<cell>.json``), its text."""
    verdict = SignedVerdict(checked=True)
    unsigned = {PROVENANCE_ENVELOPE: provenance, SUMMARY_ENVELOPE: summary}
    kinds = {PROVENANCE_ENVELOPE: SLSA_PROVENANCE, SUMMARY_ENVELOPE: VERIFICATION_SUMMARY_TYPE}
    for name in STATEMENT_ENVELOPES:
        label = f"{where}{name}"
        data = envelopes.get(name)
        if data is None:
            verdict.findings.add(
                "SIGNATURE_MISSING", f"{label} is missing: the evidence is not signed", image=image_id
            )
            continue
        copy = unsigned[name]
        try:
            verified = verify_statement_envelope(
                data,
                trusted,
                where=label,
                predicate_type=kinds[name],
                image_id=image_id,
                copy=copy.encode("utf-8") if copy is not None else None,  # absent: the gate's finding
                copy_name=name.replace(".dsse", ""),
            )
        except SignatureError as exc:
            verdict.findings.add(exc.code, exc.one_line(), image=image_id)
            continue
        verdict.signers[name] = verified.keyid
    judge = SignedCheck(trusted=trusted, required=required, image_id=image_id, where=where)
    if sbom is not None:
        _check_signed_sbom(verdict, judge, envelopes.get(SBOM_ENVELOPE), sbom, sbom_named)
    for title, text in sorted((records or {}).items()):
        _check_signed_record(verdict, judge, envelopes, title, text)
    return verdict


def _check_signed_record(
    verdict: SignedVerdict, judge: SignedCheck, envelopes: dict[str, bytes], title: str, text: str | None
) -> None:
    """One receipt or test receipt: signed by a trusted key (the host that ran it), byte for byte."""
    trusted, required, image_id, where = judge.trusted, judge.required, judge.image_id, judge.where
    prefix = next((p for p in LINKS if title.startswith(p)), None)
    if prefix is None or text is None:  # not a link, or unreadable: the gate's own finding
        return
    payload_type, unsigned_code, kind, stage = LINKS[prefix]
    name = envelope_name(title)
    data = envelopes.get(name)
    if data is None:
        refused = " and signed evidence is required: refused" if required else ""
        verdict.findings.add(
            unsigned_code,
            f"{where}{title} is NOT signed (no {name}): anyone who can write it can forge the {kind}; "
            f"sign it ({stage} --signing-key){refused}",
            severity=Severity.error if required else Severity.warning,
            image=image_id,
        )
        return
    try:
        verified = verify_record_envelope(
            data,
            trusted,
            where=f"{where}{name}",
            payload_type=payload_type,
            copy=text.encode("utf-8"),
            copy_name=title,
        )
    except SignatureError as exc:
        verdict.findings.add(exc.code, exc.one_line(), image=image_id)
        return
    verdict.signers[name] = verified.keyid


def _check_signed_sbom(
    verdict: SignedVerdict, judge: SignedCheck, data: bytes | None, sbom: str, named: str | None
) -> None:
    """The SBOM's own envelope, and whether the signed summary vouches for it (its sha256 there)."""
    trusted, required, image_id, where = judge.trusted, judge.required, judge.image_id, judge.where
    label = f"{where}{SBOM_ENVELOPE}"
    severity = Severity.error if required else Severity.warning
    refused = " and signed evidence is required: refused" if required else ""
    if data is None:
        verdict.findings.add(
            "SBOM_UNSIGNED",
            f"{where}{SBOM_FILE_NAME} is not signed (no {SBOM_ENVELOPE}){refused}",
            severity=severity,
            image=image_id,
        )
    else:
        try:
            verified = verify_envelope(data, trusted, where=label, payload_type=SBOM_PAYLOAD_TYPE)
        except SignatureError as exc:
            verdict.findings.add(exc.code, exc.one_line(), image=image_id)
            return
        verdict.signers[SBOM_ENVELOPE] = verified.keyid
        if verified.payload != sbom.encode("utf-8"):
            verdict.findings.add(
                "SIGNED_EVIDENCE_MISMATCH",
                f"{label}: the signed SBOM differs from the {SBOM_FILE_NAME} beside it",
                image=image_id,
            )
            return
    if named is None:
        verdict.findings.add(
            "SBOM_UNSIGNED",
            f"{where}the signed verification summary names no SBOM, so nothing vouches that "
            f"{SBOM_FILE_NAME} is the one verify-provenance wrote{refused}",
            severity=severity,
            image=image_id,
        )
