"""A vLLM-like component built in the vLLM builder image made from dockerfiles/vllm-builder.Dockerfile.

The repository is shaped like the vLLM fork: setuptools-scm versions it (version policy
``scm``, ``vllm/_version.py`` generated), and ``setup.py`` compiles a CUDA extension with
nvcc for the arch list it reads from TORCH_CUDA_ARCH_LIST (``12.0a`` -> sm_120a). The
builder is built for real by releasekit from the same Dockerfile as the release's, on
the local Debian test base (no registry pulls) with this machine's CUDA toolkit in its
build context and its pinned build requirements from a wheelhouse. Each nvcc call comes
after a random number of other processes, as in a parallel build, so the verifier's
rebuild runs nvcc at other PIDs than the build did: it is byte-equal only because
releasekit's builder environment keeps nvcc's PID out of the objects.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from forge import Forge
from plan_world import plan_lock

from releasekit.builder.native import fatbin_arches
from releasekit.builder.plan import make_plan
from releasekit.builder.service import BuildOptions, run_build
from releasekit.clock import SystemClock
from releasekit.docker_engine import Engine, LazyEngine
from releasekit.manifest import load_manifest
from releasekit.provenance.verify import VerifyOptions, verify_provenance
from releasekit.records.lock import write_lock

pytestmark = [pytest.mark.docker, pytest.mark.slow]

REPO_ROOT = Path(__file__).resolve().parents[1]
BUILDER = "releasekit-test/vllm-builder:cuda"
PINS = [
    "setuptools==80.9.0",
    "setuptools-scm==8.3.1",
    "wheel==0.45.1",
    "packaging==25.0",
    "cmake==3.31.6",
    "ninja==1.11.1.4",
    "jinja2==3.1.6",
]


def cuda_toolkit() -> Path | None:
    """The machine's CUDA toolkit directory (the one whose bin/nvcc is the compiler, not a wrapper)."""
    candidates = [os.environ.get("CUDA_HOME"), "/usr/local/cuda"]
    nvcc = shutil.which("nvcc")
    if nvcc:
        candidates.append(str(Path(nvcc).resolve().parent.parent))
    for where in filter(None, candidates):
        path = Path(where).resolve()
        if (path / "bin" / "nvcc").is_file() and (path / "include" / "cuda_runtime.h").is_file():
            return path
    return None


PYPROJECT = """\
[build-system]
requires = ["setuptools>=70", "setuptools-scm>=8"]
build-backend = "setuptools.build_meta"

[project]
name = "vllm"
dynamic = ["version"]
requires-python = ">=3.10"

[tool.setuptools]
packages = ["vllm"]

[tool.setuptools_scm]
version_file = "vllm/_version.py"
"""

SETUP = '''\
"""Like vLLM's setup.py: the CUDA extension is compiled for TORCH_CUDA_ARCH_LIST."""
import os
import random
import subprocess
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext


class NvccBuild(build_ext):
    def build_extension(self, ext):
        out = Path(self.get_ext_fullpath(ext.name))
        out.parent.mkdir(parents=True, exist_ok=True)
        gencode = []
        for arch in os.environ["TORCH_CUDA_ARCH_LIST"].split(";"):
            sm = arch.replace(".", "")
            gencode += ["-gencode", f"arch=compute_{sm},code=sm_{sm}"]
        nvcc = os.path.join(os.environ.get("CUDA_HOME", "/usr/local/cuda"), "bin", "nvcc")
        objects = []
        for source in ext.sources:
            # The other jobs of a parallel build take a varying number of PIDs before nvcc runs.
            for _ in range(random.randrange(1, 40)):
                subprocess.check_call(["true"])
            obj = Path(self.build_temp) / (source + ".o")
            obj.parent.mkdir(parents=True, exist_ok=True)
            # Compiled with -c, then linked: how CMake and torch's extension builder drive nvcc.
            subprocess.check_call([nvcc, "-O2", "-Xcompiler", "-fPIC", *gencode, "-c", source, "-o", str(obj)])
            objects.append(str(obj))
        subprocess.check_call([nvcc, "-shared", *gencode, "-o", str(out), *objects])


setup(ext_modules=[Extension("vllm._C", ["csrc/activation.cu"])], cmdclass={"build_ext": NvccBuild})
'''

KERNEL = """\
extern "C" __global__ void silu_and_mul(float *out, const float *x, int d) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < d) { float a = x[i]; out[i] = a / (1.0f + __expf(-a)) * x[d + i]; }
}
"""

FILES = {
    "pyproject.toml": PYPROJECT,
    "setup.py": SETUP,
    "csrc/activation.cu": KERNEL,
    "vllm/__init__.py": "from vllm._version import version as __version__\n",
    "vllm/engine.py": "class LLMEngine:\n    pass\n",
    ".gitignore": "vllm/_version.py\nbuild/\n*.egg-info/\n",
}


