"""Evidence attached to a pushed image digest, as an OCI artifact the registry stores.

Distribution v2.8 (and many registries in use) has no referrers API, so the artifact is
found by a tag derived from the image digest, the scheme cosign made common:
``sha256-<hex>.releasekit``. The artifact manifest also carries an OCI 1.1 ``subject``
pointing at the image, so registries that do index referrers list it there too.

Layers, each titled with ``org.opencontainers.image.title``: the provenance statement,
the verification summary, the plan-check result, every receipt, the SBOM (CycloneDX, when
verify-provenance wrote one), the gate report (with the policy it applied) and the release notes. ``promote`` reads them back and runs the same
gate again, so a promotion needs nothing but the registry.

When the release directory has a source archive, ``archive.json`` is attached too, and each
archive file (git bundles, locked wheels, manifest, lock) is one more layer titled with its
path (``archive/...``) and typed ``ARCHIVE_BLOB_MEDIA``; those binary layers are read only by
``fetch_archive_blobs`` (``releasekit reproduce``), never by the text reader.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any, Final

from pydantic import BaseModel

from releasekit.bounded_read import RECORD_MAX_BYTES, WHEEL_MAX_BYTES, read_bounded
from releasekit.errors import EnvironmentProblem
from releasekit.publish.evidence import (
    RECEIPT_PARSER,
    TEST_RECEIPT_PARSER,
    Evidence,
    evidence_from,
    missing,
    parse_evidence,
)
from releasekit.records.archive import ARCHIVE_FILE
from releasekit.records.build import RELEASE_NOTES_FILE
from releasekit.records.evidence import EvidenceFile, Parser
from releasekit.records.gate import GATE_FILE
from releasekit.records.oci import OCI_MANIFEST, TITLE, Descriptor, EvidenceConfig, ImageManifest
from releasekit.records.plan_check import PLAN_CHECK_FILE
from releasekit.records.provenance import PROVENANCE_FILE
from releasekit.records.publish import AttachmentRecord, SignedAttachmentRecord
from releasekit.records.sbom import SBOM_FILE, SBOM_MEDIA
from releasekit.records.test_receipt import HYGIENE_FILE, TESTS_DIR
from releasekit.records.verification import VERIFICATION_SUMMARY_FILE
from releasekit.registry import ManifestBlob, RegistryClient

ARTIFACT_TYPE = "application/vnd.releasekit.attestations.v1+json"
NOTES_FILE = RELEASE_NOTES_FILE
RECEIPT_PREFIX = "receipts/"
TEST_RECEIPT_PREFIX = TESTS_DIR + "/"
TEST_RECEIPT_MEDIA = "application/vnd.releasekit.test-receipt+json"
HYGIENE_MEDIA = "application/vnd.releasekit.hygiene+json"

_MEDIA = {
    PROVENANCE_FILE: "application/vnd.in-toto+json",
    VERIFICATION_SUMMARY_FILE: "application/vnd.releasekit.verification-summary+json",
    PLAN_CHECK_FILE: "application/vnd.releasekit.plan-check+json",
    GATE_FILE: "application/vnd.releasekit.gate+json",
    NOTES_FILE: "text/markdown",
}
RECEIPT_MEDIA = "application/vnd.releasekit.receipt+json"
ARCHIVE_INDEX_FILE = ARCHIVE_FILE
ARCHIVE_INDEX_MEDIA = "application/vnd.releasekit.archive+json"
ARCHIVE_BLOB_MEDIA = "application/vnd.releasekit.archive.blob"
ARCHIVE_PREFIX = "archive/"

# One layer of an artifact: (title, media type, bytes).
Layer = tuple[str, str, bytes]


def attachment_tag(image_digest: str) -> str:
    return image_digest.replace(":", "-") + ".releasekit"


# What publish attached, as publish.json records it.
Attached = AttachmentRecord


def push_artifact(
    client: RegistryClient,
    repository: str,
    image: ManifestBlob,
    *,
    artifact_type: str,
    config: bytes,
    config_media_type: str,
    layers: list[Layer],
    annotations: dict[str, str] | None = None,
) -> bytes:
    """Push the config and every layer blob; the OCI 1.1 artifact manifest over them (``subject``: the image).

    Returns the manifest's bytes (``ImageManifest.to_bytes``: the same inputs, the same digest);
    the caller puts it under a tag or by digest.
    """
    config_digest = client.push_blob(repository, config)
    descriptors = [
        Descriptor(
            mediaType=media,
            digest=client.push_blob(repository, data),
            size=len(data),
            annotations={TITLE: title},
        )
        for title, media, data in layers
    ]
    manifest = ImageManifest(
        schemaVersion=2,
        mediaType=OCI_MANIFEST,
        artifactType=artifact_type,
        config=Descriptor(mediaType=config_media_type, digest=config_digest, size=len(config)),
        layers=descriptors,
        subject=Descriptor(mediaType=image.media_type, digest=image.digest, size=len(image.data)),
        annotations=annotations,
    )
    return manifest.to_bytes()


def _name(path: str) -> str:
    return path.replace("\\", "/").rsplit("/", 1)[-1]


def evidence_layers(evidence: Evidence) -> list[Layer]:
    """The evidence files read for the gate, as attached: each one's exact bytes, when it was readable."""
    named: list[tuple[str, str, EvidenceFile[Any] | None]] = [
        (PROVENANCE_FILE, _MEDIA[PROVENANCE_FILE], evidence.provenance),
        (VERIFICATION_SUMMARY_FILE, _MEDIA[VERIFICATION_SUMMARY_FILE], evidence.verification_summary),
        (PLAN_CHECK_FILE, _MEDIA[PLAN_CHECK_FILE], evidence.plan_check),
        *((RECEIPT_PREFIX + _name(r.path), RECEIPT_MEDIA, r) for r in evidence.receipts),
        *((TEST_RECEIPT_PREFIX + _name(t.path), TEST_RECEIPT_MEDIA, t) for t in evidence.test_receipts),
        (HYGIENE_FILE, HYGIENE_MEDIA, evidence.hygiene),
        (SBOM_FILE, SBOM_MEDIA, evidence.sbom),
    ]
    return [
        (title, media, raw) for title, media, f in named if f is not None and (raw := f.raw()) is not None
    ]


