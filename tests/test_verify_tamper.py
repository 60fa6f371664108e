"""verify-provenance against real images: a clean release, then one derived image per tamper kind.

The clean release is what `releasekit demo` makes for real, up to `releasekit build`: git
repositories, `plan lock`, `plan check`, PEP 517 wheels (one with a CUDA kernel compiled by
nvcc for sm_120a), the image, its labels, build.json and provenance. Each tamper derives a
new image from it with the Docker SDK (run a shell in a container, commit), and must be
reported with its own finding code while the clean image verifies.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from cli_run import invoke
from stable import assert_same_record

from releasekit.clock import SystemClock
from releasekit.docker_engine import LazyEngine
from releasekit.provenance.checks import all_checks
from releasekit.provenance.verify import VerifyOptions, VerifyResult, verify_provenance
from releasekit.records.sbom import SBOM_FILE

pytestmark = [pytest.mark.docker, pytest.mark.slow]

SP = "/usr/local/lib/python3.11/dist-packages"  # where `releasekit build` installs the wheels
RUNTIME = f"{SP}/rkdemo_runtime"
KERNEL = "__global__ void scale(float *a, float b) { a[threadIdx.x] *= b; }\n"


def _nvcc(source: Path, out: Path, arch: str) -> Path:
    if shutil.which("nvcc") is None:
        pytest.skip("nvcc is not installed (the native-arch tampers need a real CUDA compiler)")
    subprocess.run(
        [
            "nvcc",
            "-shared",
            "-Xcompiler",
            "-fPIC",
            "-cudart",
            "none",
            "-gencode",
            f"arch=compute_{arch},code=sm_{arch}",
            "-o",
            str(out),
            str(source),
        ],
        check=True,
        capture_output=True,
    )
    return out


def _pip_wheel(src: Path, out: Path, epoch: int) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "SOURCE_DATE_EPOCH": str(epoch)}
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(out), str(src)],
        check=True,
        capture_output=True,
        env=env,
    )
    return next(out.glob("*.whl"))


def _tar(files: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name.lstrip("/"))
            info.size = len(data)
            info.mode = 0o755
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


class Release:
    """The clean release: image, lock, manifest, release directory; and a way to derive tampered images."""

    def __init__(self, client, root: Path) -> None:
        self.client = client
        self.root = root
        self.images: list[str] = []

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

    def verify(self, image: str, **kwargs) -> VerifyResult:
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

    def dist_info(self) -> str:
        return f"{SP}/rkdemo_runtime-0.1.0+g{self.commit[:12]}.dist-info"


@pytest.fixture(scope="module")
def release(tmp_path_factory, docker_client, verify_cache) -> Iterator[Release]:
    """The clean image: `releasekit demo`'s pipeline up to and including `releasekit build`."""
    client = docker_client
    from releasekit.demo.service import STAGES, run_demo

    root = tmp_path_factory.mktemp("verify")
    with pytest.MonkeyPatch.context() as env:
        if "RELEASEKIT_CACHE" not in os.environ:  # a cache the run chose stays
            env.setenv("RELEASEKIT_CACHE", str(verify_cache))
        from releasekit.demo.service import VALIDATION_SETUP_STAGES

        # The demo's manifest forbids pip nvidia-* wheels (seed 003's policy), which one tamper needs.
        plain = [s for s in STAGES if s.name not in VALIDATION_SETUP_STAGES]
        names = [s.name for s in plain]
        stages = plain[: names.index("build") + 1]
        demo = run_demo(root / "demo", stages=stages)
        assert demo.passed and demo.image_id, [s.summary for s in demo.stages]
        rel = Release(client, root)
        rel.image_id = demo.image_id
        rel.lock = root / "demo" / "lock.json"
        rel.manifest = root / "demo" / "example" / "manifest.yaml"
        rel.artifacts = root / "demo" / "release"
        lock = json.loads(rel.lock.read_text())
        rel.commit = lock["components"]["runtime"]["commit"]
        rel.native = "kernels" in lock["components"]
        if rel.native:
            (root / "k.cu").write_text(KERNEL)
            rel.so_90a = _nvcc(root / "k.cu", root / "k90a.so", "90a").read_bytes()
        yield rel
    for image in rel.images:
        with contextlib.suppress(Exception):  # best effort
            client.images.remove(image, force=True)


