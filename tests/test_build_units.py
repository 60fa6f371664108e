"""The build's pure parts, on real files: wheel normalisation, version rule, Dockerfile lint, layer re-packing."""

from __future__ import annotations

import base64
import hashlib
import io
import os
import shutil
import subprocess
import tarfile
import zipfile
from pathlib import Path

import pytest

from releasekit.builder import dockerfile
from releasekit.builder.image import repack
from releasekit.builder.native import REPRODUCIBLE_NVCC_FLAGS
from releasekit.builder.wheel import build_environment, check_version_names_commit, unmet_requirements
from releasekit.builder.wheelfile import inspect, normalise, record_mismatches
from releasekit.builder.wheelhouse import fetch_pinned_wheel
from releasekit.errors import BuildFailed, InputError
from releasekit.manifest.models import BuildRecipe
from releasekit.records.lock import LockedWheelComponent

COMMIT = "0123456789abcdef0123456789abcdef01234567"


def _wheel(path: Path, order: list[str], stamp: tuple[int, ...]) -> Path:
    files = {
        "pkg/__init__.py": b"x = 1\n",
        "pkg/data.txt": b"data\n",
        "pkg-1.0+g0123456789ab.dist-info/METADATA": b"Metadata-Version: 2.1\nName: pkg\nVersion: 1.0+g0123456789ab\n",
        "pkg-1.0+g0123456789ab.dist-info/WHEEL": b"Wheel-Version: 1.0\nTag: py3-none-any\n",
    }
    rows = [
        f"{n},sha256={base64.urlsafe_b64encode(hashlib.sha256(d).digest()).rstrip(b'=').decode()},{len(d)}"
        for n, d in files.items()
    ]
    files["pkg-1.0+g0123456789ab.dist-info/RECORD"] = (
        "\n".join([*rows, "pkg-1.0+g0123456789ab.dist-info/RECORD,,"]) + "\n"
    ).encode()
    with zipfile.ZipFile(path, "w") as zf:
        for name in order:
            info = zipfile.ZipInfo(name, date_time=stamp)
            info.external_attr = 0o664 << 16
            zf.writestr(info, files[name])
    return path


def test_normalised_wheels_are_identical_whatever_the_backend_stamped(tmp_path):
    names = [
        "pkg/data.txt",
        "pkg-1.0+g0123456789ab.dist-info/RECORD",
        "pkg/__init__.py",
        "pkg-1.0+g0123456789ab.dist-info/WHEEL",
        "pkg-1.0+g0123456789ab.dist-info/METADATA",
    ]
    a = _wheel(tmp_path / "a.whl", names, (2024, 5, 6, 7, 8, 10))
    b = _wheel(tmp_path / "b.whl", list(reversed(names)), (2030, 1, 2, 3, 4, 6))
    assert a.read_bytes() != b.read_bytes()
    for w in (a, b):
        normalise(w, 1_767_225_600)
        assert record_mismatches(w) == []
    assert a.read_bytes() == b.read_bytes()
    with zipfile.ZipFile(a) as zf:
        order = zf.namelist()
        assert {i.date_time for i in zf.infolist()} == {(2026, 1, 1, 0, 0, 0)}
    assert order[-1].endswith("/RECORD") and order[0] == "pkg/__init__.py"
    assert inspect(a).version == "1.0+g0123456789ab"


def test_record_mismatch_is_found(tmp_path):
    w = _wheel(
        tmp_path / "a.whl",
        ["pkg/__init__.py", "pkg-1.0+g0123456789ab.dist-info/RECORD"],
        (2024, 1, 1, 0, 0, 0),
    )
    with zipfile.ZipFile(w, "a") as zf:
        zf.writestr("pkg/extra.py", b"")
    assert any("not in RECORD" in p for p in record_mismatches(w))


@pytest.mark.parametrize("version", ["1.0+g0123456789ab", "2.1.0+cu130.g0123456", "0.1+g" + COMMIT])
def test_version_naming_the_commit_passes(version):
    check_version_names_commit("c", version, COMMIT)


