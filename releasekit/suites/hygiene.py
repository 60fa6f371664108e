"""``releasekit hygiene``: the manifest's linters on each component's composed tree, at pinned versions.

The tree is the canonical head the lock recorded with the planned PRs merged in order
(what ``plan compose`` makes); the files in scope are those the plan changes (``git diff
--name-only base..composed``) or every tracked file. Tools come from PyPI at the versions
the manifest pins, installed once into a cache (a tool already on PATH at exactly that
version is used as it is). ruff and git run here: they read the tree, they run nothing of
it. The repository's hooks are its code: they run only in the hook sandbox
(``suites/hook_sandbox.py``), with the hook runner unpacked from its wheels.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from releasekit.child_env import child_env
from releasekit.docker_engine import Engine
from releasekit.errors import EnvironmentProblem, InputError
from releasekit.findings import Findings, Severity
from releasekit.git.runner import Git
from releasekit.manifest import LoadedManifest, load_manifest
from releasekit.manifest.models import GitComponent
from releasekit.manifest.testing import Hygiene
from releasekit.records.lock import Lock, lock_file_sha256, read_lock
from releasekit.records.test_receipt import (
    HYGIENE_FILE,
    HygieneComponent,
    HygieneReceipt,
    HygieneStepResult,
    write_record,
)
from releasekit.suites.checks import hygiene_checks
from releasekit.suites.context import HygieneContext
from releasekit.suites.hook_sandbox import HookSandbox, runner_site
from releasekit.suites.sources import composed_tree

_DIST = {"ruff": "ruff", "pre-commit": "pre-commit", "prek": "prek"}
_NOT_RUNNABLE = {"HOOK_NOT_RUNNABLE", "HOOKS_NO_CONFIG"}


@dataclass
class HygieneOptions:
    manifest: Path
    lock: Path
    outdir: Path
    components: list[str] = field(default_factory=list)
    allow_local_repos: bool = False
    cache_dir: Path | None = None
    tool_dir: Path | None = None


def _tools_dir() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "releasekit" / "tools"


def _version_of(exe: str) -> str | None:
    try:
        out = subprocess.run(
            [exe, "--version"], capture_output=True, text=True, timeout=60, check=False, env=child_env()
        ).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    words = out.split()
    return words[-1] if words else None


def ensure_tool(name: str, version: str, tool_dir: Path | None = None) -> Path:
    """The executable of ``name`` at exactly ``version``: from PATH if it is that version, else from a cached venv."""
    on_path = shutil.which(name)
    if on_path and _version_of(on_path) == version:
        return Path(on_path)
    venv = (tool_dir or _tools_dir()) / f"{name}-{version}"
    exe = venv / "bin" / name
    if exe.is_file() and _version_of(str(exe)) == version:
        return exe
    shutil.rmtree(venv, ignore_errors=True)
    steps = [
        [sys.executable, "-m", "venv", str(venv)],
        [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", f"{_DIST[name]}=={version}"],
    ]
    for argv in steps:
        proc = subprocess.run(
            argv, capture_output=True, text=True, timeout=900, check=False, env=child_env(prefixes=("PIP_",))
        )
        if proc.returncode != 0:
            shutil.rmtree(venv, ignore_errors=True)
            tail = " ".join((proc.stderr or proc.stdout).split())[-300:]
            raise EnvironmentProblem(f"cannot install {name}=={version} (pinned by the manifest): {tail}")
    if _version_of(str(exe)) != version:
        raise EnvironmentProblem(f"{exe} does not report version {version}")
    return exe


HOOK_RUNNERS = ("pre-commit", "prek")


def _host_tools(hygiene: Hygiene, tool_dir: Path | None) -> dict[str, Path]:
    """The tools that run here (ruff): they read the tree and run nothing of it; never a hook runner."""
    return {
        tool: ensure_tool(tool, version, tool_dir)
        for tool, version in hygiene.tools.items()
        if tool not in HOOK_RUNNERS
    }


def _hook_sandbox(
    engine: Engine, lock: Lock, hygiene: Hygiene, tool_dir: Path | None, *, network: bool
) -> HookSandbox | None:
    """The sandbox of the repository's hooks (a pre-commit step only): the lock's base image, the
    runner at its pinned version; ``network``: the manifest grants the component's hygiene one."""
    if "pre-commit" not in hygiene.steps:
        return None
    runner = hygiene.hook_runner
    version = hygiene.tools.get(runner)
    if version is None:
        raise InputError(f"hygiene: the pre-commit step needs tools.{runner} pinned")
    base = lock.toolchain.base_image
    image = engine.image_id(base.image_id or base.name) or engine.image_id(base.name)
    if image is None:
        raise EnvironmentProblem(
            f"base image {base.name} is not in the Docker Engine: the repository's hooks run in a sandbox of it",
            hint="load or build it (releasekit demo makes its own), then rerun",
        )
    site = runner_site(runner, version, tool_dir or _tools_dir())
    return HookSandbox(engine=engine, image=image, runner=runner, site=site, network=network)


def _files(git: Git, base: str, scope: str) -> list[str]:
    if scope == "all":
        out = git.run("ls-files", "-z")
    else:
        out = git.run("diff", "-z", "--name-only", "--diff-filter=ACMR", base, "HEAD")
    return sorted(f for f in out.split("\0") if f)


