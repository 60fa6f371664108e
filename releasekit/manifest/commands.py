"""CLI commands of the manifest stage: validate, schema, show."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from pydantic import BaseModel

from releasekit.errors import InputError
from releasekit.findings import Findings

if TYPE_CHECKING:
    from releasekit.manifest import LoadedManifest

manifest_app = typer.Typer(help="Read, check and explain a release manifest.", no_args_is_help=True)

FileArg = typer.Argument(..., help="the manifest YAML file", show_default=False)
JsonOpt = typer.Option(False, "--json", help="machine-readable output")


class ValidateResult(BaseModel):
    manifest: str
    sha256: str
    name: str
    passed: bool
    findings: Findings


@manifest_app.command("validate")
def validate_cmd(file: Path = FileArg, as_json: bool = JsonOpt) -> None:
    """Check types and rules. Exit 0 valid, 1 rule findings, 2 unusable (schema/YAML errors)."""
    from releasekit.findings import exit_code_for
    from releasekit.manifest import validate_manifest
    from releasekit.report import print_json, render_findings, stdout_console

    loaded = validate_manifest(file)
    result = ValidateResult(
        manifest=str(file),
        sha256=loaded.sha256,
        name=loaded.manifest.name,
        passed=loaded.findings.passed,
        findings=loaded.findings,
    )
    if as_json:
        print_json(result)
    else:
        console = stdout_console()
        render_findings(loaded.findings, console, ok_message=f"{file} is a valid releasekit/v1 manifest")
        if loaded.findings.passed and len(loaded.findings):
            console.print(f"{file}: valid (with notes above)")
    raise typer.Exit(exit_code_for(loaded.findings))


@manifest_app.command("schema")
def schema_cmd() -> None:
    """Print the JSON Schema of manifest v1 (generated from the models)."""
    from releasekit.manifest.models import Manifest

    schema = Manifest.model_json_schema(by_alias=True)
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = "https://releasekit.invalid/schema/manifest-v1.json"
    typer.echo(json.dumps(schema, indent=2, sort_keys=True))


def _after_text(refs: list[int | str]) -> str:
    return ", ".join(f"#{r}" if isinstance(r, int) or "#" not in str(r) else str(r) for r in refs)


def plan_view(loaded: LoadedManifest) -> dict[str, object]:
    """The merge plan per component, in order, as plain data (the JSON form of ``show``)."""
    from releasekit.manifest.models import GitComponent, WheelComponent

    m = loaded.manifest
    out: dict[str, object] = {"name": m.name, "components": {}}
    comps: dict[str, object] = {}
    for name, comp in m.components.items():
        if isinstance(comp, GitComponent):
            comps[name] = {
                "kind": "git",
                "repo": comp.repo,
                "canonical_branch": comp.canonical_branch,
                "merge_plan": [
                    {
                        "order": i + 1,
                        "pr": p.pr,
                        "title": p.title,
                        "after": [str(a) for a in p.after],
                        "supersedes": p.supersedes,
                    }
                    for i, p in enumerate(comp.merge_plan)
                ],
                "already_canonical": [
                    {"pr": c.pr, "commit": c.commit, "title": c.title, "supersedes": c.supersedes}
                    for c in comp.already_canonical
                ],
                "must_not_merge": sorted(
                    {s for e in comp.superseding() for s in e.supersedes} | {c.pr for c in comp.closed}
                ),
            }
        elif isinstance(comp, WheelComponent):
            comps[name] = {
                "kind": "wheel",
                "requirement": comp.requirement,
                "sha256": comp.sha256,
                "source": comp.source.model_dump() if comp.source else None,
            }
    out["components"] = comps
    out["exclusions"] = [
        {"id": e.id, "disposition": e.disposition, "description": e.description} for e in m.exclusions
    ]
    return out


@manifest_app.command("show")
def show_cmd(file: Path = FileArg, as_json: bool = JsonOpt) -> None:
    """Show the merge order per component, with dependencies and supersessions."""
    from rich.markup import escape
    from rich.table import Table

    from releasekit.findings import exit_code_for
    from releasekit.manifest import validate_manifest
    from releasekit.manifest.models import WheelComponent
    from releasekit.report import print_json, render_findings, stdout_console

    loaded = validate_manifest(file)
    if as_json:
        print_json(plan_view(loaded))
        raise typer.Exit(exit_code_for(loaded.findings))
    m = loaded.manifest
    console = stdout_console()
    console.print(f"[bold]{escape(m.name)}[/bold]  ({escape(str(file))}, sha256 {loaded.sha256[:16]}…)")
    for name, comp in m.components.items():
        if isinstance(comp, WheelComponent):
            src = (
                f" from {comp.source.repo}@{comp.source.ref or ''} {comp.source.commit or ''}"
                if comp.source
                else ""
            )
            console.print(
                f"\n[bold]{escape(name)}[/bold]: {escape(f'wheel {comp.requirement} sha256 {comp.sha256}{src}')}"
            )
            continue
        pin = f" pinned at {comp.commit}" if comp.commit else ""
        branch = comp.canonical_branch or "(remote default branch)"
        console.print(
            f"\n[bold]{escape(name)}[/bold]: {escape(f'{comp.repo} canonical branch {branch}{pin}')}"
        )
        if comp.merge_plan:
            table = Table(show_header=True, header_style="bold", title_justify="left")
            for col in ("order", "PR", "title", "after", "supersedes"):
                table.add_column(col, overflow="fold")
            for i, p in enumerate(comp.merge_plan):
                table.add_row(
                    str(i + 1),
                    f"#{p.pr}",
                    escape(p.title),
                    escape(_after_text(p.after)),
                    ", ".join(f"#{s}" for s in p.supersedes),
                )
            console.print(table)
        for c in comp.already_canonical:
            ref = f"#{c.pr}" if c.pr is not None else f"commit {c.commit}"
            sup = f" (supersedes {', '.join(f'#{s}' for s in c.supersedes)})" if c.supersedes else ""
            console.print(f"  already canonical: {ref} {c.title}{sup}", markup=False)
        superseded = sorted({s for e in comp.superseding() for s in e.supersedes})
        if superseded:
            console.print(
                f"  must not be merged (superseded): {', '.join(f'#{s}' for s in superseded)}", markup=False
            )
        for closed in comp.closed:
            console.print(
                f"  must not be merged (closed): #{closed.pr} {closed.title}: {closed.reason}", markup=False
            )
    if m.exclusions:
        console.print("\n[bold]explicit exclusions[/bold]")
        for e in m.exclusions:
            console.print(f"  {e.id} ({e.disposition}): {e.description}: {e.reason}", markup=False)
    if len(loaded.findings):
        console.print()
        render_findings(loaded.findings, console)
    raise typer.Exit(exit_code_for(loaded.findings))


@manifest_app.command("import")
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
    allow_local_repos: bool = typer.Option(
        False, "--allow-local-repos", help="accept a local path or file:// for --repo"
    ),
    mirrors: list[str] = typer.Option(
        [],
        "--mirror",
        help="URL=PATH: read repository URL from the local copy PATH (repeatable; also RELEASEKIT_MIRRORS).",
    ),
    as_json: bool = JsonOpt,
) -> None:
    """Convert today's tool's files into a releasekit manifest (and lock), then validate it."""
    from releasekit.git.mirrors import add_mirrors

    add_mirrors(mirrors)
    from releasekit.findings import exit_code_for
    from releasekit.git import local_repos_allowed
    from releasekit.manifest.importer import import_release
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
    app.add_typer(manifest_app, name="manifest")