def attachment_files(
    evidence: Evidence,
    *,
    gate_json: bytes,
    release_notes: str,
    archive_dir: Path | None = None,
    archive_files: list[str] | None = None,
) -> list[Layer]:
    """What publish attaches, in order: the evidence, gate.json, the notes, then the source archive."""
    files = evidence_layers(evidence)
    files.append((GATE_FILE, _MEDIA[GATE_FILE], gate_json))
    files.append((NOTES_FILE, _MEDIA[NOTES_FILE], release_notes.encode()))
    if archive_dir is not None:
        # The release source archive: its index, then each file (relative to the release directory).
        index = read_bounded(archive_dir / ARCHIVE_INDEX_FILE, RECORD_MAX_BYTES, within=archive_dir)
        files.append((ARCHIVE_INDEX_FILE, ARCHIVE_INDEX_MEDIA, index))
        for rel in archive_files or []:
            blob = read_bounded(archive_dir / rel, WHEEL_MAX_BYTES, within=archive_dir)
            files.append((rel, ARCHIVE_BLOB_MEDIA, blob))
    return files


def attach(
    client: RegistryClient,
    repository: str,
    image: ManifestBlob,
    files: list[Layer],
    *,
    image_id: str,
    lock_sha256: str,
) -> Attached:
    """The files as one OCI 1.1 artifact whose ``subject`` is the image, under ``attachment_tag``."""
    body = push_artifact(
        client,
        repository,
        image,
        artifact_type=ARTIFACT_TYPE,
        config=EvidenceConfig(image_id=image_id, lock_sha256=lock_sha256, subject=image.digest).to_bytes(),
        config_media_type=ARTIFACT_TYPE,
        layers=files,
        annotations={"io.releasekit.image.id": image_id, "io.releasekit.lock.sha256": lock_sha256},
    )
    tag = attachment_tag(image.digest)
    digest = client.put_manifest(repository, tag, body, OCI_MANIFEST)
    return Attached(tag=tag, digest=digest, files=[name for name, _, _ in files])


