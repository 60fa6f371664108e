"""The demo release built once per test run, and the writable copies tests make of it.

``build_demo_once``: ``releasekit demo``'s stages up to ``build`` on the bare example (without the
validation set-up), on a build cache of its own, once per run: under pytest-xdist the first worker
to ask builds under a lock in the run's directory, the others wait and read what it left. The
result, ``DemoBuild``, is read-only: its tree's digest is taken when it is built and checked again
when a process's session ends, so a test that writes into it fails the run.

Tests that change what they get take a copy: ``DemoRelease`` (the red-team and tamper modules'
release: its own release directory, derived images), ``CacheWorld`` (the poisoned-cache modules:
their own copy of the build cache the build wrote).
"""

from __future__ import annotations

import hashlib
import io
import json
import shutil
import tarfile
from dataclasses import dataclass
from pathlib import Path

import pytest
from corpus import tree_digest
from run_shared import run_directory, run_lock

from releasekit.clock import SystemClock
from releasekit.docker_engine import Engine, LazyEngine
from releasekit.provenance.verify import VerifyOptions, VerifyResult, verify_provenance

SP = "/usr/local/lib/python3.11/dist-packages"  # where `releasekit build` installs the wheels


@dataclass(frozen=True)
class DemoBuild:
    """One real release, read-only: ``demo/`` (example, lock, release directory) and ``cache/``."""

    root: Path
    image_id: str
    digest: str  # corpus.tree_digest of root / "demo" and of root / "cache", as built

    @property
    def demo(self) -> Path:
        return self.root / "demo"

    @property
    def lock(self) -> Path:
        return self.demo / "lock.json"

    @property
    def manifest(self) -> Path:
        return self.demo / "example" / "manifest.yaml"

    @property
    def artifacts(self) -> Path:
        return self.demo / "release"

    @property
    def cache(self) -> Path:
        """The ``RELEASEKIT_CACHE`` the build ran on (``build/``, ``git/``)."""
        return self.root / "cache"

    @property
    def commit(self) -> str:
        return json.loads(self.lock.read_text())["components"]["runtime"]["commit"]

    @property
    def native(self) -> bool:
        return "kernels" in json.loads(self.lock.read_text())["components"]

    def current_digest(self) -> str:
        return _digest_of(self.root)

    def copy_artifacts(self, into: Path) -> Path:
        shutil.copytree(self.artifacts, into, symlinks=True)
        return into

    def copy_cache(self, into: Path) -> Path:
        shutil.copytree(self.cache, into, symlinks=True)
        return into


def _digest_of(root: Path) -> str:
    return hashlib.sha256(f"{tree_digest(root / 'demo')} {tree_digest(root / 'cache')}".encode()).hexdigest()


def build_demo_once(config: pytest.Config) -> DemoBuild:
    """The run's one demo build (made by whichever process of the run asks first)."""
    from releasekit.demo.service import STAGES, VALIDATION_SETUP_STAGES, run_demo

    root = run_directory(config) / "demo-build"
    built = root.parent / "demo-build.json"
    with run_lock(config, "demo-build"):
        if not built.is_file():
            shutil.rmtree(root, ignore_errors=True)  # what an earlier, failed attempt left
            root.mkdir()
            plain = [s for s in STAGES if s.name not in VALIDATION_SETUP_STAGES]
            names = [s.name for s in plain]
            with pytest.MonkeyPatch.context() as env:
                env.setenv("RELEASEKIT_CACHE", str(root / "cache"))  # its own: the builds start cold
                demo = run_demo(root / "demo", stages=plain[: names.index("build") + 1])
            assert demo.passed and demo.image_id, [s.summary for s in demo.stages]
            built.write_text(json.dumps({"image_id": demo.image_id, "digest": _digest_of(root)}))
        facts = json.loads(built.read_text())
    return DemoBuild(root, facts["image_id"], facts["digest"])


def _tar(files: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name.lstrip("/"))
            info.size = len(data)
            info.mode = 0o755
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


