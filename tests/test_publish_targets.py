"""A second publish target in one file: an in-memory one, registered in ``TARGETS``, runs publish and
promote end to end (the gate, the attachments, the tags, promote's second gate over what was attached)
with nothing else changed. No engine, no registry: the fake target never opens one."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from publish_support import IMAGE_CMD, IMAGE_ENV, Release

from releasekit.docker_engine import ImageFacts
from releasekit.publish.attachments import FetchedAttachments, FetchedSigned
from releasekit.publish.promote import promote
from releasekit.publish.service import publish
from releasekit.publish.targets import (
    TARGETS,
    EvidenceFiles,
    PublishTarget,
    Pushed,
    TargetEdge,
    TargetSession,
    make_target,
)
from releasekit.records.publish import PUBLISH_FILE, AttachmentRecord, PublishRecord, SignedAttachmentRecord
from releasekit.records.staging import StagingRecord
from releasekit.registry import ManifestBlob, Reference

IMAGE_ID = "sha256:" + "4" * 64
MEDIA = "application/vnd.example.memory+json"


def _blob(document: dict[str, object]) -> ManifestBlob:
    data = json.dumps(document, sort_keys=True).encode()
    return ManifestBlob(data=data, media_type=MEDIA, digest="sha256:" + hashlib.sha256(data).hexdigest())


@dataclass
class Repository:
    images: dict[str, tuple[ManifestBlob, ImageFacts]] = field(default_factory=dict)  # digest ->
    tags: dict[str, str] = field(default_factory=dict)  # tag -> digest
    attached: dict[str, dict[str, bytes]] = field(default_factory=dict)  # image digest -> title -> bytes
    signed: dict[str, dict[str, bytes]] = field(default_factory=dict)


class MemorySession(TargetSession):
    def __init__(self, repo: Repository) -> None:
        self.repo = repo

    def push(self, image: ImageFacts) -> Pushed:
        blob = _blob({"image": image.id})
        self.repo.images[blob.digest] = (blob, image)
        return Pushed(digest=blob.digest, blob=blob)

    def copy_staged(self, image: ImageFacts, staged: StagingRecord) -> Pushed:
        return self.push(image)

    def attach(self, subject: ManifestBlob, evidence: EvidenceFiles) -> AttachmentRecord:
        files = {title: data for title, _, data in evidence.files}
        self.repo.attached[subject.digest] = files
        return AttachmentRecord(
            tag=f"{subject.digest}.evidence", digest=_blob({"files": sorted(files)}).digest, files=list(files)
        )

    def attach_signed(self, subject: ManifestBlob, envelopes: dict[str, bytes]) -> SignedAttachmentRecord:
        self.repo.signed[subject.digest] = dict(envelopes)
        digest = _blob({"envelopes": sorted(envelopes)}).digest
        return SignedAttachmentRecord(digest=digest, method="referrers-api", files=sorted(envelopes))

    def tag_digest(self, tag: str) -> str | None:
        return self.repo.tags.get(tag)

    def put_tag(self, tag: str, image: ManifestBlob) -> None:
        self.repo.tags[tag] = image.digest

    def image(self, reference: Reference) -> tuple[ManifestBlob, ImageFacts]:
        digest = reference.digest or self.repo.tags[reference.tag or ""]
        return self.repo.images[digest]

    def fetch_attachments(self, image_digest: str) -> FetchedAttachments | None:
        files = self.repo.attached.get(image_digest)
        if files is None:
            return None
        return FetchedAttachments(digest=image_digest, files={t: d.decode() for t, d in files.items()})

    def fetch_signed(self, image_digest: str) -> FetchedSigned | None:
        files = self.repo.signed.get(image_digest)
        return None if files is None else FetchedSigned(digest="", method="referrers-api", files=files)


class MemoryTarget(PublishTarget):
    kind = "memory"

    def __init__(self, edge: TargetEdge) -> None:
        self.repositories: dict[str, Repository] = {}

    @contextmanager
    def open(self, where: Reference, *, evidence_texts: list[str] | None = None) -> Iterator[TargetSession]:
        yield MemorySession(self.repositories.setdefault(where.name, Repository()))

    def staged_image(self, staged: StagingRecord) -> ImageFacts:
        raise NotImplementedError("nothing is staged in memory")


class LocalImages:
    """The engine's one use before a push: the local image's facts."""

    def inspect(self, image: str) -> ImageFacts:
        assert image == IMAGE_ID
        return ImageFacts(id=IMAGE_ID, env=dict(IMAGE_ENV), cmd=list(IMAGE_CMD))


def _no_registry(host: str, credentials: object) -> object:
    raise AssertionError(f"the memory target opened a registry ({host})")


@pytest.fixture
def memory(monkeypatch) -> MemoryTarget:
    monkeypatch.setitem(TARGETS, MemoryTarget.kind, MemoryTarget)
    target = make_target(TargetEdge(open_registry=_no_registry), MemoryTarget.kind)
    assert isinstance(target, MemoryTarget)
    return target


def test_publish_and_promote_run_through_a_target_registered_in_one_entry(tmp_path: Path, memory) -> None:
    release = Release(tmp_path / "rel", IMAGE_ID)
    where = "memory.invalid/team/app"
    published = publish(
        image=IMAGE_ID,
        lock_path=release.lock,
        receipts_dir=release.receipts,
        to=where,
        tags=["beta"],
        engine=LocalImages(),  # type: ignore[arg-type]  # only inspect is asked of it
        publish_target=memory,
    )
    assert published.gate.passed and published.published, published.gate.findings
    repo = memory.repositories[where]
    assert repo.tags == {"beta": published.digest}
    attached = repo.attached[published.digest or ""]
    assert {"gate.json", "RELEASE.md", "provenance.intoto.json", "plan-check.json"} <= set(attached)
    record = PublishRecord.model_validate_json((release.evidence / "published" / PUBLISH_FILE).read_text())
    assert record.digest == published.digest and record.attachment is not None

    promoted = promote(source=f"{where}:beta", target=f"{where}:stable", publish_target=memory)
    assert promoted.promoted, promoted.findings
    assert promoted.gate is not None and promoted.gate.passed
    assert repo.tags == {"beta": published.digest, "stable": published.digest}
    assert promoted.digest == published.digest and promoted.image_id == IMAGE_ID


def test_promote_refuses_a_digest_with_nothing_attached_on_any_target(memory) -> None:
    where = "memory.invalid/team/other"
    with memory.open(Reference.parse(where)) as session:
        pushed = session.push(ImageFacts(id=IMAGE_ID))
        session.put_tag("beta", pushed.blob)
    result = promote(source=f"{where}:beta", target=f"{where}:stable", publish_target=memory)
    assert not result.promoted
    assert [f.code for f in result.findings] == ["ATTACHMENTS_MISSING"]
    assert memory.repositories[where].tags == {"beta": pushed.digest}


def test_an_unknown_target_kind_is_named() -> None:
    with pytest.raises(ValueError, match="unknown publish target kind 'ftp'.*known: oci"):
        make_target(TargetEdge(open_registry=_no_registry), "ftp")