@pytest.fixture(scope="module")
def toolkit() -> Path:
    found = cuda_toolkit()
    if found is None:
        pytest.skip("no CUDA toolkit (nvcc) on this machine")
    return found


def _manifest(root: Path, repo: str, base: str, toolkit: Path, house: Path) -> Path:
    path = root / "vllm.yaml"
    path.write_text(f"""\
schema: releasekit/v1
name: vllm-cuda
components:
  vllm:
    kind: git
    repo: {repo}
    canonical_branch: dev/fathomless-firmament
    distribution: vllm
    import_names: [vllm]
    build:
      version_policy:
        policy: scm
        reason: setuptools-scm names the commit in the version.
      environment:
        kind: image
        image: {BUILDER}
        digest: to-be-locked
        dockerfile: {REPO_ROOT / "dockerfiles" / "vllm-builder.Dockerfile"}
        base:
          name: {base}
          digest: to-be-locked
        build_args:
          TORCH_VERSION: ""
          MAX_JOBS: "2"
        context:
          toolkit: {toolkit}
          wheels: {house}
      native: true
      generated_files: [vllm/_version.py]
toolchain:
  base_image:
    name: {base}
    digest: to-be-locked
  cuda_arch_list: ["12.0a"]
""")
    return path


def test_vllm_like_cuda_component_builds_in_the_builder_image(tmp_path, toolkit, base_image, docker_client):
    house = tmp_path / "wheelhouse"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--quiet",
            "--dest",
            str(house),
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
    forge = Forge(tmp_path / "vllm", name="vllm", default_branch="dev/fathomless-firmament")
    commit = forge.init(FILES, "vLLM-like fork")
    manifest = _manifest(tmp_path, forge.url, base_image.name, toolkit, house)
    lock = tmp_path / "lock.json"
    write_lock(plan_lock(load_manifest(manifest), cache_dir=tmp_path / "git", allow_local=True), lock)
    # Before anything is built, the plan names the builder by its Dockerfile and leaves nothing to be locked.
    plan = make_plan(manifest, lock)
    assert plan.unresolved() == [] and plan.components[0].builder.dockerfile_sha256
    assert plan.components[0].builder.build_args["BASE_IMAGE"] == base_image.image_id
    try:
        record = run_build(
            BuildOptions(
                manifest=manifest,
                lock=lock,
                outdir=tmp_path / "out",
                cache_dir=tmp_path / "cache",
                git_cache_dir=tmp_path / "git",
                allow_local_repos=True,
                build_root=tmp_path / "src",
            ),
            Engine(),
            clock=SystemClock(),
        )
        comp = record.components[0]
        assert comp.builder_image == docker_client.images.get(BUILDER).id
        assert "nvcc" in (tmp_path / "out" / "logs" / "vllm-builder.log").read_text()
        assert comp.version and comp.version.endswith(tuple(f"+g{commit[:n]}" for n in range(7, 13)))
        assert comp.native_arches == ["12.0a"]
        wheel = tmp_path / "out" / "wheels" / (comp.wheel_filename or "")
        assert wheel.name.startswith("vllm-") and "linux_x86_64" in wheel.name
        with zipfile.ZipFile(wheel) as zf:
            libs = [n for n in zf.namelist() if n.startswith("vllm/_C") and n.endswith(".so")]
            assert len(libs) == 1
            assert "sm_120a" in fatbin_arches(zf.read(libs[0]))
            assert commit[:7] in zf.read("vllm/_version.py").decode()
        env = json.loads((tmp_path / "out" / "provenance.intoto.json").read_text())["predicate"][
            "buildDefinition"
        ]["internalParameters"]["builderEnvironment"]["vllm"]
        assert env["TORCH_CUDA_ARCH_LIST"] == "12.0a" and "PATH" not in env
        # nvcc's temporary files are named after the object, not nvcc's PID: the rebuild below is byte-equal.
        assert env["NVCC_APPEND_FLAGS"] == "--objdir-as-tempdir"
        result = verify_provenance(
            VerifyOptions(
                image=record.image_id,
                lock=lock,
                artifacts=tmp_path / "out",
                manifest=manifest,
                allow_local_repos=True,
                cache_dir=str(tmp_path / "git"),
                summary=tmp_path / "summary.json",
            ),
            engine=LazyEngine(timeout=120),
            clock=SystemClock(),
        )
        assert result.passed, [f.render() for f in result.findings.findings if f.severity == "error"]
    finally:
        for image in docker_client.images.list(name=BUILDER.split(":")[0]):
            for tag in image.tags:
                docker_client.images.remove(tag, noprune=False)
