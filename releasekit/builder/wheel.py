"""PEP 517 wheel builds, each in a sandbox: a throw-away container, never on this machine.

Everything of a component that executes (its backend, in-tree or not, ``setup.py``, its build
hooks) runs in a container of the builder image (``environment.kind: image``) or of the release
base image (``kind: venv``: a fresh venv inside, with the manifest's pinned build requirements
installed from wheels downloaded here, ``--only-binary=:all:``, without an index). The container
has no network (unless the locked manifest grants the component's ``build`` one:
``sandbox.network``), runs as ``nobody``, with every capability dropped; the source is mounted
read-only and copied to its fixed build path inside; its only writable places are its own
directories, exported when it ends; its environment is built from nothing (no PYTHONPATH, no
user site, fixed locale and time zone, SOURCE_DATE_EPOCH from the commit, the CUDA arch list in
the variables build systems read) and never holds a credential, a key or a URL carrying one.
It is removed, with every process it started, before the build returns (docs/build.md, "The
build sandbox").
"""

from __future__ import annotations

import json
import os
import re
import shlex
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
from releasekit.child_env import child_env, is_secret
from releasekit.docker_engine import ContainerSpec, Engine, Sandbox
from releasekit.errors import BuildFailed, EnvironmentProblem
from releasekit.manifest.models import BuildRecipe

HOOKS = Path(__file__).with_name("pep517_hooks.py")
# A version's local label naming the commit: 1.2.3+g1a2b3c4 or 1.2.3+cu130.g1a2b3c4d5e6.
COMMIT_LABEL = re.compile(r"(?:^|[.+])g([0-9a-f]{7,40})(?:$|[.])")


# Where sources are inside a build sandbox: fixed, so that paths compiled into binaries are too.
BUILD_SRC = "/releasekit-src"
# The sandbox's other places: the source, read-only; the hook runner and the build requirements'
# wheels, read-only; the venv, HOME and TMPDIR; the hooks' results and the wheel (exported).
SOURCE_RO = "/releasekit-source"
TOOLS = "/releasekit-tools"
WHEELS = "/releasekit-wheels"
WORK = "/releasekit-work"
OUT = "/releasekit-out"
SANDBOX_USER = "65534:65534"  # nobody
SANDBOX_TIMEOUT = 6 * 3600.0  # a CUDA build of a large project takes hours; a hang ends here
URL_CREDENTIAL = re.compile(r"(?i)\b[a-z][a-z0-9+.-]*://[^/@\s]+@")


@dataclass
class Builder:
    """The image a wheel is built in, resolved to a local image ID: the manifest's builder image, or
    (``venv``) the release base image, in which a fresh venv gets the pinned build requirements;
    ``host_toolchain``: a CUDA build of a venv recipe, which gets this machine's compilers (``/usr``
    and CUDA_HOME, read-only) since the base image has none."""

    engine: Engine
    name: str
    image_id: str
    venv: bool = False
    host_toolchain: bool = False
    network: bool = False  # the manifest's sandbox.network grants this component's build a network


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
    # The host's index settings never reach a build (a URL may carry a credential): pinned build
    # requirements are downloaded here and installed in the sandbox without an index.
    for key in ("CUDA_HOME", "CUDA_PATH", "TMPDIR"):
        if key in os.environ:
            env[key] = os.environ[key]
    if recipe.native:
        env.update(native.arch_environment(arches))
    env.update(recipe.env)
    # Declared host variables (build.pass_env) pass with the host's value; nothing else does.
    # A credential never passes, whatever the manifest declares: the backend could read it (issue 34).
    # Nor does a value with a credential inside a URL (https://user:token@host/...).
    env.update(
        {
            k: os.environ[k]
            for k in recipe.pass_env
            if k in os.environ and not is_secret(k) and not URL_CREDENTIAL.search(os.environ[k])
        }
    )
    if recipe.native:
        env["NVCC_APPEND_FLAGS"] = native.nvcc_append_flags(env.get("NVCC_APPEND_FLAGS"))
    return env


def container_environment(env: dict[str, str]) -> dict[str, str]:
    """The part of the build environment a sandbox gets (it has its own PATH, HOME and TMPDIR)."""
    return {k: v for k, v in env.items() if k not in ("PATH", "HOME", "TMPDIR")}


def sandbox_environment(env: dict[str, str]) -> dict[str, str]:
    """The sandbox's whole environment: the build's, with HOME and TMPDIR in its own writable place."""
    return {**container_environment(env), "HOME": f"{WORK}/home", "TMPDIR": f"{WORK}/tmp"}


