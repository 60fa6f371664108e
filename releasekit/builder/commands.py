"""CLI commands of the build stage: ``releasekit build``."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from releasekit.cli_options import (
    MIRROR,
    OFFLINE,
    REMOVED_SIGNING_KEY,
    allow_local_flag,
    json_flag,
    refuse_signing_key,
)

if TYPE_CHECKING:
    from releasekit.builder.plan import BuildPlan
    from releasekit.records.build import BuildRecord


def render_record(record: BuildRecord, outdir: Path) -> None:
    from rich.markup import escape

    from releasekit.report import findings_table, stdout_console

    console = stdout_console()
    rows = [
        [
            c.name,
            c.commit[:12] if c.commit else "",
            c.version or "",
            (c.wheel_sha256 or "")[:16],
            c.cache if c.built else ("pinned wheel" if c.kind == "wheel" else "recorded"),
        ]
        for c in record.components
    ]
    console.print(
        findings_table(
            f"release {record.name}", ["component", "commit", "version", "wheel sha256", "cache"], rows
        )
    )
    console.print(
        f"image {escape(record.image_id)}"
        + (f" tagged {escape(record.image_tag)}" if record.image_tag else "")
    )
    console.print(
        f"cache: {len(record.cache.hits)} hit(s), {len(record.cache.misses)} miss(es), wheels layer {record.cache.layer}"
    )
    console.print(
        f"outputs in {escape(str(outdir))}: build.json, provenance.intoto.json, RELEASE.md, wheels/, logs/"
    )
    render_archive(outdir)


def render_archive(outdir: Path) -> None:
    """The release source archive's size and contents (archive.json)."""
    from rich.markup import escape

    from releasekit.records.archive import ARCHIVE_FILE, read_archive
    from releasekit.report import stdout_console

    if not (outdir / ARCHIVE_FILE).is_file():
        return
    index = read_archive(outdir / ARCHIVE_FILE)
    console = stdout_console()
    console.print(f"source archive: {len(index.entries)} file(s), {index.total_size:,} B ({ARCHIVE_FILE})")
    for e in index.entries:
        what = f"{e.component} {e.commit[:12]}" if e.commit and e.component else (e.component or e.kind)
        console.print(f"  {escape(e.path)}  {e.size:,} B  sha256 {e.sha256[:16]}  {escape(what)}")


def render_plan(plan: BuildPlan) -> None:
    from rich.markup import escape

    from releasekit.report import findings_table, stdout_console

    console = stdout_console()
    rows = [
        [
            c.name,
            f"{c.repo or ''}\n{c.ref or ''} @ {c.commit}" + (f"\ntree {c.tree}" if c.tree else ""),
            (
                f"{c.builder.kind}: {c.builder.image}@{c.builder.digest}"
                if c.builder.kind == "image"
                else c.builder.kind
            )
            + (f"\n{c.builder.dockerfile}" if c.builder.dockerfile else ""),
            (c.version_policy or "") + (f"\n{c.version_policy_reason}" if c.version_policy_reason else ""),
            c.expected_wheel or "",
        ]
        for c in plan.components
    ]
    title = (
        f"build plan {plan.name} (lock {plan.lock_sha256[:12] if plan.lock_sha256 else 'none: to-be-locked'})"
    )
    console.print(
        findings_table(
            title, ["component", "fresh checkout", "builder", "version policy", "expected wheel"], rows
        )
    )
    console.print(f"base image {escape(plan.base_image)}")
    for c in plan.components:
        if not c.command:
            continue
        console.print(
            f"\n[bold]{escape(c.name)}[/bold]" + (f" in {escape(c.checkout)}" if c.checkout else "")
        )
        for key, value in c.builder.build_args.items():
            console.print(f"  builder ARG {escape(key)}={escape(value)}")
        for key, value in c.environment.items():
            console.print(f"  env {escape(key)}={escape(value)}")
        for change in c.modifications:
            console.print(f"  stamp {escape(change)}")
        for command in c.command:
            console.print(f"  $ {escape(command)}")
    unresolved = plan.unresolved()
    if unresolved:
        console.print(
            f"\nto-be-locked: {escape(', '.join(unresolved))} (run `releasekit plan lock` and pass --lock)"
        )


def register(app: typer.Typer) -> None:
    """Add this stage's commands to the root app."""

    @app.command("build")
    def build_cmd(
        file: Path = typer.Argument(..., help="the manifest YAML file", show_default=False),
        *,
        lock: Path = typer.Option(None, "--lock", help="the lock written by `releasekit plan lock`"),
        plan: bool = typer.Option(
            False, "--plan", help="print what would run for each component; build nothing"
        ),
        outdir: Path = typer.Option(
            None, "-o", "--output", help="release directory (default: release/<name>)"
        ),
        tag: str = typer.Option(None, "--tag", help="tag the image with this name once everything passed"),
        no_cache: bool = typer.Option(False, "--no-cache", help="rebuild every wheel and the image layer"),
        wheelhouse: list[Path] = typer.Option(
            [], "--wheelhouse", help="directory of pinned wheels (repeatable)"
        ),
        allow_local_repos: bool = allow_local_flag("accept file:// and path remotes (tests, demo)"),
        mirror: list[str] = MIRROR,
        offline: bool = OFFLINE,
        save_image: bool = typer.Option(False, "--save-image", help="keep the image as OUTDIR/image.tar"),
        plan_check: Path = typer.Option(
            None,
            "--plan-check",
            help="plan-check.json that `plan check -o` wrote, for RELEASE.md"
            " (default: the release directory's, else the one beside the lock)",
        ),
        template: Path = typer.Option(
            None,
            "--template",
            help="Dockerfile template (default: releasekit/templates/release.Dockerfile.j2)",
        ),
        signing_key: Path | None = REMOVED_SIGNING_KEY,
        as_json: bool = json_flag("machine-readable output (the build record)"),
    ) -> None:
        """Build wheels from fresh checkouts of the locked commits and assemble a labelled, reproducible image."""
        from releasekit.git.mirrors import use_options

        refuse_signing_key(signing_key, "build")
        use_options(mirror, offline)
        from rich.console import Console
        from rich.markup import escape

        from releasekit.builder.plan import make_plan
        from releasekit.builder.service import BuildOptions, run_build
        from releasekit.clock import SystemClock
        from releasekit.docker_engine import Engine
        from releasekit.errors import InputError
        from releasekit.report import print_json

        err = Console(file=sys.stderr, highlight=False)
        if plan:
            build_plan = make_plan(file, lock)
            if as_json:
                print_json(build_plan.model_dump(mode="json", by_alias=True))
            else:
                render_plan(build_plan)
            raise typer.Exit(0)
        if lock is None:
            raise InputError("build needs --lock LOCK (only --plan runs without one)")
        opts = BuildOptions(
            manifest=file,
            lock=lock,
            outdir=outdir,
            tag=tag,
            no_cache=no_cache,
            wheelhouses=wheelhouse,
            allow_local_repos=allow_local_repos,
            keep_image_archive=save_image,
            template=template,
            plan_check=plan_check,
        )
        if plan_check is not None and not plan_check.is_file():  # before anything is built
            raise InputError(f"--plan-check {plan_check}: no such file")
        record = run_build(
            opts,
            Engine,  # made once the inputs are read; no engine: exit 2 then, before any wheel is built
            progress=(lambda _msg: None) if as_json else (lambda msg: err.print(escape(msg))),
            clock=SystemClock(),
        )
        if as_json:
            print_json(record)
        else:
            render_record(record, outdir or Path("release") / record.name)
        raise typer.Exit(0)
