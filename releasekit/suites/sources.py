"""Source trees for the test stage: the locked commit's test files, and the composed tree for hygiene."""

from __future__ import annotations

import shutil
from pathlib import Path, PurePosixPath

from releasekit.errors import InputError
from releasekit.findings import Findings
from releasekit.git.checkout import fresh_checkout
from releasekit.git.mirror import Mirror
from releasekit.git.runner import Git
from releasekit.manifest import LoadedManifest
from releasekit.manifest.models import GitComponent
from releasekit.manifest.testing import TestSuite
from releasekit.records.lock import LockedGitComponent

_CONFIG_FILES = ("pyproject.toml", "pytest.ini", "setup.cfg", "tox.ini", "conftest.py")


def locked_checkout(
    comp: GitComponent,
    locked: LockedGitComponent,
    loaded: LoadedManifest,
    dest: Path,
    *,
    allow_local: bool,
    cache_dir: Path | None = None,
) -> Path:
    mirror = Mirror(comp.repo, cache_dir, allow_local=allow_local, base_dir=loaded.directory)
    return fresh_checkout(mirror, locked.commit, dest, expect_tree=locked.tree).path


def _safe(rel: str) -> PurePosixPath:
    path = PurePosixPath(rel)
    if path.is_absolute() or ".." in path.parts or not path.parts:
        raise InputError(f"test path {rel!r} must be relative to the repository root, without '..'")
    return path


def stage_suite(checkout: Path, suite: TestSuite, dest: Path) -> None:
    """Copy the suite's test paths (not the package: the image's installed code is under test) into ``dest``."""
    wanted: list[PurePosixPath] = [PurePosixPath(n) for n in _CONFIG_FILES]
    for rel in [*(suite.pytest.paths if suite.pytest else []), *suite.files]:
        rel_path = _safe(rel.split("::")[0])
        wanted.append(rel_path)
        for parent in list(rel_path.parents)[:-1]:
            wanted.append(parent / "conftest.py")
            wanted.append(parent / "__init__.py")
    dest.mkdir(parents=True, exist_ok=True)
    for wanted_path in dict.fromkeys(wanted):
        src = checkout / wanted_path
        if src.is_symlink() or not src.exists():
            continue
        target = dest / wanted_path
        target.parent.mkdir(parents=True, exist_ok=True)
        if src.is_dir():
            shutil.copytree(
                src, target, dirs_exist_ok=True, ignore=shutil.ignore_patterns("__pycache__", ".git")
            )
        else:
            shutil.copy2(src, target)


def composed_tree(
    name: str,
    comp: GitComponent,
    locked: LockedGitComponent,
    loaded: LoadedManifest,
    dest: Path,
    *,
    allow_local: bool,
    cache_dir: Path | None = None,
) -> tuple[str, str, str]:
    """Check out the canonical head the lock recorded and merge the planned PRs in order (as ``plan compose``).

    Returns (base, composed commit, composed tree). A conflict is an InputError: ``plan
    compose`` reports it as a finding; hygiene needs a tree.
    """
    from releasekit.plan.compose import Composable, compose_into

    mirror = Mirror(comp.repo, cache_dir, allow_local=allow_local, base_dir=loaded.directory)
    findings = Findings()
    base = locked.canonical_head if comp.merge_plan else locked.commit
    result = compose_into(Composable(name, comp, mirror, locked), findings, dest, base=base)
    if not findings.passed:
        raise InputError(f"{name}: cannot compose the tree for hygiene: {findings.errors[0].message}")
    head = Git(dest).run("rev-parse", "HEAD").strip()
    return base, head, result.tree or ""
