"""releasekit build on the real Docker Engine, from real git repositories and real PEP 517 builds.

One example release (the demo's two components: pure Python, and CUDA when nvcc is
present) is locked with ``plan lock``'s service and built once per module; the tests
read that build, then build it again (forced and cached) and break it on purpose.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest
from cli_run import invoke
from plan_world import plan_lock
from stable import archive_bytes, assert_same_record

from releasekit.builder.native import fatbin_arches
from releasekit.builder.service import BuildOptions, run_build
from releasekit.clock import SystemClock
from releasekit.demo.example import DemoRepository, make_example
from releasekit.docker_engine import Engine
from releasekit.errors import BuildFailed, EnvironmentProblem, InputError
from releasekit.manifest import load_manifest
from releasekit.records.build import BuildRecord
from releasekit.records.lock import Lock, lock_file_sha256, read_lock, write_lock

pytestmark = [pytest.mark.docker, pytest.mark.slow]
TAG = "releasekit-test/build:module"
HAS_NVCC = shutil.which("nvcc") is not None


@dataclass
class World:
    root: Path
    manifest: Path
    lock_path: Path
    lock: Lock
    record: BuildRecord
    out: Path

    def options(self, out: str, **kw) -> BuildOptions:
        return BuildOptions(
            manifest=self.manifest,
            lock=kw.pop("lock", self.lock_path),
            outdir=self.root / out,
            cache_dir=self.root / "cache",
            git_cache_dir=self.root / "git",
            allow_local_repos=True,
            build_root=self.root / "src",
            wheelhouses=HOUSES,
            **kw,
        )


# The wheelhouse of the pinned component, made by the module fixture.
HOUSES: list[Path] = []
# The pinned wheel's declared source: a commit of the demo's runtime repository (set by the fixture).
EXTRA: dict[str, str] = {}


def _lock(root: Path, manifest: Path, name: str = "lock.json") -> Path:
    lock = plan_lock(load_manifest(manifest), cache_dir=root / "git", allow_local=True, wheelhouses=HOUSES)
    path = root / name
    write_lock(lock, path)
    return path


@pytest.fixture(scope="module")
def build_world(tmp_path_factory, base_image, docker_client) -> World:
    root = tmp_path_factory.mktemp("build")
    example = make_example(root / "example", base_image=base_image.name)
    manifest = Path(example.manifest)
    HOUSES[:] = [_pinned_wheelhouse(root / "wheelhouse")]
    source_repo = Path(example.repositories["runtime"])
    EXTRA["repo"] = source_repo.resolve().as_uri()
    EXTRA["commit"] = subprocess.run(
        ["git", "--git-dir", str(source_repo), "rev-parse", "main~1"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    text = manifest.read_text()
    manifest.write_text(text.replace("toolchain:\n", PINNED_COMPONENT.format(**EXTRA) + "toolchain:\n", 1))
    lock_path = _lock(root, manifest)
    w = World(root, manifest, lock_path, read_lock(lock_path), None, root / "out1")  # type: ignore[arg-type]
    w.record = run_build(w.options("out1", tag=TAG), Engine(), clock=SystemClock())
    yield w
    for image in docker_client.images.list(name="releasekit-test/build"):
        for tag in image.tags:
            docker_client.images.remove(tag, noprune=False)


PINNED_COMPONENT = """\
  extra:
    kind: wheel
    requirement: rkdemo-extra==1.0
    sha256: to-be-locked
    import_names: [rkdemo_extra]
    source:
      repo: {repo}
      ref: refs/heads/main
      commit: "{commit}"
