"""The demo's example: component repositories with history and PR refs, and its manifest.

Each repository is a bare "remote" plus a work tree, shaped the way a forge leaves it:
commits on ``main``, pull requests published as ``refs/pull/N/head``, planned PRs
merged with merge commits, and a superseded PR left open and unmerged. Commit times
are fixed, so the example (and so the release built from it) is the same every time.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import jinja2
from pydantic import BaseModel

from releasekit.demo.projects import kernels, runtime
from releasekit.errors import EnvironmentProblem

HERE = Path(__file__).parent
BACKEND = HERE / "projects" / "backend.py"
EPOCH = 1_767_225_600  # 2026-01-01T00:00:00Z: the first commit of every demo repository


class DemoRepository:
    """A bare remote plus the work tree that feeds it (git run with a fixed identity and clock)."""

    def __init__(self, root: Path, name: str) -> None:
        self.remote = root / f"{name}.git"
        self.work = root / "clones" / name
        self.time = EPOCH
        self.base: str | None = (
            None  # the commit before the merge plan: what the baseline image is built from
        )
        for path in (self.remote, self.work):
            shutil.rmtree(path, ignore_errors=True)
        self._git(None, "init", "--quiet", "--bare", "--initial-branch=main", str(self.remote))
        self._git(None, "init", "--quiet", "--initial-branch=main", str(self.work))

    def _git(self, cwd: Path | None, *args: str) -> str:
        env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
        stamp = f"{self.time} +0000"
        env.update(
            GIT_CONFIG_NOSYSTEM="1",
            GIT_CONFIG_GLOBAL="/dev/null",
            GIT_AUTHOR_NAME="releasekit demo",
            GIT_AUTHOR_EMAIL="demo@releasekit.invalid",
            GIT_COMMITTER_NAME="releasekit demo",
            GIT_COMMITTER_EMAIL="demo@releasekit.invalid",
            GIT_AUTHOR_DATE=stamp,
            GIT_COMMITTER_DATE=stamp,
        )
        argv = ["git", "-c", "commit.gpgsign=false", "-c", "protocol.file.allow=always"]
        if cwd is not None:
            argv += ["-C", str(cwd)]
        try:
            proc = subprocess.run([*argv, *args], capture_output=True, text=True, env=env)
        except FileNotFoundError:
            raise EnvironmentProblem("git is not installed (apt-get install git)") from None
        if proc.returncode != 0:
            raise EnvironmentProblem(f"demo: git {args[0]} failed: {proc.stderr.strip()[:200]}")
        return proc.stdout.strip()

    def git(self, *args: str) -> str:
        return self._git(self.work, *args)

    def commit(self, files: dict[str, str], message: str) -> str:
        for rel, content in files.items():
            path = self.work / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(content, encoding="utf-8")
            self.git("add", "--", rel)
        self.time += 3600
        self.git("commit", "--quiet", "-m", message)
        return self.git("rev-parse", "HEAD")

    def publish(self) -> None:
        self.git("push", "--quiet", "--force", str(self.remote), "main:refs/heads/main")

    def open_pr(self, number: int, files: dict[str, str], title: str) -> str:
        self.git("checkout", "--quiet", "-B", f"pr-{number}", "main")
        head = self.commit(files, title)
        self.git("push", "--quiet", "--force", str(self.remote), f"{head}:refs/pull/{number}/head")
        self.git("checkout", "--quiet", "main")
        return head

    def merge_pr(self, number: int) -> str:
        self.time += 3600
        self.git("merge", "--quiet", "--no-ff", "-m", f"Merge pull request #{number}", f"pr-{number}")
        self.publish()
        return self.git("rev-parse", "HEAD")


class DemoExample(BaseModel):
    root: str
    manifest: str
    repositories: dict[str, str]
    native: bool
    skipped: list[str]
    # component -> the commit before its merge plan (the "canonical without the plan" baseline)
    base_commits: dict[str, str] = {}


def _backend_files() -> dict[str, str]:
    return {"_build/rkdemo_backend.py": BACKEND.read_text(encoding="utf-8")}


def make_runtime_repo(root: Path) -> DemoRepository:
    repo = DemoRepository(root, "rkdemo-runtime")
    repo.commit(
        {
            "pyproject.toml": runtime.PYPROJECT,
            "rkdemo_runtime/__init__.py": runtime.INIT_V1,
            ".gitignore": "rkdemo_runtime/_version.py\n",
            "tests/test_greet.py": runtime.TEST_GREET,
            "tests/test_gpu.py": runtime.TEST_GPU,
            "tests/fixtures/greetings.txt": runtime.GREETINGS_FIXTURE,
            **_backend_files(),
        },
        "rkdemo-runtime: package skeleton with a git-derived version",
    )
    repo.base = repo.git("rev-parse", "HEAD")
    repo.publish()
    repo.open_pr(
        1,
        {"rkdemo_runtime/scale.py": runtime.SCALE, "tests/test_scale.py": runtime.TEST_SCALE},
        "Add a scale helper",
    )
    repo.open_pr(
        3, {"rkdemo_runtime/__init__.py": runtime.INIT_PR3}, "Greeting names the project (superseded)"
    )
    repo.merge_pr(1)
    repo.open_pr(2, {"rkdemo_runtime/__init__.py": runtime.INIT_PR2}, "Greeting names the release")
    repo.merge_pr(2)
    return repo


def make_kernels_repo(root: Path) -> DemoRepository:
    repo = DemoRepository(root, "rkdemo-kernels")
    repo.commit(
        {
            "pyproject.toml": kernels.PYPROJECT,
            "rkdemo_kernels/__init__.py": kernels.INIT,
            "kernels/scale.cu": kernels.KERNEL_V1,
            ".gitignore": "rkdemo_kernels/_version.py\n",
            **_backend_files(),
        },
        "rkdemo-kernels: scale kernel for SM120",
    )
    repo.publish()
    repo.open_pr(5, {"kernels/scale.cu": kernels.KERNEL_PR5}, "Launch the scale kernel with 256 threads")
    repo.merge_pr(5)
    return repo


def nvcc_version() -> str | None:
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        return None
    out = subprocess.run([nvcc, "--version"], capture_output=True, text=True).stdout
    for token in out.replace(",", " ").split():
        if token.startswith("V") and token[1:2].isdigit():
            return ".".join(token[1:].split(".")[:2])
    return "unknown"


# The ruff the hygiene stage pins when none is on PATH (it is then installed from PyPI).
DEFAULT_RUFF = "0.17.6"


def ruff_version() -> str:
    """The version of the ruff on PATH: the demo pins what this host has, so nothing is fetched."""
    ruff = shutil.which("ruff")
    if ruff is None:
        return DEFAULT_RUFF
    out = subprocess.run([ruff, "--version"], capture_output=True, text=True, check=False).stdout.split()
    return out[-1] if out else DEFAULT_RUFF


def make_example(root: Path, *, base_image: str, native: bool | None = None) -> DemoExample:
    """Write the repositories and ``manifest.yaml`` under ``root``. ``native=None``: only if nvcc exists."""
    root.mkdir(parents=True, exist_ok=True)
    repos_dir = root / "repos"
    cuda = nvcc_version()
    if native is None:
        native = cuda is not None
    skipped = (
        [] if native else ["kernels: nvcc not found on PATH, the CUDA component is left out of the demo"]
    )
    runtime_repo = make_runtime_repo(repos_dir)
    kernels_repo = make_kernels_repo(repos_dir) if native else None
    template = jinja2.Template(
        (HERE / "manifest.yaml.j2").read_text(encoding="utf-8"), trim_blocks=True, lstrip_blocks=True
    )
    manifest = root / "manifest.yaml"
    manifest.write_text(
        template.render(
            runtime_repo=runtime_repo.remote.resolve().as_uri(),
            kernels_repo=kernels_repo.remote.resolve().as_uri() if kernels_repo else None,
            base_image=base_image,
            ruff_version=ruff_version(),
            # The demo's runtime has no CUDA (its engine runs on the CPU); nvcc only compiles the
            # kernels' machine code, which verify-provenance checks by arch, not by toolkit version.
            cuda=None,
        ),
        encoding="utf-8",
    )
    repositories = {"runtime": str(runtime_repo.remote)}
    if kernels_repo:
        repositories["kernels"] = str(kernels_repo.remote)
    return DemoExample(
        root=str(root),
        manifest=str(manifest),
        repositories=repositories,
        native=native,
        skipped=skipped,
        base_commits={"runtime": str(runtime_repo.base)},
    )