@pytest.mark.parametrize(
    "version,message",
    [
        ("1.0", "does not name its commit"),
        ("1.0+cu130", "does not name its commit"),
        ("1.0+gfedcba987654", "names commit fedcba987654"),
    ],
)
def test_version_not_naming_the_commit_fails(version, message):
    with pytest.raises(BuildFailed, match=message):
        check_version_names_commit("c", version, COMMIT)


def test_build_requirements_must_be_pinned():
    assert unmet_requirements(["setuptools>=68", "wheel"], ["setuptools==70.0.0", "wheel==0.43.0"]) == []
    assert unmet_requirements(["setuptools>=71"], ["setuptools==70.0.0"]) == ["setuptools>=71"]
    assert unmet_requirements(["ninja"], []) == ["ninja"]
    assert "pinned" in unmet_requirements(["x"], ["x>=1"])[0]


DIGEST = "sha256:" + "ab" * 32


def test_the_shipped_template_passes_its_own_lint():
    template = dockerfile.TEMPLATES_DIR / dockerfile.DEFAULT_TEMPLATE
    text = dockerfile.render(template, {"base": {"name": "b", "digest": DIGEST}, "labels": {"a.b": 'x "y"'}})
    assert dockerfile.lint(text, template.name).findings == []
    settings = dockerfile.image_settings(text)
    assert settings.labels == {"a.b": 'x "y"'} and settings.cmd == ["python3"]
    assert settings.env["PYTHONDONTWRITEBYTECODE"] == "1"


@pytest.mark.parametrize(
    "line,code",
    [
        ("COPY . /opt/vllm", "DOCKERFILE_COPIES_SOURCE"),
        ("COPY vllm/ /usr/local/lib/python3.11/dist-packages/vllm/", "DOCKERFILE_COPIES_SOURCE"),
        ("ADD https://example.invalid/src.tar.gz /src", "DOCKERFILE_COPIES_SOURCE"),
        ("COPY --from=builder /src /src", "DOCKERFILE_COPIES_SOURCE"),
        ("ENV PYTHONPATH=/opt/vllm:/usr/local/lib/python3.11/dist-packages", "DOCKERFILE_PYTHONPATH"),
        ("ENV PYTHONPATH /workspace", "DOCKERFILE_PYTHONPATH"),
        ("RUN pip install /tmp/w/x.whl", "DOCKERFILE_INSTALL_UNPINNED"),
    ],
)
def test_lint_refuses_source_trees_and_overlays(line, code):
    text = f"FROM base@{DIGEST}\nCOPY wheels/ /tmp/w/\n{line}\n"
    findings = dockerfile.lint(text, "t.j2")
    assert [f.code for f in findings] == [code]
    assert findings.findings[0].location.line == 3


def test_lint_allows_wheels_and_site_packages():
    text = (
        f"FROM base@{DIGEST}\nCOPY wheels/a-1-py3-none-any.whl /tmp/\n"
        "ENV PYTHONPATH=/usr/local/lib/python3.11/dist-packages\n"
        "RUN pip install --no-deps --require-hashes -r r.txt\n"
    )
    assert dockerfile.lint(text, "t").findings == []
    assert [f.code for f in dockerfile.lint("FROM debian:bookworm\n", "t")] == [
        "DOCKERFILE_BASE_NOT_BY_DIGEST"
    ]


def _tar(path: Path, entries: list[tuple[str, bytes | None]], mtime: int, uid: int) -> None:
    with tarfile.open(path, "w", format=tarfile.PAX_FORMAT) as tar:
        for name, data in entries:
            info = tarfile.TarInfo(name)
            info.mtime, info.uid, info.uname = mtime, uid, "someone"
            if data is None:
                info.type, info.mode = tarfile.DIRTYPE, 0o755
                tar.addfile(info)
            else:
                info.size, info.mode = len(data), 0o644
                tar.addfile(info, io.BytesIO(data))