"""


def _pinned_wheelhouse(house: Path) -> Path:
    """A wheel built elsewhere (here: written by hand, RECORD and all) for a wheel-pinned component."""
    import base64
    import hashlib

    files = {
        "rkdemo_extra/__init__.py": b"EXTRA = True\n",
        "rkdemo_extra-1.0.dist-info/METADATA": b"Metadata-Version: 2.1\nName: rkdemo-extra\nVersion: 1.0\n",
        "rkdemo_extra-1.0.dist-info/WHEEL": b"Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    rows = [
        f"{n},sha256={base64.urlsafe_b64encode(hashlib.sha256(d).digest()).rstrip(b'=').decode()},{len(d)}"
        for n, d in files.items()
    ]
    files["rkdemo_extra-1.0.dist-info/RECORD"] = (
        "\n".join([*rows, "rkdemo_extra-1.0.dist-info/RECORD,,"]) + "\n"
    ).encode()
    house.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(house / "rkdemo_extra-1.0-py3-none-any.whl", "w") as zf:
        for name, data in files.items():
            zf.writestr(name, data)
    return house


def _run_in(docker_client, image: str, script: str) -> str:
    out = docker_client.containers.run(
        image, ["python3", "-B", "-c", script], remove=True, network_disabled=True
    )
    return out.decode()


def test_labels_match_the_lock(build_world: World, docker_client):
    labels = docker_client.images.get(TAG).labels
    assert labels["io.releasekit.lock.sha256"] == lock_file_sha256(build_world.lock_path)
    assert labels["io.releasekit.manifest.sha256"] == build_world.lock.manifest.sha256
    for name, comp in build_world.lock.git_components().items():
        prefix = f"io.releasekit.component.{name}"
        assert labels[f"{prefix}.commit"] == comp.commit
        assert labels[f"{prefix}.tree"] == comp.tree
        assert labels[f"{prefix}.repo"] == comp.repo
        assert labels[f"{prefix}.version"].endswith(f"+g{comp.commit[:12]}")
        wheel = next(c for c in build_world.record.components if c.name == name)
        assert labels[f"{prefix}.wheel.sha256"] == wheel.wheel_sha256
    extra = build_world.lock.components["extra"]
    assert labels["io.releasekit.component.extra.commit"] == EXTRA["commit"]
    assert labels["io.releasekit.component.extra.wheel.sha256"] == extra.sha256
    assert labels["io.releasekit.component.extra.version"] == "1.0"
    runtime = build_world.lock.components["runtime"]
    assert labels["org.opencontainers.image.revision"] == runtime.commit
    assert labels["org.opencontainers.image.base.name"] == build_world.lock.toolchain.base_image.name
    newest = max(c.commit_time for c in build_world.lock.git_components().values())
    from datetime import UTC, datetime

    assert labels["org.opencontainers.image.created"] == datetime.fromtimestamp(newest, UTC).strftime(
        "%Y-%m-%dT%H:%M:%SZ"
    )
    assert docker_client.images.get(TAG).id == build_world.record.image_id


def test_installed_files_match_records_and_versions_name_the_locked_commits(
    build_world: World, docker_client
):
    script = r"""
import base64, csv, hashlib, importlib, importlib.metadata as md, json, os
out = {}
for name, mod in (("rkdemo-runtime", "rkdemo_runtime"), ("rkdemo-kernels", "rkdemo_kernels"), ("rkdemo-extra", "rkdemo_extra")):
    try:
        dist = md.distribution(name)
    except md.PackageNotFoundError:
        continue
    bad, n = [], 0
    for row in csv.reader(dist.read_text("RECORD").splitlines()):
        if not row[1]:
            continue
        path = os.path.normpath(os.path.join(str(dist.locate_file("")), row[0]))
        algo, _, want = row[1].partition("=")
        got = base64.urlsafe_b64encode(hashlib.new(algo, open(path, "rb").read()).digest()).rstrip(b"=").decode()
        n += 1
        if got != want:
            bad.append(row[0])
    m = importlib.import_module(mod)
    commit = importlib.import_module(mod + "._version").__commit__ if name != "rkdemo-extra" else None
    out[name] = {"version": dist.version, "bad": bad, "files": n, "commit": commit, "file": m.__file__}
