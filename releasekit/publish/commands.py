"""CLI commands of the publish stage: publish, promote; and the stage's edge (``docker_engine``,
``publish_target``): the effects the library is given are made here."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

from releasekit.cli_options import JSON, REQUIRE_SIGNED, TRUSTED_KEY

if TYPE_CHECKING:
    from releasekit.findings import Findings
    from releasekit.publish.engine import DockerEngine
    from releasekit.publish.gate import GateReport
    from releasekit.publish.promote import PromoteResult
    from releasekit.publish.service import PublishResult
    from releasekit.publish.targets import PublishTarget

TrustedKeyOpt = TRUSTED_KEY
RequireSignedOpt = REQUIRE_SIGNED


def docker_engine() -> DockerEngine:
    """The Docker Engine publish inspects the image with and pushes through (600 s per call)."""
    from releasekit.docker_engine import connect
    from releasekit.publish.engine import DockerEngine

    return DockerEngine(connect(timeout=600))


def publish_target(engine: DockerEngine | None = None, kind: str | None = None) -> PublishTarget:
    """Where publish and promote put the image: the target of ``kind`` (the OCI registry by default),
    with the registry opener made here (``RegistryClient`` per host and its credentials) and the
    engine a push goes through (promote needs none)."""
    from releasekit.publish.targets import DEFAULT_KIND, TargetEdge, make_target
    from releasekit.registry import RegistryClient

    return make_target(TargetEdge(open_registry=RegistryClient, engine=engine), kind or DEFAULT_KIND)


def _refuse_mixed_runs(evidence: Path, staged: Path | None) -> None:
    """Records of two runs in the evidence directory: exit 2 before the Docker Engine is reached. A
    ``--staged`` staging.json is judged after its signature is (the service checks all again then):
    an edited signed one is ``SIGNED_EVIDENCE_MISMATCH``, not two runs."""
    from releasekit.records.release_dir import refuse_mixed_runs

    refuse_mixed_runs(evidence, before="stage" if staged is not None else "publish")


def _warn_unsigned(findings: Findings) -> None:
    """Unsigned evidence accepted: one ``warning:`` line on stderr (also a finding in the result)."""
    import sys

    from releasekit.publish.signatures import unsigned_warnings

    for line in unsigned_warnings(findings):
        sys.stderr.write(f"releasekit: {line}\n")


def _render_gate(report: GateReport) -> None:
    from releasekit.report import render_findings, stdout_console

    console = stdout_console()
    for check in report.checks:
        mark = "[green]pass[/green]" if check.passed else "[bold red]FAIL[/bold red]"
        console.print(f"{mark}  {check.name}")
    render_findings(report.findings, console, ok_message="every gate passed")


def _render_publish(result: PublishResult) -> None:
    from releasekit.report import stdout_console

    _render_gate(result.gate)
    console = stdout_console()
    if result.published:
        console.print(f"published {result.image_id} as {result.repository}@{result.digest}")
        for tag in result.tags:
            was = result.moved_tags.get(tag)
            console.print(f"  tag {result.repository}:{tag}" + (f" (moved from {was})" if was else ""))
        if result.attachment:
            console.print(
                f"  evidence {result.repository}:{result.attachment.tag} ({result.attachment.digest})"
            )
        if result.signed:
            where = f"tag {result.signed.tag}" if result.signed.tag else "referrers API"
            console.print(
                f"  signed evidence {result.signed.digest} via {where}: {', '.join(result.signed.files)}"
            )
        console.print(f"  release notes {result.release_notes}")
    else:
        console.print(f"refused: nothing was pushed to {result.repository}")


def _render_promote(result: PromoteResult) -> None:
    from releasekit.report import render_findings, stdout_console

    console = stdout_console()
    if result.gate is not None:
        _render_gate(result.gate)
    else:
        render_findings(result.findings, console)
    if result.promoted:
        for name, keyid in result.signers.items():
            console.print(f"  {name}: signature by {keyid[:16]} verified ({result.signed_via})")
        if result.reproducer:
            console.print(
                f"  reproduced independently: receipt signed by reproducer key {result.reproducer[:16]}"
            )
        console.print(f"promoted {result.source} -> {result.target} ({result.digest})")
    else:
        console.print(f"refused: {result.target} was not changed")


def publish_cmd(
    image: str | None = typer.Option(
        None, "--image", help="local image ID or name that releasekit build produced (or use --staged)"
    ),
    staged: Path | None = typer.Option(
        None,
        "--staged",
        help="staging.json: promote the staged digest into the release repository (no Docker push);"
        " receipts must name that digest",
    ),
    lock: Path = typer.Option(..., "--lock", help="the lock the image was built from"),
    receipts: Path = typer.Option(..., "--receipts", help="directory with one validation receipt per cell"),
    to: str | None = typer.Option(
        None, "--to", help="REGISTRY/REPO[:TAG]; default: the manifest's publish.repository"
    ),
    tag: list[str] = typer.Option(
        [], "--tag", help="release tag (repeatable); default: the manifest's publish.tags"
    ),
    evidence: Path | None = typer.Option(
        None,
        "--evidence",
        help="directory with plan-check.json, verification_summary.json, provenance.intoto.json"
        " [default: the lock's directory]",
    ),
    manifest: Path | None = typer.Option(
        None, "--manifest", help="the manifest [default: the one the lock names]"
    ),
    out: Path | None = typer.Option(
        None, "-o", "--out", help="where RELEASE.md and publish.json go [default: EVIDENCE/published]"
    ),
    trusted_key: list[Path] = TrustedKeyOpt,
    require_signed: bool = RequireSignedOpt,
    as_json: bool = JSON,
) -> None:
    """Push IMAGE and tag it, only if every gate passed for this exact image ID and lock."""
    from releasekit.findings import exit_code_for
    from releasekit.publish.service import publish
    from releasekit.report import print_json

    _refuse_mixed_runs(evidence or lock.parent, staged)  # before the engine is reached
    result = publish(
        engine=(engine := docker_engine()),
        publish_target=publish_target(engine),
        image=image,
        staged=staged,
        lock_path=lock,
        receipts_dir=receipts,
        evidence_dir=evidence,
        manifest_path=manifest,
        to=to,
        tags=tag,
        out_dir=out,
        trusted_key_files=trusted_key,
        require_signed=require_signed,
    )
    _warn_unsigned(result.gate.findings)
    if as_json:
        print_json(result)
    else:
        _render_publish(result)
    raise typer.Exit(exit_code_for(result.gate.findings))


def promote_cmd(
    source: str = typer.Option(..., "--from", help="REGISTRY/REPO:TAG to promote, e.g. …/vllm:beta"),
    target: str = typer.Option(
        ..., "--to", help="REGISTRY/REPO:TAG to point at the same digest, e.g. …/vllm:stable"
    ),
    manifest: Path | None = typer.Option(
        None,
        "--manifest",
        help="hold the release to this manifest's matrix [default: the one it was published with]",
    ),
    trusted_key: list[Path] = TrustedKeyOpt,
    require_signed: bool = RequireSignedOpt,
    reproduced: Path | None = typer.Option(
        None,
        "--reproduced",
        help="a reproduce receipt (reproduce --receipt), its .dsse.json beside it signed by a reproducer key: "
        "required for the stable channel when the --manifest says publish.require_reproduced",
    ),
    as_json: bool = JSON,
) -> None:
    """Re-tag the digest behind --from as --to after checking its attached evidence again; never rebuilds."""
    from releasekit.findings import exit_code_for
    from releasekit.publish.promote import promote
    from releasekit.report import print_json

    result = promote(
        publish_target=publish_target(),
        source=source,
        target=target,
        manifest_path=manifest,
        trusted_key_files=trusted_key,
        require_signed=require_signed,
        reproduced=reproduced,
    )
    _warn_unsigned(result.findings)
    if as_json:
        print_json(result)
    else:
        _render_promote(result)
    raise typer.Exit(0 if result.promoted else max(1, exit_code_for(result.findings)))


# ``releasekit summary``: the release records as GitHub-flavoured markdown, for the workflow's
# $GITHUB_STEP_SUMMARY. Here because publish is the stage that reads every earlier record.
summary_app = typer.Typer(
    help="Render release records as GitHub-flavoured markdown (for $GITHUB_STEP_SUMMARY).",
    no_args_is_help=True,
)


@summary_app.command("plan")
def summary_plan_cmd(
    plan_check: Path = typer.Argument(..., help="the plan check record"),
    lock: Path | None = typer.Option(None, "--lock", help="the lock, for the forge's state of each PR"),
) -> None:
    """The plan table: each PR, its state in git, how it landed, its state on the forge."""
    from releasekit.publish.step_summary import plan_summary

    typer.echo(plan_summary(plan_check, lock), nl=False)


@summary_app.command("verification")
def summary_verification_cmd(path: Path = typer.Argument(..., help="the verification summary")) -> None:
    """Each provenance check: status and what it examined."""
    from releasekit.publish.step_summary import verification_summary

    typer.echo(verification_summary(path), nl=False)


@summary_app.command("validation")
def summary_validation_cmd(
    receipts: Path = typer.Argument(..., help="directory of validation receipts"),
) -> None:
    """Each cell: status, and every gate's number against its baseline."""
    from releasekit.publish.step_summary import validation_summary

    typer.echo(validation_summary(receipts), nl=False)


@summary_app.command("tests")
def summary_tests_cmd(
    release_dir: Path = typer.Argument(
        ..., help="the release directory: its test receipts and hygiene record"
    ),
) -> None:
    """Each component suite's status and counts, and each hygiene step."""
    from releasekit.publish.step_summary import tests_summary

    typer.echo(tests_summary(release_dir), nl=False)


@summary_app.command("publish")
def summary_publish_cmd(path: Path = typer.Argument(..., help="the publish record")) -> None:
    """What publish pushed and tagged, and each gate check's verdict."""
    from releasekit.publish.step_summary import publish_summary

    typer.echo(publish_summary(path), nl=False)


def register(app: typer.Typer) -> None:
    """Add this stage's commands to the root app."""
    app.command("publish")(publish_cmd)
    app.command("promote")(promote_cmd)
    app.add_typer(summary_app, name="summary")
