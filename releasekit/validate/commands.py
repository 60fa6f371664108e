"""CLI commands of the validate stage: ``matrix`` and ``validate [run] | validate aggregate``."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from typer.core import TyperGroup

from releasekit.cli_options import (
    CANDIDATE_IMAGE,
    REQUIRE_SIGNED,
    SIGNING_KEY_FILE,
    STAGED,
    TRUSTED_KEY,
    json_flag,
    name_value_options,
)

if TYPE_CHECKING:
    from releasekit.manifest import LoadedManifest
    from releasekit.staging.candidate import Candidate
    from releasekit.validate.service import ValidationResult


class _RunByDefault(TyperGroup):
    """``releasekit validate FILE ...`` means ``validate run FILE ...``; named subcommands win."""

    def parse_args(self, ctx, args):  # type: ignore[no-untyped-def]
        if args and args[0] not in self.commands and args[0] not in ("--help", "-h"):
            args = ["run", *args]
        return super().parse_args(ctx, args)


class MatrixFormat(StrEnum):
    table = "table"
    json = "json"
    github = "github"


validate_app = typer.Typer(
    cls=_RunByDefault,
    no_args_is_help=True,
    help="Run matrix cells against a candidate image (default: run), or aggregate receipts.",
)


def _gpu_count() -> int:
    if shutil.which("nvidia-smi") is None:
        return 0
    from releasekit.child_env import child_env

    try:
        out = subprocess.run(
            ["nvidia-smi", "-L"],
            capture_output=True,
            text=True,
            timeout=30,
            env=child_env(("CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES")),
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return 0
    return sum(1 for line in out.splitlines() if line.startswith("GPU "))


def matrix(
    file: Path = typer.Argument(..., help="The release manifest."),
    fmt: MatrixFormat = typer.Option(
        MatrixFormat.table, "--format", help="table, json, or a GitHub Actions matrix."
    ),
    json_out: bool = json_flag("Same as --format json."),
    label_prefix: str = typer.Option(
        "gpu", help="Runner label prefix for --format github (gpu-1, gpu-2, ...)."
    ),
) -> None:
    """List the validation cells of a manifest."""
    from releasekit.manifest import load_manifest
    from releasekit.report import findings_table, print_json, stdout_console
    from releasekit.validate.matrix import github_matrix, matrix_rows

    loaded = load_manifest(file)
    spec = loaded.manifest.validation
    if fmt == MatrixFormat.github:
        # Compact, one line: meant for `echo "matrix=$(...)" >> "$GITHUB_OUTPUT"`.
        sys.stdout.write(json.dumps(github_matrix(spec, label_prefix), separators=(",", ":")) + "\n")
        return
    rows = matrix_rows(spec)
    if json_out or fmt == MatrixFormat.json:
        print_json({"manifest": str(file), "manifest_sha256": loaded.sha256, "cells": rows})
        return
    table = findings_table(
        f"{loaded.manifest.name}: {len(rows)} cells",
        ["cell", "model", "TP", "DCP", "EP", "GPUs", "spec", "quant", "KV", "checks", "gates"],
        [
            [
                r.id,
                r.model,
                str(r.tp),
                str(r.dcp),
                str(r.ep or "-"),
                str(r.gpus),
                r.speculative,
                r.quantization or "-",
                r.kv_cache_dtype or "-",
                ",".join(r.checks),
                "; ".join(r.gates) or "-",
            ]
            for r in rows
        ],
    )
    stdout_console().print(table)


@validate_app.command("run")
def run(
    file: Path = typer.Argument(..., help="The release manifest."),
    image: str = CANDIDATE_IMAGE,
    staged: Path | None = STAGED,
    lock: Path | None = typer.Option(
        None, "--lock", help="The lock the image was built from (bound into receipts)."
    ),
    cell: list[str] = typer.Option(None, "--cell", help="Run only these cells (repeatable)."),
    output: Path = typer.Option(Path("receipts"), "-o", "--output", help="Directory for the receipts."),
    gpus: int | None = typer.Option(
        None, "--gpus", help="GPUs to pack cells onto (default: nvidia-smi's count)."
    ),
    seed: int = typer.Option(0, "--seed", help="Seed for random prompts and pass keys."),
    baseline_image: list[str] = typer.Option(
        None,
        "--baseline-image",
        help="NAME=REF: serve baseline NAME (an `image:` baseline) from image REF beside the candidate "
        "(repeatable).",
    ),
    dry_run: bool = typer.Option(
        False,
        "--dry-run",
        help="Start no server: render every cell and have IMAGE's own engine parse it (pre-flight); no receipts.",
    ),
    trusted_key: list[Path] = TRUSTED_KEY,
    require_signed: bool = REQUIRE_SIGNED,
    signing_key: Path | None = SIGNING_KEY_FILE,
    json_out: bool = json_flag(None),
) -> None:
    """Run cells in containers of IMAGE; one receipt per cell in -o DIR."""
    from releasekit.clock import SystemClock
    from releasekit.docker_engine import LazyEngine
    from releasekit.manifest import load_manifest
    from releasekit.validate.service import run_validation

    loaded = load_manifest(file)
    signed = require_signed or bool(loaded.manifest.publish and loaded.manifest.publish.signed)
    keys = _staged_keys(loaded, lock, list(trusted_key)) if staged is not None else list(trusted_key)
    candidate = _candidate(image, staged, keys, signed)
    if candidate.warning:
        typer.echo(f"releasekit: {candidate.warning}", err=True)
    image = image if candidate.digest is None else candidate.image
    if dry_run:
        from releasekit.records.lock import read_lock
        from releasekit.validate.locked_inputs import with_locked_inputs

        _dry_run(
            with_locked_inputs(loaded, read_lock(lock)) if lock else loaded, image, cell or None, json_out
        )
    result = run_validation(
        loaded,
        image,
        lock,
        output,
        cells=cell or None,
        gpus=_gpu_count() if gpus is None else gpus,
        client=LazyEngine(timeout=60),  # the cells' containers
        clock=SystemClock(),
        seed=seed,
        image_digest=candidate.digest,
        baseline_images=name_value_options(
            baseline_image or [], "--baseline-image", "NAME=REF (a baseline's name and an image)"
        ),
    )
    if signing_key is not None:  # the key is read only now, after every container has gone
        _sign_receipts(signing_key, result)
    _render(loaded.manifest.name, result, json_out)
    raise typer.Exit(0 if result.passed else 1)


def _staged_keys(loaded: LoadedManifest, lock: Path | None, given: list[Path]) -> list[Path]:
    """The keys staging.json's signature is checked with: --trusted-key, else the manifest's, only as
    the manifest the lock was made from (issue 43)."""
    from releasekit.manifest import trusted_key_files_for_lock
    from releasekit.records.lock import read_lock

    lock_manifest = read_lock(lock).manifest.sha256 if lock is not None else None
    return trusted_key_files_for_lock(loaded, lock_manifest, given, "validate")


def _candidate(image: str, staged: Path | None, keys: list[Path], signed: bool) -> Candidate:
    """The image to run (``--staged``: pulled by digest, or the local one, proven the verified image)."""
    from releasekit.docker_engine import LazyEngine
    from releasekit.staging.candidate import resolve_candidate

    puller = LazyEngine(timeout=600)  # reached only with --staged
    try:
        return resolve_candidate(
            image, staged, trusted_key_files=keys, require_signed=signed, what="validate", engine=puller
        )
    finally:
        puller.close()


def _sign_receipts(signing_key: Path, result: ValidationResult) -> None:
    from releasekit.signing import load_signer
    from releasekit.signing.statements import sign_receipt_file

    signer = load_signer(signing_key)
    for c in result.cells:
        if Path(c.receipt).is_file():
            sign_receipt_file(signer, Path(c.receipt))


def _render(name: str, result: ValidationResult, json_out: bool) -> None:
    """The run as JSON, or one table row per cell then the findings (the shell renders, the service does not)."""
    from releasekit.report import findings_table, print_json, stdout_console

    if json_out:
        print_json(result)
    else:
        console = stdout_console()
        console.print(
            findings_table(
                f"validate {name} on {result.image_id[:19]}",
                ["cell", "status", "seconds", "findings", "receipt"],
                [
                    [c.cell_id, c.status, f"{c.duration_s:.1f}", ", ".join(c.codes) or "-", c.receipt]
                    for c in result.cells
                ],
            )
        )
        for f in result.findings:
            console.print(f.render())
        console.print("[green]passed[/green]" if result.passed else "[bold red]failed[/bold red]")


def _dry_run(loaded, image: str, cells: list[str] | None, json_out: bool) -> None:  # type: ignore[no-untyped-def]
    from releasekit.docker_engine import LazyEngine
    from releasekit.report import findings_table, print_json, stdout_console
    from releasekit.validate.preflight import run_preflight

    result = run_preflight(loaded, image, cells, client=LazyEngine(timeout=60))
    if json_out:
        print_json(result)
    else:
        console = stdout_console()
        console.print(
            findings_table(
                f"pre-flight of {loaded.manifest.name} in {result.image_id[:19]}",
                ["cell", "engine", "parsed", "findings"],
                [
                    [
                        c.cell_id,
                        c.engine,
                        "yes" if c.parsed is not None else "no",
                        ", ".join(sorted({f.code for f in c.findings})) or "-",
                    ]
                    for c in result.cells
                ],
            )
        )
        for f in [*result.findings, *(f for c in result.cells for f in c.findings)]:
            console.print(f.render())
        console.print(
            "[green]every cell parsed as meant[/green]" if result.passed else "[bold red]failed[/bold red]"
        )
    raise typer.Exit(0 if result.passed else 1)


@validate_app.command("aggregate")
def aggregate(
    receipts: Path = typer.Argument(..., help="A directory of receipts."),
    output: Path | None = typer.Option(
        None, "-o", "--output", help="Write REPORT.md, summary.json and PNG plots here."
    ),
    json_out: bool = json_flag(None),
) -> None:
    """Merge receipts: one verdict, a markdown report, throughput and candidate-vs-baseline plots."""
    from releasekit.findings import Findings
    from releasekit.report import findings_table, print_json, render_findings, stdout_console
    from releasekit.validate.report import aggregate_directory

    agg = aggregate_directory(receipts, output)
    if json_out:
        print_json(agg.model_dump(mode="json", by_alias=True))
    else:
        console = stdout_console()
        console.print(
            findings_table(
                "receipts",
                ["cell", "status", "spec", "headline"],
                [
                    [
                        c.cell_id,
                        c.status,
                        c.speculative,
                        ", ".join(f"{k}={v:.4g}" for k, v in c.headline.items() if v is not None),
                    ]
                    for c in agg.cells
                ],
            )
        )
        render_findings(Findings(findings=agg.findings), console, ok_message="every required cell passed")
    raise typer.Exit(0 if agg.passed else 1)


def register(app: typer.Typer) -> None:
    """Add this stage's commands to the root app."""
    app.command("matrix")(matrix)
    app.add_typer(validate_app, name="validate")
