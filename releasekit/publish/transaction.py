"""Steps 2-5 of publish: push under a staging tag, check what the registry holds, attach, tag.

Only after the pushed manifest has been read back (config digest = image ID, every blob
present) and the image pulled back by digest (same ID, digest and labels) are the evidence
attached and the release tags put. A failure before the tags leaves no release tag; a rerun
resumes (blobs already there are skipped).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from releasekit.atomic import failpoint
from releasekit.docker_engine import ImageFacts
from releasekit.errors import EnvironmentProblem
from releasekit.publish.engine import DockerEngine
from releasekit.registry import ManifestBlob, Reference, RegistryClient, RegistryCredentials


@dataclass(frozen=True)
class Pushed:
    """The image as the registry holds it after the push, checked."""

    digest: str
    blob: ManifestBlob


@dataclass
class Tagged:
    moved: dict[str, str] = field(default_factory=dict)  # tag -> the digest it pointed at before


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


def push_checked(
    engine: DockerEngine,
    client: RegistryClient,
    image: ImageFacts,
    target: Reference,
    credentials: RegistryCredentials | None,
) -> Pushed:
    """Steps 2-3: push under the staging tag, read the manifest back, pull the image back by digest."""

    def registry_still_there() -> None:
        try:
            client.ping()
        except EnvironmentProblem as exc:
            raise EnvironmentProblem(
                f"push to {target.host} interrupted: {exc.message}",
                hint="nothing was tagged; rerun to resume",
            ) from None

    digest = engine.push_staged(image.id, target, credentials, on_retry=registry_still_there)
    blob = check_pushed(client, target, digest, image.id)
    pulled = engine.pull_back(target, digest, credentials)
    pull_back_check(image, pulled, f"{target.name}@{digest}", digest)
    return Pushed(digest=digest, blob=blob)


def put_tags(client: RegistryClient, target: Reference, pushed: Pushed, tags: list[str]) -> Tagged:
    """Step 5: the same manifest bytes under each release tag; a tag that pointed elsewhere is reported."""
    out = Tagged()
    for tag in tags:
        before = client.get_manifest(target.repository, tag)
        if before is not None and before.digest != pushed.digest:
            out.moved[tag] = before.digest
        client.put_manifest(target.repository, tag, pushed.blob.data, pushed.blob.media_type)
        failpoint(f"publish-tagged:{tag}")
    return out
