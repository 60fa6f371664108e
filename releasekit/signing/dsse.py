"""DSSE (Dead Simple Signing Envelope) v1: sign and verify a payload with its type.

The signature covers the pre-authentication encoding (PAE) of type and payload::

    "DSSEv1" SP LEN(type) SP type SP LEN(payload) SP payload

where LEN is the byte length in ASCII decimal and SP one space. The envelope is JSON:
``{"payload": b64, "payloadType": type, "signatures": [{"keyid": id, "sig": b64}]}``.
Payloads here are in-toto statements (``application/vnd.in-toto+json``).

Base64: this signer writes standard base64 with padding. The DSSE envelope specification
lets signers use either the standard or the URL-safe alphabet ("verifiers MUST accept
either") and says nothing of padding, so RFC 4648 applies (padding required). A verifier
here decodes strictly: one alphabet per value (standard, else URL-safe), padded, no
character outside the alphabet (``validate=True``), and the decoded bytes must encode back
to exactly the text given. Anything else (non-zero pad bits, missing or extra padding,
whitespace, mixed alphabets) is ``SIGNATURE_ENCODING``: the same bytes may have only one
spelling, so an envelope cannot be altered without its text changing.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass

from releasekit.errors import ReleasekitError
from releasekit.records.dsse import Envelope, EnvelopeSignature
from releasekit.signing.keys import Signer, TrustedKeys

PAYLOAD_TYPE = "application/vnd.in-toto+json"
ENVELOPE_MEDIA_TYPE = "application/vnd.dsse.envelope.v1+json"


class SignatureError(ReleasekitError):
    """An envelope that does not verify against the trusted keys: a check failure, exit 1."""

    exit_code = 1

    def __init__(self, message: str, *, code: str = "SIGNATURE_INVALID") -> None:
        super().__init__(message)
        self.code = code


def pae(payload_type: str, payload: bytes) -> bytes:
    kind = payload_type.encode("utf-8")
    return b"DSSEv1 %d %s %d %s" % (len(kind), kind, len(payload), payload)


def parse_envelope(data: bytes, where: str = "envelope") -> Envelope:
    try:
        return Envelope.from_bytes(data)
    except ValueError as exc:
        raise SignatureError(f"{where}: not a DSSE envelope ({exc})") from None


def sign_payload(signer: Signer, payload: bytes, payload_type: str = PAYLOAD_TYPE) -> Envelope:
    signature = signer.sign(pae(payload_type, payload))
    return Envelope(
        payload=base64.b64encode(payload).decode("ascii"),
        payload_type=payload_type,
        signatures=[EnvelopeSignature(keyid=signer.keyid, sig=base64.b64encode(signature).decode("ascii"))],
    )


_URLSAFE = bytes.maketrans(b"-_", b"+/")


def strict_b64decode(text: str) -> bytes | None:
    """The bytes of canonical, padded base64 (standard or URL-safe alphabet); None for anything else."""
    try:
        raw = text.encode("ascii")
    except UnicodeEncodeError:
        return None
    urlsafe = b"-" in raw or b"_" in raw
    if urlsafe and (b"+" in raw or b"/" in raw):
        return None  # one alphabet per value
    try:
        decoded = base64.b64decode(raw.translate(_URLSAFE) if urlsafe else raw, validate=True)
    except (binascii.Error, ValueError):
        return None
    again = base64.urlsafe_b64encode(decoded) if urlsafe else base64.b64encode(decoded)
    return decoded if again == raw else None


def _b64(text: str, what: str, where: str) -> bytes:
    decoded = strict_b64decode(text)
    if decoded is None:
        raise SignatureError(
            f"{where}: {what} is not canonical base64 (standard or URL-safe alphabet, padded, "
            "re-encoding to the same text)",
            code="SIGNATURE_ENCODING",
        )
    return decoded


@dataclass(frozen=True)
class Verified:
    payload: bytes
    payload_type: str
    keyid: str


def verify_envelope(
    data: bytes | Envelope,
    trusted: TrustedKeys,
    *,
    where: str = "envelope",
    payload_type: str = PAYLOAD_TYPE,
) -> Verified:
    """The payload, only if a signature by one of ``trusted`` verifies over PAE(type, payload).

    Raises SignatureError (one line) otherwise: ``SIGNER_UNTRUSTED`` when no signature names
    a trusted key, ``SIGNATURE_INVALID`` for everything else.
    """
    if not trusted:
        raise SignatureError(f"{where}: no trusted public key to verify with", code="SIGNER_UNTRUSTED")
    envelope = data if isinstance(data, Envelope) else parse_envelope(data, where)
    if envelope.payload_type != payload_type:
        raise SignatureError(f"{where}: payloadType is {envelope.payload_type!r}, expected {payload_type!r}")
    if not envelope.signatures:
        raise SignatureError(f"{where}: the envelope has no signature", code="SIGNATURE_MISSING")
    payload = _b64(envelope.payload, "payload", where)
    message = pae(envelope.payload_type, payload)
    tried: list[str] = []
    for signature in envelope.signatures:
        # A signature without a keyid may be by any trusted key; one with a keyid only by that key.
        candidates = [signature.keyid] if signature.keyid else trusted.keyids
        raw = _b64(signature.sig, "a signature", where)
        for keyid in candidates:
            if keyid not in trusted.keys:
                continue
            tried.append(keyid)
            if trusted.verify(keyid, raw, message):
                return Verified(payload=payload, payload_type=envelope.payload_type, keyid=keyid)
    if tried:
        raise SignatureError(
            f"{where}: the signature by trusted key {tried[0][:16]} does not verify (payload or signature altered)"
        )
    signers = ", ".join(s.keyid[:16] or "(no keyid)" for s in envelope.signatures)
    trusted_ids = ", ".join(k[:16] for k in trusted.keyids)
    raise SignatureError(
        f"{where}: signed by {signers}, which is not a trusted key (trusted: {trusted_ids})",
        code="SIGNER_UNTRUSTED",
    )