def test_layer_repack_is_deterministic(tmp_path):
    entries = [("stage/", None), ("stage/usr/", None), ("stage/usr/b.py", b"b"), ("stage/usr/a.py", b"a")]
    _tar(tmp_path / "1.tar", entries, 1_700_000_000, 1000)
    _tar(tmp_path / "2.tar", list(reversed(entries)), 1_800_000_000, 0)
    for n in ("1", "2"):
        repack(tmp_path / f"{n}.tar", tmp_path / f"{n}.out", strip="stage/", mtime=1_767_225_600)
    assert (tmp_path / "1.out").read_bytes() == (tmp_path / "2.out").read_bytes()
    with tarfile.open(tmp_path / "1.out") as tar:
        members = tar.getmembers()
    assert [m.name for m in members] == ["usr", "usr/a.py", "usr/b.py"]
    assert {(m.mtime, m.uid, m.gid, m.uname) for m in members} == {(1_767_225_600, 0, 0, "")}


def test_pinned_wheel_is_refused_on_hash_mismatch(tmp_path):
    house = tmp_path / "house"
    house.mkdir()
    wheel = _wheel(house / "pkg-1.0-py3-none-any.whl", ["pkg/__init__.py"], (2024, 1, 1, 0, 0, 0))
    good = hashlib.sha256(wheel.read_bytes()).hexdigest()
    comp = LockedWheelComponent(
        name="pkg", distribution="pkg", version="1.0", filename=wheel.name, sha256=good
    )
    assert fetch_pinned_wheel(comp, [house], None, tmp_path / "out").read_bytes() == wheel.read_bytes()
    bad = comp.model_copy(update={"sha256": "0" * 64})
    with pytest.raises(BuildFailed, match="the lock pins 0000"):
        fetch_pinned_wheel(bad, [house], None, tmp_path / "out2")
    assert not (tmp_path / "out2" / wheel.name).exists()
    with pytest.raises(InputError, match="--wheelhouse"):
        fetch_pinned_wheel(comp, [], None, tmp_path / "out3")


def test_secrets_in_urls_never_reach_labels():
    from releasekit.builder.labels import image_labels
    from releasekit.records.build import BaseImageRecord, ComponentRecord

    comp = ComponentRecord(
        name="vllm",
        kind="git",
        role="runtime",
        built=True,
        commit=COMMIT,
        tree=COMMIT,
        repo="https://user:s3cret-token@github.com/org/vllm.git",
        version="1+g0123456789ab",
    )
    labels = image_labels(
        components=[comp],
        base=BaseImageRecord(name="b", image_id="sha256:" + "1" * 64),
        created="2026-01-01T00:00:00Z",
        lock_sha256="2" * 64,
        manifest_sha256="3" * 64,
        release_name="r",
    )
    assert not any("s3cret" in v for v in labels.values())
    assert labels["io.releasekit.component.vllm.repo"] == "https://github.com/org/vllm.git"
    assert labels["org.opencontainers.image.source"] == "https://github.com/org/vllm.git"


def test_pinned_wheel_from_a_simple_index(tmp_path):
    import http.server
    import threading
    from functools import partial

    wheel = _wheel(tmp_path / "w.whl", ["pkg/__init__.py"], (2024, 1, 1, 0, 0, 0))
    page = tmp_path / "simple" / "pkg"
    page.mkdir(parents=True)
    (page / "pkg-1.0-py3-none-any.whl").write_bytes(wheel.read_bytes())
    (page / "index.html").write_text(
        '<a href="pkg-1.0-py3-none-any.whl#sha256=x">pkg-1.0-py3-none-any.whl</a>'
    )
    handler = partial(http.server.SimpleHTTPRequestHandler, directory=str(tmp_path))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        index = f"http://127.0.0.1:{server.server_address[1]}/simple"
        digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
        comp = LockedWheelComponent(
            name="pkg", distribution="pkg", version="1.0", filename="pkg-1.0-py3-none-any.whl", sha256=digest
        )
        got = fetch_pinned_wheel(comp, [], index, tmp_path / "out")
        assert got.read_bytes() == wheel.read_bytes()
        with pytest.raises(BuildFailed):
            fetch_pinned_wheel(comp.model_copy(update={"sha256": "f" * 64}), [], index, tmp_path / "out2")
    finally:
        server.shutdown()


