"""Sign the release directory's statements into ``*.dsse.json`` envelopes beside them.

``provenance.intoto.json`` and ``verification_summary.json`` are in-toto Statements (the
summary's predicate is SLSA VSA v1, its subject the image it verified): each file's exact
bytes are its envelope's payload. Both files stay as they are; the envelopes are added.
The statement and envelope models are ``releasekit.records.intoto`` and ``releasekit.records.dsse``.

``sbom.cdx.json`` is CycloneDX, not a statement: ``sbom.cdx.dsse.json`` signs its exact bytes with
the CycloneDX media type as the payload type (``SBOM_PAYLOAD_TYPE``). What binds it to the image is
the document itself (its serial number and subject name the image ID) and the signed summary,
which names its sha256.

The chain's other links are records, signed the same way by the host that wrote them (the file's
exact bytes, a payload type of their own so that one cannot stand in for another):
``staging.json`` -> ``staging.dsse.json`` (``stage``), ``receipts/<cell>.json`` ->
``receipts/<cell>.dsse.json`` (``validate``), ``tests/<component>.<suite>.json`` ->
``tests/<component>.<suite>.dsse.json`` (``test``). Each file must parse as its record before it
is signed. What binds them to the image is their own content (``image_id``), which the verifier
reads only from the signed bytes' unsigned copy, checked byte for byte.
"""

from __future__ import annotations

from pathlib import Path

from releasekit.atomic import check_writable, write_atomic
from releasekit.bounded_read import RECORD_MAX_BYTES, read_bounded
from releasekit.records.base import Record, RecordError, record_from_bytes
from releasekit.records.dsse import ENVELOPE_SUFFIX, envelope_name
from releasekit.records.intoto import STATEMENT_TYPE, VERIFICATION_SUMMARY_TYPE, AnyStatement, StatementError
from releasekit.records.intoto import parse_statement as parse_any_statement
from releasekit.records.receipt import RECEIPT_PAYLOAD_TYPE, Receipt
from releasekit.records.reproduce_receipt import REPRODUCE_RECEIPT_PAYLOAD_TYPE, ReproduceReceipt
from releasekit.records.sbom import SBOM_MEDIA
from releasekit.records.staging import STAGING_PAYLOAD_TYPE, StagingRecord
from releasekit.records.test_receipt import TEST_RECEIPT_PAYLOAD_TYPE, TestReceipt
from releasekit.signing.dsse import PAYLOAD_TYPE, SignatureError, sign_payload
from releasekit.signing.keys import Signer

SBOM_PAYLOAD_TYPE = SBOM_MEDIA

__all__ = [
    "ENVELOPE_SUFFIX",
    "SBOM_PAYLOAD_TYPE",
    "STATEMENT_TYPE",
    "VERIFICATION_SUMMARY_TYPE",
    "envelope_path",
    "parse_statement",
    "sign_receipt_file",
    "sign_reproduce_receipt_file",
    "sign_sbom_file",
    "sign_staging_file",
    "sign_statement_file",
    "sign_summary_file",
    "sign_test_receipt_file",
    "write_envelope",
]

_WHY = {
    "not-json": "the signed payload is not JSON",
    "not-statement": "the signed payload is not an in-toto Statement v1",
    "no-subject": "the signed statement has no subject",
}


def envelope_path(statement_file: Path) -> Path:
    """``provenance.intoto.json`` -> ``provenance.intoto.dsse.json``."""
    return statement_file.with_name(envelope_name(statement_file.name))


def write_envelope(
    signer: Signer | None, payload: bytes, path: Path, payload_type: str = PAYLOAD_TYPE
) -> Path | None:
    """Sign ``payload`` into ``path`` (``atomic.write_atomic``: a symbolic link or other non-regular file
    there is refused, never written through); with no signer, remove a stale envelope there instead
    (a planted link is removed, not followed)."""
    check_writable(path)
    if signer is None:
        path.unlink(missing_ok=True)
        return None
    write_atomic(path, sign_payload(signer, payload, payload_type).to_json())
    return path


