"""CLI commands of the provenance stage: ``releasekit verify-provenance``."""

from __future__ import annotations

from pathlib import Path

import typer

from releasekit.cli_options import (
    MIRROR,
    OFFLINE,
    REMOVED_SIGNING_KEY,
    allow_local_flag,
    json_flag,
    refuse_signing_key,
)


def verify_provenance_command(
    image: str = typer.Argument(..., help="Image ID or tag in the local Docker Engine."),
    lock: Path = typer.Option(..., "--lock", help="The lock the image was built from."),
    artifacts: Path | None = typer.Option(
        None,
        "--artifacts",
        help="Release directory of `releasekit build` (build.json, wheels/); the summary is written there.",
    ),
    manifest: Path | None = typer.Option(
        None, "--manifest", help="The manifest (default: the one the lock names)."
    ),
    summary: Path | None = typer.Option(None, "--summary", help="Where to write the verification summary."),
    sbom: Path | None = typer.Option(
        None,
        "--sbom",
        help="Where to write the CycloneDX SBOM of a verified image [default: ARTIFACTS/sbom.cdx.json].",
    ),
    signing_key: Path | None = REMOVED_SIGNING_KEY,
    allow_local_repos: bool = allow_local_flag("Allow file:// and local-path repositories (tests, demo)."),
    mirror: list[str] = MIRROR,
    offline: bool = OFFLINE,
    probe_timeout: float = typer.Option(120.0, "--probe-timeout", help="Seconds the in-image probe may run."),
    no_cache: bool = typer.Option(
        False,
        "--no-cache",
        help="Rebuild into an empty cache of this run's own. The build's cache is never read either way "
        "(a new process always rebuilds; see docs/verify.md).",
    ),
    deadline: float = typer.Option(
        3600.0, "--deadline", help="Seconds for the whole run; past it, a finding."
    ),
    max_kept_mb: int = typer.Option(128, "--max-kept-mb", help="Metadata files kept in memory, MB in all."),
    max_roots: int = typer.Option(256, "--max-roots", help="sys.path entries and site directories examined."),
    json_out: bool = json_flag("Machine-readable output."),
) -> None:
    """Prove that what IMAGE imports is exactly what the locked commits produce."""
    from releasekit.git.mirrors import use_options

    refuse_signing_key(signing_key, "verify-provenance")
    use_options(mirror, offline)
    from releasekit.clock import SystemClock
    from releasekit.deadline import hard_deadline
    from releasekit.docker_engine import LazyEngine
    from releasekit.git import local_repos_allowed
    from releasekit.provenance.verify import VerifyOptions, verify_provenance
    from releasekit.report import print_json, render_findings, stdout_console

    with hard_deadline(deadline, "verify-provenance"):
        result = verify_provenance(
            VerifyOptions(
                image=image,
                lock=lock,
                artifacts=artifacts,
                manifest=manifest,
                summary=summary,
                sbom=sbom,
                allow_local_repos=local_repos_allowed(allow_local_repos),
                probe_timeout=probe_timeout,
                no_cache=no_cache,
                deadline=deadline,
                max_kept_bytes=max_kept_mb * 1024 * 1024,
                max_roots=max_roots,
            ),
            engine=LazyEngine(timeout=120),  # reached when the image is first inspected
            clock=SystemClock(),
        )
    if json_out:
        print_json(result)
    else:
        console = stdout_console()
        console.print(f"image {result.image_id} ({', '.join(result.image_tags) or 'untagged'})")
        console.print(f"lock sha256 {result.lock_sha256}")
        stats = result.stats
        console.print(
            f"{stats.distributions} distribution(s), {stats.files} path(s), {stats.bytes_hashed / 1e6:.1f} MB hashed "
            f"in {stats.seconds_total:.1f} s"
        )
        for check in result.checks:
            seen = f"{check.count} {check.examined}" if check.examined else "-"
            why = f": {check.reason}" if check.reason else ""
            console.print(f"  {check.name}: {check.status} ({seen}){why}", markup=False, highlight=False)
        render_findings(result.findings, console, ok_message="the image is what the locked commits produce")
        if result.summary_path:
            console.print(f"verification summary: {result.summary_path}")
        if result.sbom_path:
            console.print(f"SBOM (CycloneDX): {result.sbom_path}")
        console.print("[green]VERIFIED[/green]" if result.passed else "[red]NOT VERIFIED[/red]")
    raise typer.Exit(0 if result.passed else 1)


def register(app: typer.Typer) -> None:
    """Add this stage's commands to the root app."""
    app.command("verify-provenance")(verify_provenance_command)