def test_pinned_wheel_from_a_simple_index_is_hash_checked(tmp_path):
    import functools
    import hashlib
    import threading
    from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

    from releasekit.builder.wheelhouse import fetch_pinned_wheel
    from releasekit.errors import BuildFailed
    from releasekit.records.lock import LockedWheelComponent

    project = tmp_path / "simple" / "demo-wheel"
    project.mkdir(parents=True)
    wheel = project / "demo_wheel-1.0-py3-none-any.whl"
    wheel.write_bytes(b"wheel bytes")
    (project / "index.html").write_text(f'<a href="{wheel.name}#sha256=ignored">{wheel.name}</a>')
    handler = functools.partial(SimpleHTTPRequestHandler, directory=str(tmp_path))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    index = f"http://127.0.0.1:{server.server_address[1]}/simple/"
    try:
        good = hashlib.sha256(b"wheel bytes").hexdigest()
        comp = LockedWheelComponent(
            name="dw", distribution="demo-wheel", version="1.0", filename=wheel.name, sha256=good
        )
        out = fetch_pinned_wheel(comp, [], index, tmp_path / "out")
        assert out.read_bytes() == b"wheel bytes"
        bad = comp.model_copy(update={"sha256": "0" * 64})
        with pytest.raises(BuildFailed):
            fetch_pinned_wheel(bad, [], index, tmp_path / "out2")
    finally:
        server.shutdown()


KERNEL = """\
namespace { __device__ float scale = 2.0f; }
__global__ void silu(float *out, const float *x, int d) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < d) { out[i] = scale * x[i] / (1.0f + __expf(-x[i])); }
}
void launch(float *o, const float *x, int d) { silu<<<(d + 127) / 128, 128>>>(o, x, d); }
"""


def _nvcc_objects(tmp_path: Path, env: dict[str, str], tag: str) -> list[bytes]:
    """The same source compiled twice like CMake does (``nvcc -c``), the second time at a later PID."""
    (tmp_path / "k.cu").write_text(KERNEL)
    out = []
    for run in range(2):
        for _ in range(run * 7):  # other jobs of a parallel build take PIDs in between
            subprocess.run(["true"], check=True)
        obj = tmp_path / f"{tag}{run}" / "k.cu.o"
        obj.parent.mkdir()
        subprocess.run(
            [
                "nvcc",
                "-O2",
                "-Xcompiler",
                "-fPIC",
                "-gencode",
                "arch=compute_120a,code=sm_120a",
                "-c",
                "k.cu",
                "-o",
                str(obj),
            ],
            cwd=tmp_path,
            env=env,
            check=True,
            capture_output=True,
        )
        out.append(obj.read_bytes())
    return out


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on PATH")
def test_native_build_environment_makes_nvcc_objects_independent_of_the_pid(tmp_path):
    env = build_environment(BuildRecipe(native=True), 1700000000, COMMIT, ["12.0a"])
    env["PATH"] = os.environ["PATH"]
    assert env["NVCC_APPEND_FLAGS"] == REPRODUCIBLE_NVCC_FLAGS
    plain = {k: v for k, v in env.items() if k != "NVCC_APPEND_FLAGS"}
    # Without the flag nvcc's temporary file, named after its PID, is in the symbol table.
    first, second = _nvcc_objects(tmp_path, plain, "plain")
    assert first != second and b"tmpxft_" in first
    first, second = _nvcc_objects(tmp_path, env, "build")
    assert first == second and b"tmpxft_" not in first


def test_nvcc_flags_declared_by_the_recipe_are_kept():
    recipe = BuildRecipe(native=True, env={"NVCC_APPEND_FLAGS": "-lineinfo"})
    assert (
        build_environment(recipe, 1, COMMIT, ["12.0a"])["NVCC_APPEND_FLAGS"]
        == f"-lineinfo {REPRODUCIBLE_NVCC_FLAGS}"
    )
    recipe = BuildRecipe(native=True, env={"NVCC_APPEND_FLAGS": "-objtemp"})
    assert build_environment(recipe, 1, COMMIT, ["12.0a"])["NVCC_APPEND_FLAGS"] == "-objtemp"
    assert "NVCC_APPEND_FLAGS" not in build_environment(BuildRecipe(), 1, COMMIT, [])