def _codes(result: VerifyResult) -> set[str]:
    return {f.code for f in result.findings.errors}


def _record_line(path: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{path},sha256={digest},{len(data)}"


def test_clean_image_verifies(release):
    result = release.verify(release.image_id)
    assert result.passed, "\n".join(f.render() for f in result.findings)
    assert result.findings.errors == []
    assert result.probe.ok and all(s.get("origin", "").startswith(SP) for s in result.probe.specs)
    assert {c.name for c in result.checks} >= {
        "labels",
        "records",
        "unowned-files",
        "shadowing",
        "source-blobs",
    }
    summary = json.loads(Path(result.summary_path).read_text())["predicate"]  # the Statement's VSA predicate
    assert summary["verificationResult"] == "PASSED"
    assert summary["resourceUri"] == release.image_id
    assert summary["policy"]["digest"]["sha256"] == result.lock_sha256
    # Issue 35: every check with its status and what it examined; nothing passes on nothing.
    checks = {c["name"]: c for c in summary["releasekit"]["checks"]}
    assert set(checks) == {c.name for c in all_checks()}
    for check in checks.values():
        assert check["status"] in ("passed", "not applicable"), check
        assert (check["count"] > 0) == (check["status"] == "passed"), check
        assert check["status"] == "passed" or check["reason"], check
    assert checks["records"]["examined"] == "distributions" and checks["unowned-files"]["count"] > 10
    # Byte-stable (issue 22): a second verification writes the same summary apart from timeVerified.
    sbom = _sbom_of_verified(release, result)
    assert summary["releasekit"]["sbom_sha256"] == hashlib.sha256(sbom).hexdigest()  # the summary names it
    again = release.verify(
        release.image_id, summary=release.root / "summary-again.json", sbom=release.root / "sbom-again.json"
    )
    assert again.summary_path != result.summary_path
    assert_same_record(Path(result.summary_path), Path(again.summary_path), "verification_summary.json")
    assert Path(str(again.sbom_path)).read_bytes() == sbom  # byte-identical, no time or random serial


def _sbom_of_verified(release, result: VerifyResult) -> bytes:
    """The SBOM verify-provenance wrote beside the release (issue 27): valid CycloneDX, exact, complete."""
    from cyclonedx.schema import SchemaVersion
    from cyclonedx.validation.json import JsonStrictValidator

    from releasekit.records.sbom import sbom_serial

    assert result.sbom_path == str(release.artifacts / SBOM_FILE)
    raw = Path(result.sbom_path).read_bytes()
    assert JsonStrictValidator(SchemaVersion.V1_6).validate_str(raw.decode()) is None
    doc = json.loads(raw)
    assert doc["serialNumber"] == sbom_serial(release.image_id).urn
    assert doc["metadata"]["component"]["version"] == release.image_id

    def walk(components):
        for c in components:
            yield c
            yield from walk(c.get("components", []))

    every = list(walk(doc["components"]))
    runtime = next(c for c in every if c.get("purl", "").startswith("pkg:pypi/rkdemo-runtime@"))
    props = {p["name"]: p["value"] for p in runtime["properties"]}
    assert props["releasekit:vcs:commit"] == release.commit
    assert runtime["hashes"][0]["alg"] == "SHA-256" and runtime["externalReferences"][0]["type"] == "vcs"
    assert any(c.get("purl", "").startswith("pkg:deb/debian/python3.11") for c in every)
    files = {
        p["value"].split("  ", 1)[1]
        for c in [doc["metadata"]["component"], *every]
        for p in c.get("properties", [])
        if p["name"] == "releasekit:file"
    }
    assert "/usr/bin/python3.11" in files and f"{release.dist_info()}/RECORD" in files
    return raw


TAMPERS = {
    "edited-py": (
        f"echo 'def answer():\n    return 41' >> {RUNTIME}/scale.py",
        {"RECORD_HASH_MISMATCH", "SOURCE_BLOB_MISMATCH"},
    ),
    "extra-module": (f"echo 'import os' > {SP}/stray_helper.py", {"UNOWNED_FILE"}),
    "pth-injection": (
        f'echo \'import os; os.environ.setdefault("X", "1")\' > {SP}/zz-inject.pth',
        {"PTH_INJECTION"},
    ),
    "sitecustomize": (f"echo 'import os' > {SP}/sitecustomize.py", {"SITECUSTOMIZE"}),
    "debian-sitecustomize": ("echo 'import os' >> /etc/python3.11/sitecustomize.py", {"SITECUSTOMIZE"}),
    "copied-tree": (
        f"mkdir -p {RUNTIME}/extra && echo 'x = 1' > {RUNTIME}/extra/__init__.py",
        {"UNOWNED_FILE"},
    ),
}


@pytest.mark.parametrize("kind", sorted(TAMPERS))
def test_file_tampers_are_reported(release, kind):
    script, expected = TAMPERS[kind]
    result = release.verify(release.derive(script))
    assert not result.passed
    assert expected <= _codes(result), [f.render() for f in result.findings]
    # No SBOM for an image that did not verify, and none left from an earlier run.
    assert result.sbom_path is None and not (release.artifacts / SBOM_FILE).exists()


def test_pythonpath_overlay(release):
    image = release.derive(
        f"mkdir -p /overlay/rkdemo_runtime && cp {RUNTIME}/*.py /overlay/rkdemo_runtime/ "
        "&& echo '# patched' >> /overlay/rkdemo_runtime/scale.py",
        changes=["ENV PYTHONPATH=/overlay"],
    )
    result = release.verify(image)
    assert {"ENV_OVERLAY", "MODULE_SHADOWED", "UNOWNED_FILE"} <= _codes(result), [
        f.render() for f in result.findings
    ]
    shadow = next(f for f in result.findings if f.code == "MODULE_SHADOWED")
    assert shadow.location.path.startswith("/overlay/rkdemo_runtime")


def test_version_rewritten_to_another_commit(release):
    other = "0" * 7 + release.commit[7:]
    dist_info = release.dist_info()
    # Rewrite the version everywhere and make RECORD agree, so only the commit itself betrays it.
    script = (
        f"sed -i 's/+g{release.commit[:12]}/+g{other[:12]}/' {dist_info}/METADATA {RUNTIME}/_version.py && "
        f"sed -i 's/{release.commit}/{other}/' {RUNTIME}/_version.py && "
        "python3 /fix_record.py"
    )
    result = release.verify(release.derive(script, files={"/fix_record.py": _fix_record_script().encode()}))
    codes = _codes(result)
    assert {"VERSION_COMMIT_MISMATCH", "GENERATED_VERSION_MISMATCH", "WHEEL_RECORD_MISMATCH"} <= codes, codes
    assert "RECORD_HASH_MISMATCH" not in codes


def _fix_record_script() -> str:
    return f'''
import base64, csv, glob, hashlib, io, os
record = glob.glob("{SP}/rkdemo_runtime-*.dist-info/RECORD")[0]
rows = list(csv.reader(open(record)))
out = io.StringIO()
writer = csv.writer(out, lineterminator="\\n")
for row in rows:
    path = os.path.normpath(os.path.join("{SP}", row[0]))
    if row[1] and os.path.isfile(path):
        data = open(path, "rb").read()
        row[1] = "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        row[2] = str(len(data))
    writer.writerow(row)
open(record, "w").write(out.getvalue())
os.remove(__file__)
'''


def test_record_rewritten_to_match_an_edited_file(release):
    script = f"echo 'def answer():\n    return 41' >> {RUNTIME}/scale.py && python3 /fix_record.py"
    result = release.verify(release.derive(script, files={"/fix_record.py": _fix_record_script().encode()}))
    codes = _codes(result)
    assert {"WHEEL_RECORD_MISMATCH", "SOURCE_BLOB_MISMATCH"} <= codes, codes
    assert "RECORD_HASH_MISMATCH" not in codes


def test_replaced_native_extension(release):
    if not release.native:
        pytest.skip("the demo has no CUDA component without nvcc")
    image = release.derive("true", files={f"{SP}/rkdemo_kernels/librkdemo_kernels.so": release.so_90a})
    result = release.verify(image)
    assert {"RECORD_HASH_MISMATCH", "NATIVE_ARCH_MISSING"} <= _codes(result), [
        f.render() for f in result.findings
    ]
    missing = next(f for f in result.findings if f.code == "NATIVE_ARCH_MISSING")
    assert "12.0a" in missing.message and "sm_90a" in missing.message


def test_label_edited(release):
    image = release.derive("true", changes=[f"LABEL io.releasekit.component.runtime.commit={'f' * 40}"])
    result = release.verify(image)
    # The label is checked against the lock; the reproduction sees another config (another image ID).
    assert _codes(result) == {"LABEL_MISMATCH", "BUILD_RECORD_MISMATCH", "IMAGE_NOT_REPRODUCED"}, "\n".join(
        f.render() for f in result.findings
    )


def test_undeclared_nvidia_wheel(release):
    src = release.root / "nvidia-src"
    (src / "nvidia_fake_runtime").mkdir(parents=True, exist_ok=True)
    (src / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools>=68"]\nbuild-backend = "setuptools.build_meta"\n'
        '[project]\nname = "nvidia-cuda-runtime-cu13"\nversion = "13.0.96"\n'
        '[tool.setuptools]\npackages = ["nvidia_fake_runtime"]\n'
    )
    (src / "nvidia_fake_runtime" / "__init__.py").write_text("")
    wheel = _pip_wheel(src, release.root / "nvidia-wheel", 1_700_000_000)
    image = release.derive(
        f"python3 -m pip install -q --break-system-packages --no-index --no-deps /w/{wheel.name} && rm -rf /w",
        files={f"/w/{wheel.name}": wheel.read_bytes()},
    )
    result = release.verify(image)
    # Every derived image is also not the image build.json describes.
    assert {
        "FORBIDDEN_DISTRIBUTION",
        "BUILD_RECORD_MISMATCH",
        "IMAGE_NOT_REPRODUCED",
        "FILE_UNACCOUNTED",
    } <= _codes(result), [f.render() for f in result.findings]


# --- a hostile image cannot touch the host or hang the verifier ------------------------------


def test_hanging_probe_is_bounded(release):
    image = release.derive(f"echo 'import time; time.sleep(3600)' > {SP}/zz-hang.pth")
    started = time.monotonic()
    result = release.verify(image, probe_timeout=5)
    assert time.monotonic() - started < 120
    assert {"PROBE_FAILED", "PTH_INJECTION"} <= _codes(result)


def test_flooding_probe_output_is_capped(release):
    # 80 MB on stdout before the probe's report: over the 64 MB cap (and the engine's log limit).
    image = release.derive(f"echo 'import sys; sys.stdout.write(\"x\" * 80_000_000)' > {SP}/zz-flood.pth")
    result = release.verify(image)
    assert {"PROBE_FAILED", "PTH_INJECTION"} <= _codes(result)
    assert not result.probe.ok


def test_symlinks_out_and_dotdot_record_paths(release, tmp_path):
    secret = tmp_path / "host-secret"
    secret.write_text("host only\n")
    dist_info = release.dist_info()
    script = (
        f"ln -s /etc {SP}/etc_link && ln -s {secret} {SP}/host_link && "
        f"echo '../../../../../../../../../../{str(secret).lstrip('/')},"
        f"{_record_line('x', b'host only' + bytes([10])).split(',', 1)[1]}' >> {dist_info}/RECORD"
    )
    result = release.verify(release.derive(script))
    codes = _codes(result)
    assert {"RECORD_UNSAFE_PATH", "UNOWNED_FILE"} <= codes, codes
    # The link to the host path resolves inside the image, where that file does not exist.
    assert not any(
        f.code == "RECORD_HASH_MISMATCH" and str(secret) in (f.location.path or "") for f in result.findings
    )


def test_cli_exit_codes_and_json(release):
    env = {"RELEASEKIT_ALLOW_LOCAL_REPOS": "1", "RELEASEKIT_CACHE": str(release.root / "cache")}
    base = ["verify-provenance"]
    args = [
        "--lock",
        str(release.lock),
        "--artifacts",
        str(release.artifacts),
        "--manifest",
        str(release.manifest),
    ]
    ok = invoke(*base, release.image_id, *args, "--json", env=env)
    assert ok.returncode == 0, ok.stdout[-3000:] + ok.stderr
    data = json.loads(ok.stdout)
    assert data["passed"] is True and data["image_id"] == release.image_id
    assert (release.artifacts / "verification_summary.json").is_file()
    label = release.derive("true", changes=["LABEL io.releasekit.lock.sha256=0"])
    bad = invoke(*base, label, *args, env=env)
    assert bad.returncode == 1 and "LABEL_MISMATCH" in bad.stdout
    missing = invoke(*base, "no-such-image:1", *args, env=env)
    assert missing.returncode == 2 and missing.stderr.count("\n") == 1 and "no image" in missing.stderr
