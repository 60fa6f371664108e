"""PEP 517 wheel builds in an isolated environment: a fresh venv with pinned build requirements.

The environment is built from nothing for every build: no inherited PYTHONPATH, no
user site, fixed locale and time zone, SOURCE_DATE_EPOCH from the commit, and the
CUDA arch list in the variables build systems read (TORCH_CUDA_ARCH_LIST, CUDAARCHS).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from pydantic import BaseModel

from releasekit.build import native, wheelfile
from releasekit.errors import BuildFailed, EnvironmentProblem
from releasekit.manifest.models import BuildRecipe

HOOKS = Path(__file__).with_name("pep517_hooks.py")
# A version's local label naming the commit: 1.2.3+g1a2b3c4 or 1.2.3+cu130.g1a2b3c4d5e6.
COMMIT_LABEL = re.compile(r"(?:^|[.+])g([0-9a-f]{7,40})(?:$|[.])")


class BuiltWheel(BaseModel):
    path: str
    filename: str
    distribution: str
    version: str
    sha256: str
    native_arches: list[str] = []


class Log:
    """One log file per component; every subprocess's output is appended to it."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("", encoding="utf-8")

    def write(self, text: str) -> None:
        with self.path.open("a", encoding="utf-8") as fh:
            fh.write(text if text.endswith("\n") else text + "\n")

    def run(self, cmd: list[str], *, cwd: Path | None = None, env: dict[str, str] | None = None) -> int:
        self.write("$ " + " ".join(cmd))
        with self.path.open("a", encoding="utf-8") as fh:
            proc = subprocess.run(cmd, cwd=cwd, env=env, stdout=fh, stderr=subprocess.STDOUT)
        return proc.returncode


def build_environment(recipe: BuildRecipe, source_date_epoch: int, commit: str, arches: list[str]) -> dict[str, str]:
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": os.environ.get("HOME", "/root"),
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "TZ": "UTC",
        "PYTHONHASHSEED": "0",
        "PYTHONNOUSERSITE": "1",
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        "SOURCE_DATE_EPOCH": str(source_date_epoch),
        # The commit releasekit checked out: backends that cannot run git may stamp it.
        "RELEASEKIT_SOURCE_COMMIT": commit,
    }
    for key in ("CUDA_HOME", "CUDA_PATH", "TMPDIR", "PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL"):
        if key in os.environ:
            env[key] = os.environ[key]
    if recipe.native:
        env.update(native.arch_environment(arches))
    env.update(recipe.env)
    return env


def _check_requirements(wanted: list[str], pinned: list[str]) -> list[str]:
    """Build requirements that the pinned set does not satisfy."""
    versions: dict[str, str] = {}
    for item in pinned:
        req = Requirement(item)
        spec = next(iter(req.specifier), None)
        if spec is None or spec.operator != "==":
            return [f"{item} (build requirements must be pinned as name==version)"]
        versions[req.name.lower().replace("_", "-")] = spec.version
    missing: list[str] = []
    for item in wanted:
        try:
            req = Requirement(item)
        except InvalidRequirement:
            missing.append(item)
            continue
        if req.marker is not None and not req.marker.evaluate():
            continue
        have = versions.get(req.name.lower().replace("_", "-"))
        if have is None or (req.specifier and have not in req.specifier):
            missing.append(item)
    return missing