def _statement_bytes(path: Path) -> bytes:
    return read_bounded(path, RECORD_MAX_BYTES, within=path.parent)


def sign_statement_file(signer: Signer | None, statement_file: Path) -> Path | None:
    """``X.json`` (an in-toto Statement) -> ``X.dsse.json`` signed by ``signer``."""
    return write_envelope(signer, _statement_bytes(statement_file), envelope_path(statement_file))


def sign_summary_file(signer: Signer | None, summary_file: Path, image_id: str) -> Path | None:
    """``verification_summary.json`` (a Statement about ``image_id``) -> its envelope, the file's bytes signed."""
    if signer is None:
        return write_envelope(None, b"", envelope_path(summary_file))
    payload = _statement_bytes(summary_file)
    try:
        statement = parse_any_statement(payload)
    except StatementError as exc:
        raise SignatureError(f"{summary_file.name}: {_WHY[exc.reason]}; refusing to sign it") from None
    if image_id not in statement.subject_digests():
        raise SignatureError(f"{summary_file.name} is not about {image_id}; refusing to sign it")
    return write_envelope(signer, payload, envelope_path(summary_file))


def sign_sbom_file(signer: Signer | None, sbom_file: Path) -> Path | None:
    """``sbom.cdx.json`` -> ``sbom.cdx.dsse.json``: its exact bytes signed (no signer: a stale envelope removed)."""
    if signer is None:
        return write_envelope(None, b"", envelope_path(sbom_file))
    return write_envelope(signer, _statement_bytes(sbom_file), envelope_path(sbom_file), SBOM_PAYLOAD_TYPE)


def _sign_record_file(
    signer: Signer | None, record_file: Path, kind: type[Record], payload_type: str
) -> Path | None:
    """The record file's exact bytes signed into ``X.dsse.json`` (no signer: a stale envelope removed)."""
    if signer is None:
        return write_envelope(None, b"", envelope_path(record_file))
    payload = read_bounded(record_file, kind.max_bytes, within=record_file.parent)
    try:
        record_from_bytes(kind, payload, str(record_file))
    except RecordError as exc:
        raise SignatureError(f"{exc.one_line()}; refusing to sign it") from None
    return write_envelope(signer, payload, envelope_path(record_file), payload_type)


def sign_staging_file(signer: Signer | None, staging_file: Path) -> Path | None:
    """``staging.json`` -> ``staging.dsse.json``, signed by the host that staged the candidate."""
    return _sign_record_file(signer, staging_file, StagingRecord, STAGING_PAYLOAD_TYPE)


def sign_receipt_file(signer: Signer | None, receipt_file: Path) -> Path | None:
    """``receipts/<cell>.json`` -> ``receipts/<cell>.dsse.json``, signed by the host that validated."""
    return _sign_record_file(signer, receipt_file, Receipt, RECEIPT_PAYLOAD_TYPE)


def sign_test_receipt_file(signer: Signer | None, receipt_file: Path) -> Path | None:
    """``tests/<component>.<suite>.json`` -> its ``.dsse.json``, signed by the host that ran the suite."""
    return _sign_record_file(signer, receipt_file, TestReceipt, TEST_RECEIPT_PAYLOAD_TYPE)


def sign_reproduce_receipt_file(signer: Signer, receipt_file: Path) -> Path | None:
    """A reproduce receipt -> its ``.dsse.json`` beside it, signed by the reproducer's own key."""
    return _sign_record_file(signer, receipt_file, ReproduceReceipt, REPRODUCE_RECEIPT_PAYLOAD_TYPE)


def parse_statement(payload: bytes, where: str) -> AnyStatement:
    """The statement a verified envelope carries; a :class:`SignatureError` (one line) when it is none."""
    try:
        return parse_any_statement(payload)
    except StatementError as exc:
        raise SignatureError(f"{where}: {_WHY[exc.reason]}") from None
