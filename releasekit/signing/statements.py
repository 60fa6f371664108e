"""Sign the release directory's statements into ``*.dsse.json`` envelopes beside them.

``provenance.intoto.json`` is already an in-toto Statement: its bytes are the payload.
``verification_summary.json`` is a SLSA verification summary body: its envelope's payload
is an in-toto Statement whose ``predicate`` is that file's JSON, unchanged, and whose
subject is the image it verified. Both files stay as they are; the envelopes are added.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from releasekit.signing.dsse import PAYLOAD_TYPE, SignatureError, sign_payload
from releasekit.signing.keys import Signer

STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
VERIFICATION_SUMMARY_TYPE = "https://slsa.dev/verification_summary/v1"
ENVELOPE_SUFFIX = ".dsse.json"


def envelope_path(statement_file: Path) -> Path:
    """``provenance.intoto.json`` -> ``provenance.intoto.dsse.json``."""
    return statement_file.with_name(statement_file.name.removesuffix(".json") + ENVELOPE_SUFFIX)


def summary_statement(image_id: str, summary: bytes, name: str | None = None) -> bytes:
    """The in-toto Statement that carries a verification summary (its JSON as the predicate)."""
    statement = {
        "_type": STATEMENT_TYPE,
        "subject": [{"name": name or image_id, "digest": {"sha256": image_id.removeprefix("sha256:")}}],
        "predicateType": VERIFICATION_SUMMARY_TYPE,
        "predicate": json.loads(summary),
    }
    return (json.dumps(statement, indent=2, sort_keys=True) + "\n").encode("utf-8")


def write_envelope(signer: Signer | None, payload: bytes, path: Path) -> Path | None:
    """Sign ``payload`` into ``path``; with no signer, remove a stale envelope there instead."""
    if signer is None:
        path.unlink(missing_ok=True)
        return None
    path.write_bytes(sign_payload(signer, payload, PAYLOAD_TYPE).to_json())
    return path


def sign_statement_file(signer: Signer | None, statement_file: Path) -> Path | None:
    """``X.json`` (an in-toto Statement) -> ``X.dsse.json`` signed by ``signer``."""
    return write_envelope(signer, statement_file.read_bytes(), envelope_path(statement_file))


def sign_summary_file(signer: Signer | None, summary_file: Path, image_id: str) -> Path | None:
    payload = summary_statement(image_id, summary_file.read_bytes()) if signer is not None else b""
    return write_envelope(signer, payload, envelope_path(summary_file))


def parse_statement(payload: bytes, where: str) -> dict[str, Any]:
    try:
        statement = json.loads(payload)
    except ValueError:
        raise SignatureError(f"{where}: the signed payload is not JSON") from None
    if not isinstance(statement, dict) or statement.get("_type") != STATEMENT_TYPE:
        raise SignatureError(f"{where}: the signed payload is not an in-toto Statement v1")
    subjects = statement.get("subject")
    if not isinstance(subjects, list) or not subjects:
        raise SignatureError(f"{where}: the signed statement has no subject")
    return statement


def subject_digests(statement: dict[str, Any]) -> list[str]:
    """Every subject's sha256, as ``sha256:<hex>``."""
    out: list[str] = []
    for subject in statement.get("subject") or []:
        digest = (subject.get("digest") or {}).get("sha256") if isinstance(subject, dict) else None
        if isinstance(digest, str):
            out.append("sha256:" + digest)
    return out
