"""verify-provenance against real images: a clean release, then one derived image per tamper kind.

The clean release (built once per run; ``demo_release`` in tests/conftest.py is the module's copy)
is what `releasekit demo` makes for real, up to `releasekit build`: git
repositories, `plan lock`, `plan check`, PEP 517 wheels (one with a CUDA kernel compiled by
nvcc for sm_120a), the image, its labels, build.json and provenance. Each tamper derives a
new image from it with the Docker SDK (run a shell in a container, commit), and must be
reported with its own finding code while the clean image verifies.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from cli_run import invoke
from stable import assert_same_record

from releasekit.provenance.checks import all_checks
from releasekit.provenance.verify import VerifyResult
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


def _codes(result: VerifyResult) -> set[str]:
    return {f.code for f in result.findings.errors}


def _record_line(path: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{path},sha256={digest},{len(data)}"


def test_clean_image_verifies(demo_release):
    result = demo_release.verify(demo_release.image_id)
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
    assert summary["resourceUri"] == demo_release.image_id
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
    sbom = _sbom_of_verified(demo_release, result)
    assert summary["releasekit"]["sbom_sha256"] == hashlib.sha256(sbom).hexdigest()  # the summary names it
    again = demo_release.verify(
        demo_release.image_id,
        summary=demo_release.root / "summary-again.json",
        sbom=demo_release.root / "sbom-again.json",
    )
    assert again.summary_path != result.summary_path
    assert_same_record(Path(result.summary_path), Path(again.summary_path), "verification_summary.json")
    assert Path(str(again.sbom_path)).read_bytes() == sbom  # byte-identical, no time or random serial


def _sbom_of_verified(demo_release, result: VerifyResult) -> bytes:
    """The SBOM verify-provenance wrote beside the release (issue 27): valid CycloneDX, exact, complete."""
    from cyclonedx.schema import SchemaVersion
    from cyclonedx.validation.json import JsonStrictValidator

    from releasekit.records.sbom import sbom_serial

    assert result.sbom_path == str(demo_release.artifacts / SBOM_FILE)
    raw = Path(result.sbom_path).read_bytes()
    assert JsonStrictValidator(SchemaVersion.V1_6).validate_str(raw.decode()) is None
    doc = json.loads(raw)
    assert doc["serialNumber"] == sbom_serial(demo_release.image_id).urn
    assert doc["metadata"]["component"]["version"] == demo_release.image_id

    def walk(components):
        for c in components:
            yield c
            yield from walk(c.get("components", []))

    every = list(walk(doc["components"]))
    runtime = next(c for c in every if c.get("purl", "").startswith("pkg:pypi/rkdemo-runtime@"))
    props = {p["name"]: p["value"] for p in runtime["properties"]}
    assert props["releasekit:vcs:commit"] == demo_release.commit
    assert runtime["hashes"][0]["alg"] == "SHA-256" and runtime["externalReferences"][0]["type"] == "vcs"
    assert any(c.get("purl", "").startswith("pkg:deb/debian/python3.11") for c in every)
    files = {
        p["value"].split("  ", 1)[1]
        for c in [doc["metadata"]["component"], *every]
        for p in c.get("properties", [])
        if p["name"] == "releasekit:file"
    }
    assert "/usr/bin/python3.11" in files and f"{demo_release.dist_info()}/RECORD" in files
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
def test_file_tampers_are_reported(demo_release, kind):
    script, expected = TAMPERS[kind]
    result = demo_release.verify(demo_release.derive(script))
    assert not result.passed
    assert expected <= _codes(result), [f.render() for f in result.findings]
    # No SBOM for an image that did not verify, and none left from an earlier run.
    assert result.sbom_path is None and not (demo_release.artifacts / SBOM_FILE).exists()


def test_pythonpath_overlay(demo_release):
    image = demo_release.derive(
        f"mkdir -p /overlay/rkdemo_runtime && cp {RUNTIME}/*.py /overlay/rkdemo_runtime/ "
        "&& echo '# patched' >> /overlay/rkdemo_runtime/scale.py",
        changes=["ENV PYTHONPATH=/overlay"],
    )
    result = demo_release.verify(image)
    assert {"ENV_OVERLAY", "MODULE_SHADOWED", "UNOWNED_FILE"} <= _codes(result), [
        f.render() for f in result.findings
    ]
    shadow = next(f for f in result.findings if f.code == "MODULE_SHADOWED")
    assert shadow.location.path.startswith("/overlay/rkdemo_runtime")


def test_version_rewritten_to_another_commit(demo_release):
    other = "0" * 7 + demo_release.commit[7:]
    dist_info = demo_release.dist_info()
    # Rewrite the version everywhere and make RECORD agree, so only the commit itself betrays it.
    script = (
        f"sed -i 's/+g{demo_release.commit[:12]}/+g{other[:12]}/' {dist_info}/METADATA {RUNTIME}/_version.py && "
        f"sed -i 's/{demo_release.commit}/{other}/' {RUNTIME}/_version.py && "
        "python3 /fix_record.py"
    )
    result = demo_release.verify(
        demo_release.derive(script, files={"/fix_record.py": _fix_record_script().encode()})
    )
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


def test_record_rewritten_to_match_an_edited_file(demo_release):
    script = f"echo 'def answer():\n    return 41' >> {RUNTIME}/scale.py && python3 /fix_record.py"
    result = demo_release.verify(
        demo_release.derive(script, files={"/fix_record.py": _fix_record_script().encode()})
    )
    codes = _codes(result)
    assert {"WHEEL_RECORD_MISMATCH", "SOURCE_BLOB_MISMATCH"} <= codes, codes
    assert "RECORD_HASH_MISMATCH" not in codes


def test_replaced_native_extension(demo_release):
    if not demo_release.native:
        pytest.skip("the demo has no CUDA component without nvcc")
    (demo_release.root / "k.cu").write_text(KERNEL)
    so_90a = _nvcc(demo_release.root / "k.cu", demo_release.root / "k90a.so", "90a").read_bytes()
    image = demo_release.derive("true", files={f"{SP}/rkdemo_kernels/librkdemo_kernels.so": so_90a})
    result = demo_release.verify(image)
    assert {"RECORD_HASH_MISMATCH", "NATIVE_ARCH_MISSING"} <= _codes(result), [
        f.render() for f in result.findings
    ]
    missing = next(f for f in result.findings if f.code == "NATIVE_ARCH_MISSING")
    assert "12.0a" in missing.message and "sm_90a" in missing.message


def test_label_edited(demo_release):
    image = demo_release.derive("true", changes=[f"LABEL io.releasekit.component.runtime.commit={'f' * 40}"])
    result = demo_release.verify(image)
    # The label is checked against the lock; the reproduction sees another config (another image ID).
    assert _codes(result) == {"LABEL_MISMATCH", "BUILD_RECORD_MISMATCH", "IMAGE_NOT_REPRODUCED"}, "\n".join(
        f.render() for f in result.findings
    )


def test_undeclared_nvidia_wheel(demo_release):
    src = demo_release.root / "nvidia-src"
    (src / "nvidia_fake_runtime").mkdir(parents=True, exist_ok=True)
    (src / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools>=68"]\nbuild-backend = "setuptools.build_meta"\n'
        '[project]\nname = "nvidia-cuda-runtime-cu13"\nversion = "13.0.96"\n'
        '[tool.setuptools]\npackages = ["nvidia_fake_runtime"]\n'
    )
    (src / "nvidia_fake_runtime" / "__init__.py").write_text("")
    wheel = _pip_wheel(src, demo_release.root / "nvidia-wheel", 1_700_000_000)
    image = demo_release.derive(
        f"python3 -m pip install -q --break-system-packages --no-index --no-deps /w/{wheel.name} && rm -rf /w",
        files={f"/w/{wheel.name}": wheel.read_bytes()},
    )
    result = demo_release.verify(image)
    # Every derived image is also not the image build.json describes.
    assert {
        "FORBIDDEN_DISTRIBUTION",
        "BUILD_RECORD_MISMATCH",
        "IMAGE_NOT_REPRODUCED",
        "FILE_UNACCOUNTED",
    } <= _codes(result), [f.render() for f in result.findings]


# --- a hostile image cannot touch the host or hang the verifier ------------------------------


def test_hanging_probe_is_bounded(demo_release):
    image = demo_release.derive(f"echo 'import time; time.sleep(3600)' > {SP}/zz-hang.pth")
    started = time.monotonic()
    result = demo_release.verify(image, probe_timeout=5)
    assert time.monotonic() - started < 120
    assert {"PROBE_FAILED", "PTH_INJECTION"} <= _codes(result)


def test_flooding_probe_output_is_capped(demo_release):
    # 80 MB on stdout before the probe's report: over the 64 MB cap (and the engine's log limit).
    image = demo_release.derive(
        f"echo 'import sys; sys.stdout.write(\"x\" * 80_000_000)' > {SP}/zz-flood.pth"
    )
    result = demo_release.verify(image)
    assert {"PROBE_FAILED", "PTH_INJECTION"} <= _codes(result)
    assert not result.probe.ok


def test_symlinks_out_and_dotdot_record_paths(demo_release, tmp_path):
    secret = tmp_path / "host-secret"
    secret.write_text("host only\n")
    dist_info = demo_release.dist_info()
    script = (
        f"ln -s /etc {SP}/etc_link && ln -s {secret} {SP}/host_link && "
        f"echo '../../../../../../../../../../{str(secret).lstrip('/')},"
        f"{_record_line('x', b'host only' + bytes([10])).split(',', 1)[1]}' >> {dist_info}/RECORD"
    )
    result = demo_release.verify(demo_release.derive(script))
    codes = _codes(result)
    assert {"RECORD_UNSAFE_PATH", "UNOWNED_FILE"} <= codes, codes
    # The link to the host path resolves inside the image, where that file does not exist.
    assert not any(
        f.code == "RECORD_HASH_MISMATCH" and str(secret) in (f.location.path or "") for f in result.findings
    )


def test_cli_exit_codes_and_json(demo_release):
    env = {"RELEASEKIT_ALLOW_LOCAL_REPOS": "1", "RELEASEKIT_CACHE": str(demo_release.root / "cache")}
    base = ["verify-provenance"]
    args = [
        "--lock",
        str(demo_release.lock),
        "--artifacts",
        str(demo_release.artifacts),
        "--manifest",
        str(demo_release.manifest),
    ]
    ok = invoke(*base, demo_release.image_id, *args, "--json", env=env)
    assert ok.returncode == 0, ok.stdout[-3000:] + ok.stderr
    data = json.loads(ok.stdout)
    assert data["passed"] is True and data["image_id"] == demo_release.image_id
    assert (demo_release.artifacts / "verification_summary.json").is_file()
    label = demo_release.derive("true", changes=["LABEL io.releasekit.lock.sha256=0"])
    bad = invoke(*base, label, *args, env=env)
    assert bad.returncode == 1 and "LABEL_MISMATCH" in bad.stdout
    missing = invoke(*base, "no-such-image:1", *args, env=env)
    assert missing.returncode == 2 and missing.stderr.count("\n") == 1 and "no image" in missing.stderr
