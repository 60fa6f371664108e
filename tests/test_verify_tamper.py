"""verify-provenance against real images: a clean release, then one derived image per tamper kind.

The clean release is made for real: a git repository, a fresh clone of the locked commit,
a CUDA kernel compiled by nvcc for sm_120a, a PEP 517 wheel, an image built on the base
image with that wheel installed by pip, labels and a lock. Each tamper derives a new image
from it with the Docker SDK (run a shell in a container, commit), and must be reported
with its own finding code while the clean image verifies.
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
from pathlib import Path

import pytest

from releasekit.lock import (
    Lock,
    LockedBaseImage,
    LockedGitComponent,
    LockedManifest,
    LockedToolchain,
    write_lock,
)
from releasekit.provenance.verify import VerifyOptions, VerifyResult, verify_provenance

sys.path.insert(0, str(Path(__file__).parent))
from forge import Forge  # noqa: E402

pytestmark = [pytest.mark.docker, pytest.mark.slow]

BASE = os.environ.get("RELEASEKIT_TEST_BASE_IMAGE", "releasekit/base-python:bookworm")
SP = "/opt/venv/lib/python3.11/site-packages"
PATH_ENV = "/opt/venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
KERNEL = "__global__ void scale(float *a, float b) { a[threadIdx.x] *= b; }\n"

CORE_PY = '''"""The demo component's one real module."""


def answer() -> int:
    return 42