class FetchedAttachments(BaseModel):
    digest: str
    files: dict[str, str]  # title -> text

    def _read(self, name: str, parse: Parser[Any]) -> EvidenceFile[Any]:
        text = self.files.get(name)
        if text is None:
            return missing(f"attached:{name}", "not attached to this digest")
        return parse_evidence(f"attached:{name}", text.encode("utf-8"), parse)

    def evidence(self) -> Evidence:
        titles = sorted(self.files)
        return evidence_from(
            self._read,
            [self._read(name, RECEIPT_PARSER) for name in titles if name.startswith(RECEIPT_PREFIX)],
            [
                self._read(name, TEST_RECEIPT_PARSER)
                for name in titles
                if name.startswith(TEST_RECEIPT_PREFIX)
            ],
            build_notes=self.files.get(NOTES_FILE),
            has_hygiene=HYGIENE_FILE in self.files,
            has_sbom=SBOM_FILE in self.files,
        )


def read_artifact(
    client: RegistryClient, repository: str, reference: str, what: str
) -> tuple[ManifestBlob, ImageManifest] | None:
    """The artifact manifest under ``reference`` (None when there is none); malformed: EnvironmentProblem."""
    blob = client.get_manifest(repository, reference)
    if blob is None:
        return None
    try:
        return blob, ImageManifest.parse(blob.data)
    except ValueError as exc:
        raise EnvironmentProblem(f"{what} is malformed: {exc}") from None


def _title(layer: Descriptor, what: str) -> str:
    if layer.title is None:
        raise EnvironmentProblem(f"{what} is malformed: a layer has no {TITLE} annotation")
    return layer.title


def fetch_attachments(
    client: RegistryClient, repository: str, image_digest: str
) -> FetchedAttachments | None:
    what = f"attachment {attachment_tag(image_digest)}"
    found = read_artifact(client, repository, attachment_tag(image_digest), what)
    if found is None:
        return None
    blob, manifest = found
    if manifest.subject_digest != image_digest:
        raise EnvironmentProblem(f"{what} names another subject")
    try:
        files = {
            _title(layer, what): client.get_blob(repository, layer.digest).decode("utf-8")
            for layer in manifest.layers
            if layer.mediaType != ARCHIVE_BLOB_MEDIA
        }
    except UnicodeDecodeError as exc:
        raise EnvironmentProblem(f"{what} is malformed: {exc}") from None
    return FetchedAttachments(digest=blob.digest, files=files)


# -- signed evidence: the DSSE envelopes, as their own OCI 1.1 artifact ---------------------

SIGNED_ARTIFACT_TYPE = "application/vnd.dsse.envelope.v1+json"
SIGNED_CONFIG_TYPE = "application/vnd.oci.empty.v1+json"
EMPTY_CONFIG = b"{}"
REFERRERS_API: Final = "referrers-api"
TAG_FALLBACK: Final = "tag-fallback"


def signed_tag(image_digest: str) -> str:
    """``sha256-<hex>.att``: where registries without the referrers API keep the envelopes."""
    return image_digest.replace(":", "-") + ".att"


SignedAttached = SignedAttachmentRecord  # referrers-api (the registry lists it) or tag-fallback (.att tag)