def image_script(recipe: BuildRecipe, *, venv: bool = False) -> str:
    """The exact shell command run in a build sandbox."""
    workdir = f"{BUILD_SRC}/{recipe.subdirectory.strip('/')}" if recipe.subdirectory else BUILD_SRC
    config = shlex.quote(json.dumps(recipe.config_settings))
    pinned = recipe.environment.requirements if venv else []
    python = f"{WORK}/venv/bin/python" if venv else "python3"
    steps = [
        "set -e",
        f"mkdir -p {WORK}/home {WORK}/tmp {OUT}/dist",
        # A backend may write beside its sources (setuptools-scm's version file): it writes the copy.
        f"cp -R {SOURCE_RO}/. {BUILD_SRC}/",
        f"cd {workdir}",
    ]
    if venv:
        steps.append(f"python3 -m venv {'' if pinned else '--without-pip '}{WORK}/venv")
    if pinned:
        steps.append(
            f"{python} -m pip install --no-input --no-index --find-links {WHEELS} "
            + " ".join(shlex.quote(p) for p in pinned)
        )
    steps.append(f"{python} {TOOLS}/pep517_hooks.py get_requires_for_build_wheel {OUT}/requires.json")
    steps.append(f"{python} {TOOLS}/pep517_hooks.py build_wheel {OUT}/result.json {OUT}/dist {config}")
    # What the build edited of its sources (the copy against the read-only source).
    steps.append(
        f"{python} {TOOLS}/pep517_hooks.py changed_sources {OUT}/changed.json {SOURCE_RO} {BUILD_SRC}"
    )
    return "; ".join(steps)


def sandbox_command(recipe: BuildRecipe, image: str, *, venv: bool, network: bool = False) -> str:
    """The build as a ``docker run`` command line (what ``build --plan`` shows); ``network``: granted."""
    return (
        f"docker run --rm {'' if network else '--network=none '}--user {SANDBOX_USER} --cap-drop=ALL "
        f"-v SOURCE:{SOURCE_RO}:ro {image} /bin/sh -c {shlex.quote(image_script(recipe, venv=venv))}"
    )


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


def download_requirements(pinned: list[str], into: Path, log: Log) -> None:
    """The pinned build requirements (and what they need) as wheels only: downloading runs no project
    code (no sdist is built here); the sandbox installs them without an index."""
    into.mkdir()
    if not pinned:
        return
    cmd = [sys.executable, "-m", "pip", "download", "--no-input", "--only-binary=:all:", "--dest", str(into)]
    # The host's pip settings (an index, a wheelhouse) apply here, on this machine, and only here.
    if log.run([*cmd, *pinned], env=child_env(prefixes=("PIP_",))) != 0:
        raise BuildFailed(f"cannot download the pinned build requirements as wheels (see {log.path})")


def sandbox_spec(builder: Builder, script: str, env: dict[str, str], mounts: dict[str, str]) -> ContainerSpec:
    """The container a build runs in: no network (unless granted), nobody, no capability, no new privilege."""
    if builder.host_toolchain:
        mounts = {**mounts, "/usr": "/usr"}
        for key in ("CUDA_HOME", "CUDA_PATH"):
            if env.get(key) and Path(env[key]).is_dir():
                mounts[str(Path(env[key]).resolve())] = str(Path(env[key]).resolve())
    return ContainerSpec(
        builder.image_id,
        entrypoint=["/bin/sh", "-c", script],
        command=[],
        environment=sandbox_environment(env),
        user=SANDBOX_USER,
        network=builder.network,
        read_only_mounts=mounts,
        cap_drop=["ALL"],
        security_opt=["no-new-privileges"],
        pids_limit=4096,
        log_max_size="64m",
    )


def _in_sandbox(
    builder: Builder,
    project_source: Path,
    tmp: Path,
    *,
    recipe: BuildRecipe,
    env: dict[str, str],
    log: Log,
    component: str,
) -> Path:
    """Both hooks in one throw-away container; its results and wheel come out through its export."""
    tools = tmp / "tools"
    tools.mkdir()
    shutil.copyfile(HOOKS, tools / "pep517_hooks.py")
    pinned = recipe.environment.requirements if builder.venv else []
    mounts = {str(project_source): SOURCE_RO, str(tools): TOOLS}
    if pinned:
        download_requirements(pinned, tmp / "wheels", log)
        mounts[str(tmp / "wheels")] = WHEELS
    script = image_script(recipe, venv=builder.venv)
    exported = tmp / "out.tar"
    where = "sandbox, network granted by the manifest" if builder.network else "sandbox, no network"
    log.write(f"$ [{builder.image_id[:19]}, {where}] sh -c {script}")
    run = builder.engine.run_sandboxed(
        sandbox_spec(builder, script, env, mounts),
        Sandbox(writable=[BUILD_SRC, WORK, OUT], export=OUT, export_to=exported, timeout=SANDBOX_TIMEOUT),
    )
    log.write(run.output)
    results = _exported(exported, tmp / "dist") if exported.is_file() else {}
    requires = results.get("requires")
    if builder.venv and requires is not None:
        missing = unmet_requirements(requires["static"] + requires["dynamic"], pinned)
        if missing:
            raise BuildFailed(
                f"{component}: build requirements not pinned by the manifest's build environment: "
                + ", ".join(missing)
            )
    if run.exit_code != 0 or "wheel" not in results:
        why = "ran past its deadline" if run.timed_out else "failed"
        raise BuildFailed(f"{component}: wheel build in the {builder.name} sandbox {why} (see {log.path})")
    _sources_untouched(component, recipe, results.get("changed"))
    if requires is not None and not builder.venv:
        log.write(
            f"# build requirements (provided by the builder image): {requires['static'] + requires['dynamic']}"
        )
    return tmp / "dist" / results["wheel"]


