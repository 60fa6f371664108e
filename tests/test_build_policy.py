"""Version policies on a B12X-like repository, built in the python-builder image made from dockerfiles/.

The repository is shaped like the real B12X: a setuptools package with a static
``version = "1.2.6"`` in pyproject.toml, a ``_version.py`` repeating it, package data and
no compiled code. The builder image is built for real from
``dockerfiles/python-builder.Dockerfile`` on the local Debian test base (no registry
pulls; its pinned build requirements come from a wheelhouse in its build context).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from forge import Forge
from plan_world import plan_lock

from releasekit.builder.service import BuildOptions, run_build
from releasekit.clock import SystemClock
from releasekit.docker_engine import Engine, LazyEngine
from releasekit.errors import BuildFailed
from releasekit.manifest import load_manifest
from releasekit.provenance.verify import VerifyOptions, verify_provenance
from releasekit.records.build import BuildRecord
from releasekit.records.lock import write_lock

pytestmark = [pytest.mark.docker, pytest.mark.slow]

REPO_ROOT = Path(__file__).resolve().parents[1]
BUILDER = "releasekit-test/python-builder:policy"
PINS = ["setuptools==80.9.0", "setuptools-scm==8.3.1", "wheel==0.45.1", "packaging==25.0"]

PYPROJECT = """\
[build-system]
requires = ["setuptools>=70"]
build-backend = "setuptools.build_meta"

[project]
name = "b12x"
version = "1.2.6"
description = "B12X-like: CuTe-DSL kernels compiled at run time"
requires-python = ">=3.10"

[tool.setuptools.packages.find]
include = ["b12x*"]

[tool.setuptools.package-data]
b12x = ["configs/*.json"]
"""

FILES = {
    "pyproject.toml": PYPROJECT,
    "b12x/__init__.py": 'from b12x._version import __version__\n\n__all__ = ["__version__"]\n',
    "b12x/_version.py": '__version__ = "1.2.6"\n',
    "b12x/gemm/__init__.py": '"""W4A16 GEMM: the kernel source is CuTe DSL, compiled when first called."""\n',
    "b12x/gemm/w4a16.py": "def tile_shape(m: int) -> tuple[int, int]:\n    return (128, 128) if m > 64 else (64, 128)\n",
    "b12x/configs/sm120.json": '{"arch": "sm_120a", "tiles": [[128, 128]]}\n',
}


def wheelhouse(dest: Path) -> Path:
    """The builder's pinned build requirements as wheels (downloaded once per machine into the test dir)."""
    dest.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--quiet",
            "--dest",
            str(dest),
            "--only-binary=:all:",
            "--python-version",
            "3.11",
            "--platform",
            "manylinux2014_x86_64",
            "--implementation",
            "cp",
            *PINS,
        ],
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        pytest.skip(f"cannot fetch the builder's pinned wheels: {proc.stderr.strip().splitlines()[-1:]}")
    return dest


def manifest_text(repo: str, base: str, house: Path, policy: str) -> str:
    return f"""\
schema: releasekit/v1
name: b12x-policy
components:
  b12x:
    kind: git
    repo: {repo}
    canonical_branch: main
    distribution: b12x
    import_names: [b12x]
    build:
{policy}
      environment:
        kind: image
        image: {BUILDER}
        digest: to-be-locked
        dockerfile: {REPO_ROOT / "dockerfiles" / "python-builder.Dockerfile"}
        base:
          name: {base}
          digest: to-be-locked
        context:
          wheels: {house}
toolchain:
  base_image:
    name: {base}
    digest: to-be-locked
  cuda_arch_list: ["12.0a"]
"""


STAMP = """\
      version_policy:
        policy: stamp
        stamp: pyproject
        file: b12x/_version.py
        reason: B12X declares a static version in pyproject.toml; releasekit stamps the commit into it.
"""
STATIC = """\
      version_policy:
        policy: static
        reason: B12X declares a static version; the commit is proven by labels, provenance and blobs.
"""
SCM = "      version_policy: scm\n"


@dataclass
class World:
    root: Path
    forge: Forge
    commit: str
    base: str
    house: Path

    def manifest(self, name: str, policy: str) -> Path:
        path = self.root / f"{name}.yaml"
        path.write_text(manifest_text(self.forge.url, self.base, self.house, policy))
        return path

    def build(self, name: str, policy: str, **kw) -> tuple[Path, Path, BuildRecord]:
        manifest = self.manifest(name, policy)
        lock = self.root / f"{name}.lock.json"
        write_lock(plan_lock(load_manifest(manifest), cache_dir=self.root / "git", allow_local=True), lock)
        opts = BuildOptions(
            manifest=manifest,
            lock=lock,
            outdir=self.root / name,
            cache_dir=self.root / "cache",
            git_cache_dir=self.root / "git",
            allow_local_repos=True,
            build_root=self.root / "src",
            **kw,
        )
        return manifest, lock, run_build(opts, Engine(), clock=SystemClock())

    def verify(self, name: str, manifest: Path, lock: Path, record: BuildRecord):
        return verify_provenance(
            VerifyOptions(
                image=record.image_id,
                lock=lock,
                artifacts=self.root / name,
                manifest=manifest,
                allow_local_repos=True,
                cache_dir=str(self.root / "git"),
                summary=self.root / f"{name}-summary.json",
            ),
            engine=LazyEngine(timeout=120),
            clock=SystemClock(),
        )


