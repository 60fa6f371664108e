"""pre-commit / prek hooks of the repository's own config, on the composed tree.

``repo: local`` and ``repo: meta`` hooks run, each in the hook sandbox (``suites/hook_sandbox.py``:
a throw-away container without network, never this machine). A hook of a remote repository has to
be fetched from the network: it runs only where the manifest grants the component's ``hygiene`` a
network (``sandbox.network``), the runner fetching it inside the sandbox; elsewhere it is reported
as not runnable (a warning: never a pass).
"""

from __future__ import annotations

import re
from typing import Any

from ruamel.yaml import YAML, YAMLError

from releasekit.findings import Findings, Severity
from releasekit.suites.context import HygieneContext

CONFIG = ".pre-commit-config.yaml"
_SPOT = re.compile(r"^([^\s:][^:]*):(\d+):(?:(\d+):)?\s*(.*)$")


class HooksCheck:
    name = "pre-commit"
    codes: tuple[str, ...] = ("HOOK_FAILED", "HOOK_NOT_RUNNABLE", "HOOKS_NO_CONFIG", "HOOKS_CONFIG_INVALID")

    def run(self, ctx: HygieneContext) -> Findings:
        found = Findings()
        config_path = ctx.tree / CONFIG
        if not config_path.is_file():
            found.add(
                "HOOKS_NO_CONFIG",
                f"the repository has no {CONFIG}; no hook ran",
                severity=Severity.warning,
                component=ctx.component,
            )
            return found
        try:
            config: Any = YAML(typ="safe").load(config_path.read_text(encoding="utf-8"))
            repos = list(config["repos"])
        except (YAMLError, KeyError, TypeError, UnicodeDecodeError) as exc:
            found.add(
                "HOOKS_CONFIG_INVALID",
                f"{CONFIG} cannot be read: {exc}",
                component=ctx.component,
                file=CONFIG,
            )
            return found
        runnable = _runnable(ctx, repos, found)
        if not runnable:
            return found
        # The runnable subset as its own config, beside (not in) the work tree's files.
        subset = ctx.tree / ".git" / "releasekit-hooks.yaml"
        with subset.open("w", encoding="utf-8") as handle:
            YAML(typ="safe", pure=True).dump({**config, "repos": runnable}, handle)
        scope = ["--all-files"] if ctx.hygiene.scope == "all" else ["--files", *ctx.files]
        if ctx.hygiene.scope == "changed" and not ctx.files:
            return found
        assert ctx.hooks is not None  # made by the stage for every pre-commit step
        for repo in runnable:
            for hook in repo.get("hooks") or []:
                hook_id = str(hook.get("id"))
                # In the sandbox, never on this machine: a hook is the repository's code (issue 43).
                code, out = ctx.hooks.run(
                    ctx.tree,
                    ["run", hook_id, "--config", f".git/{subset.name}", *scope],
                    {"SKIP": "", "PRE_COMMIT_COLOR": "never", "NO_COLOR": "1"},
                )
                if code == 0:
                    continue
                _failed(ctx, hook_id, out, "", found)
        return found


def _runnable(ctx: HygieneContext, repos: list[Any], found: Findings) -> list[dict[str, Any]]:
    """The hook repositories that run in the sandbox: local and meta, and remote ones where the manifest
    grants the sandbox a network (the runner fetches them there); each other hook is said."""
    runnable: list[dict[str, Any]] = []
    granted = ctx.hooks is not None and ctx.hooks.network
    for repo in repos:
        url = str(repo.get("repo", ""))
        hooks = [h for h in repo.get("hooks") or [] if isinstance(h, dict)]
        if url in ("local", "meta") or granted:
            runnable.append(repo)
            continue
        for hook in hooks:
            found.add(
                "HOOK_NOT_RUNNABLE",
                f"hook {hook.get('id')} of {url}@{repo.get('rev')} must be fetched from the network: not "
                "runnable in the sandbox without one (the manifest's sandbox.network can grant hygiene one)",
                severity=Severity.warning,
                component=ctx.component,
                file=CONFIG,
            )
    return runnable


def _failed(ctx: HygieneContext, hook_id: str, out: str, err: str, found: Findings) -> None:
    """A failed hook's findings at the file:line it names, or one finding with its output's tail if it names none."""
    spots = 0
    for text in (out + "\n" + err).splitlines():
        match = _SPOT.match(text.strip())
        if match and (ctx.tree / match.group(1)).is_file():
            spots += 1
            found.add(
                "HOOK_FAILED",
                f"{hook_id}: {match.group(4) or 'reported'}",
                component=ctx.component,
                file=match.group(1),
                line=int(match.group(2)),
                column=int(match.group(3)) if match.group(3) else None,
            )
    if not spots:
        tail = " ".join((out + " " + err).split())[-300:]
        found.add("HOOK_FAILED", f"{hook_id} failed: {tail}", component=ctx.component)
