"""The last act of ``releasekit demo``: publish to a local registry, then promote.

One call for the demo: in the demo's registry on 127.0.0.1, where the "stage" stage pushed the
verified candidate, publish that staged digest (or, with no registry given, start a throw-away
one and push the image), through
the real gate to ``REG/demo/<name>:beta`` (with ``trusted_key``: its signed evidence verified
and attached to the digest, unsigned evidence refused), promote ``beta`` to ``stable`` (same
digest; with ``trusted_key`` the attached envelopes verified again), and hand back what
happened. A registry started here is stopped when the call returns; its storage stays under
``root`` for anyone who wants to look.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from pydantic import BaseModel

from releasekit.demo.localregistry import LocalRegistry, start_local_registry
from releasekit.publish.commands import docker_engine, publish_target
from releasekit.publish.promote import PromoteResult, promote
from releasekit.publish.service import PublishResult, publish


class LocalRelease(BaseModel):
    registry: str
    repository: str
    publish: PublishResult
    promote: PromoteResult | None = None

    @property
    def passed(self) -> bool:
        return self.publish.published and self.promote is not None and self.promote.promoted

    def signed_text(self) -> str:
        """What the stage says of the signatures: which key, which way attached, verified again at promote."""
        signed = self.publish.signed
        if signed is None or not self.publish.signers:
            return "evidence NOT signed"
        keyids = sorted({k[:16] for k in self.publish.signers.values()})
        where = f"tag {signed.tag}" if signed.tag else "the referrers API"
        again = " and at promote" if self.promote is not None and self.promote.signers else ""
        return (
            f"{len(signed.files)} DSSE envelope(s) signed by {', '.join(keyids)} attached via {where}, "
            f"verified with --trusted-key at publish{again}"
        )


@contextmanager
def _registry(root: Path, running: LocalRegistry | None) -> Iterator[LocalRegistry]:
    if running is not None:
        yield running
        return
    with start_local_registry(root) as reg:
        yield reg


def publish_locally(
    *,
    root: Path,
    image: str,
    lock_path: Path,
    receipts_dir: Path,
    evidence_dir: Path | None = None,
    manifest_path: Path | None = None,
    repository: str = "demo/release",
    out_dir: Path | None = None,
    trusted_key: Path | None = None,
    staged: Path | None = None,
    registry: LocalRegistry | None = None,
) -> LocalRelease:
    """``staged`` (staging.json) with the running ``registry`` that holds it: publish that digest,
    promoted registry-side as the workflow's publish job does; else push ``image`` to a registry
    started (and stopped) here."""
    trusted = [trusted_key] if trusted_key is not None else []
    from_staging = staged is not None and registry is not None
    with _registry(root, registry) as reg:
        target = f"{reg.host}/{repository}"
        engine = docker_engine()
        published = publish(
            engine=engine,
            publish_target=publish_target(engine),
            image=None if from_staging else image,
            staged=staged if from_staging else None,
            lock_path=lock_path,
            receipts_dir=receipts_dir,
            evidence_dir=evidence_dir,
            manifest_path=manifest_path,
            to=target,
            tags=["beta"],
            out_dir=out_dir,
            trusted_key_files=trusted,
            require_signed=bool(trusted),
        )
        outcome = LocalRelease(registry=reg.host, repository=target, publish=published)
        if published.published:
            outcome.promote = promote(
                publish_target=publish_target(),
                source=f"{target}:beta",
                target=f"{target}:stable",
                manifest_path=manifest_path,
                trusted_key_files=trusted,
                require_signed=bool(trusted),
            )
        return outcome
