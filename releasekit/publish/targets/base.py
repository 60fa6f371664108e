"""The place a release image goes, as publish and promote see it: the ``PublishTarget`` interface.

Publish and promote reach a target only through these two classes. A target is opened on one
repository (``PublishTarget.open``, which also says whether the target is reachable), and the
session then does what the stages need of it, in their order:

* publish: ``push`` the image (or ``copy_staged`` the staged candidate) and check what the
  target holds; ``attach`` the evidence and ``attach_signed`` the envelopes to that digest;
  ``put_tag`` each release tag (``tag_digest`` first, to report a tag that moved);
* promote: ``image`` (a tag's or digest's manifest and image facts), ``fetch_attachments``
  and ``fetch_signed`` (the evidence and envelopes attached to that digest), then ``put_tag``
  and ``tag_digest`` to read the new tag back.

What the files and envelopes are is the stages' business; how they are stored (an OCI artifact
with a ``subject``, found by referrers or by tag) is the target's. The OCI registry is the one
target (``oci.py``); ``targets.TARGETS`` maps a target kind to its factory.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import ClassVar

from releasekit.docker_engine import ImageFacts
from releasekit.publish.attachments import FetchedAttachments, FetchedSigned, Layer
from releasekit.publish.engine import DockerEngine
from releasekit.records.publish import AttachmentRecord, SignedAttachmentRecord
from releasekit.records.staging import StagingRecord
from releasekit.registry import ManifestBlob, Reference, RegistryOpener


@dataclass(frozen=True)
class Pushed:
    """The image as the target holds it after the push, checked: its digest and manifest bytes."""

    digest: str
    blob: ManifestBlob


@dataclass(frozen=True)
class TargetEdge:
    """The effects a target may use, made by a command (the edge) and passed in: the registry opener,
    and the Docker Engine for a push (promote needs none)."""

    open_registry: RegistryOpener
    engine: DockerEngine | None = None


@dataclass(frozen=True)
class EvidenceFiles:
    """What is attached to a pushed image: the files (title, media type, bytes) and what they are about."""

    files: list[Layer]
    image_id: str
    lock_sha256: str


class TargetSession(ABC):
    """One repository of a target, opened and reachable, for the length of one publish or promote."""

    @abstractmethod
    def push(self, image: ImageFacts) -> Pushed:
        """Steps 2-3 of publish: the image into the repository, checked (and pulled back) by digest."""

    @abstractmethod
    def copy_staged(self, image: ImageFacts, staged: StagingRecord) -> Pushed:
        """``publish --staged``: the staged digest into the repository, checked, pulled back."""

    @abstractmethod
    def attach(self, subject: ManifestBlob, evidence: EvidenceFiles) -> AttachmentRecord:
        """Step 4: the evidence files, stored with the image digest as their subject."""

    @abstractmethod
    def attach_signed(self, subject: ManifestBlob, envelopes: dict[str, bytes]) -> SignedAttachmentRecord:
        """Step 4: the DSSE envelopes (title -> bytes), stored with the image digest as their subject."""

    @abstractmethod
    def tag_digest(self, tag: str) -> str | None:
        """The digest ``tag`` names now (None: no such tag)."""

    @abstractmethod
    def put_tag(self, tag: str, image: ManifestBlob) -> None:
        """The same manifest bytes under ``tag``."""

    @abstractmethod
    def image(self, reference: Reference) -> tuple[ManifestBlob, ImageFacts]:
        """The manifest ``reference`` names (tag or digest) and the image facts its config records."""

    @abstractmethod
    def fetch_attachments(self, image_digest: str) -> FetchedAttachments | None:
        """The evidence files attached to ``image_digest`` (None: nothing attached)."""

    @abstractmethod
    def fetch_signed(self, image_digest: str) -> FetchedSigned | None:
        """The envelopes attached to ``image_digest`` (None: none)."""


class PublishTarget(ABC):
    """A kind of place images go; ``open`` gives a session on one repository of it."""

    kind: ClassVar[str]

    @abstractmethod
    def open(
        self, where: Reference, *, evidence_texts: list[str] | None = None
    ) -> AbstractContextManager[TargetSession]:
        """A session on ``where`` (host and repository), its reachability checked before anything is
        sent. ``evidence_texts``: what is about to be attached, for a target that must refuse to send
        its own secrets along (InputError)."""

    @abstractmethod
    def staged_image(self, staged: StagingRecord) -> ImageFacts:
        """The image facts of the staged candidate, read from where it was staged."""
