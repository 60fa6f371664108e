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
"""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import BaseModel, Field

from releasekit.errors import InputError
from releasekit.findings import Findings
from releasekit.records.dsse import PROVENANCE_ENVELOPE_FILE as PROVENANCE_ENVELOPE
from releasekit.records.dsse import SUMMARY_ENVELOPE_FILE as SUMMARY_ENVELOPE
from releasekit.records.provenance import SLSA_PROVENANCE_V1 as SLSA_PROVENANCE
from releasekit.records.safe_io import TEXT_MAX_BYTES, read_bounded
from releasekit.signing import SignatureError, TrustedKeys, load_trusted_keys, verify_envelope
from releasekit.signing.statements import VERIFICATION_SUMMARY_TYPE, parse_statement

ENVELOPES = (PROVENANCE_ENVELOPE, SUMMARY_ENVELOPE)
CHECK_NAME = "signed evidence"


def local_envelopes(evidence_dir: Path) -> dict[str, bytes]:
    """The envelopes beside the evidence (a FIFO, a link out or an oversized one: exit 2, ``safe_io``)."""
    return {
        name: read_bounded(evidence_dir / name, TEXT_MAX_BYTES, within=evidence_dir)
        for name in ENVELOPES
        if os.path.lexists(evidence_dir / name)
    }


def trusted_keys(paths: list[Path], *, signed: bool, policy_signed: bool, what: str) -> TrustedKeys | None:
    """The keys from ``--trusted-key``; None when signatures are neither given, present nor required.

    Exit 2 (missing input) when the evidence is signed, or the release policy requires it,
    and no key to verify with was given.
    """
    if paths:
        return load_trusted_keys(paths)
    if policy_signed:
        raise InputError(f"{what}: the release policy requires signed evidence; pass --trusted-key FILE")
    if signed:
        raise InputError(f"{what}: the evidence is signed; pass --trusted-key FILE (the signer's public key)")
    return None


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
) -> SignedVerdict:
    verdict = SignedVerdict(checked=True)
    unsigned = {PROVENANCE_ENVELOPE: provenance, SUMMARY_ENVELOPE: summary}
    kinds = {PROVENANCE_ENVELOPE: SLSA_PROVENANCE, SUMMARY_ENVELOPE: VERIFICATION_SUMMARY_TYPE}
    for name in ENVELOPES:
        label = f"{where}{name}"
        data = envelopes.get(name)
        if data is None:
            verdict.findings.add(
                "SIGNATURE_MISSING", f"{label} is missing: the evidence is not signed", image=image_id
            )
            continue
        try:
            verified = verify_envelope(data, trusted, where=label)
            statement = parse_statement(verified.payload, label)
        except SignatureError as exc:
            verdict.findings.add(exc.code, exc.one_line(), image=image_id)
            continue
        verdict.signers[name] = verified.keyid
        if statement.predicateType != kinds[name]:
            verdict.findings.add(
                "SIGNED_EVIDENCE_MISMATCH",
                f"{label}: signed statement is a {statement.predicateType!r}, expected {kinds[name]!r}",
                image=image_id,
            )
            continue
        digests = statement.subject_digests()
        if image_id not in digests:
            verdict.findings.add(
                "SIGNED_SUBJECT_MISMATCH",
                f"{label}: signed for {', '.join(d[:19] for d in digests) or 'no digest'}, not for image {image_id[:19]}",
                image=image_id,
            )
            continue
        copy = unsigned[name]
        if copy is None:
            continue  # its absence is the gate's finding
        same = (
            verified.payload == copy.encode("utf-8")
            if name == PROVENANCE_ENVELOPE
            else statement.predicate_equals(copy)
        )
        if not same:
            verdict.findings.add(
                "SIGNED_EVIDENCE_MISMATCH",
                f"{label}: the signed statement differs from the unsigned {name.replace('.dsse', '')} beside it",
                image=image_id,
            )
    return verdict
