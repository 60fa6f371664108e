"""CLI command of the reproduce stage: ``releasekit reproduce``."""

from __future__ import annotations

import sys
from pathlib import Path

import typer
from rich.console import Console
from rich.markup import escape

from releasekit.cli_options import JSON
from releasekit.errors import InputError
from releasekit.report import print_json, stdout_console
from releasekit.reproduce.service import ReproduceResult, reproduce


def _render(result: ReproduceResult) -> None:
    console = stdout_console()
    console.print(
        f"evidence {escape(result.source)}: {result.archive.files} archive file(s), "
        f"{result.archive.size:,} B, every sha256 verified; signatures {escape(result.archive.signatures)}"
    )
    for note in result.notes:
        console.print(f"note: {escape(note)}")
    for finding in result.findings.sorted():
        console.print(escape(finding.render()))
    if result.findings.errors:
        console.print(
            "[bold red]NOT reproduced[/bold red]: the archive holds more than it lists; nothing was built"
        )
        return
    console.print(f"published image {result.published_image_id}")
    console.print(f"rebuilt image   {result.rebuilt_image_id}")
    for layer in result.layers:
        mark = "same" if layer.same else "DIFFERENT"
        console.print(
            f"  layer {layer.index}: {mark} {layer.published or '-'}"
            + ("" if layer.same else f" -> {layer.rebuilt or '-'}")
        )
    for comp in result.components:
        console.print(
            f"  {escape(comp.name)} {escape(comp.wheel or '')}: {'same' if comp.same else 'DIFFERENT'}"
        )
    if result.same:
        console.print("[green]reproduced[/green]: the rebuilt image is the published image, bit for bit")
    else:
        diff = result.first_difference
        console.print(
            f"[bold red]NOT reproduced[/bold red]: {escape(diff.message if diff else 'the images differ')}"
        )


def reproduce_cmd(
    reference: str | None = typer.Argument(
        None, help="REGISTRY/REPO@DIGEST (or :TAG, resolved to its digest)"
    ),
    from_dir: Path | None = typer.Option(
        None, "--from", help="a local release directory instead of a registry"
    ),
    workdir: Path | None = typer.Option(None, "--workdir", help="empty directory to rebuild in (kept)"),
    receipt: Path | None = typer.Option(
        None,
        "--receipt",
        help="write the reproduce receipt here (a registry digest only), for `sign --reproduce-receipt` "
        "and `promote --reproduced`",
    ),
    runner: str | None = typer.Option(
        None, "--runner", help="this machine's name in the receipt [default: $RUNNER_NAME, else the hostname]"
    ),
    as_json: bool = JSON,
) -> None:
    """Rebuild a published image from its attached source archive alone; exit 0 same, 1 different."""
    if (reference is None) == (from_dir is None):
        raise InputError("name either REGISTRY/REPO@DIGEST or --from DIR")
    if receipt is not None and from_dir is not None:
        raise InputError("--receipt records the reproduction of a registry digest: name REGISTRY/REPO@DIGEST")
    if receipt is not None:
        from releasekit.atomic import check_writable

        check_writable(receipt)  # a link or special file there is refused before anything is built
    err = Console(file=sys.stderr, highlight=False)
    from functools import partial

    from releasekit.builder.service import run_build
    from releasekit.clock import SystemClock
    from releasekit.docker_engine import Engine
    from releasekit.registry import RegistryClient

    result = reproduce(
        engine=Engine(),
        rebuild=partial(run_build, clock=SystemClock()),
        open_registry=RegistryClient,
        reference=reference,
        from_dir=from_dir,
        workdir=workdir,
        keep=workdir is not None,
        runner=runner,
        progress=(lambda _m: None) if as_json else (lambda m: err.print(escape(m))),
    )
    if receipt is not None and result.receipt is not None:
        result.receipt.write(receipt)
    if as_json:
        print_json(result)
    else:
        _render(result)
    raise typer.Exit(0 if result.same else 1)


def register(app: typer.Typer) -> None:
    """Add this stage's commands to the root app."""
    app.command("reproduce")(reproduce_cmd)