def _sources_untouched(component: str, recipe: BuildRecipe, changed: object) -> None:
    """A build may write its declared generated files and new (ignored) files, never a source file:
    a backend that edits one ships sources that are not the locked commit's (the sandbox compared
    its copy with the read-only source; a version stamp was applied before, to both)."""
    if not isinstance(changed, list):
        raise BuildFailed(f"{component}: the build sandbox did not say which sources the build changed")
    sub = recipe.subdirectory.rstrip("/") + "/" if recipe.subdirectory else ""
    allowed = set(recipe.generated_files) | {sub + g for g in recipe.generated_files}
    edited = [str(path) for path in changed if path not in allowed]
    if edited:
        raise BuildFailed(
            f"{component}: the build changed the checked-out sources ({', '.join(edited[:3])}); "
            "the wheel would not be the locked commit"
        )


MAX_RESULT_BYTES = 1 << 20


def _exported(exported: Path, dist: Path) -> dict:
    """The hooks' results (``requires``; ``wheel``: its file name, the wheel copied to ``dist``) from
    the sandbox's export; anything else in it is ignored, a wheel name that is a path is refused."""
    out: dict = {}
    with tarfile.open(exported) as tar:
        for key, name in (
            ("requires", "requires.json"),
            ("result", "result.json"),
            ("changed", "changed.json"),
        ):
            try:
                member = tar.getmember(f"{OUT.strip('/')}/{name}")
            except KeyError:
                continue
            handle = tar.extractfile(member) if member.isfile() and member.size <= MAX_RESULT_BYTES else None
            if handle is not None:
                out[key] = json.loads(handle.read())
        wheel = (out.pop("result", None) or {}).get("wheel")
        if not isinstance(wheel, str) or "/" in wheel or not wheel.endswith(".whl"):
            return out
        try:
            member = tar.getmember(f"{OUT.strip('/')}/dist/{wheel}")
        except KeyError:
            return out
        source = tar.extractfile(member) if member.isfile() else None
        if source is None:
            return out
        dist.mkdir(exist_ok=True)
        with source, (dist / wheel).open("wb") as dst:
            shutil.copyfileobj(source, dst)
        out["wheel"] = wheel
    return out


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
    builder: Builder,
    extra_env: dict[str, str] | None = None,
) -> BuiltWheel:
    """Build one wheel from ``source`` into ``out_dir`` in a sandbox of ``builder``; BuildFailed
    names the log on failure."""
    project = source / recipe.subdirectory if recipe.subdirectory else source
    if not (project / "pyproject.toml").is_file():
        raise BuildFailed(f"{component}: no pyproject.toml in {recipe.subdirectory or 'the repository root'}")
    if recipe.native and builder.host_toolchain and shutil.which("nvcc") is None:
        raise EnvironmentProblem(
            f"{component} compiles CUDA code but nvcc is not on PATH", hint="install the CUDA toolkit"
        )
    env = build_environment(recipe, source_date_epoch, commit, arches)
    env.update(extra_env or {})  # the version policy's stamp, when it is an environment variable
    where = f"a fresh venv in {builder.name}" if builder.venv else f"builder image {builder.name}"
    log.write(
        f"# releasekit build of {component} at {commit} in {where} ({builder.image_id}, sandboxed), "
        f"SOURCE_DATE_EPOCH={source_date_epoch}"
    )
    with tempfile.TemporaryDirectory(prefix="releasekit-wheel-") as tmp_name:
        tmp = Path(tmp_name)
        built = _in_sandbox(builder, source, tmp, recipe=recipe, env=env, log=log, component=component)
        wheelfile.normalise(built, source_date_epoch)
        out_dir.mkdir(parents=True, exist_ok=True)
        final = out_dir / built.name
        shutil.move(str(built), final)
    return _checked(final, recipe=recipe, commit=commit, arches=arches, log=log, component=component, env=env)


def _checked(
    final: Path,
    *,
    recipe: BuildRecipe,
    commit: str,
    arches: list[str],
    log: Log,
    component: str,
    env: dict[str, str],
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
        environment=hygiene.redact(container_environment(env)),
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