def build_wheel(
    source: Path,
    out_dir: Path,
    *,
    recipe: BuildRecipe,
    commit: str,
    source_date_epoch: int,
    arches: list[str],
    log: Log,
    component: str,
) -> BuiltWheel:
    """Build one wheel from ``source`` into ``out_dir``; BuildFailed names the log on failure."""
    project = source / recipe.subdirectory if recipe.subdirectory else source
    if not (project / "pyproject.toml").is_file():
        raise BuildFailed(f"{component}: no pyproject.toml in {recipe.subdirectory or 'the repository root'}")
    if recipe.native and shutil.which("nvcc") is None:
        raise EnvironmentProblem(
            f"{component} compiles CUDA code but nvcc is not on PATH", hint="install the CUDA toolkit"
        )
    env = build_environment(recipe, source_date_epoch, commit, arches)
    log.write(f"# releasekit build of {component} at {commit}, SOURCE_DATE_EPOCH={source_date_epoch}")
    with tempfile.TemporaryDirectory(prefix="releasekit-venv-") as tmp:
        venv = Path(tmp) / "venv"
        pinned = recipe.environment.requirements
        venv_cmd = [sys.executable, "-m", "venv", str(venv)]
        if not pinned:
            venv_cmd.insert(3, "--without-pip")
        if log.run(venv_cmd, env=env) != 0:
            raise EnvironmentProblem(f"{component}: cannot create a build venv (python3-venv missing?)")
        python = str(venv / "bin" / "python")
        env["VIRTUAL_ENV"] = str(venv)
        env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env['PATH']}"
        if pinned and log.run([python, "-m", "pip", "install", "--no-input", *pinned], env=env) != 0:
            raise BuildFailed(f"{component}: installing build requirements failed (see {log.path})")
        result = Path(tmp) / "result.json"
        if log.run([python, str(HOOKS), "get_requires_for_build_wheel", str(result)], cwd=project, env=env) != 0:
            raise BuildFailed(f"{component}: the build backend failed to load (see {log.path})")
        wanted = json.loads(result.read_text())
        missing = _check_requirements(wanted["static"] + wanted["dynamic"], pinned)
        if missing:
            raise BuildFailed(
                f"{component}: build requirements not pinned by the manifest's build environment: "
                + ", ".join(missing)
            )
        dist = Path(tmp) / "dist"
        dist.mkdir()
        config = json.dumps(recipe.config_settings)
        if log.run([python, str(HOOKS), "build_wheel", str(result), str(dist), config], cwd=project, env=env) != 0:
            raise BuildFailed(f"{component}: wheel build failed (see {log.path})")
        built = dist / json.loads(result.read_text())["wheel"]
        wheelfile.normalise(built, source_date_epoch)
        out_dir.mkdir(parents=True, exist_ok=True)
        final = out_dir / built.name
        shutil.move(str(built), final)
    info = wheelfile.inspect(final)
    check_version_names_commit(component, info.version, commit)
    check_generated_files(component, final, recipe.generated_files, commit, recipe.subdirectory)
    arches_found: list[str] = []
    if recipe.native:
        arches_found = native.check_wheel_arches(component, final, arches)
    log.write(f"# built {info.filename} sha256={info.sha256}")
    return BuiltWheel(
        path=str(final),
        filename=info.filename,
        distribution=info.distribution,
        version=info.version,
        sha256=info.sha256,
        native_arches=arches_found,
    )


def check_version_names_commit(component: str, version: str, commit: str) -> None:
    """Seed 003 step 4: the generated version must name the commit whose sources are in the wheel."""
    local = version.partition("+")[2]
    match = COMMIT_LABEL.search(local) if local else None
    if match is None:
        raise BuildFailed(
            f"{component}: built version {version} does not name its commit "
            f"(expected a local label such as +g{commit[:12]})"
        )
    if not commit.startswith(match.group(1)):
        raise BuildFailed(f"{component}: built version {version} names commit {match.group(1)}, locked {commit[:12]}")


def check_generated_files(
    component: str, wheel: Path, generated: list[str], commit: str, subdirectory: str | None
) -> None:
    """Generated version files shipped in the wheel must name the same commit."""
    for rel in generated:
        inside = rel.removeprefix(f"{subdirectory.rstrip('/')}/") if subdirectory else rel
        data = wheelfile.read_member(wheel, inside)
        if data is None:
            continue
        hexes = re.findall(r"(?<![0-9a-f])[0-9a-f]{7,40}(?![0-9a-f])", data.decode("utf-8", "replace"))
        if not any(commit.startswith(h) for h in hexes):
            raise BuildFailed(f"{component}: generated {rel} does not name the locked commit {commit[:12]}")
