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
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from pydantic import BaseModel

from releasekit.builder import hygiene, native, stamp, wheelfile
from releasekit.child_env import is_secret
from releasekit.docker_engine import Engine
from releasekit.errors import BuildFailed, EnvironmentProblem
from releasekit.manifest.models import BuildRecipe

HOOKS = Path(__file__).with_name("pep517_hooks.py")
# A version's local label naming the commit: 1.2.3+g1a2b3c4 or 1.2.3+cu130.g1a2b3c4d5e6.
COMMIT_LABEL = re.compile(r"(?:^|[.+])g([0-9a-f]{7,40})(?:$|[.])")


# Where sources are inside a builder container: fixed, like the host build path.
BUILD_SRC = "/releasekit-src"


@dataclass
class Builder:
    """A builder image, resolved to a local image ID."""

    engine: Engine
    name: str
    image_id: str


class BuiltWheel(BaseModel):
    path: str
    filename: str
    distribution: str
    version: str
    sha256: str
    native_arches: list[str] = []
    # What the build ran with (cached with the wheel, so a cache hit records the same).
    environment: dict[str, str] = {}
    modifications: list[dict[str, str | None]] = []


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


# What the recorded build environment says instead of the build's random temporary directory.
BUILD_TMP = "$BUILD_TMP"


def build_environment(
    recipe: BuildRecipe, source_date_epoch: int, commit: str, arches: list[str]
) -> dict[str, str]:
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
    # Declared host variables (build.pass_env) pass with the host's value; nothing else does.
    # A credential never passes, whatever the manifest declares: the backend could read it (issue 34).
    env.update({k: os.environ[k] for k in recipe.pass_env if k in os.environ and not is_secret(k)})
    if recipe.native:
        env["NVCC_APPEND_FLAGS"] = native.nvcc_append_flags(env.get("NVCC_APPEND_FLAGS"))
    return env


def container_environment(env: dict[str, str]) -> dict[str, str]:
    """The part of the build environment a builder container gets (it has its own PATH and HOME)."""
    return {k: v for k, v in env.items() if k not in ("PATH", "HOME", "TMPDIR")}


def image_script(recipe: BuildRecipe) -> str:
    """The exact shell command run in a builder container."""
    workdir = f"{BUILD_SRC}/{recipe.subdirectory.strip('/')}" if recipe.subdirectory else BUILD_SRC
    config = json.dumps(recipe.config_settings).replace("'", "'\\''")
    return (
        f"set -e; mkdir -p /releasekit-out/dist; cd {workdir}; "
        "python3 /releasekit-tools/pep517_hooks.py get_requires_for_build_wheel /releasekit-out/requires.json; "
        f"python3 /releasekit-tools/pep517_hooks.py build_wheel /releasekit-out/result.json /releasekit-out/dist '{config}'"
    )


def venv_commands(recipe: BuildRecipe) -> list[list[str]]:
    """The commands of a venv build, with VENV, RESULT and DIST standing for its temporary paths."""
    create = [
        "python3",
        "-m",
        "venv",
        *([] if recipe.environment.requirements else ["--without-pip"]),
        "VENV",
    ]
    out = [create]
    if recipe.environment.requirements:
        out.append(
            ["VENV/bin/python", "-m", "pip", "install", "--no-input", *recipe.environment.requirements]
        )
    out.append(["VENV/bin/python", "pep517_hooks.py", "get_requires_for_build_wheel", "RESULT"])
    out.append(
        [
            "VENV/bin/python",
            "pep517_hooks.py",
            "build_wheel",
            "RESULT",
            "DIST",
            json.dumps(recipe.config_settings),
        ]
    )
    return out


def unmet_requirements(wanted: list[str], pinned: list[str]) -> list[str]:
    """Build requirements that the pinned set does not satisfy."""
    versions: dict[str, str] = {}
    for item in pinned:
        req = Requirement(item)
        spec = next(iter(req.specifier), None)
        if spec is None or spec.operator != "==":
            return [f"{item} (build requirements must be pinned as name==version)"]
        versions[req.name.lower().replace("_", "-")] = spec.version
    missing: list[str] = []
    # A backend may name a requirement both statically and dynamically (setuptools: wheel).
    for item in dict.fromkeys(wanted):
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


def _in_venv(
    project: Path,
    dist: Path,
    tmp: Path,
    recipe: BuildRecipe,
    *,
    component: str,
    env: dict[str, str],
    log: Log,
) -> Path:
    """A fresh venv on this machine with exactly the manifest's pinned build requirements."""
    venv = tmp / "venv"
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
    # The hook runner is run from a folder of its own: run from releasekit/builder/, that folder
    # would be sys.path[0] and its modules (wheel.py, stamp.py, ...) would shadow the backend's
    # imports (setuptools' bdist_wheel imports the wheel package).
    tools = tmp / "tools"
    tools.mkdir()
    hooks = str(shutil.copyfile(HOOKS, tools / "pep517_hooks.py"))
    result = tmp / "result.json"
    if log.run([python, hooks, "get_requires_for_build_wheel", str(result)], cwd=project, env=env) != 0:
        raise BuildFailed(f"{component}: the build backend failed to load (see {log.path})")
    wanted = json.loads(result.read_text())
    missing = unmet_requirements(wanted["static"] + wanted["dynamic"], pinned)
    if missing:
        raise BuildFailed(
            f"{component}: build requirements not pinned by the manifest's build environment: "
            + ", ".join(missing)
        )
    config = json.dumps(recipe.config_settings)
    if log.run([python, hooks, "build_wheel", str(result), str(dist), config], cwd=project, env=env) != 0:
        raise BuildFailed(f"{component}: wheel build failed (see {log.path})")
    return dist / json.loads(result.read_text())["wheel"]


