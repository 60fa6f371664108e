"""The reproduce receipt: what ``releasekit reproduce --receipt FILE`` found, for ``promote --reproduced``.

One independent rebuild of a published digest from its attached source archive alone: which
digest and image it examined, the image it rebuilt, whether every layer was the same, the lock
and manifest the build named, and which machine did each. ``releasekit sign --reproduce-receipt
FILE`` signs its exact bytes into ``FILE`` minus ``.json`` plus ``.dsse.json``, with a payload type
of its own (``REPRODUCE_RECEIPT_PAYLOAD_TYPE``), so that no other signed record can stand in for it.

It holds no time: the same reproduction on the same runner writes the same bytes.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path
from typing import Final, Literal

from pydantic import Field

from releasekit.records.base import Record, Strict, load_record, write_record

REPRODUCE_RECEIPT_SCHEMA: Final = "releasekit.reproduce-receipt/v1"
REPRODUCE_RECEIPT_PAYLOAD_TYPE: Final = "application/vnd.releasekit.reproduce-receipt+json"
# The machine's name for a build or a reproduction: ``--runner``, else the CI runner's name, else the host.
RUNNER_ENV: Final = "RUNNER_NAME"


def runner_identity(given: str | None = None) -> str:
    """``given`` (``--runner NAME``), else ``$RUNNER_NAME`` (GitHub Actions names every runner), else the hostname."""
    return given or os.environ.get(RUNNER_ENV) or socket.gethostname()


class ReproducedBuild(Strict):
    """The build the published digest came from, as its attached evidence names it."""

    lock_sha256: str  # archive.json's, checked against the archived lock
    manifest_sha256: str
    provenance_sha256: str  # of the provenance statement the rebuild started from
    runner: str | None  # the provenance's internalParameters.runner (None: the build recorded none)


class ReproduceExamined(Strict):
    layers: int  # layers compared
    archive_files: int  # source archive files verified before the rebuild


class ReproduceReceipt(Record):
    kind = "reproduce receipt"

    schema_: Literal["releasekit.reproduce-receipt/v1"] = Field(
        default=REPRODUCE_RECEIPT_SCHEMA, alias="schema"
    )
    digest: str  # REGISTRY/REPO@sha256:... that was reproduced
    published_image_id: str
    rebuilt_image_id: str
    reproduced: bool  # the rebuilt image ID is the published one and every layer is the same
    build: ReproducedBuild
    reproducer: str  # runner_identity() of the machine that rebuilt it
    examined: ReproduceExamined

    def digest_only(self) -> str:
        """``sha256:...`` of ``digest``."""
        return self.digest.rpartition("@")[2]

    def write(self, path: Path) -> None:
        write_record(self, path)


def read_reproduce_receipt(path: Path) -> ReproduceReceipt:
    return load_record(ReproduceReceipt, path)