class DemoRelease:
    """A module's own copy of the demo build: the release directory copied (verify-provenance writes
    its summary and SBOM there), the image, lock and manifest shared; and the images it derives."""

    def __init__(self, client, build: DemoBuild, root: Path) -> None:
        self.client = client
        self.root = root
        self.images: list[str] = []
        self.image_id = build.image_id
        self.lock = build.lock
        self.manifest = build.manifest
        self.artifacts = build.copy_artifacts(root / "release")
        self.commit = build.commit
        self.native = build.native

    def derive(
        self,
        script: str,
        *,
        files: dict[str, bytes] | None = None,
        changes: list[str] | None = None,
        start: str | None = None,
    ) -> str:
        # The release has no entrypoint: the script runs as the command, and the commit restores CMD.
        container = self.client.containers.create(
            start or self.image_id, command=["sh", "-c", script], network_mode="none"
        )
        try:
            if files:
                container.put_archive("/", _tar(files))
            container.start()
            status = container.wait(timeout=300)
            if status.get("StatusCode") != 0:
                raise AssertionError(container.logs().decode(errors="replace"))
            image = container.commit(changes=['CMD ["python3"]', *(changes or [])])
        finally:
            container.remove(force=True)
        self.images.append(image.id)
        return image.id

    def forge(self, image: str, into: Path, *, wheel: tuple[str, Path] | None = None) -> Path:
        """The attacker's release directory: build.json (and labels it records) rewritten for ``image``."""
        forged = into / "forged-release"
        shutil.copytree(self.artifacts, forged)
        record = json.loads((forged / "build.json").read_text())
        record["image_id"] = image
        if wheel is not None:
            name, path = wheel
            shutil.copyfile(path, forged / "wheels" / path.name)
            sha = hashlib.sha256(path.read_bytes()).hexdigest()
            for comp in record["components"]:
                if comp["name"] == name:
                    (forged / "wheels" / comp["wheel_filename"]).unlink()
                    comp["wheel_filename"], comp["wheel_sha256"] = path.name, sha
                    record["labels"][f"io.releasekit.component.{name}.wheel.sha256"] = sha
        (forged / "build.json").write_text(json.dumps(record, indent=2))
        return forged

    def verify(self, image: str, **kwargs) -> VerifyResult:
        """``image`` against this release directory, with the manifest given."""
        kwargs.setdefault("summary", self.root / f"summary-{image[7:19]}.json")
        opts = VerifyOptions(
            image=image,
            lock=self.lock,
            artifacts=self.artifacts,
            manifest=self.manifest,
            allow_local_repos=True,
            cache_dir=str(self.root / "git-cache"),
            **kwargs,
        )
        return verify_provenance(opts, engine=LazyEngine(timeout=120), clock=SystemClock())

    def verify_forged(self, image: str, artifacts: Path, **kwargs) -> VerifyResult:
        """``image`` against an attacker's release directory, the manifest found from the lock."""
        opts = VerifyOptions(
            image=image,
            lock=self.lock,
            artifacts=artifacts,
            allow_local_repos=True,
            cache_dir=str(self.root / "git-cache"),
            summary=self.root / f"summary-{image[7:19]}.json",
            **kwargs,
        )
        return verify_provenance(opts, engine=LazyEngine(timeout=120), clock=SystemClock())

    def attack(self, tmp_path: Path, script: str, **kwargs) -> VerifyResult:
        wheel = kwargs.pop("wheel", None)
        image = self.derive(script, **kwargs)
        return self.verify_forged(image, self.forge(image, tmp_path, wheel=wheel))

    def dist_info(self) -> str:
        return f"{SP}/rkdemo_runtime-0.1.0+g{self.commit[:12]}.dist-info"


class CacheWorld:
    """A module's own copy of the demo build's cache (``build`` wrote it; these tests poison it) and
    release directory; ``build`` runs ``releasekit build`` again on it, as the attacker's build would."""

    def __init__(self, client, build: DemoBuild, root: Path, base_id: str) -> None:
        self.client = client
        self.images: list[str] = []
        self.root = root
        build.copy_cache(root / "cache")
        self.cache = root / "cache" / "build"  # $RELEASEKIT_CACHE/build, what the build wrote
        self.lock, self.manifest = build.lock, build.manifest
        self.release = build.copy_artifacts(root / "release")
        self.image_id, self.base_id = build.image_id, base_id

    def build(self, name: str, **kwargs) -> Path:
        """``releasekit build`` again, on the (poisoned) cache: the attacker's release directory."""
        from releasekit.builder.service import BuildOptions, run_build

        outdir = self.root / name
        record = run_build(
            BuildOptions(
                manifest=self.manifest, lock=self.lock, outdir=outdir, allow_local_repos=True, **kwargs
            ),
            Engine(),
            clock=SystemClock(),
        )
        self.images.append(record.image_id)
        return outdir

    def verify(self, artifacts: Path, image: str | None = None, **kwargs) -> VerifyResult:
        from releasekit.records.build import read_build_record

        image = image or read_build_record(artifacts / "build.json").image_id
        opts = VerifyOptions(
            image=image,
            lock=self.lock,
            artifacts=artifacts,
            allow_local_repos=True,
            summary=self.root / f"summary-{image[7:19]}.json",
            **kwargs,
        )
        return verify_provenance(opts, engine=LazyEngine(timeout=120), clock=SystemClock())

    def base_file(self, path: str) -> bytes:
        container = self.client.containers.create(self.base_id, command=["true"], network_mode="none")
        try:
            stream, _ = container.get_archive(path)
            with tarfile.open(fileobj=io.BytesIO(b"".join(stream))) as tar:
                member = tar.next()
                assert member is not None
                fh = tar.extractfile(member)
                assert fh is not None
                return fh.read()
        finally:
            container.remove(force=True)

    def entry(self, kind: str, name: str) -> Path:
        found = sorted(self.cache.glob(f"{kind}/*/*/{name}"))
        assert len(found) == 1, found
        return found[0]