'''
PYPROJECT = """[build-system]
requires = ["setuptools>=68"]
build-backend = "setuptools.build_meta"

[project]
name = "demo-pkg"
dynamic = ["version"]

[tool.setuptools]
packages = ["demo_pkg"]

[tool.setuptools.dynamic]
version = {attr = "demo_pkg._version.__version__"}

[tool.setuptools.package-data]
demo_pkg = ["*.so"]
"""


def _docker():
    docker = pytest.importorskip("docker")
    try:
        client = docker.from_env()
        client.ping()
    except Exception as exc:  # noqa: BLE001
        pytest.skip(f"no Docker Engine: {exc}")
    return client


def _nvcc(source: Path, out: Path, arch: str) -> Path:
    if shutil.which("nvcc") is None:
        pytest.skip("nvcc is not installed (the native-arch tampers need a real CUDA compiler)")
    subprocess.run(
        ["nvcc", "-shared", "-Xcompiler", "-fPIC", "-cudart", "none",
         "-gencode", f"arch=compute_{arch},code=sm_{arch}", "-o", str(out), str(source)],
        check=True, capture_output=True,
    )
    return out


def _pip_wheel(src: Path, out: Path, epoch: int) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "SOURCE_DATE_EPOCH": str(epoch)}
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(out), str(src)],
                   check=True, capture_output=True, env=env)
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

    def derive(self, script: str, *, files: dict[str, bytes] | None = None, changes: list[str] | None = None,
               start: str | None = None) -> str:
        container = self.client.containers.create(
            start or self.image_id, entrypoint=["sh", "-c", script], command=[], network_mode="none", user="root"
        )
        try:
            if files:
                container.put_archive("/", _tar(files))
            container.start()
            status = container.wait(timeout=120)
            if status.get("StatusCode") != 0:
                raise AssertionError(container.logs().decode(errors="replace"))
            image = container.commit(changes=changes or [])
        finally:
            container.remove(force=True)
        # Committing keeps the derive container's entrypoint: restore the release's own.
        fixed = self.client.containers.create(image.id, entrypoint=["true"], command=[], network_mode="none")
        try:
            image = fixed.commit(changes=['ENTRYPOINT ["python3", "-c", "import demo_pkg"]', "CMD []"])
        finally:
            fixed.remove(force=True)
        self.images.append(image.id)
        return image.id

    def verify(self, image: str, **kwargs) -> VerifyResult:
        opts = VerifyOptions(image=image, lock=self.lock, artifacts=self.artifacts, manifest=self.manifest,
                             allow_local_repos=True, cache_dir=str(self.root / "git-cache"),
                             summary=self.root / f"summary-{image[7:19]}.json", **kwargs)
        return verify_provenance(opts)


@pytest.fixture(scope="module")
def release(tmp_path_factory) -> Release:
    client = _docker()
    from releasekit.build.baseimage import ensure_base_image
    from releasekit.build.engine import Engine

    base = ensure_base_image(Engine(client), BASE)
    root = tmp_path_factory.mktemp("verify")
    rel = Release(client, root)
    forge = Forge(root / "forge", "demo")
    commit = forge.init({
        "pyproject.toml": PYPROJECT,
        "demo_pkg/__init__.py": '"""demo component."""\n\nfrom demo_pkg.core import answer\n\n__all__ = ["answer"]\n',
        "demo_pkg/core.py": CORE_PY,
        "kernels/scale.cu": KERNEL,
    })
    tree = forge.tree(commit)
    rel.commit = commit
    # The build, by hand until `releasekit build` is wired in: fresh clone, generated version, kernel, wheel.
    src = root / "src"
    subprocess.run(["git", "clone", "-q", forge.url, str(src)], check=True)
    subprocess.run(["git", "-C", str(src), "checkout", "-q", commit], check=True)
    version = f"0.1.0+g{commit[:12]}"
    (src / "demo_pkg" / "_version.py").write_text(f'__version__ = "{version}"\n__commit__ = "{commit}"\n')
    _nvcc(src / "kernels" / "scale.cu", src / "demo_pkg" / "_kernels.so", "120a")
    rel.so_90a = _nvcc(src / "kernels" / "scale.cu", root / "scale90a.so", "90a").read_bytes()
    artifacts = root / "release"
    wheel = _pip_wheel(src, artifacts / "wheels", 1_700_000_000)
    wheel_sha = hashlib.sha256(wheel.read_bytes()).hexdigest()

    manifest = root / "manifest.yaml"
    manifest.write_text(
        "schema: releasekit/v1\nname: verify-demo\ncomponents:\n  demo:\n    kind: git\n"
        f"    repo: {forge.url}\n    canonical_branch: main\n    distribution: demo-pkg\n"
        "    import_names: [demo_pkg]\n    build:\n      native: true\n      cuda_arch_list: ['12.0a']\n"
        "      generated_files: [demo_pkg/_version.py]\n"
        f"toolchain:\n  base_image:\n    name: {BASE}\n    digest: {base.image_id}\n  cuda_arch_list: ['12.0a']\n"
        "policy:\n  forbidden_distributions: ['nvidia-*']\n"
    )
    manifest_sha = hashlib.sha256(manifest.read_bytes()).hexdigest()
    lock = Lock(
        name="verify-demo",
        manifest=LockedManifest(path="manifest.yaml", sha256=manifest_sha, name="verify-demo"),
        locked_at="2026-12-02T00:00:00Z",
        components={"demo": LockedGitComponent(name="demo", repo=forge.url, canonical_branch="main", commit=commit,
                                               tree=tree, commit_time=1_700_000_000, canonical_head=commit)},
        toolchain=LockedToolchain(base_image=LockedBaseImage(name=BASE, digest=base.image_id),
                                  cuda_arch_list=["12.0a"]),
    )
    rel.lock = root / "lock.json"
    lock_sha = write_lock(lock, rel.lock)
    rel.manifest = manifest
    rel.artifacts = artifacts
    labels = {
        "org.opencontainers.image.base.name": BASE,
        "org.opencontainers.image.base.digest": base.image_id,
        "io.releasekit.lock.sha256": lock_sha,
        "io.releasekit.manifest.sha256": manifest_sha,
        "io.releasekit.component.demo.repo": forge.url,
        "io.releasekit.component.demo.commit": commit,
        "io.releasekit.component.demo.tree": tree,
        "io.releasekit.component.demo.version": version,
        "io.releasekit.component.demo.wheel.sha256": wheel_sha,
    }
    rel.image_id = base.image_id
    changes = [f"ENV PATH={PATH_ENV}", *[f"LABEL {k}={json.dumps(v)}" for k, v in labels.items()]]
    rel.image_id = rel.derive(
        f"python3 -m venv /opt/venv && /opt/venv/bin/pip install -q --no-index --no-deps /w/{wheel.name} && rm -rf /w",
        files={f"/w/{wheel.name}": wheel.read_bytes()}, changes=changes, start=base.image_id,
    )
    rel.images.remove(rel.image_id)
    (artifacts / "build.json").write_text(json.dumps({
        "lock_sha256": lock_sha, "manifest_sha256": manifest_sha, "image_id": rel.image_id,
        "components": [{"name": "demo", "kind": "git", "repo": forge.url, "commit": commit, "tree": tree,
                        "version": version, "wheel_filename": wheel.name, "wheel_sha256": wheel_sha,
                        "distribution": "demo-pkg", "import_names": ["demo_pkg"], "native_arches": ["12.0a"]}],
    }))
    rel.labels = labels
    yield rel
    for image in [*rel.images, rel.image_id]:
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
    assert result.probe.ok and any(s.get("origin", "").startswith(SP) for s in result.probe.specs)
    summary = json.loads(Path(result.summary_path).read_text())
    assert summary["verificationResult"] == "PASSED"
    assert summary["resourceUri"] == release.image_id
    assert summary["policy"]["digest"]["sha256"] == result.lock_sha256


TAMPERS = {
    "edited-py": (f"echo 'def answer():\n    return 41' >> {SP}/demo_pkg/core.py",
                  {"RECORD_HASH_MISMATCH", "SOURCE_BLOB_MISMATCH"}),
    "extra-module": (f"echo 'import os' > {SP}/stray_helper.py", {"UNOWNED_FILE"}),
    "pth-injection": (f"echo 'import os; os.environ.setdefault(\"X\", \"1\")' > {SP}/zz-inject.pth", {"PTH_INJECTION"}),
    "sitecustomize": (f"echo 'import os' > {SP}/sitecustomize.py", {"SITECUSTOMIZE"}),
    "debian-sitecustomize": ("echo 'import os' >> /etc/python3.11/sitecustomize.py", {"SITECUSTOMIZE"}),
    "copied-tree": (f"mkdir -p {SP}/demo_pkg/extra && echo 'x = 1' > {SP}/demo_pkg/extra/__init__.py",
                    {"UNOWNED_FILE"}),
}


@pytest.mark.parametrize("kind", sorted(TAMPERS))
def test_file_tampers_are_reported(release, kind):
    script, expected = TAMPERS[kind]
    result = release.verify(release.derive(script))
    assert not result.passed
    assert expected <= _codes(result), [f.render() for f in result.findings]


def test_pythonpath_overlay(release):
    image = release.derive(
        f"mkdir -p /overlay/demo_pkg && cp {SP}/demo_pkg/*.py /overlay/demo_pkg/ "
        "&& echo '# patched' >> /overlay/demo_pkg/core.py",
        changes=["ENV PYTHONPATH=/overlay"],
    )
    result = release.verify(image)
    assert {"ENV_OVERLAY", "MODULE_SHADOWED", "UNOWNED_FILE"} <= _codes(result), [f.render() for f in result.findings]
    shadow = next(f for f in result.findings if f.code == "MODULE_SHADOWED")
    assert shadow.location.path.startswith("/overlay/demo_pkg")


def test_version_rewritten_to_another_commit(release):
    other = "0" * 7 + release.commit[7:]
    dist_info = f"{SP}/demo_pkg-0.1.0+g{release.commit[:12]}.dist-info"
    # Rewrite the version everywhere and make RECORD agree, so only the commit itself betrays it.
    script = (
        f"sed -i 's/+g{release.commit[:12]}/+g{other[:12]}/' {dist_info}/METADATA {SP}/demo_pkg/_version.py && "
        f"sed -i 's/{release.commit}/{other}/' {SP}/demo_pkg/_version.py && "
        "python3 /fix_record.py"
    )
    result = release.verify(release.derive(script, files={"/fix_record.py": _fix_record_script().encode()}))
    codes = _codes(result)
    assert {"VERSION_COMMIT_MISMATCH", "GENERATED_VERSION_MISMATCH", "WHEEL_RECORD_MISMATCH"} <= codes, codes
    assert "RECORD_HASH_MISMATCH" not in codes


def _fix_record_script() -> str:
    return f'''
