"""``staging.json``: the verified candidate as the staging registry holds it, by digest.

``releasekit stage`` writes it on the build host after ``verify-provenance`` passed: the image
ID that was verified, the registry repository it was pushed to, and the manifest digest the
registry holds it under (read back: its config digest is the image ID and every blob is
there). GPU hosts pull ``reference`` (``REGISTRY/REPO@sha256:…``) and refuse an image whose ID
is not ``image_id``; ``publish --staged`` copies exactly that digest into the release repository.
The tag (``lock-<lock sha256>``) only keeps the registry from collecting the manifest; nothing
reads an image by it.
"""

from __future__ import annotations

from typing import Final, Literal

from pydantic import Field

from releasekit.records.base import Record

STAGING_FILE: Final = "staging.json"
# ``staging.dsse.json``: the host that staged signs staging.json's exact bytes (``releasekit.signing``).
STAGING_ENVELOPE_FILE: Final = "staging.dsse.json"
STAGING_PAYLOAD_TYPE: Final = "application/vnd.releasekit.staging+json"
STAGING_SCHEMA: Final = "releasekit.staging/v1"


class StagingRecord(Record):
    kind = "staging record"

    schema_: Literal["releasekit.staging/v1"] = Field(default=STAGING_SCHEMA, alias="schema")
    image_id: str  # the verified image's ID (sha256 of its config)
    lock_sha256: str
    registry: str  # host[:port]
    repository: str  # the repository path in that registry
    digest: str  # the manifest digest the registry holds the image under
    tag: str  # lock-<lock sha256>: keeps the manifest from being garbage-collected, never read
    media_type: str
    verification_summary_sha256: str  # the summary that said PASSED for image_id

    @property
    def reference(self) -> str:
        return f"{self.registry}/{self.repository}@{self.digest}"


def staging_tag(lock_sha256: str) -> str:
    return f"lock-{lock_sha256}"
