"""Checking signed evidence, for every stage that takes it in (stage, publish, promote).

``trusted_keys`` turns ``--trusted-key`` into the keys to verify with (or says that none are
needed); ``verify_statement_envelope`` checks one envelope over an in-toto Statement: a trusted
signature, the expected predicate type, the image as its subject, and the unsigned copy beside it
byte for byte. Each failure is a :class:`SignatureError` carrying its finding code.
"""

from __future__ import annotations

from pathlib import Path

from releasekit.errors import InputError
from releasekit.signing.dsse import SignatureError, Verified, verify_envelope
from releasekit.signing.keys import TrustedKeys, load_trusted_keys
from releasekit.signing.statements import parse_statement


def trusted_keys(paths: list[Path], *, signed: bool, required: bool, what: str) -> TrustedKeys | None:
    """The keys from ``--trusted-key``; None when none were given and the evidence is unsigned.

    Exit 2 (missing input) when the evidence is signed and no key to verify it with was given
    (``required``, for the message: signatures are required by --require-signed or the policy).
    """
    if paths:
        return load_trusted_keys(paths)
    if signed:
        why = (
            "signed evidence is required and the evidence is signed" if required else "the evidence is signed"
        )
        raise InputError(f"{what}: {why}; pass --trusted-key FILE (the signer's public key)")
    return None


def verify_statement_envelope(
    data: bytes,
    trusted: TrustedKeys,
    *,
    where: str,
    predicate_type: str,
    image_id: str,
    copy: bytes | None,
    copy_name: str,
) -> Verified:
    """The verified envelope over a Statement about ``image_id``; ``copy``: the unsigned file's bytes
    (None: absent, which is the caller's finding). ``SignatureError`` codes: those of
    ``verify_envelope``, ``SIGNED_EVIDENCE_MISMATCH`` (another predicate type, or the copy differs)
    and ``SIGNED_SUBJECT_MISMATCH`` (signed for another image)."""
    verified = verify_envelope(data, trusted, where=where)
    statement = parse_statement(verified.payload, where)
    if statement.predicateType != predicate_type:
        raise SignatureError(
            f"{where}: signed statement is a {statement.predicateType!r}, expected {predicate_type!r}",
            code="SIGNED_EVIDENCE_MISMATCH",
        )
    digests = statement.subject_digests()
    if image_id not in digests:
        raise SignatureError(
            f"{where}: signed for {', '.join(d[:19] for d in digests) or 'no digest'}, not for image {image_id[:19]}",
            code="SIGNED_SUBJECT_MISMATCH",
        )
    if copy is not None and verified.payload != copy:  # both files are statements: signed byte for byte
        raise SignatureError(
            f"{where}: the signed statement differs from the unsigned {copy_name} beside it",
            code="SIGNED_EVIDENCE_MISMATCH",
        )
    return verified