import base64, csv, glob, hashlib, io, os
record = glob.glob("{SP}/demo_pkg-*.dist-info/RECORD")[0]
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
    script = f"echo 'def answer():\n    return 41' >> {SP}/demo_pkg/core.py && python3 /fix_record.py"
    result = release.verify(release.derive(script, files={"/fix_record.py": _fix_record_script().encode()}))
    codes = _codes(result)
    assert {"WHEEL_RECORD_MISMATCH", "SOURCE_BLOB_MISMATCH"} <= codes, codes
    assert "RECORD_HASH_MISMATCH" not in codes


def test_replaced_native_extension(release):
    image = release.derive("true", files={f"{SP}/demo_pkg/_kernels.so": release.so_90a})
    result = release.verify(image)
    assert {"RECORD_HASH_MISMATCH", "NATIVE_ARCH_MISSING"} <= _codes(result), [f.render() for f in result.findings]
    missing = next(f for f in result.findings if f.code == "NATIVE_ARCH_MISSING")
    assert "12.0a" in missing.message and "sm_90a" in missing.message


def test_label_edited(release):
    image = release.derive("true", changes=[f"LABEL io.releasekit.component.demo.commit={'f' * 40}"])
    result = release.verify(image)
    assert _codes(result) == {"LABEL_MISMATCH", "BUILD_RECORD_MISMATCH"}, [f.render() for f in result.findings]


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
        f"/opt/venv/bin/pip install -q --no-index --no-deps /w/{wheel.name} && rm -rf /w",
        files={f"/w/{wheel.name}": wheel.read_bytes()},
    )
    result = release.verify(image)
    # Every derived image is also not the image build.json describes.
    assert _codes(result) == {"FORBIDDEN_DISTRIBUTION", "BUILD_RECORD_MISMATCH"}, [f.render() for f in result.findings]


