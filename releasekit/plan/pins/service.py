"""``audit pins`` on a local repository: which commit, which skip list, then the audit."""

from __future__ import annotations

from pathlib import Path

from releasekit.errors import InputError
from releasekit.git.tree import resolve_commit
from releasekit.manifest.models import Manifest, PinInputSkip
from releasekit.plan.pins.audit import audit_pins
from releasekit.plan.pins.tree import commit_tree, local_repository
from releasekit.records.plan_check import PinAuditResult


def pins_service(
    manifest: Manifest,
    repo: Path,
    *,
    rev: str | None = None,
    component: str | None = None,
    locked_commit: str | None = None,
) -> PinAuditResult:
    """``audit pins``: the pins in ``rev`` (default HEAD, or the lock's commit) of a local repository."""
    skip: list[PinInputSkip] = []
    if component is not None:
        comp = manifest.git_components().get(component)
        if comp is None:
            raise InputError(f"--component {component!r} is not a git component of the manifest")
        skip = comp.pin_inputs.skip if comp.pin_inputs else []
    git = local_repository(repo)
    commit = resolve_commit(git, rev or locked_commit or "HEAD", f"--repo {repo}")
    if locked_commit and commit != locked_commit:
        raise InputError(f"--commit {rev} is {commit[:12]}, not the locked commit {locked_commit[:12]}")
    return audit_pins(
        manifest, commit_tree(git, commit), repo=str(repo), commit=commit, component=component, skip=skip
    )
