"""Checking signed evidence, for every stage that takes it in (stage, publish, promote).

``trusted_keys`` turns ``--trusted-key`` into the keys to verify with (or says that none are
needed); ``verify_statement_envelope`` checks one envelope over an in-toto Statement: a trusted
signature, the expected predicate type, the image as its subject, and the unsigned copy beside it
byte for byte. Each failure is a :class:`SignatureError` carrying its finding code.

``verify_record_envelope`` checks an envelope over a record file (staging.json, a receipt, a test
receipt): a trusted signature, the record's payload type, the file beside it byte for byte.
``read_signed_staging`` is how every reader of ``staging.json`` (a GPU host's ``validate`` /
``test --staged``, ``publish --staged``) takes it in: verified before a single field is used.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from releasekit.bounded_read import TEXT_MAX_BYTES, read_bounded
from releasekit.errors import InputError
from releasekit.records.base import record_from_bytes
from releasekit.records.staging import STAGING_ENVELOPE_FILE, STAGING_PAYLOAD_TYPE, StagingRecord
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


def verify_record_envelope(
    data: bytes, trusted: TrustedKeys, *, where: str, payload_type: str, copy: bytes, copy_name: str
) -> Verified:
    """The verified envelope over a record file's exact bytes. ``SignatureError`` codes: those of
    ``verify_envelope`` (another payload type is ``SIGNATURE_INVALID``) and
    ``SIGNED_EVIDENCE_MISMATCH`` (the file beside it is not the signed one)."""
    verified = verify_envelope(data, trusted, where=where, payload_type=payload_type)
    if verified.payload != copy:
        raise SignatureError(
            f"{where}: the signed record differs from the {copy_name} beside it (edited after signing)",
            code="SIGNED_EVIDENCE_MISMATCH",
        )
    return verified


@dataclass(frozen=True)
class SignedStaging:
    record: StagingRecord
    signer: str | None  # the keyid whose signature verified; None: unsigned, and that was allowed
    warning: str | None  # said on stderr when it is unsigned and accepted


def read_signed_staging(
    path: Path, trusted_key_files: list[Path], *, required: bool, what: str
) -> SignedStaging:
    """``staging.json``, its bytes read once and checked against ``staging.dsse.json`` beside it.

    Refused (``SignatureError``, exit 1, the finding's code leading its one line): unsigned when
    signed evidence is required (``STAGING_UNSIGNED``), a trusted key given and no envelope
    (``STAGING_UNSIGNED``), an edited file (``SIGNED_EVIDENCE_MISMATCH``), another key
    (``SIGNER_UNTRUSTED``). Signed and no key given: missing input, exit 2.
    """
    directory = path.parent
    try:
        raw = read_bounded(path, StagingRecord.max_bytes, within=directory)
    except FileNotFoundError:
        raise InputError(f"{path}: no such file (expected {StagingRecord.schema_version()})") from None
    envelope_path = directory / STAGING_ENVELOPE_FILE
    envelope = (
        read_bounded(envelope_path, TEXT_MAX_BYTES, within=directory)
        if os.path.lexists(envelope_path)
        else None
    )
    trusted = trusted_keys(trusted_key_files, signed=envelope is not None, required=required, what=what)
    signer: str | None = None
    warning: str | None = None
    try:
        if envelope is None:
            if required or trusted is not None:
                refused = "signed evidence is required" if required else "a trusted key was given"
                raise SignatureError(
                    f"{what}: {path} is not signed (no {STAGING_ENVELOPE_FILE}) and {refused}: refused",
                    code="STAGING_UNSIGNED",
                )
            warning = (
                f"warning: STAGING_UNSIGNED: {path} is NOT signed: anyone who can write it can point this "
                "host at another image; sign it (stage --signing-key) and pass --trusted-key, or "
                "--require-signed to refuse this"
            )
        elif trusted is not None:
            signer = verify_record_envelope(
                envelope,
                trusted,
                where=f"{what}: {envelope_path}",
                payload_type=STAGING_PAYLOAD_TYPE,
                copy=raw,
                copy_name=path.name,
            ).keyid
    except SignatureError as exc:
        raise SignatureError(f"{exc.code}: {exc.one_line()}", code=exc.code) from None
    return SignedStaging(
        record=record_from_bytes(StagingRecord, raw, str(path)), signer=signer, warning=warning
    )
