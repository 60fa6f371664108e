"""``publish.json``: what ``publish`` pushed, where, under which tags, and the gate's verdict.

Written by the publish stage into its output directory after a successful push. The full gate
report (with every receipt) travels as ``gate.json`` in the image's attachments; this record
keeps the verdict per check and every finding.
"""

from __future__ import annotations

from typing import Final, Literal

from pydantic import Field

from releasekit.findings import Findings
from releasekit.records.base import Record, Strict

PUBLISH_FILE: Final = "publish.json"
PUBLISH_SCHEMA: Final = "releasekit.publish/v1"


class GateCheckOutcome(Strict):
    name: str
    passed: bool
    findings: Findings = Field(default_factory=Findings)


class GateOutcome(Strict):
    passed: bool
    checks: list[GateCheckOutcome] = Field(default_factory=list)
    findings: Findings = Field(default_factory=Findings)
    cells: list[str] = Field(default_factory=list)  # cells whose receipts the gate accepted


class AttachmentRecord(Strict):
    tag: str
    digest: str
    files: list[str]


class SignedAttachmentRecord(Strict):
    """The DSSE envelopes attached to the pushed digest, and how a verifier finds them."""

    digest: str  # the artifact manifest's digest
    method: Literal["referrers-api", "tag-fallback"]
    tag: str | None = None  # the fallback tag, when that is how it can be found
    files: list[str]


class Published(Strict):
    """What a publish did: shared by the stage's result and by ``publish.json``."""

    published: bool
    image_id: str
    lock_sha256: str
    repository: str
    tags: list[str]
    digest: str | None = None
    staging_tag: str | None = None
    attachment: AttachmentRecord | None = None
    moved_tags: dict[str, str] = Field(default_factory=dict)  # tag -> the digest it pointed at before
    release_notes: str | None = None  # path of the RELEASE.md written
    signed: SignedAttachmentRecord | None = None  # the DSSE envelopes, and whether referrers API or .att tag
    signers: dict[str, str] = Field(default_factory=dict)  # envelope -> keyid that verified


class PublishRecord(Record, Published):
    kind = "publish record"

    schema_: Literal["releasekit.publish/v1"] = Field(default=PUBLISH_SCHEMA, alias="schema")
    gate: GateOutcome