def attach_signed(
    client: RegistryClient, repository: str, image: ManifestBlob, envelopes: dict[str, bytes]
) -> SignedAttached:
    """Push the envelopes as an artifact whose ``subject`` is the image; findable by referrers or by tag.

    The manifest is put by digest first. If the registry then lists it among the image's
    referrers, that is how promote finds it; otherwise (distribution 2.x has no referrers
    API) it is also put under ``sha256-<hex>.att``.
    """
    body = push_artifact(
        client,
        repository,
        image,
        artifact_type=SIGNED_ARTIFACT_TYPE,
        config=EMPTY_CONFIG,
        config_media_type=SIGNED_CONFIG_TYPE,
        layers=[(name, SIGNED_ARTIFACT_TYPE, data) for name, data in sorted(envelopes.items())],
    )
    digest = "sha256:" + hashlib.sha256(body).hexdigest()
    client.put_manifest(repository, digest, body, OCI_MANIFEST)
    referrers = client.referrers(repository, image.digest)
    if referrers is not None and any(r.digest == digest for r in referrers):
        return SignedAttached(digest=digest, method=REFERRERS_API, files=sorted(envelopes))
    tag = signed_tag(image.digest)
    client.put_manifest(repository, tag, body, OCI_MANIFEST)
    return SignedAttached(digest=digest, method=TAG_FALLBACK, tag=tag, files=sorted(envelopes))


class FetchedSigned(BaseModel):
    digest: str
    method: str
    files: dict[str, bytes]  # title -> envelope bytes


def _read_signed(
    client: RegistryClient, repository: str, reference: str, image_digest: str
) -> dict[str, bytes] | None:
    what = f"signed evidence {reference}"
    found = read_artifact(client, repository, reference, what)
    if found is None or found[1].artifactType != SIGNED_ARTIFACT_TYPE:
        return None
    manifest = found[1]
    if manifest.subject_digest != image_digest:
        raise EnvironmentProblem(f"{what} names another subject than {image_digest}")
    return {_title(layer, what): client.get_blob(repository, layer.digest) for layer in manifest.layers}


def fetch_signed(client: RegistryClient, repository: str, image_digest: str) -> FetchedSigned | None:
    """The envelopes attached to ``image_digest``: through the referrers API, else the ``.att`` tag."""
    referrers = client.referrers(repository, image_digest)
    for ref in referrers or []:
        if ref.artifactType == SIGNED_ARTIFACT_TYPE:
            files = _read_signed(client, repository, ref.digest, image_digest)
            if files is not None:
                return FetchedSigned(digest=ref.digest, method=REFERRERS_API, files=files)
    tag = signed_tag(image_digest)
    files = _read_signed(client, repository, tag, image_digest)
    if files is None:
        return None
    blob = client.get_manifest(repository, tag)
    return FetchedSigned(digest=blob.digest if blob else "", method=TAG_FALLBACK, files=files)


def _archive_title(title: str | None, what: str) -> str:
    parts = (title or "").split("/")
    if (
        title is None
        or not title.startswith(ARCHIVE_PREFIX)
        or any(p in ("", ".", "..") for p in parts)
        or "\\" in title
    ):
        raise EnvironmentProblem(f"{what}: unsafe archive path {title!r}")
    return title


def fetch_archive_blobs(client: RegistryClient, repository: str, image_digest: str, dest: Path) -> list[str]:
    """Download the archive files attached to ``image_digest`` into ``dest`` (by title); returns the titles.

    Each blob is checked against its layer digest by the registry client; whether it is the file
    ``archive.json`` lists is for the caller to check.
    """
    what = f"attachment {attachment_tag(image_digest)}"
    found = read_artifact(client, repository, attachment_tag(image_digest), what)
    if found is None:
        return []
    titles: list[str] = []
    for layer in found[1].layers:
        if layer.mediaType != ARCHIVE_BLOB_MEDIA:
            continue
        title = _archive_title(layer.title, what)
        out = dest / title
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_bytes(client.get_blob(repository, layer.digest))
        titles.append(title)
    return titles
