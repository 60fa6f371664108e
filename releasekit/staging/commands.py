"""CLI command of the staging stage: stage."""

from __future__ import annotations

from pathlib import Path

import typer

from releasekit.cli_options import json_flag


def stage_cmd(
    image: str = typer.Option(..., "--image", help="local image ID or name that verify-provenance passed"),
    lock: Path = typer.Option(..., "--lock", help="the lock the image was built from"),
    staging: str | None = typer.Option(
        None, "--staging", help="REGISTRY/REPO to stage in [default: the manifest's publish.staging]"
    ),
    evidence: Path | None = typer.Option(
        None, "--evidence", help="directory with verification_summary.json [default: the lock's directory]"
    ),
    manifest: Path | None = typer.Option(
        None, "--manifest", help="the manifest [default: the one the lock names]"
    ),
    out: Path | None = typer.Option(
        None, "-o", "--out", help="where staging.json goes [default: the evidence directory]"
    ),
    as_json: bool = json_flag(None),
) -> None:
    """Push the verified candidate to a staging repository and record its digest, for GPU hosts to pull."""
    from releasekit.docker_engine import connect
    from releasekit.report import print_json, stdout_console
    from releasekit.staging.service import StageRequest, stage

    engine = connect()
    try:
        record = stage(
            StageRequest(
                image=image,
                lock_path=lock,
                staging=staging,
                evidence_dir=evidence,
                manifest_path=manifest,
                out=out,
            ),
            engine,
        )
    finally:
        engine.close()
    if as_json:
        print_json(record)
    else:
        stdout_console().print(f"staged {record.image_id[:19]} as {record.reference}")


def register(app: typer.Typer) -> None:
    """Add this stage's commands to the root app."""
    app.command("stage")(stage_cmd)
