"""Typer-free entries for plan-stage commands whose start-up is timed against git.

``audit release-only ... --json`` is compared end to end with ``git cherry`` (docs/benchmarks.md,
"merge plan"): importing typer and building its command tree costs more than git's whole
answer. ``releasekit.cli.main`` hands such argument lists here first. Only what this
parser fully understands is run here: ``--json`` output with the command's own options,
each given once as ``--name VALUE``, ``--name=VALUE`` or a flag. Anything else (``--help``,
text output, an unknown, incomplete or repeated option, a value starting with ``-``)
returns None and goes to the typer command in ``releasekit.plan.commands``, which stays
the reference: tests hold both to the same options and byte-identical output.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

# Option -> keyword of the typer command ``audit release-only`` (releasekit/plan/commands.py).
RELEASE_ONLY_OPTIONS = {
    "--release": "release",
    "--canonical": "canonical",
    "--repo": "repo",
    "--manifest": "manifest",
    "--component": "component",
    "--upstream": "upstream",
    "--cache": "cache",
}
RELEASE_ONLY_REPEATED = {"--mirror": "mirror"}  # repeatable: URL=PATH each (git/mirrors.py)
RELEASE_ONLY_FLAGS = {
    "--allow-local-repos": "allow_local_repos",
    "--no-fetch": "no_fetch",
    "--offline": "offline",
    "--json": "as_json",
}


def parse_release_only(args: list[str]) -> dict[str, str | bool | list[str]] | None:
    """The options of ``audit release-only`` as the typer command would read them, or None."""
    values: dict[str, str | bool | list[str]] = {}
    repeated: dict[str, list[str]] = {}
    i = 0
    while i < len(args):
        name, eq, value = args[i].partition("=")
        if name in RELEASE_ONLY_REPEATED:
            if not eq:
                if i + 1 >= len(args):
                    return None
                i += 1
                value = args[i]
            if value.startswith("-"):
                return None
            repeated.setdefault(RELEASE_ONLY_REPEATED[name], []).append(value)
            i += 1
            continue
        if name in RELEASE_ONLY_OPTIONS:
            if not eq:
                if i + 1 >= len(args):
                    return None
                i += 1
                value = args[i]
            key = RELEASE_ONLY_OPTIONS[name]
        elif not eq and name in RELEASE_ONLY_FLAGS:
            key, value = RELEASE_ONLY_FLAGS[name], ""
        else:
            return None
        if key in values or value.startswith("-"):
            return None
        values[key] = value if name in RELEASE_ONLY_OPTIONS else True
        i += 1
    if values.get("as_json") is not True or "release" not in values or "canonical" not in values:
        return None
    return {**values, **repeated}


def release_only_json(args: list[str]) -> int | None:
    """Run ``audit release-only --json``: its exit code, or None to leave it to the typer command."""
    values = parse_release_only(args)
    if values is None:
        return None
    # pydantic looks for plugins by reading the entry points of every installed distribution
    # when the first model is built (30-80 ms here, as much as git cherry's whole answer);
    # releasekit's records use none. A value the user set is kept.
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
    from releasekit.git.mirrors import use_options
    from releasekit.plan.audit import release_only_audit

    mirrors = values.get("mirror")
    use_options(mirrors if isinstance(mirrors, list) else [], values.get("offline") is True)

    def text(key: str) -> str | None:
        value = values.get(key)
        return value if isinstance(value, str) else None

    manifest, cache = text("manifest"), text("cache")
    report = release_only_audit(
        text("repo") or ".",
        str(values["release"]),
        str(values["canonical"]),
        manifest=Path(manifest) if manifest is not None else None,
        component=text("component"),
        cache_dir=Path(cache) if cache is not None else None,
        allow_local=values.get("allow_local_repos") is True,
        fetch=values.get("no_fetch") is not True,
        upstream=text("upstream"),
    )
    sys.stdout.write(json.dumps(report.model_dump(mode="json"), indent=2) + "\n")
    return 0 if report.findings.passed else 1
