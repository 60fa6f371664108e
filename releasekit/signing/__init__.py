"""Signed evidence: DSSE envelopes over in-toto statements, and the keys that sign them.

Stage-neutral: it imports only ``errors``, ``findings``, ``records`` and third-party
libraries, so every stage (build, provenance, publish) can use it.
"""

from releasekit.signing.dsse import (
    PAYLOAD_TYPE,
    Envelope,
    SignatureError,
    Verified,
    pae,
    sign_payload,
    verify_envelope,
)
from releasekit.signing.keys import (
    ENV_KEY,
    ENV_KEY_FILE,
    Signer,
    TrustedKeys,
    keyid_of,
    load_signer,
    load_trusted_keys,
)

__all__ = [
    "ENV_KEY",
    "ENV_KEY_FILE",
    "PAYLOAD_TYPE",
    "Envelope",
    "SignatureError",
    "Signer",
    "TrustedKeys",
    "Verified",
    "keyid_of",
    "load_signer",
    "load_trusted_keys",
    "pae",
    "sign_payload",
    "verify_envelope",
]
