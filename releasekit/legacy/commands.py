"""CLI of the legacy room: ``releasekit manifest import`` (today's tool's files -> a releasekit manifest).

The command keeps its place in the ``manifest`` group: ``cli.py`` merges the group this module
registers into the manifest stage's own (both are listed under ``manifest`` in ``cli.COMMANDS``),
so ``manifest/`` holds configuration only and never imports this room.
"""

from __future__ import annotations

from pathlib import Path

import typer

from releasekit.cli_options import JSON, MIRROR, OFFLINE, allow_local_flag
from releasekit.errors import InputError
from releasekit.manifest.commands import MANIFEST_HELP

legacy_app = typer.Typer(help=MANIFEST_HELP, no_args_is_help=True)


@legacy_app.command("import")
def import_cmd(
    file: Path = typer.Argument(
        ..., help="a merge manifest JSON of today's tool (schema_version 1)", show_default=False
    ),
    output: Path = typer.Option(..., "-o", "--output", help="where to write the releasekit/v1 YAML"),
    component: str = typer.Option("vllm", help="the component name for its repository"),
    base_image: str = typer.Option(
        ..., "--base-image", help="the runtime base image name (its digest is locked later)"
    ),
    cuda_arch: list[str] = typer.Option(["12.0a"], "--cuda-arch", help="CUDA arch (repeatable)"),
    lock: Path | None = typer.Option(
        None, "--lock", help="today's integration lock: its base commit becomes the pinned commit"
    ),
    lock_out: Path | None = typer.Option(
        None, "--lock-out", help="also write --lock as a releasekit lock (reads trees from the repository)"
    ),
    receipt: Path | None = typer.Option(
        None, "--receipt", help="today's validation receipt: its numbers become a named baseline"
    ),
    component_repo: list[str] = typer.Option(
        [],
        "--component-repo",
        help="NAME=URL: the repository of a receipt's source_composition entry (repeatable; "
        "absent: guessed beside the manifest's repository, with a warning)",
    ),
    repo: str | None = typer.Option(
        None, "--repo", help="read the repository from here instead of the manifest's URL (--lock-out)"
    ),
    allow_local_repos: bool = allow_local_flag("accept a local path or file:// for --repo"),
    mirrors: list[str] = MIRROR,
    offline: bool = OFFLINE,
    as_json: bool = JSON,
) -> None:
    """Convert today's tool's files into a releasekit manifest (and lock), then validate it."""
    from releasekit.git.mirrors import use_options

    use_options(mirrors, offline)
    from releasekit.findings import exit_code_for
    from releasekit.git import local_repos_allowed
    from releasekit.legacy.importer import import_release
    from releasekit.manifest.models import GitComponent
    from releasekit.report import print_json, render_findings, stdout_console

    repos: dict[str, str] = {}
    for item in component_repo:
        name, sep, url = item.partition("=")
        if not sep or not name or not url:
            raise InputError(f"--component-repo {item!r}: expected NAME=URL")
        repos[name] = url
    result = import_release(
        file,
        output,
        component=component,
        base_image=base_image,
        cuda_arch_list=cuda_arch,
        lock_path=lock,
        lock_out=lock_out,
        receipt_path=receipt,
        component_repos=repos,
        repo=repo,
        allow_local=allow_local_repos or local_repos_allowed(),
    )
    manifest = result.loaded.manifest
    comp = manifest.components[component]
    assert isinstance(comp, GitComponent)
    if as_json:
        print_json(
            {
                "output": str(result.output),
                "sha256": result.sha256,
                "lock": str(result.lock) if result.lock else None,
                "carried": result.imported.carried,
                "findings": result.findings,
            }
        )
    else:
        console = stdout_console()
        supersessions = sum(len(p.supersedes) for p in comp.merge_plan)
        console.print(
            f"wrote {result.output}: {len(manifest.components)} component(s), {len(comp.merge_plan)} planned PRs, "
            f"{supersessions} supersessions, {len(manifest.exclusions)} reviewed exclusions"
            + (
                f", baseline(s) {', '.join(manifest.validation.baselines)}"
                if manifest.validation.baselines
                else ""
            )
            + f"; {len(result.imported.carried)} fields carried",
            markup=False,
        )
        if result.lock:
            console.print(f"wrote {result.lock}: today's integration lock as a releasekit lock", markup=False)
        render_findings(result.findings, console, ok_message=f"{result.output} validates")
    raise typer.Exit(exit_code_for(result.findings))


def register(app: typer.Typer) -> None:
    app.add_typer(legacy_app, name="manifest")
