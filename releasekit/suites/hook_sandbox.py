"""The sandbox a repository's hooks run in (issue 43): a throw-away container, never the host.

A pre-commit hook of the repository's config (``repo: local`` with ``language: system``, a
script of the tree, any other) is a pull request's code. ``hygiene`` runs the hook runner in a
container of the lock's base image, through the one Docker adapter (``Engine.run_sandboxed``):
no network (unless the locked manifest's ``sandbox.network`` grants the component's ``hygiene``
one: then the runner also fetches the config's remote hook repositories there), as ``nobody``
with every capability dropped, the composed tree mounted read-only and copied to a private
work tree inside, the host's programs (``/usr``: git, python3, what ``language: system`` hooks
call) read-only, the hook runner from its wheels (downloaded here
with ``pip download --only-binary=:all:``, unpacked without running anything, mounted read-only),
an allow-listed environment, and nothing of the host writable. The container is removed, with
every process it started, before the hook's result is judged.
"""

from __future__ import annotations

import shlex
import shutil
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from releasekit import atomic
from releasekit.child_env import child_env
from releasekit.docker_engine import ContainerSpec, Engine, Sandbox
from releasekit.errors import EnvironmentProblem

TREE_RO = "/releasekit-tree"
TREE = "/releasekit-hooks/tree"
TOOLS = "/releasekit-tools"
WORK = "/releasekit-work"
SANDBOX_USER = "65534:65534"  # nobody
HOOK_TIMEOUT = 900.0
_DIST = {"pre-commit": "pre-commit", "prek": "prek"}
_READY = ".releasekit-ready"


@dataclass(frozen=True)
class HookSandbox:
    """Where the hook runner runs: ``image`` (an image ID), with the runner's unpacked wheels in ``site``."""

    engine: Engine
    image: str
    runner: str  # pre-commit | prek
    site: Path
    network: bool = False  # the manifest's sandbox.network grants this component's hygiene a network

    def run(self, tree: Path, args: list[str], env: dict[str, str]) -> tuple[int, str]:
        """The runner with ``args`` in a private copy of ``tree``: its exit code and its output."""
        runner = "python3 -m pre_commit" if self.runner == "pre-commit" else f"{TOOLS}/bin/prek"
        script = (
            f"set -e; mkdir -p {WORK}/home {WORK}/tmp {WORK}/cache; cp -R {TREE_RO}/. {TREE}/; cd {TREE}; "
            f"exec {runner} {shlex.join(args)}"
        )
        spec = ContainerSpec(
            self.image,
            entrypoint=["/bin/sh", "-c", script],
            command=[],
            environment={**sandbox_environment(self.runner), **env},
            user=SANDBOX_USER,
            network=self.network,
            read_only_mounts={str(tree): TREE_RO, str(self.site): TOOLS, "/usr": "/usr"},
            cap_drop=["ALL"],
            security_opt=["no-new-privileges"],
            pids_limit=4096,
            log_max_size="64m",
        )
        run = self.engine.run_sandboxed(spec, Sandbox(writable=[TREE, WORK], timeout=HOOK_TIMEOUT))
        if run.timed_out:
            raise EnvironmentProblem(f"{self.runner} ran longer than {HOOK_TIMEOUT:g} s")
        return run.exit_code, run.output


def sandbox_environment(runner: str) -> dict[str, str]:
    """The hook runner's whole environment: fixed, no variable of the host's."""
    env = {
        "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        "HOME": f"{WORK}/home",
        "TMPDIR": f"{WORK}/tmp",
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "PRE_COMMIT_HOME": f"{WORK}/cache",
        "PREK_HOME": f"{WORK}/cache",
        "PYTHONDONTWRITEBYTECODE": "1",
        "GIT_CONFIG_NOSYSTEM": "1",
    }
    if runner == "pre-commit":
        env["PYTHONPATH"] = TOOLS
    return env


def runner_site(runner: str, version: str, tool_dir: Path) -> Path:
    """The hook runner at ``version`` as unpacked wheels (cached): downloaded wheels only, so nothing
    of a package runs here; unpacking a wheel is what installing it does, without its scripts."""
    site = tool_dir / f"{runner}-{version}-sandbox"
    with atomic.entry_lock(site):  # two hygiene runs at once: one makes it, the other finds it
        if not (site / _READY).is_file():
            _make_site(runner, version, tool_dir, site)
    return site


def _make_site(runner: str, version: str, tool_dir: Path, site: Path) -> None:
    shutil.rmtree(site, ignore_errors=True)
    wheels = tool_dir / f"{runner}-{version}-wheels"
    shutil.rmtree(wheels, ignore_errors=True)
    cmd = [sys.executable, "-m", "pip", "download", "--quiet", "--no-input", "--only-binary=:all:"]
    proc = subprocess.run(
        [*cmd, "--dest", str(wheels), f"{_DIST[runner]}=={version}"],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
        env=child_env(prefixes=("PIP_",)),
    )
    if proc.returncode != 0:
        tail = " ".join((proc.stderr or proc.stdout).split())[-300:]
        raise EnvironmentProblem(f"cannot download {runner}=={version} (pinned by the manifest): {tail}")
    for wheel in sorted(wheels.glob("*.whl")):
        _unpack(wheel, site)
    shutil.rmtree(wheels, ignore_errors=True)
    atomic.write_atomic(site / _READY, f"{runner}=={version}\n")


def _unpack(wheel: Path, site: Path) -> None:
    """A wheel's files under ``site`` (its ``.data/scripts`` under ``site/bin``); a path that leaves is refused."""
    with zipfile.ZipFile(wheel) as zf:
        for info in zf.infolist():
            parts = PurePosixPath(info.filename).parts
            if info.is_dir() or not parts or info.filename.startswith("/") or ".." in parts:
                continue
            if len(parts) > 2 and parts[0].endswith(".data") and parts[1] == "scripts":
                target = site / "bin" / PurePosixPath(*parts[2:])
            elif len(parts) > 2 and parts[0].endswith(".data") and parts[1] in ("purelib", "platlib"):
                target = site / PurePosixPath(*parts[2:])
            else:
                target = site / PurePosixPath(*parts)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(zf.read(info))
            target.chmod(0o755 if target.parent.name == "bin" else 0o644)
