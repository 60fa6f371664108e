"""The OCI registry as a publish target: the Docker Engine pushes, the registry's HTTP API checks.

Publish pushes through the engine under a staging tag named after the image ID, reads the manifest
back by digest (config digest = image ID, every blob present) and pulls the image back by digest
(``transaction.pull_back_check``); evidence and envelopes are OCI 1.1 artifacts whose ``subject`` is
the image (``attachments.py``: found by the ``sha256-<hex>.releasekit`` / ``.att`` tags or the
referrers API); a tag is a manifest put under it. The registry client comes from the opener the
command passed in (``TargetEdge``), for each host with its credentials (``resolve_credentials``).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import ClassVar

from releasekit.docker_engine import ImageFacts
from releasekit.errors import EnvironmentProblem, InputError
from releasekit.publish import attachments
from releasekit.publish.attachments import FetchedAttachments, FetchedSigned
from releasekit.publish.engine import DockerEngine
from releasekit.publish.targets.base import EvidenceFiles, PublishTarget, Pushed, TargetEdge, TargetSession
from releasekit.records.oci import ImageConfig, ImageManifest
from releasekit.records.publish import AttachmentRecord, SignedAttachmentRecord
from releasekit.records.staging import StagingRecord
from releasekit.registry import (
    ManifestBlob,
    Reference,
    RegistryClient,
    RegistryCredentials,
    RegistryOpener,
    copy_image,
    resolve_credentials,
)

__all__ = ["OciSession", "OciTarget", "check_pushed", "pull_back_check", "registry_image"]


def check_pushed(client: RegistryClient, target: Reference, digest: str, image_id: str) -> ManifestBlob:
    """The registry has exactly this image under ``digest``, every blob of it."""
    return client.check_image(target.repository, digest, image_id)


def pull_back_check(built: ImageFacts, pulled: ImageFacts, reference: str, digest: str) -> None:
    """The image pulled back by digest is the one built: same image ID, the pushed digest, same labels."""
    problems: list[str] = []
    if pulled.id != built.id:
        problems.append(f"image ID {pulled.id} is not the built {built.id}")
    if digest not in pulled.repo_digests:
        problems.append(f"the engine does not record digest {digest} for it")
    if pulled.labels != built.labels:
        changed = sorted(
            k for k in set(pulled.labels) | set(built.labels) if pulled.labels.get(k) != built.labels.get(k)
        )
        problems.append(f"labels differ ({', '.join(changed[:3])})")
    if problems:
        raise EnvironmentProblem(
            f"pull-back of {reference}: {'; '.join(problems)}", hint="nothing was tagged"
        )


def registry_image(client: RegistryClient, src: Reference) -> tuple[ManifestBlob, ImageFacts]:
    """The manifest ``src`` names and the image facts its config blob records."""
    blob = client.get_manifest(src.repository, src.digest or src.tag or "")
    if blob is None:
        raise InputError(f"{src} does not exist in the registry")
    try:
        manifest = ImageManifest.parse(blob.data)
    except ValueError as exc:
        raise InputError(f"{src}: {exc}") from None
    if manifest.config is None:
        raise InputError(f"{src} is a manifest list or index; promote a single image")
    image_id = manifest.config.digest
    try:
        config = ImageConfig.parse(client.get_blob(src.repository, image_id))
    except ValueError as exc:
        raise InputError(f"{src}: config blob {image_id}: {exc}") from None
    return blob, ImageFacts.from_config(image_id, config.config or {})


def staged_reference(staged: StagingRecord) -> Reference:
    return Reference(host=staged.registry, repository=staged.repository, digest=staged.digest)


class OciSession(TargetSession):
    """One repository of one registry, through one client."""

    def __init__(
        self,
        client: RegistryClient,
        where: Reference,
        credentials: RegistryCredentials | None,
        edge: TargetEdge,
    ) -> None:
        self.client = client
        self.where = where
        self.credentials = credentials
        self.edge = edge

    def _engine(self) -> DockerEngine:
        if self.edge.engine is None:
            raise TypeError("this OCI target was opened without a Docker Engine: it cannot push")
        return self.edge.engine

    def push(self, image: ImageFacts) -> Pushed:
        """Push under the staging tag, read the manifest back, pull the image back by digest."""
        client, target, credentials = self.client, self.where, self.credentials

        def registry_still_there() -> None:
            try:
                client.ping()
            except EnvironmentProblem as exc:
                raise EnvironmentProblem(
                    f"push to {target.host} interrupted: {exc.message}",
                    hint="nothing was tagged; rerun to resume",
                ) from None

        engine = self._engine()
        digest = engine.push_staged(image.id, target, credentials, on_retry=registry_still_there)
        blob = check_pushed(client, target, digest, image.id)
        pulled = engine.pull_back(target, digest, credentials)
        pull_back_check(image, pulled, f"{target.name}@{digest}", digest)
        return Pushed(digest=digest, blob=blob)

    def copy_staged(self, image: ImageFacts, staged: StagingRecord) -> Pushed:
        """The staged manifest and its blobs into the release repository by digest, checked, then pulled back."""
        client, target = self.client, self.where
        source = staged_reference(staged)
        if (source.host, source.repository) == (target.host, target.repository):
            blob = client.check_image(target.repository, staged.digest, staged.image_id)
        else:
            with self.edge.open_registry(source.host, resolve_credentials(source.host)) as staging:
                copy_image(staging, source.repository, staged.digest, client, target.repository)
            blob = check_pushed(client, target, staged.digest, staged.image_id)
        pulled = self._engine().pull_back(target, staged.digest, self.credentials)
        pull_back_check(image, pulled, f"{target.name}@{staged.digest}", staged.digest)
        return Pushed(digest=staged.digest, blob=blob)

    def attach(self, subject: ManifestBlob, evidence: EvidenceFiles) -> AttachmentRecord:
        return attachments.attach(
            self.client,
            self.where.repository,
            subject,
            evidence.files,
            image_id=evidence.image_id,
            lock_sha256=evidence.lock_sha256,
        )

    def attach_signed(self, subject: ManifestBlob, envelopes: dict[str, bytes]) -> SignedAttachmentRecord:
        return attachments.attach_signed(self.client, self.where.repository, subject, envelopes)

    def tag_digest(self, tag: str) -> str | None:
        blob = self.client.get_manifest(self.where.repository, tag)
        return blob.digest if blob is not None else None

    def put_tag(self, tag: str, image: ManifestBlob) -> None:
        self.client.put_manifest(self.where.repository, tag, image.data, image.media_type)

    def image(self, reference: Reference) -> tuple[ManifestBlob, ImageFacts]:
        return registry_image(self.client, reference)

    def fetch_attachments(self, image_digest: str) -> FetchedAttachments | None:
        return attachments.fetch_attachments(self.client, self.where.repository, image_digest)

    def fetch_signed(self, image_digest: str) -> FetchedSigned | None:
        return attachments.fetch_signed(self.client, self.where.repository, image_digest)


def _mentions(texts: list[str], secret: str) -> bool:
    return bool(secret) and any(secret in text for text in texts)


class OciTarget(PublishTarget):
    """An OCI distribution registry (``REGISTRY/REPO``), reached with the command's registry opener."""

    kind: ClassVar[str] = "oci"

    def __init__(self, edge: TargetEdge) -> None:
        self.edge = edge
        self.open_registry: RegistryOpener = edge.open_registry

    @contextmanager
    def open(self, where: Reference, *, evidence_texts: list[str] | None = None) -> Iterator[TargetSession]:
        credentials = resolve_credentials(where.host)
        if credentials is not None and _mentions(evidence_texts or [], credentials.password):
            raise InputError("the evidence contains the registry password; refusing to push and attach it")
        with self.open_registry(where.host, credentials) as client:
            client.ping()  # unreachable or refused: say so before anything is pushed
            yield OciSession(client, where, credentials, self.edge)

    def staged_image(self, staged: StagingRecord) -> ImageFacts:
        source = staged_reference(staged)
        with self.open_registry(source.host, resolve_credentials(source.host)) as client:
            _, facts = registry_image(client, source)
        return facts