def test_release_notes_read_the_plan_check_wherever_it_was_written(tmp_path: Path) -> None:
    """RELEASE.md said "Plan check: not run" when plan-check.json sat anywhere but the release
    directory, although the check ran and failed: ``build --plan-check PATH`` names it, and without
    it the one beside the lock is read; "not run" only when none was given or found."""
    from publish_support import Release
    from records_support import notes_build_record

    from releasekit.builder.release_notes import notes_plan, render_release_notes
    from releasekit.builder.service import BuildOptions, plan_check_path
    from releasekit.records.base import load_record
    from releasekit.records.lock import read_lock
    from releasekit.records.plan_check import PlanCheckResult

    release = Release(tmp_path / "rel", "sha256:" + "1" * 64)
    release.write_plan_check(errors=["RELEASE_ONLY_COMMIT"])
    elsewhere = tmp_path / "checks" / "plan-check.json"
    elsewhere.parent.mkdir()
    (release.evidence / "plan-check.json").rename(elsewhere)
    outdir = tmp_path / "release-dir"
    outdir.mkdir()

    def notes(options: BuildOptions) -> str:
        found = plan_check_path(options, outdir)
        result = load_record(PlanCheckResult, found) if found is not None else None
        plan = notes_plan(read_lock(release.lock), [], result, release.lock_sha256)
        return render_release_notes(notes_build_record("pubtest"), plan)

    given = BuildOptions(manifest=release.manifest, lock=release.lock, plan_check=elsewhere)
    assert "Plan check: failed." in notes(given)
    plain = BuildOptions(manifest=release.manifest, lock=release.lock)
    text = notes(plain)
    assert "Plan check: not run." in text and "given with --plan-check" in text
    shutil.copy(elsewhere, release.lock.parent / "plan-check.json")  # beside the lock
    assert "Plan check: failed." in notes(plain)
    with pytest.raises(InputError, match="--plan-check .*: no such file"):
        plan_check_path(
            BuildOptions(manifest=release.manifest, lock=release.lock, plan_check=tmp_path / "no"), outdir
        )
    from cli_run import invoke

    out = tmp_path / "out"
    r = invoke(
        "build",
        str(release.manifest),
        "--lock",
        str(release.lock),
        "-o",
        str(out),
        "--plan-check",
        str(tmp_path / "no"),
    )
    assert r.returncode == 2 and r.stderr.strip().splitlines() == [
        f"releasekit: error: --plan-check {tmp_path / 'no'}: no such file"
    ], r.stderr
    assert not out.exists()