print(json.dumps(out))
"""
    installed = json.loads(_run_in(docker_client, TAG, script))
    expected = {"rkdemo-runtime": "runtime", **({"rkdemo-kernels": "kernels"} if HAS_NVCC else {})}
    assert set(installed) == {*expected, "rkdemo-extra"}
    assert installed["rkdemo-extra"]["version"] == "1.0" and installed["rkdemo-extra"]["bad"] == []
    for dist, comp_name in expected.items():
        commit = build_world.lock.components[comp_name].commit
        got = installed[dist]
        assert got["bad"] == [] and got["files"] >= 4
        assert got["version"].endswith(f"+g{commit[:12]}")
        assert got["commit"] == commit
        assert got["file"].startswith("/usr/local/lib/python3")


def test_outputs_provenance_and_release_notes(build_world: World):
    out = build_world.out
    record = BuildRecord.model_validate_json((out / "build.json").read_text())
    assert record.image_id == build_world.record.image_id and record.image_tag == TAG
    statement = json.loads((out / "provenance.intoto.json").read_text())
    assert statement["_type"] == "https://in-toto.io/Statement/v1"
    assert statement["predicateType"] == "https://slsa.dev/provenance/v1"
    subjects = {s["name"]: s["digest"]["sha256"] for s in statement["subject"]}
    assert subjects[TAG] == record.image_id.removeprefix("sha256:")
    deps = statement["predicate"]["buildDefinition"]["resolvedDependencies"]
    for name, comp in build_world.lock.git_components().items():
        dep = next(d for d in deps if d["name"] == name)
        assert dep["uri"] == f"git+{comp.repo}@refs/heads/main"
        assert dep["digest"] == {"gitCommit": comp.commit}
    assert next(d for d in deps if d["name"] == "lock")["digest"]["sha256"] == lock_file_sha256(
        build_world.lock_path
    )
    assert (
        next(d for d in deps if d["name"] == "base-image")["annotations"]["imageId"]
        == record.base_image.image_id
    )
    notes = (out / "RELEASE.md").read_text()
    extra = next(c for c in record.components if c.name == "extra")
    assert extra.kind == "wheel" and extra.commit == EXTRA["commit"] and extra.wheel_filename not in subjects
    pinned = next(d for d in deps if d["name"] == "extra")
    assert pinned["uri"] == "pkg:pypi/rkdemo-extra@1.0" and pinned["digest"]["sha256"] == extra.wheel_sha256
    assert pinned["annotations"]["gitCommit"] == EXTRA["commit"]
    assert extra.wheel_sha256 in notes and EXTRA["commit"] in notes
    for comp in (c for c in record.components if c.built):
        wheel = out / "wheels" / comp.wheel_filename
        assert subjects[comp.wheel_filename] == comp.wheel_sha256
        assert comp.commit in notes and comp.wheel_sha256 in notes and comp.repo in notes
        assert (out / comp.log).read_text().count("SOURCE_DATE_EPOCH") >= 1
        with zipfile.ZipFile(wheel) as zf:
            assert {i.date_time for i in zf.infolist()} == {_zip_time(build_world, comp.name)}
    assert "FROM releasekit/base-python:bookworm@sha256:" in (out / "Dockerfile").read_text()
    assert record.smoke["problems"] == []


def _zip_time(build_world: World, name: str) -> tuple[int, ...]:
    import time

    return tuple(time.gmtime(build_world.lock.components[name].commit_time)[:6])


@pytest.mark.skipif(not HAS_NVCC, reason="nvcc is not on PATH: the CUDA component is not part of this build")
def test_native_component_has_sm120a_code(build_world: World):
    comp = next(c for c in build_world.record.components if c.name == "kernels")
    assert comp.native_arches == ["12.0a"]
    with zipfile.ZipFile(build_world.out / "wheels" / comp.wheel_filename) as zf:
        lib = zf.read("rkdemo_kernels/librkdemo_kernels.so")
    assert fatbin_arches(lib) == {"sm_120a"}


def test_two_builds_are_identical_and_the_cache_skips_unchanged_components(build_world: World, docker_client):
    # Remove the first image so that the second build really loads its own.
    docker_client.images.remove(build_world.record.image_id, force=True)
    # A stale tree where the build checks out: never reused, so it cannot leak into the wheel.
    stale = build_world.root / "src" / "runtime" / "rkdemo_runtime"
    stale.mkdir(parents=True, exist_ok=True)
    (stale / "leftover.py").write_text("LEFT = 'over'\n")
    forced = run_build(build_world.options("out2", no_cache=True, tag=TAG), Engine(), clock=SystemClock())
    runtime_wheel = next(c.wheel_filename for c in forced.components if c.name == "runtime")
    with zipfile.ZipFile(build_world.root / "out2/wheels" / runtime_wheel) as zf:
        assert "rkdemo_runtime/leftover.py" not in zf.namelist()
    assert docker_client.images.get(TAG).id == build_world.record.image_id
    assert sorted(forced.cache.misses) == sorted(c.name for c in build_world.record.components if c.built)
    assert forced.cache.layer == "miss"
    assert forced.image_id == build_world.record.image_id
    assert {c.name: c.wheel_sha256 for c in forced.components} == {
        c.name: c.wheel_sha256 for c in build_world.record.components
    }
    for comp in forced.components:
        assert (build_world.root / "out2/wheels" / comp.wheel_filename).read_bytes() == (
            build_world.out / "wheels" / comp.wheel_filename
        ).read_bytes()

    # Byte-stable records (issue 22): both builds started cold, so every record is the same bytes,
    # the provenance apart from its documented time fields.
    for name in ("build.json", "archive.json", "RELEASE.md", "Dockerfile", "provenance.intoto.json"):
        assert_same_record(build_world.out / name, build_world.root / "out2" / name)
    # The archive itself, byte for byte (issue 35: a bundle once differed while its sha256 in
    # archive.json was the only trace).
    assert archive_bytes(build_world.out) == archive_bytes(build_world.root / "out2")

    # The mirrors as months of fetches and a gc leave them: the same objects, packed anew with
    # other delta settings. The archive's bundles must not change with that (issue 35).
    for mirror in sorted((build_world.root / "git").glob("*.git")):
        repack = ["repack", "-q", "-a", "-d", "-f", "--window=250", "--depth=1"]
        subprocess.run(["git", "--git-dir", str(mirror), *repack], check=True, capture_output=True)
    cached = run_build(build_world.options("out3"), Engine(), clock=SystemClock())
    assert cached.cache.misses == [] and sorted(cached.cache.hits) == sorted(forced.cache.misses)
    assert cached.cache.layer == "hit"
    assert cached.image_id == build_world.record.image_id
    assert (build_world.root / "out3/logs/runtime.log").read_text().startswith("# cache hit")
    # From the cache (and without --tag): the same records apart from what says hit instead of
    # miss, and the tag.
    for name in ("archive.json", "Dockerfile"):
        assert_same_record(build_world.out / name, build_world.root / "out3" / name)
    assert archive_bytes(build_world.out) == archive_bytes(build_world.root / "out3")
    first, third = (json.loads((build_world.root / d / "build.json").read_text()) for d in ("out1", "out3"))
    for record in (first, third):
        record.pop("cache"), record.pop("image_tag")
        for comp in record["components"]:
            comp.pop("cache")
    assert first == third


def test_moved_checkout_is_refused(build_world: World):
    data = json.loads(build_world.lock_path.read_text())
    other = data["components"]["runtime"]["pull_requests"][0]
    # The lock names a commit whose tree is not the one recorded: a moved or rewritten head.
    data["components"]["runtime"]["commit"] = other["head"]
    moved = build_world.root / "moved-lock.json"
    moved.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    with pytest.raises(InputError, match="tree is"):
        run_build(build_world.options("out-moved", lock=moved, no_cache=True), Engine(), clock=SystemClock())
    assert not (build_world.root / "out-moved/build.json").exists()


def test_build_that_edits_tracked_sources_is_refused(build_world: World):
    root = build_world.root / "dirty"
    repo = DemoRepository(root / "repos", "rkdemo-runtime")
    src = Path(build_world.manifest).parent / "repos/clones/rkdemo-runtime"
    files = {
        str(p.relative_to(src)): p.read_text()
        for p in src.rglob("*")
        if p.is_file() and ".git" not in p.parts
    }
    files["_build/rkdemo_backend.py"] += (
        "\n_orig = build_wheel\n\ndef build_wheel(d, c=None, m=None):\n"
        "    open('rkdemo_runtime/scale.py', 'a').write('# patched during the build\\n')\n"
        "    return _orig(d, c, m)\n"
    )
    repo.commit(files, "a backend that patches sources while building")
    repo.publish()
    manifest = root / "manifest.yaml"
    text = (
        Path(build_world.manifest)
        .read_text()
        .replace(
            Path(build_world.manifest).parent.joinpath("repos/rkdemo-runtime.git").resolve().as_uri(),
            repo.remote.resolve().as_uri(),
            1,
        )
    )  # only the runtime component: the pinned wheel's declared source stays where it is
    manifest.write_text(_without_merge_plans(text))
    lock = _lock(root, manifest)
    opts = build_world.options("out-dirty", lock=lock, no_cache=True).model_copy(
        update={"manifest": manifest}
    )
    with pytest.raises(BuildFailed, match="changed the checked-out sources"):
        run_build(opts, Engine(), clock=SystemClock())


def _without_merge_plans(text: str) -> str:
    """The dirty-build repository has no PR refs: drop the merge plans so that it can be locked."""
    out, skipping = [], False
    for line in text.splitlines():
        if line.strip() == "merge_plan:":
            skipping = True
            continue
        if skipping and line.startswith("      "):
            continue
        skipping = False
        out.append(line)
    return "\n".join(out) + "\n"


def test_failed_build_tags_nothing_and_the_rerun_reuses_the_cache(build_world: World, docker_client):
    root = build_world.root / "broken"
    shutil.copytree(Path(build_world.manifest).parent / "repos", root / "repos", symlinks=True)
    work = root / "repos/clones/rkdemo-runtime"
    repo = DemoRepository.__new__(DemoRepository)
    repo.remote, repo.work, repo.time = root / "repos/rkdemo-runtime.git", work, 1_800_000_000
    repo.commit(
        {
            "pyproject.toml": (work / "pyproject.toml")
            .read_text()
            .replace("rkdemo_backend", "no_such_backend")
        },
        "break the build",
    )
    repo.publish()
    manifest = root / "manifest.yaml"
    old = Path(build_world.manifest).parent / "repos"
    manifest.write_text(
        Path(build_world.manifest)
        .read_text()
        .replace(old.resolve().as_uri(), (root / "repos").resolve().as_uri())
    )
    tag = "releasekit-test/build:broken"
    opts = build_world.options("out-broken", lock=_lock(root, manifest), tag=tag).model_copy(
        update={"manifest": manifest}
    )
    with pytest.raises(BuildFailed, match="runtime"):
        run_build(opts, Engine(), clock=SystemClock())
    assert not (build_world.root / "out-broken/build.json").exists()
    assert not docker_client.images.list(name=tag)

    repo.commit(
        {
            "pyproject.toml": (work / "pyproject.toml")
            .read_text()
            .replace("no_such_backend", "rkdemo_backend")
        },
        "fix the build",
    )
    repo.publish()
    fixed = run_build(
        opts.model_copy(update={"lock": _lock(root, manifest, "fixed-lock.json")}),
        Engine(),
        clock=SystemClock(),
    )
    assert fixed.cache.misses == ["runtime"]
    assert fixed.cache.hits == (["kernels"] if HAS_NVCC else [])
    assert docker_client.images.get(tag).id == fixed.image_id


def test_cli_json_and_environment_faults(build_world: World, tmp_path):
    env = {"RELEASEKIT_CACHE": str(build_world.root / "cli-cache"), "RELEASEKIT_ALLOW_LOCAL_REPOS": "1"}
    ok = invoke(
        "build",
        str(build_world.manifest),
        "--lock",
        str(build_world.lock_path),
        "-o",
        str(tmp_path / "o"),
        "--json",
        "--save-image",
        "--wheelhouse",
        str(HOUSES[0]),
        env=env,
    )
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)["image_id"] == build_world.record.image_id
    # --save-image: a self-contained docker-save tar whose config hashes to the image ID.
    import hashlib
    import tarfile

    with tarfile.open(tmp_path / "o" / "image.tar") as tar:
        manifest = json.load(tar.extractfile("manifest.json"))[0]
        config = tar.extractfile(manifest["Config"]).read()
        names = set(tar.getnames())
    assert "sha256:" + hashlib.sha256(config).hexdigest() == build_world.record.image_id
    assert len(manifest["Layers"]) == len(json.loads(config)["rootfs"]["diff_ids"]) >= 2
    assert set(manifest["Layers"]) <= names

    no_engine = invoke(
        "build",
        str(build_world.manifest),
        "--lock",
        str(build_world.lock_path),
        "-o",
        str(tmp_path / "o2"),
        env={**env, "DOCKER_HOST": f"unix://{tmp_path}/no.sock"},
    )
    assert no_engine.returncode == 2
    assert no_engine.stderr.count("\n") == 1 and "Docker Engine" in no_engine.stderr

    data = json.loads(build_world.lock_path.read_text())
    data["toolchain"]["base_image"] = {"name": "releasekit-test/no-such-base:1"}
    missing = tmp_path / "lock-missing-base.json"
    missing.write_text(json.dumps(data))
    gone = invoke(
        "build", str(build_world.manifest), "--lock", str(missing), "-o", str(tmp_path / "o3"), env=env
    )
    assert (
        gone.returncode == 2 and "releasekit-test/no-such-base:1 is not in the Docker Engine" in gone.stderr
    )
    assert gone.stderr.count("\n") == 1

    bad = tmp_path / "overlay.Dockerfile.j2"
    bad.write_text(
        "FROM {{ base.name }}@{{ base.digest }}\nCOPY wheels/ /w/\nCOPY vllm/ /opt/vllm/\nENV PYTHONPATH=/opt/vllm\n"
    )
    refused = invoke(
        "build",
        str(build_world.manifest),
        "--lock",
        str(build_world.lock_path),
        "-o",
        str(tmp_path / "o4"),
        "--template",
        str(bad),
        env=env,
    )
    assert refused.returncode == 1
    assert "DOCKERFILE_COPIES_SOURCE" in refused.stderr and "DOCKERFILE_PYTHONPATH" in refused.stderr
    assert "Traceback" not in refused.stderr and not (tmp_path / "o4" / "wheels").exists()

    other = tmp_path / "other.yaml"
    other.write_text(build_world.manifest.read_text() + "\n# changed\n")
    stale = invoke("build", str(other), "--lock", str(build_world.lock_path), env=env)
    assert stale.returncode == 2 and "another manifest" in stale.stderr


def test_builder_image_environment(build_world: World, base_image):
    """``environment.kind: image``: the PEP 517 build runs in a network-less container of the builder image."""
    root = build_world.root / "builder"
    root.mkdir()
    text = Path(build_world.manifest).read_text()
    venv = "    build:\n      environment:\n        kind: venv\n      generated_files: [rkdemo_runtime/_version.py]"
    assert venv in text
    manifest = root / "manifest.yaml"
    manifest.write_text(
        text.replace(venv, venv.replace("kind: venv", f"kind: image\n        image: {base_image.name}"))
    )
    opts = build_world.options("out-builder", lock=_lock(root, manifest), no_cache=True).model_copy(
        update={"manifest": manifest}
    )
    record = run_build(opts, Engine(), clock=SystemClock())
    runtime = next(c for c in record.components if c.name == "runtime")
    assert runtime.builder_image == base_image.image_id
    assert runtime.version == f"0.1.0+g{build_world.lock.components['runtime'].commit[:12]}"
    log = (build_world.root / "out-builder/logs/runtime.log").read_text()
    assert f"in builder image {base_image.name}" in log
    statement = json.loads((build_world.root / "out-builder/provenance.intoto.json").read_text())
    deps = statement["predicate"]["buildDefinition"]["resolvedDependencies"]
    assert {"sha256": base_image.image_id.removeprefix("sha256:")} in [
        d["digest"] for d in deps if d["name"] == "runtime-builder"
    ]

    missing = root / "missing.yaml"
    missing.write_text(
        manifest.read_text().replace(f"image: {base_image.name}", "image: releasekit-test/no-builder:1")
    )
    opts = opts.model_copy(update={"manifest": missing, "lock": _lock(root, missing, "missing-lock.json")})
    with pytest.raises(
        EnvironmentProblem, match="builder image releasekit-test/no-builder:1 is not in the Docker Engine"
    ):
        run_build(opts, Engine(), clock=SystemClock())
