"""The candidate image a GPU host runs: a local image, or the staged one pulled by digest and proven.

``validate --image REGISTRY/REPO@sha256:…`` (and ``test``, ``validate --dry-run``) pull the
image by digest and, before any cell or suite starts, compare the pulled image's ID with the
verified one: ``--staged staging.json`` names it (the build host wrote it after
verify-provenance passed). A digest other than the staged one, or an image whose ID is not
the verified ID, is an error naming both. Every receipt then records the digest, the image
ID and the host that ran it.

``staging.json`` is verified before any field of it is used (``signing.verify.read_signed_staging``):
with ``--trusted-key`` (or when signed evidence is required: ``--require-signed``, the manifest's
``publish.signed``) an unsigned or edited one, or one signed by another key, is refused before
anything is pulled or any container starts.

The engine is the command's (``engine=``): it pulls or inspects the image, and the command closes it.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass
from pathlib import Path

from releasekit.docker_engine import Engine, EngineError, NoSuchImage
from releasekit.errors import EnvironmentProblem, InputError
from releasekit.records.staging import STAGING_FILE, StagingRecord
from releasekit.registry import Reference, resolve_credentials
from releasekit.signing.verify import read_signed_staging


@dataclass(frozen=True)
class Candidate:
    image: str  # what to run: the local image ID
    digest: str | None  # the registry digest it was pulled by (None: a local image)
    host: str  # the machine that runs it
    warning: str | None = None  # staging.json accepted unsigned: the command says so on stderr


def this_host() -> str:
    return socket.gethostname()


def is_digest_reference(image: str) -> bool:
    return "@sha256:" in image


def resolve_candidate(
    image: str,
    staged: Path | None,
    *,
    trusted_key_files: list[Path] | None = None,
    require_signed: bool = False,
    what: str = STAGING_FILE,
    engine: Engine,
) -> Candidate:
    """The image to run. With ``staged``, it must be the verified image (pulled by digest when named so)."""
    if staged is None:
        if is_digest_reference(image):
            raise InputError(
                f"--image {image}: a digest reference needs --staged staging.json (the verified image ID to compare with)"
            )
        return Candidate(image=image, digest=None, host=this_host())
    signed = read_signed_staging(staged, list(trusted_key_files or []), required=require_signed, what=what)
    record = signed.record
    candidate = (
        _pull_staged(engine, image, record)
        if is_digest_reference(image)
        else _local_with_record(engine, image, record)
    )
    return Candidate(
        image=candidate.image, digest=candidate.digest, host=candidate.host, warning=signed.warning
    )


def _pull_staged(engine: Engine, image: str, record: StagingRecord) -> Candidate:
    ref = Reference.parse(image)
    if ref.digest != record.digest:
        raise InputError(
            f"--image names digest {ref.digest}; the staged, verified candidate is {record.digest}"
        )
    credentials = resolve_credentials(ref.host)
    auth = (credentials.username, credentials.password) if credentials else None
    try:
        pulled = engine.pull(f"{ref.name}@{ref.digest}", auth=auth)
    except NoSuchImage:
        raise EnvironmentProblem(f"the registry does not serve {image}") from None
    except EngineError as exc:
        raise EnvironmentProblem(f"pull of {image} failed: {exc.explanation}") from None
    if pulled != record.image_id:
        raise InputError(
            f"pulled {image} is image {pulled}, not the verified image {record.image_id}: refusing to run it"
        )
    return Candidate(image=pulled, digest=record.digest, host=this_host())


def _local_with_record(engine: Engine, image: str, record: StagingRecord) -> Candidate:
    """A local image named while --staged is given: it must be the verified image."""
    facts = engine.inspect(image)
    if facts.id != record.image_id:
        raise InputError(f"image {image} is {facts.id}, not the staged, verified image {record.image_id}")
    return Candidate(image=facts.id, digest=record.digest, host=this_host())
