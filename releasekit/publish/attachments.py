"""Evidence attached to a pushed image digest, as an OCI artifact the registry stores.

Distribution v2.8 (and many registries in use) has no referrers API, so the artifact is
found by a tag derived from the image digest, the scheme cosign made common:
``sha256-<hex>.releasekit``. The artifact manifest also carries an OCI 1.1 ``subject``
pointing at the image, so registries that do index referrers list it there too.

Layers, each titled with ``org.opencontainers.image.title``: the provenance statement,
the verification summary, the plan-check result, every receipt, the gate report (with the
policy it applied) and the release notes. ``promote`` reads them back and runs the same
gate again, so a promotion needs nothing but the registry.

When the release directory has a source archive, ``archive.json`` is attached too, and each
archive file (git bundles, locked wheels, manifest, lock) is one more layer titled with its
path (``archive/...``) and typed ``ARCHIVE_BLOB_MEDIA``; those binary layers are read only by
``fetch_archive_blobs`` (``releasekit reproduce``), never by the text reader.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Final

from pydantic import BaseModel

from releasekit.errors import EnvironmentProblem
from releasekit.publish.evidence import (
    BUILD_NOTES_FILE,
    HYGIENE_FILE,
    PLAN_CHECK_FILE,
    PROVENANCE_FILE,
    VERIFICATION_SUMMARY_FILE,
    Evidence,
    LoadedJson,
    parse_json,
)
from releasekit.publish.registry import ManifestBlob, RegistryClient
from releasekit.records.publish import AttachmentRecord, SignedAttachmentRecord

ARTIFACT_TYPE = "application/vnd.releasekit.attestations.v1+json"
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
TITLE = "org.opencontainers.image.title"
GATE_FILE = "gate.json"
NOTES_FILE = "RELEASE.md"
RECEIPT_PREFIX = "receipts/"
TEST_RECEIPT_PREFIX = "tests/"
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
ARCHIVE_INDEX_FILE = "archive.json"
ARCHIVE_INDEX_MEDIA = "application/vnd.releasekit.archive+json"
ARCHIVE_BLOB_MEDIA = "application/vnd.releasekit.archive.blob"
ARCHIVE_PREFIX = "archive/"


def attachment_tag(image_digest: str) -> str:
    return image_digest.replace(":", "-") + ".releasekit"


# What publish attached, as publish.json records it.
Attached = AttachmentRecord


def _raw(loaded: LoadedJson) -> bytes | None:
    if not loaded.ok or loaded.text is None:
        return None
    return loaded.text.encode("utf-8")


def attach(
    client: RegistryClient,
    repository: str,
    image: ManifestBlob,
    *,
    image_id: str,
    lock_sha256: str,
    evidence: Evidence,
    gate_json: bytes,
    release_notes: str,
    archive_dir: Path | None = None,
    archive_files: list[str] | None = None,
) -> Attached:
    files: list[tuple[str, str, bytes]] = []
    for name, loaded in (
        (PROVENANCE_FILE, evidence.provenance),
        (VERIFICATION_SUMMARY_FILE, evidence.verification_summary),
        (PLAN_CHECK_FILE, evidence.plan_check),
    ):
        data = _raw(loaded)
        if data is not None:
            files.append((name, _MEDIA[name], data))
    for receipt in evidence.receipts:
        data = _raw(receipt)
        if data is not None:
            files.append(
                (RECEIPT_PREFIX + receipt.path.replace("\\", "/").rsplit("/", 1)[-1], RECEIPT_MEDIA, data)
            )
    for test_receipt in evidence.test_receipts:
        data = _raw(test_receipt)
        if data is not None:
            name = test_receipt.path.replace("\\", "/").rsplit("/", 1)[-1]
            files.append((TEST_RECEIPT_PREFIX + name, TEST_RECEIPT_MEDIA, data))
    hygiene = _raw(evidence.hygiene) if evidence.hygiene is not None else None
    if hygiene is not None:
        files.append((HYGIENE_FILE, HYGIENE_MEDIA, hygiene))
    files.append((GATE_FILE, _MEDIA[GATE_FILE], gate_json))
    files.append((NOTES_FILE, _MEDIA[NOTES_FILE], release_notes.encode()))
    if archive_dir is not None:
        # The release source archive: its index, then each file (relative to the release directory).
        files.append(
            (ARCHIVE_INDEX_FILE, ARCHIVE_INDEX_MEDIA, (archive_dir / ARCHIVE_INDEX_FILE).read_bytes())
        )
        for rel in archive_files or []:
            files.append((rel, ARCHIVE_BLOB_MEDIA, (archive_dir / rel).read_bytes()))

    config = json.dumps({"image_id": image_id, "lock_sha256": lock_sha256, "subject": image.digest}).encode()
    config_digest = client.push_blob(repository, config)
    layers = []
    for name, media, data in files:
        digest = client.push_blob(repository, data)
        layers.append({"mediaType": media, "digest": digest, "size": len(data), "annotations": {TITLE: name}})
    manifest = {
        "schemaVersion": 2,
        "mediaType": OCI_MANIFEST,
        "artifactType": ARTIFACT_TYPE,
        "config": {"mediaType": ARTIFACT_TYPE, "digest": config_digest, "size": len(config)},
        "layers": layers,
        "subject": {"mediaType": image.media_type, "digest": image.digest, "size": len(image.data)},
        "annotations": {"io.releasekit.image.id": image_id, "io.releasekit.lock.sha256": lock_sha256},
    }
    body = json.dumps(manifest, indent=2, sort_keys=True).encode()
    tag = attachment_tag(image.digest)
    digest = client.put_manifest(repository, tag, body, OCI_MANIFEST)
    return Attached(tag=tag, digest=digest, files=[name for name, _, _ in files])


class FetchedAttachments(BaseModel):
    digest: str
    files: dict[str, str]  # title -> text

    def evidence(self) -> Evidence:
        def loaded(name: str) -> LoadedJson:
            text = self.files.get(name)
            if text is None:
                return LoadedJson(path=f"attached:{name}", problem="not attached to this digest")
            return parse_json(f"attached:{name}", text.encode("utf-8"))

        return Evidence(
            plan_check=loaded(PLAN_CHECK_FILE),
            verification_summary=loaded(VERIFICATION_SUMMARY_FILE),
            provenance=loaded(PROVENANCE_FILE),
            build_notes=self.files.get(BUILD_NOTES_FILE),
            receipts=[loaded(name) for name in sorted(self.files) if name.startswith(RECEIPT_PREFIX)],
            test_receipts=[
                loaded(name) for name in sorted(self.files) if name.startswith(TEST_RECEIPT_PREFIX)
            ],
            hygiene=loaded(HYGIENE_FILE) if HYGIENE_FILE in self.files else None,
        )


def fetch_attachments(
    client: RegistryClient, repository: str, image_digest: str
) -> FetchedAttachments | None:
    blob = client.get_manifest(repository, attachment_tag(image_digest))
    if blob is None:
        return None
    try:
        manifest = json.loads(blob.data)
        if manifest.get("subject", {}).get("digest") != image_digest:
            raise EnvironmentProblem(f"attachment {attachment_tag(image_digest)} names another subject")
        files = {
            layer["annotations"][TITLE]: client.get_blob(repository, layer["digest"]).decode("utf-8")
            for layer in manifest.get("layers", [])
            if layer.get("mediaType") != ARCHIVE_BLOB_MEDIA
        }
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise EnvironmentProblem(f"attachment {attachment_tag(image_digest)} is malformed: {exc}") from None
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
    config_digest = client.push_blob(repository, EMPTY_CONFIG)
    layers = []
    for name, data in sorted(envelopes.items()):
        digest = client.push_blob(repository, data)
        layers.append(
            {
                "mediaType": SIGNED_ARTIFACT_TYPE,
                "digest": digest,
                "size": len(data),
                "annotations": {TITLE: name},
            }
        )
    manifest = {
        "schemaVersion": 2,
        "mediaType": OCI_MANIFEST,
        "artifactType": SIGNED_ARTIFACT_TYPE,
        "config": {"mediaType": SIGNED_CONFIG_TYPE, "digest": config_digest, "size": len(EMPTY_CONFIG)},
        "layers": layers,
        "subject": {"mediaType": image.media_type, "digest": image.digest, "size": len(image.data)},
    }
    body = json.dumps(manifest, indent=2, sort_keys=True).encode()
    digest = "sha256:" + hashlib.sha256(body).hexdigest()
    client.put_manifest(repository, digest, body, OCI_MANIFEST)
    referrers = client.referrers(repository, image.digest)
    if referrers is not None and any(r.get("digest") == digest for r in referrers):
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
    blob = client.get_manifest(repository, reference)
    if blob is None:
        return None
    try:
        manifest = json.loads(blob.data)
        if manifest.get("artifactType") != SIGNED_ARTIFACT_TYPE:
            return None
        if manifest.get("subject", {}).get("digest") != image_digest:
            raise EnvironmentProblem(f"signed evidence {reference} names another subject than {image_digest}")
        return {
            layer["annotations"][TITLE]: client.get_blob(repository, layer["digest"])
            for layer in manifest.get("layers", [])
        }
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise EnvironmentProblem(f"signed evidence {reference} is malformed: {exc}") from None


def fetch_signed(client: RegistryClient, repository: str, image_digest: str) -> FetchedSigned | None:
    """The envelopes attached to ``image_digest``: through the referrers API, else the ``.att`` tag."""
    referrers = client.referrers(repository, image_digest)
    for ref in referrers or []:
        if ref.get("artifactType") == SIGNED_ARTIFACT_TYPE and isinstance(ref.get("digest"), str):
            files = _read_signed(client, repository, str(ref["digest"]), image_digest)
            if files is not None:
                return FetchedSigned(digest=str(ref["digest"]), method=REFERRERS_API, files=files)
    tag = signed_tag(image_digest)
    files = _read_signed(client, repository, tag, image_digest)
    if files is None:
        return None
    blob = client.get_manifest(repository, tag)
    return FetchedSigned(digest=blob.digest if blob else "", method=TAG_FALLBACK, files=files)


def fetch_archive_blobs(client: RegistryClient, repository: str, image_digest: str, dest: Path) -> list[str]:
    """Download the archive files attached to ``image_digest`` into ``dest`` (by title); returns the titles.

    Each blob is checked against its layer digest by the registry client; whether it is the file
    ``archive.json`` lists is for the caller to check.
    """
    blob = client.get_manifest(repository, attachment_tag(image_digest))
    if blob is None:
        return []
    titles: list[str] = []
    try:
        manifest = json.loads(blob.data)
        for layer in manifest.get("layers", []):
            if layer.get("mediaType") != ARCHIVE_BLOB_MEDIA:
                continue
            title = str(layer["annotations"][TITLE])
            parts = title.split("/")
            if (
                not title.startswith(ARCHIVE_PREFIX)
                or any(p in ("", ".", "..") for p in parts)
                or "\\" in title
            ):
                raise EnvironmentProblem(
                    f"attachment {attachment_tag(image_digest)}: unsafe archive path {title!r}"
                )
            out = dest / title
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_bytes(client.get_blob(repository, layer["digest"]))
            titles.append(title)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise EnvironmentProblem(f"attachment {attachment_tag(image_digest)} is malformed: {exc}") from None
    return titles