# --- a hostile image cannot touch the host or hang the verifier ------------------------------


def test_hanging_probe_is_bounded(release):
    image = release.derive(f"echo 'import time; time.sleep(3600)' > {SP}/zz-hang.pth")
    started = time.monotonic()
    result = release.verify(image, probe_timeout=5)
    assert time.monotonic() - started < 120
    assert {"PROBE_FAILED", "PTH_INJECTION"} <= _codes(result)


def test_symlinks_out_and_dotdot_record_paths(release, tmp_path):
    secret = tmp_path / "host-secret"
    secret.write_text("host only\n")
    dist_info = f"{SP}/demo_pkg-0.1.0+g{release.commit[:12]}.dist-info"
    script = (
        f"ln -s /etc {SP}/etc_link && ln -s {secret} {SP}/host_link && "
        f"echo '../../../../../../../../../../{str(secret).lstrip('/')},"
        f"{_record_line('x', b'host only' + bytes([10])).split(',', 1)[1]}' >> {dist_info}/RECORD"
    )
    result = release.verify(release.derive(script))
    codes = _codes(result)
    assert {"RECORD_UNSAFE_PATH", "UNOWNED_FILE"} <= codes, codes
    # The link to the host path resolves inside the image, where that file does not exist.
    assert not any(f.code == "RECORD_HASH_MISMATCH" and str(secret) in (f.location.path or "")
                   for f in result.findings)


def test_cli_exit_codes_and_json(release):
    env = {**os.environ, "RELEASEKIT_ALLOW_LOCAL_REPOS": "1", "RELEASEKIT_CACHE": str(release.root / "cache")}
    base = [sys.executable, "-m", "releasekit", "verify-provenance"]
    args = ["--lock", str(release.lock), "--artifacts", str(release.artifacts), "--manifest", str(release.manifest)]
    ok = subprocess.run([*base, release.image_id, *args, "--json"], capture_output=True, text=True, env=env)
    assert ok.returncode == 0, ok.stdout[-3000:] + ok.stderr
    data = json.loads(ok.stdout)
    assert data["passed"] is True and data["image_id"] == release.image_id
    assert (release.artifacts / "verification_summary.json").is_file()
    label = release.derive("true", changes=["LABEL io.releasekit.lock.sha256=0"])
    bad = subprocess.run([*base, label, *args], capture_output=True, text=True, env=env)
    assert bad.returncode == 1 and "LABEL_MISMATCH" in bad.stdout
    missing = subprocess.run([*base, "no-such-image:1", *args], capture_output=True, text=True, env=env)
    assert missing.returncode == 2 and missing.stderr.count("\n") == 1 and "no image" in missing.stderr