def test_an_unverified_wheel_source_stays_marked_in_labels_provenance_and_release_notes(
    tmp_path: Path,
) -> None:
    """A lock's WHEEL_SOURCE_UNVERIFIED (a pinned wheel whose ``source:`` plan lock could not read)
    reached the labels and RELEASE.md as a plain commit: now the label, the provenance's dependency
    and RELEASE.md's components table say "unverified". A verified source carries no such label, so
    images without unverified wheel sources (the demo's) keep their labels and ID."""
    from datetime import UTC, datetime

    from records_support import notes_build_record

    from releasekit.builder.labels import image_labels
    from releasekit.builder.release_notes import render_release_notes
    from releasekit.builder.service import BuildOptions, provenance_statement
    from releasekit.records.build import BaseImageRecord, ComponentRecord
    from releasekit.records.lock import Lock, LockedBaseImage, LockedManifest, LockedToolchain

    source = "a6b593d" + "0" * 33
    wheel = ComponentRecord(
        name="deepgemm",
        kind="wheel",
        role="runtime",
        repo="https://github.com/deepseek-ai/DeepGEMM.git",
        ref="main",
        commit=source,
        version="2.1.0",
        distribution="deep-gemm",
        wheel_filename="deep_gemm-2.1.0-py3-none-any.whl",
        wheel_sha256="5" * 64,
    )
    base = BaseImageRecord(name="b", image_id="sha256:" + "1" * 64)
    common = {
        "base": base,
        "created": "2026-01-01T00:00:00Z",
        "lock_sha256": "2" * 64,
        "manifest_sha256": "3" * 64,
    }
    verified = image_labels(components=[wheel], release_name="r", **common)
    unverified = image_labels(
        components=[wheel], release_name="r", unverified_sources=frozenset({"deepgemm"}), **common
    )
    label = "io.releasekit.component.deepgemm.source-verification"
    assert label not in verified and unverified[label] == "unverified"
    assert {k: v for k, v in unverified.items() if k != label} == verified

    record = notes_build_record("r").model_copy(update={"components": [wheel], "labels": unverified})
    notes = render_release_notes(record)
    assert f"{source} (source unverified: WHEEL_SOURCE_UNVERIFIED)" in notes
    plain = notes_build_record("r").model_copy(update={"components": [wheel], "labels": verified})
    assert "unverified" not in render_release_notes(plain)

    lock = Lock(
        name="r",
        manifest=LockedManifest(path="m.yaml", sha256="3" * 64, name="r"),
        components={},
        toolchain=LockedToolchain(base_image=LockedBaseImage(name="scratch")),
    )
    opts = BuildOptions(manifest=tmp_path / "m.yaml", lock=tmp_path / "lock.json")
    now = datetime(2026, 1, 1, tzinfo=UTC)

    def annotations(rec) -> dict:
        statement = provenance_statement(rec, lock, opts, "2" * 64, now, finished=now)
        [dep] = [d for d in statement.predicate.buildDefinition.resolvedDependencies if d.name == "deepgemm"]
        return dict(dep.annotations or {})

    assert annotations(record)["sourceVerification"] == "unverified"
    assert "sourceVerification" not in annotations(plain)


def test_verify_provenance_expects_the_unverified_source_label() -> None:
    """verify-provenance's label check holds the image to the lock's WHEEL_SOURCE_UNVERIFIED: an image
    without the label (an older build, or one it was stripped from) is LABEL_MISSING."""
    from types import SimpleNamespace

    from releasekit.provenance.checks.labels import LabelsCheck
    from releasekit.records.lock import (
        Lock,
        LockedBaseImage,
        LockedManifest,
        LockedToolchain,
        LockedWheelComponent,
        LockedWheelSource,
    )

    def lock(verified: bool) -> Lock:
        wheel = LockedWheelComponent(
            name="deepgemm",
            distribution="deep-gemm",
            version="2.1.0",
            filename="deep_gemm-2.1.0-py3-none-any.whl",
            sha256="5" * 64,
            source=LockedWheelSource(repo="https://github.com/deepseek-ai/DeepGEMM.git", verified=verified),
        )
        return Lock(
            name="r",
            manifest=LockedManifest(path="m.yaml", sha256="3" * 64, name="r"),
            components={"deepgemm": wheel},
            toolchain=LockedToolchain(base_image=LockedBaseImage(name="scratch")),
        )

    label = "io.releasekit.component.deepgemm.source-verification"

    def codes(verified: bool, labels: dict[str, str]) -> list[tuple[str, str | None]]:
        image = SimpleNamespace(labels=labels, id="sha256:" + "1" * 64)
        ctx = SimpleNamespace(
            image=image, lock=lock(verified), lock_sha256="2" * 64, components={}, record=None
        )
        return [(f.code, f.location.field) for f in LabelsCheck().run(ctx)]  # type: ignore[arg-type]

    base = {"io.releasekit.lock.sha256": "2" * 64, "io.releasekit.manifest.sha256": "3" * 64}
    base["org.opencontainers.image.base.name"] = "scratch"
    assert codes(False, base) == [("LABEL_MISSING", label)]
    assert codes(False, {**base, label: "unverified"}) == []
    assert codes(True, base) == []
