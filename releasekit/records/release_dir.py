"""One run per release directory (issue 44): which files each stage owns there, and the readers' check
that the records they find belong to one run.

A stage that writes a release directory commits its files with ``atomic.commit_run``: its own
earlier files and the later stages' records (``replaced_by``) go in the same step as its new ones
come in. The records of the build host's chain (``build.json``, ``verification_summary.json``,
``staging.json``, ``published/publish.json``) each name the image and the lock they belong to;
``refuse_mixed_runs`` is how a reader (stage, publish) refuses a directory where two of them
disagree: one line, exit 2, naming both files. Test and validation receipts are not removed by a
rerun: each names its image and lock, and the publish gate refuses one of another image or lock
(``TEST_RECEIPT_FOR_OTHER_IMAGE``, ``RECEIPT_WRONG_IMAGE``, ...), so GPU receipts of the same
image survive a rebuild that gave the same image.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from releasekit.bounded_read import UnsafeFileError, read_bounded
from releasekit.errors import InputError
from releasekit.records.archive import ARCHIVE_DIR, ARCHIVE_FILE
from releasekit.records.base import RecordError, record_from_bytes
from releasekit.records.build import BUILD_FILE, RELEASE_NOTES_FILE, BuildRecord
from releasekit.records.dsse import PROVENANCE_ENVELOPE_FILE, SBOM_ENVELOPE_FILE, SUMMARY_ENVELOPE_FILE
from releasekit.records.provenance import PROVENANCE_FILE
from releasekit.records.publish import PUBLISH_FILE, PublishRecord
from releasekit.records.sbom import SBOM_FILE
from releasekit.records.staging import STAGING_ENVELOPE_FILE, STAGING_FILE, StagingRecord
from releasekit.records.verification import VERIFICATION_SUMMARY_FILE, VerificationStatement

PUBLISHED_DIR: Final = "published"  # publish's default output directory, inside the evidence directory

# What each stage of the build host's chain writes into the release directory, in pipeline order.
STAGE_FILES: Final[dict[str, tuple[str, ...]]] = {
    "build": (
        BUILD_FILE,
        PROVENANCE_FILE,
        PROVENANCE_ENVELOPE_FILE,
        RELEASE_NOTES_FILE,
        "Dockerfile",
        "image.tar",
        ARCHIVE_FILE,
        ARCHIVE_DIR,
        "wheels",
        "logs",
    ),
    "verify-provenance": (VERIFICATION_SUMMARY_FILE, SUMMARY_ENVELOPE_FILE, SBOM_FILE, SBOM_ENVELOPE_FILE),
    "stage": (STAGING_FILE, STAGING_ENVELOPE_FILE),
    "publish": (PUBLISHED_DIR,),
}


def replaced_by(stage: str, *, own: bool = True) -> list[str]:
    """The names a run of ``stage`` removes when it commits: its own earlier files (``own``) and every
    later stage's records."""
    stages = list(STAGE_FILES)
    at = stages.index(stage)
    return [name for s in stages[at if own else at + 1 :] for name in STAGE_FILES[s]]


@dataclass(frozen=True)
class RunRecord:
    """One record of the chain as a reader compares it: the file, and the run it says it belongs to."""

    name: str
    image_id: str
    lock_sha256: str

    def said(self) -> str:
        return f"{self.name} is about image {self.image_id[:19]} and lock {self.lock_sha256[:12]}"


def _raw(path: Path, limit: int, within: Path) -> bytes | None:
    try:
        return read_bounded(path, limit, within=within)
    except (OSError, UnsafeFileError):
        return None  # absent or unusable: the reader of that file says so in its own terms


_RECORDS: Final = (
    ("build", BUILD_FILE, BuildRecord),
    ("verify-provenance", VERIFICATION_SUMMARY_FILE, VerificationStatement),
    ("stage", STAGING_FILE, StagingRecord),
    ("publish", f"{PUBLISHED_DIR}/{PUBLISH_FILE}", PublishRecord),
)


def run_records(directory: Path, *, before: str | None = None) -> tuple[list[RunRecord], str | None]:
    """The chain's records in ``directory`` that parse, in pipeline order (those of the stages before
    ``before``, when given: a stage does not judge the files it is about to replace), and which
    summary (sha256) ``staging.json`` says it staged, when there is one. A file that is absent or not
    its record is left out: its own reader refuses it, in its own terms."""
    found: list[RunRecord] = []
    staged_summary: str | None = None
    stages = list(STAGE_FILES)
    for stage, name, model in _RECORDS:
        if before is not None and stages.index(stage) >= stages.index(before):
            break
        raw = _raw(directory / name, model.max_bytes, directory)
        if raw is None:
            continue
        try:
            record = record_from_bytes(model, raw, str(directory / name))
        except RecordError:
            continue
        if isinstance(record, VerificationStatement):
            found.append(RunRecord(name, record.summary.resource_uri, record.summary.lock_sha256))
        elif isinstance(record, BuildRecord | StagingRecord | PublishRecord):
            found.append(RunRecord(name, record.image_id, record.lock_sha256))
            if isinstance(record, StagingRecord):
                staged_summary = record.verification_summary_sha256
    return found, staged_summary


def refuse_mixed_runs(directory: Path, *, before: str | None = None) -> None:
    """Exit 2 (one line naming both files) when two records of the chain in ``directory`` (of the
    stages before ``before``) belong to different runs: another image or another lock, or a
    ``staging.json`` that staged another summary."""
    found, staged_summary = run_records(directory, before=before)
    for earlier, later in zip(found, found[1:], strict=False):
        if (earlier.image_id, earlier.lock_sha256) != (later.image_id, later.lock_sha256):
            raise InputError(
                f"{directory}: records of two runs: {later.said()}, {earlier.said()}",
                hint=f"rerun the stage that wrote {later.name}, or remove it",
            )
    if staged_summary is None:
        return
    raw = _raw(directory / VERIFICATION_SUMMARY_FILE, VerificationStatement.max_bytes, directory)
    if raw is not None and hashlib.sha256(raw).hexdigest() != staged_summary:
        raise InputError(
            f"{directory}: records of two runs: {STAGING_FILE} staged verification summary "
            f"{staged_summary[:12]}, {VERIFICATION_SUMMARY_FILE} is {hashlib.sha256(raw).hexdigest()[:12]}",
            hint=f"rerun stage, or remove {STAGING_FILE}",
        )
