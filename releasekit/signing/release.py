"""``releasekit sign``: sign a release directory's evidence after verification ended, in a process of its own.

Issue 34: a process that runs git, Docker or a build must not hold the signing key (a program git runs
reads ``/proc/<ppid>/environ``). So build and verify-provenance write the statements unsigned and this
step, which starts no program at all, signs them: ``provenance.intoto.json``, ``verification_summary.json``
and ``sbom.cdx.json`` become ``*.dsse.json`` beside them. The links written later by other hosts are
signed the same way, by a ``sign`` step after the step that wrote them: ``staging.json`` (after
``stage``), ``receipts/<cell>.json`` (after ``validate -o DIR/receipts``) and
``tests/<component>.<suite>.json`` (after ``test``), each checked as its record, and about the image
the summary verified when the summary is there.

Every input is checked before the key is read: each file a regular file inside the directory, read once
and bounded; the provenance and the summary in-toto Statements about one image; the SBOM the one whose
sha256 the summary names, and the provenance the one the summary lists among its input attestations.
A summary that says FAILED is signed as well: it is what the verifier found, and the gate refuses it.
The key is then read (``load_key``), used, and dropped. An envelope already there that this key signed
over the same bytes is kept, so a second run writes nothing new (ECDSA signatures differ per run).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from releasekit.atomic import check_writable
from releasekit.bounded_read import RECORD_MAX_BYTES, read_bounded
from releasekit.errors import InputError
from releasekit.records.base import Record, RecordError, record_from_bytes
from releasekit.records.intoto import StatementError
from releasekit.records.intoto import parse_statement as parse_any_statement
from releasekit.records.provenance import PROVENANCE_FILE, SLSA_PROVENANCE_V1
from releasekit.records.receipt import RECEIPT_PAYLOAD_TYPE, Receipt
from releasekit.records.release_dir import RunRecord, refuse_mixed_runs, run_records
from releasekit.records.sbom import SBOM_FILE
from releasekit.records.staging import STAGING_FILE, STAGING_PAYLOAD_TYPE, StagingRecord
from releasekit.records.test_receipt import TEST_RECEIPT_PAYLOAD_TYPE, TESTS_DIR, TestReceipt
from releasekit.records.verification import VERIFICATION_SUMMARY_FILE, VerificationStatement
from releasekit.signing.dsse import PAYLOAD_TYPE, SignatureError, verify_envelope
from releasekit.signing.keys import Signer, TrustedKeys
from releasekit.signing.statements import ENVELOPE_SUFFIX, SBOM_PAYLOAD_TYPE, envelope_path, write_envelope

# What ``sign`` signs, in the order it signs them, with each envelope's payload type.
SIGNED_FILES: tuple[tuple[str, str], ...] = (
    (PROVENANCE_FILE, PAYLOAD_TYPE),
    (SBOM_FILE, SBOM_PAYLOAD_TYPE),
    (VERIFICATION_SUMMARY_FILE, PAYLOAD_TYPE),
)

# The links other steps write into the release directory: where, as which record, with which type, and
# their place in the chain, the order its links are written and signed: what verify-provenance wrote
# (0, SIGNED_FILES), then staging.json (1), then the receipts and test receipts (2). A link is signed
# only when every earlier link in the directory is signed already (issue 43): a sign step signs what
# the step before it wrote, never a whole directory someone may have rewritten since the earlier links
# were signed.
RECEIPTS_DIR = "receipts"
SIGNED_RECORDS: tuple[tuple[str, type[Record], str, int], ...] = (
    (STAGING_FILE, StagingRecord, STAGING_PAYLOAD_TYPE, 1),
    (f"{RECEIPTS_DIR}/*.json", Receipt, RECEIPT_PAYLOAD_TYPE, 2),
    (f"{TESTS_DIR}/*.json", TestReceipt, TEST_RECEIPT_PAYLOAD_TYPE, 2),
)
MAX_RECORD_FILES = 4096
LINK_NAMES = ("the verification's statements", STAGING_FILE, "the receipts and test receipts")


@dataclass(frozen=True)
class Evidence:
    """One file to sign: its exact bytes, read once, and its place in the chain (``SIGNED_RECORDS``)."""

    path: Path
    payload: bytes
    payload_type: str
    link: int = 0

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.payload).hexdigest()


@dataclass
class SignResult:
    directory: str
    image_id: str | None
    keyid: str = ""
    signed: list[str] = field(default_factory=list)  # envelopes written now
    kept: list[str] = field(default_factory=list)  # envelopes this key had already signed over the same bytes


def _read(directory: Path, name: str, payload_type: str, link: int = 0) -> Evidence | None:
    path = directory / name
    if not os.path.lexists(path):
        return None
    try:
        return Evidence(path, read_bounded(path, RECORD_MAX_BYTES, within=directory), payload_type, link)
    except OSError as exc:  # gone or unreadable since lexists; UnsafeFileError (exit 2) passes through
        raise InputError(f"cannot read {path}: {exc.strerror or exc}") from None


def _image_of_summary(summary: Evidence) -> tuple[str, VerificationStatement]:
    try:
        statement = record_from_bytes(VerificationStatement, summary.payload, str(summary.path))
    except RecordError as exc:
        raise InputError(f"{exc}; refusing to sign it") from None
    image_id = statement.predicate.resource_uri
    if not statement.names_image(image_id):
        raise InputError(
            f"{summary.path}: its subject is not the image it verified ({image_id[:19]}); refusing to sign it"
        )
    return image_id, statement


def _check_provenance(provenance: Evidence, image_id: str | None) -> None:
    try:
        statement = parse_any_statement(provenance.payload)
    except StatementError as exc:
        raise InputError(
            f"{provenance.path}: not an in-toto Statement v1 ({exc.reason}); refusing to sign it"
        ) from None
    if statement.predicateType != SLSA_PROVENANCE_V1:
        raise InputError(
            f"{provenance.path}: a {statement.predicateType!r} statement, not SLSA provenance; refusing to sign it"
        )
    if image_id is not None and image_id not in statement.subject_digests():
        raise InputError(
            f"{provenance.path}: not about image {image_id[:19]}, which the summary verified; refusing"
        )


def _cross_check(summary: VerificationStatement, found: dict[str, Evidence]) -> None:
    """The summary names what it verified by sha256: sign nothing that differs from it."""
    named_sbom = summary.predicate.sbom_sha256
    sbom = found.get(SBOM_FILE)
    if named_sbom is not None and (sbom is None or sbom.sha256 != named_sbom):
        what = "is missing" if sbom is None else f"has sha256 {sbom.sha256[:16]}"
        raise InputError(
            f"{SBOM_FILE} {what}; the verification summary names {named_sbom[:16]}; refusing to sign"
        )
    if named_sbom is None and sbom is not None:
        raise InputError(
            f"{SBOM_FILE} is there but the verification summary names no SBOM; refusing to sign it"
        )
    provenance = found.get(PROVENANCE_FILE)
    named = summary.predicate.input_attestations.get(PROVENANCE_FILE)
    if provenance is not None and named is not None and provenance.sha256 != named:
        raise InputError(
            f"{PROVENANCE_FILE} has sha256 {provenance.sha256[:16]}; the verification summary names "
            f"{named[:16]}; refusing to sign"
        )


def _record_files(where: Path, glob: str) -> list[Path]:
    """The files of the folder ``where`` matching ``glob``, envelopes left out (a link, a FIFO or a
    device among them is refused when read)."""
    if not os.path.lexists(where) or where.is_symlink() or not where.is_dir():
        return []  # a link or a file where the folder should be is not followed
    names = sorted(
        p.name
        for p in where.glob(glob)
        if not p.name.endswith(ENVELOPE_SUFFIX) and not p.name.startswith(".")
    )
    if len(names) > MAX_RECORD_FILES:
        raise InputError(f"{where}: more than {MAX_RECORD_FILES} files to sign")
    return [where / name for name in names]


def _check_record(evidence: Evidence, kind: type[Record], chain: RunRecord | None) -> None:
    """The file is the record it is named as, about the image and lock of the directory's chain (the
    summary, build.json, staging.json: whichever are there)."""
    try:
        record = record_from_bytes(kind, evidence.payload, str(evidence.path))
    except RecordError as exc:
        raise InputError(f"{exc.one_line()}; refusing to sign it") from None
    if chain is None:
        return
    about = getattr(record, "image_id", None)
    if about is not None and about != chain.image_id:
        raise InputError(
            f"{evidence.path}: about image {str(about)[:19]}, not {chain.image_id[:19]}, which "
            f"{chain.name} names; refusing to sign it"
        )
    lock = getattr(record, "lock_sha256", None)
    if lock is not None and lock != chain.lock_sha256:
        raise InputError(
            f"{evidence.path}: of lock {str(lock)[:12]}, not {chain.lock_sha256[:12]}, which {chain.name} "
            "names; refusing to sign it"
        )


def gather(directory: Path, receipts: Path | None = None) -> tuple[list[Evidence], str | None]:
    """Every statement and record to sign, checked; nothing signed, no key read. The receipts are
    those of ``receipts`` (by default ``DIR/receipts``)."""
    if not directory.is_dir() or directory.is_symlink():
        raise InputError(f"{directory} is not a release directory (not a directory)")
    found: dict[str, Evidence] = {}
    for name, payload_type in SIGNED_FILES:
        evidence = _read(directory, name, payload_type)
        if evidence is not None:
            found[name] = evidence
    records: list[tuple[Evidence, type[Record]]] = []
    for pattern, kind, payload_type, link in SIGNED_RECORDS:
        folder, _, glob = pattern.rpartition("/")
        where = directory / folder if folder else directory
        if folder == RECEIPTS_DIR and receipts is not None:
            where = receipts
        for path in _record_files(where, glob):
            evidence = _read(where, path.name, payload_type, link)
            if evidence is not None:
                records.append((evidence, kind))
    if not found and not records:
        names = ", ".join([name for name, _ in SIGNED_FILES] + [p for p, *_ in SIGNED_RECORDS])
        raise InputError(f"{directory}: nothing to sign (none of {names})")
    image_id = None
    if VERIFICATION_SUMMARY_FILE in found:
        image_id, summary = _image_of_summary(found[VERIFICATION_SUMMARY_FILE])
        _cross_check(summary, found)
    elif SBOM_FILE in found:
        raise InputError(
            f"{directory}: an SBOM without the verification summary that names it; refusing to sign"
        )
    if PROVENANCE_FILE in found:
        _check_provenance(found[PROVENANCE_FILE], image_id)
    # The links sign signs chain to one run: build.json, the summary and staging.json name one image and
    # lock (and staging.json this summary); every receipt and test receipt that image and lock.
    refuse_mixed_runs(directory)
    chain, _ = run_records(directory)
    for evidence, kind in records:
        _check_record(evidence, kind, chain[0] if chain else None)
    every = [*found.values(), *(evidence for evidence, _ in records)]
    for evidence in every:
        check_writable(envelope_path(evidence.path))
    return every, image_id


def _signed_by(evidence: Evidence, keys: TrustedKeys) -> bool:
    """The file's envelope is there and one of ``keys`` signed exactly these bytes."""
    target = envelope_path(evidence.path)
    if not keys.keys or not os.path.lexists(target):
        return False
    try:
        data = read_bounded(target, RECORD_MAX_BYTES, within=evidence.path.parent)
        verified = verify_envelope(data, keys, where=str(target), payload_type=evidence.payload_type)
    except (SignatureError, InputError, OSError):
        return False  # whatever is there is replaced
    return verified.payload == evidence.payload