def _step_result(
    step: str, hygiene: Hygiene, found: Findings, files: int, granted: bool
) -> HygieneStepResult:
    """One step's line in the receipt: its tool and version, passed, failed or not runnable, and whether
    its sandbox had a network (``granted``: the component's hygiene; only the hooks run in a sandbox)."""
    tool = "ruff" if step.startswith("ruff") else (hygiene.hook_runner if step == "pre-commit" else "git")
    status: Literal["passed", "failed", "not-runnable"]
    if found.errors:
        status = "failed"
    elif any(f.code in _NOT_RUNNABLE for f in found):
        status = "not-runnable"
    else:
        status = "passed"
    return HygieneStepResult(
        step=step,
        tool=tool,
        version=hygiene.tools.get(tool) if tool != "git" else None,
        status=status,
        files=files,
        detail=f"{len(found.errors)} finding(s)" if found.errors else None,
        network=granted and step == "pre-commit",
    )


def _targets(loaded: LoadedManifest, opts: HygieneOptions) -> dict[str, GitComponent]:
    """The git components with a hygiene: section (among those named); none is an input error."""
    targets = {
        name: comp
        for name, comp in loaded.manifest.git_components().items()
        if comp.hygiene is not None and (not opts.components or name in opts.components)
    }
    if not targets:
        raise InputError(
            f"{opts.manifest}: no component has a hygiene: section"
            + (f" among {', '.join(opts.components)}" if opts.components else "")
        )
    return targets


def run_hygiene(opts: HygieneOptions, engine: Engine) -> HygieneReceipt:
    """Every step on each component's composed tree; the repository's hooks in the hook sandbox
    (a container of the lock's base image, made through ``engine``)."""
    loaded = load_manifest(opts.manifest)
    lock = read_lock(opts.lock)
    if lock.manifest.sha256 != loaded.sha256:
        raise InputError(f"{opts.lock} was made from another manifest, not {opts.manifest}")
    targets = _targets(loaded, opts)
    checks = hygiene_checks()
    findings = Findings()
    components: list[HygieneComponent] = []
    with tempfile.TemporaryDirectory(prefix="releasekit-hygiene-") as tmp:
        for name, comp in targets.items():
            hygiene = comp.hygiene
            assert hygiene is not None
            locked = lock.git_components().get(name)
            if locked is None:
                raise InputError(f"the lock has no git component {name!r}")
            tree = Path(tmp) / name
            base, head, tree_id = composed_tree(
                name, comp, locked, loaded, tree, allow_local=opts.allow_local_repos, cache_dir=opts.cache_dir
            )
            files = _files(Git(tree), base, hygiene.scope)
            granted = comp.network_granted("hygiene")  # the lock's manifest (checked above)
            ctx = HygieneContext(
                component=name,
                tree=tree,
                base=base,
                head=head,
                files=files,
                hygiene=hygiene,
                tools=_host_tools(hygiene, opts.tool_dir),
                hooks=_hook_sandbox(engine, lock, hygiene, opts.tool_dir, network=granted),
            )
            record = HygieneComponent(
                component=name,
                repo=locked.repo,
                base=base,
                composed_commit=head,
                composed_tree=tree_id,
                scope=hygiene.scope,
                files=files,
            )
            for step in hygiene.steps:
                found = checks[step].run(ctx)
                record.steps.append(_step_result(step, hygiene, found, len(files), granted))
                findings.extend(found)
            components.append(record)
    steps = [s for c in components for s in c.steps]
    overall: Literal["passed", "failed", "incomplete"] = (
        "failed"
        if not findings.passed
        else ("incomplete" if any(s.status != "passed" for s in steps) else "passed")
    )
    receipt = HygieneReceipt(
        status=overall, lock_sha256=lock_file_sha256(opts.lock), components=components, findings=findings
    )
    write_record(receipt, opts.outdir / HYGIENE_FILE)
    return receipt


def required_components(manifest: Path) -> set[str]:
    """The components whose ``hygiene:`` the manifest requires (the publish gate's policy)."""
    components = load_manifest(manifest).manifest.git_components()
    return {name for name, comp in components.items() if comp.hygiene is not None and comp.hygiene.required}


def blocking_components(receipt: HygieneReceipt, required: set[str]) -> list[str]:
    """The ``required`` components that failed a step: what makes ``hygiene`` exit 1. A component
    with ``required: false`` is reported, never blocking. A step that could not run here
    (``not-runnable``) is a warning at this command, as before; the publish gate still refuses
    it (``HYGIENE_INCOMPLETE``: never a pass)."""
    return sorted(
        c.component
        for c in receipt.components
        if c.component in required and any(s.status == "failed" for s in c.steps)
    )


def shown_findings(receipt: HygieneReceipt, required: set[str]) -> Findings:
    """The receipt's findings as the publish gate will judge them: a component whose hygiene is not
    ``required`` has warnings, not errors (the receipt itself keeps what the tools said)."""
    shown = Findings()
    for finding in receipt.findings:
        if finding.location.component not in required and finding.severity == Severity.error:
            finding = finding.model_copy(update={"severity": Severity.warning})
        shown.findings.append(finding)
    return shown