@pytest.fixture(scope="module")
def policy_world(tmp_path_factory, base_image, docker_client):
    root = tmp_path_factory.mktemp("policy")
    forge = Forge(root / "b12x", name="b12x", default_branch="main")
    commit = forge.init(FILES, "b12x 1.2.6")
    house = wheelhouse(root / "wheelhouse")
    yield World(root, forge, commit, base_image.name, house)
    for image in docker_client.images.list(name=BUILDER.split(":")[0]):
        for tag in image.tags:
            docker_client.images.remove(tag, noprune=False)


def _errors(result) -> list[str]:
    return [f"{f.code}: {f.message}" for f in result.findings.findings if f.severity == "error"]


def test_stamp_names_the_commit_records_the_change_and_verifies(policy_world: World, docker_client):
    manifest, lock, record = policy_world.build("stamp", STAMP)
    comp = record.components[0]
    assert comp.version == f"1.2.6+g{policy_world.commit[:12]}"
    assert comp.wheel_filename == f"b12x-1.2.6+g{policy_world.commit[:12]}-py3-none-any.whl"
    assert comp.builder_name == BUILDER and comp.builder_image == docker_client.images.get(BUILDER).id
    assert comp.version_policy == "stamp"
    paths = {m["path"]: m for m in comp.modifications}
    assert set(paths) == {"pyproject.toml", "b12x/_version.py"}
    assert all(m["before_sha256"] != m["after_sha256"] for m in paths.values())
    statement = json.loads((policy_world.root / "stamp" / "provenance.intoto.json").read_text())
    internal = statement["predicate"]["buildDefinition"]["internalParameters"]
    assert internal["buildModifications"]["b12x"] == comp.modifications
    assert internal["versionPolicies"]["b12x"]["policy"] == "stamp"
    assert internal["builderEnvironment"]["b12x"]["SOURCE_DATE_EPOCH"] == str(policy_world.forge.clock.now)
    labels = docker_client.images.get(record.image_id).labels
    assert labels["io.releasekit.component.b12x.version-policy"] == "stamp"
    # The installed _version.py is the stamped one, not the commit's blob: accepted as declared.
    result = policy_world.verify("stamp", manifest, lock, record)
    assert result.passed, _errors(result)
    # A build record whose declared stamp is not what is installed is flagged.
    build_json = policy_world.root / "stamp" / "build.json"
    data = json.loads(build_json.read_text())
    for mod in data["components"][0]["modifications"]:
        mod["after_blob"] = "0" * 40
    build_json.write_text(json.dumps(data))
    tampered = policy_world.verify("stamp", manifest, lock, record)
    assert any(
        f.code == "SOURCE_BLOB_MISMATCH" and "_version.py" in (f.location.path or "")
        for f in tampered.findings.findings
    )
    # A declared file change in a build record whose policy is not stamp is flagged (no manifest at hand:
    # the record's own policy is what verify-provenance has).
    data["components"][0]["modifications"] = comp.modifications
    data["components"][0]["version_policy"] = "scm"
    lonely = policy_world.root / "lonely"
    lonely.mkdir()
    (lonely / "lock.json").write_bytes(lock.read_bytes())
    build_json.write_text(json.dumps(data))
    # The release directory away from the manifest (without the source archive, which holds a copy):
    # verify-provenance looks beside the lock and the release directory and finds nothing here.
    shutil.copytree(policy_world.root / "stamp", lonely / "release", ignore=shutil.ignore_patterns("archive"))
    undeclared = verify_provenance(
        VerifyOptions(
            image=record.image_id,
            lock=lonely / "lock.json",
            artifacts=lonely / "release",
            allow_local_repos=True,
            cache_dir=str(policy_world.root / "git"),
            summary=lonely / "summary.json",
        ),
        engine=LazyEngine(timeout=120),
        clock=SystemClock(),
    )
    assert "SOURCE_MODIFICATION_UNDECLARED" in {f.code for f in undeclared.findings.findings}


def test_static_is_labelled_verified_by_blobs_and_explained(policy_world: World, docker_client):
    manifest, lock, record = policy_world.build("static", STATIC)
    comp = record.components[0]
    assert comp.version == "1.2.6" and comp.modifications == []
    labels = docker_client.images.get(record.image_id).labels
    assert labels["io.releasekit.component.b12x.commit"] == policy_world.commit
    assert labels["io.releasekit.component.b12x.version-policy"] == "static"
    notes = (policy_world.root / "static" / "RELEASE.md").read_text()
    assert "Version policy **static**" in notes and "source-blob check" in notes
    result = policy_world.verify("static", manifest, lock, record)
    assert result.passed, _errors(result)
    assert {f.severity for f in result.findings.findings if f.code == "VERSION_COMMIT_MISSING"} == {"info"}


def test_scm_refuses_a_static_version(policy_world: World):
    with pytest.raises(
        BuildFailed, match=r"built version 1\.2\.6 does not name its commit .*stamp or static"
    ):
        policy_world.build("scm", SCM)
