"""CLI commands of the manifest stage: validate, schema, show."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from pydantic import BaseModel

from releasekit.cli_options import JSON
from releasekit.findings import Findings

if TYPE_CHECKING:
    from releasekit.manifest import LoadedManifest

# The group's help, shared with releasekit/legacy/commands.py, which adds ``manifest import`` to it.
MANIFEST_HELP = "Read, check and explain a release manifest."
manifest_app = typer.Typer(help=MANIFEST_HELP, no_args_is_help=True)

FileArg = typer.Argument(..., help="the manifest YAML file", show_default=False)


class ValidateResult(BaseModel):
    manifest: str
    sha256: str
    name: str
    passed: bool
    findings: Findings


@manifest_app.command("validate")
def validate_cmd(file: Path = FileArg, as_json: bool = JSON) -> None:
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
def show_cmd(file: Path = FileArg, as_json: bool = JSON) -> None:
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


def register(app: typer.Typer) -> None:
    app.add_typer(manifest_app, name="manifest")