def _in_order(new: list[Evidence]) -> None:
    """Refuse to sign a link while an earlier link of the chain in the directory is not signed yet."""
    if not new:
        return
    latest = max(item.link for item in new)
    unsigned = sorted(item.path.name for item in new if item.link < latest)
    if unsigned:
        raise InputError(
            f"{', '.join(unsigned)} not signed (or not these bytes) while {LINK_NAMES[latest]} would be: "
            "each link is signed after the step that wrote it, never later beside a later one; "
            "refusing to sign anything"
        )


def sign_release(
    directory: Path,
    load_key: Callable[[], Signer],
    *,
    receipts: Path | None = None,
    trusted: TrustedKeys | None = None,
) -> SignResult:
    """Check the directory's evidence, then read the key and sign each link not signed yet, in the
    chain's order: an earlier link must be signed already, by this key or one of ``trusted`` (another
    host's), for a later one to be signed."""
    evidence, image_id = gather(directory, receipts)
    signer = load_key()  # only now: every input has been checked
    accepted = TrustedKeys(dict(trusted.keys) if trusted else {})
    accepted.add(signer.public_key)
    # Signed already, by this key or a trusted one (another host's), over these bytes: kept as it is.
    done = {item.path for item in evidence if _signed_by(item, accepted)}
    new = [item for item in evidence if item.path not in done]
    _in_order(new)
    result = SignResult(directory=str(directory), image_id=image_id, keyid=signer.keyid)
    result.kept = [envelope_path(item.path).name for item in evidence if item.path in done]
    for item in new:
        target = envelope_path(item.path)
        write_envelope(signer, item.payload, target, item.payload_type)
        result.signed.append(target.name)
    return result