def _in_image(
    builder: Builder,
    source: Path,
    dist: Path,
    tmp: Path,
    *,
    recipe: BuildRecipe,
    env: dict[str, str],
    log: Log,
    component: str,
) -> Path:
    """A throw-away container of the builder image, without network: the image holds the build requirements."""
    tools = tmp / "tools"
    tools.mkdir()
    shutil.copyfile(HOOKS, tools / "pep517_hooks.py")
    script = image_script(recipe)
    # The container has its own PATH and HOME; everything else is the same fixed environment.
    inner = container_environment(env)
    exported = tmp / "out.tar"
    log.write(f"$ [{builder.image_id[:19]}] sh -c {script}")
    run = builder.engine.run_throwaway(
        builder.image_id,
        ["/bin/sh", "-c", script],
        inputs={BUILD_SRC: source, "/releasekit-tools": tools},
        export="/releasekit-out",
        export_to=exported,
        environment=inner,
    )
    log.write(run.output)
    if run.exit_code != 0:
        raise BuildFailed(f"{component}: wheel build in {builder.name} failed (see {log.path})")
    with tarfile.open(exported) as tar:
        result = json.load(tar.extractfile("releasekit-out/result.json"))  # type: ignore[arg-type]
        requires = json.load(tar.extractfile("releasekit-out/requires.json"))  # type: ignore[arg-type]
        member = tar.getmember(f"releasekit-out/dist/{result['wheel']}")
        with tar.extractfile(member) as src, (dist / result["wheel"]).open("wb") as dst:  # type: ignore[union-attr]
            shutil.copyfileobj(src, dst)
    log.write(
        f"# build requirements (provided by the builder image): {requires['static'] + requires['dynamic']}"
    )
    return dist / result["wheel"]


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
    builder: Builder | None = None,
    extra_env: dict[str, str] | None = None,
) -> BuiltWheel:
    """Build one wheel from ``source`` into ``out_dir``; BuildFailed names the log on failure.

    ``builder`` set: inside that image (the manifest's ``environment.kind: image``);
    otherwise in a fresh venv on this machine.
    """
    project = source / recipe.subdirectory if recipe.subdirectory else source
    if not (project / "pyproject.toml").is_file():
        raise BuildFailed(f"{component}: no pyproject.toml in {recipe.subdirectory or 'the repository root'}")
    if recipe.native and builder is None and shutil.which("nvcc") is None:
        raise EnvironmentProblem(
            f"{component} compiles CUDA code but nvcc is not on PATH", hint="install the CUDA toolkit"
        )
    env = build_environment(recipe, source_date_epoch, commit, arches)
    env.update(extra_env or {})  # the version policy's stamp, when it is an environment variable
    where = f"builder image {builder.name} ({builder.image_id})" if builder else "a fresh venv"
    log.write(
        f"# releasekit build of {component} at {commit} in {where}, SOURCE_DATE_EPOCH={source_date_epoch}"
    )
    with tempfile.TemporaryDirectory(prefix="releasekit-wheel-") as tmp_name:
        tmp = Path(tmp_name)
        dist = tmp / "dist"
        dist.mkdir()
        if builder is None:
            built = _in_venv(project, dist, tmp, recipe, component=component, env=env, log=log)
        else:
            built = _in_image(
                builder, source, dist, tmp, recipe=recipe, env=env, log=log, component=component
            )
        wheelfile.normalise(built, source_date_epoch)
        out_dir.mkdir(parents=True, exist_ok=True)
        final = out_dir / built.name
        shutil.move(str(built), final)
    return _checked(
        final,
        recipe=recipe,
        commit=commit,
        arches=arches,
        log=log,
        component=component,
        env=env,
        builder=builder,
        tmp_name=tmp_name,
    )


def _checked(
    final: Path,
    *,
    recipe: BuildRecipe,
    commit: str,
    arches: list[str],
    log: Log,
    component: str,
    env: dict[str, str],
    builder: Builder | None,
    tmp_name: str,
) -> BuiltWheel:
    """The built wheel, checked: its version names the commit (when the policy says so), its generated
    files are the allowed ones, its CUDA code covers the arch list."""
    info = wheelfile.inspect(final)
    if stamp.require_commit_named(recipe):
        check_version_names_commit(component, info.version, commit)
    check_generated_files(component, final, recipe.generated_files, commit, recipe.subdirectory)
    arches_found: list[str] = []
    if recipe.native:
        arches_found = native.check_wheel_arches(component, final, arches)
    log.write(
        f"# built {info.filename} sha256={info.sha256} (CUDA code: {', '.join(arches_found) or 'none'})"
    )
    return BuiltWheel(
        path=str(final),
        filename=info.filename,
        distribution=info.distribution,
        version=info.version,
        sha256=info.sha256,
        native_arches=arches_found,
        # The build's own temporary directory has a random name: recorded as BUILD_TMP, so that
        # two builds of the same inputs record the same environment (docs/architecture.md).
        environment=hygiene.redact(
            {
                name: value.replace(tmp_name, BUILD_TMP)
                for name, value in (container_environment(env) if builder else env).items()
            }
        ),
    )


def check_version_names_commit(component: str, version: str, commit: str) -> None:
    """Seed 003 step 4: the generated version must name the commit whose sources are in the wheel."""
    local = version.partition("+")[2]
    match = COMMIT_LABEL.search(local) if local else None
    if match is None:
        raise BuildFailed(
            f"{component}: built version {version} does not name its commit "
            f"(expected a local label such as +g{commit[:12]}; version_policy is scm: a static version "
            "needs version_policy stamp or static, with a reason)"
        )
    if not commit.startswith(match.group(1)):
        raise BuildFailed(
            f"{component}: built version {version} names commit {match.group(1)}, locked {commit[:12]}"
        )


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
