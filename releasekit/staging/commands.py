"""CLI command of the staging stage: stage."""

from __future__ import annotations

from pathlib import Path

import typer

from releasekit.cli_options import REQUIRE_SIGNED, SIGNING_KEY_FILE, TRUSTED_KEY, json_flag


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
    trusted_key: list[Path] = TRUSTED_KEY,
    require_signed: bool = REQUIRE_SIGNED,
    signing_key: Path | None = SIGNING_KEY_FILE,
    as_json: bool = json_flag(None),
) -> None:
    """Push the verified candidate to a staging repository and record its digest, for GPU hosts to pull."""
    from releasekit.docker_engine import LazyEngine
    from releasekit.registry import RegistryClient
    from releasekit.report import print_json, stdout_console
    from releasekit.staging.service import StageRequest, stage

    engine = LazyEngine()  # reached once the inputs passed (a wrong manifest stops before Docker)
    try:
        staged = stage(
            StageRequest(
                image=image,
                lock_path=lock,
                staging=staging,
                evidence_dir=evidence,
                manifest_path=manifest,
                out=out,
                trusted_key_files=list(trusted_key),
                require_signed=require_signed,
            ),
            engine,
            RegistryClient,
        )
    finally:
        engine.close()
    if signing_key is not None:  # read only now: the push (Docker) ran without the key anywhere near it
        from releasekit.signing import load_signer
        from releasekit.signing.statements import sign_staging_file

        sign_staging_file(load_signer(signing_key), staged.path)
    for line in staged.warnings:
        typer.echo(f"releasekit: {line}", err=True)
    record = staged.record
    if as_json:
        print_json(record)
    else:
        signed = f", summary signed by {staged.signer[:16]}" if staged.signer else ""
        stdout_console().print(f"staged {record.image_id[:19]} as {record.reference}{signed}")


def register(app: typer.Typer) -> None:
    """Add this stage's commands to the root app."""
    app.command("stage")(stage_cmd)
