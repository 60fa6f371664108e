"""CLI commands of the test stage: ``releasekit test`` and ``releasekit hygiene``."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

from releasekit.cli_options import (
    CANDIDATE_IMAGE,
    MIRROR,
    OFFLINE,
    REQUIRE_SIGNED,
    SIGNING_KEY_FILE,
    STAGED,
    TRUSTED_KEY,
    allow_local_flag,
    json_flag,
)
from releasekit.report import print_json, render_findings, stdout_console

if TYPE_CHECKING:
    from releasekit.findings import Findings
    from releasekit.records.test_receipt import HygieneReceipt


_LOCAL = allow_local_flag("Allow file:// and local-path repositories.")
_JSON = json_flag("Machine-readable output.")


def test_command(
    manifest: Path = typer.Argument(..., help="The release manifest (its components' tests: suites)."),
    image: str = CANDIDATE_IMAGE,
    staged: Path | None = STAGED,
    outdir: Path = typer.Option(
        ..., "-o", "--output", help="Release directory: receipts go to tests/<component>.<suite>.json."
    ),
    lock: Path | None = typer.Option(
        None, "--lock", help="The lock: test files come from each component's locked commit."
    ),
    baseline_image: str | None = typer.Option(
        None, "--baseline-image", help="Image failures are rerun on (overrides each suite's baseline)."
    ),
    suite: list[str] = typer.Option([], "--suite", help="Run only this suite (repeatable)."),
    component: list[str] = typer.Option(
        [], "--component", help="Run only this component's suites (repeatable)."
    ),
    allow_local_repos: bool = _LOCAL,
    mirror: list[str] = MIRROR,
    offline: bool = OFFLINE,
    trusted_key: list[Path] = TRUSTED_KEY,
    require_signed: bool = REQUIRE_SIGNED,
    signing_key: Path | None = SIGNING_KEY_FILE,
    json_out: bool = _JSON,
) -> None:
    """Run the components' test suites inside IMAGE; judge failures against the baseline image."""
    from releasekit.git.mirrors import use_options

    use_options(mirror, offline)
    from releasekit.clock import SystemClock
    from releasekit.docker_engine import LazyEngine
    from releasekit.git import local_repos_allowed
    from releasekit.staging.candidate import resolve_candidate
    from releasekit.suites.sweep import TestOptions, run_tests

    policy_signed, keys = (
        _signing_policy(manifest, lock, list(trusted_key))
        if staged is not None
        else (False, list(trusted_key))
    )
    puller = LazyEngine(timeout=600)  # the staged candidate's pull or inspect
    try:
        candidate = resolve_candidate(
            image,
            staged,
            trusted_key_files=keys,
            require_signed=require_signed or policy_signed,
            what="test",
            engine=puller,
        )
    finally:
        puller.close()
    if candidate.warning:
        typer.echo(f"releasekit: {candidate.warning}", err=True)
    result = run_tests(
        TestOptions(
            manifest=manifest,
            image=image if candidate.digest is None else candidate.image,
            image_digest=candidate.digest,
            outdir=outdir,
            lock=lock,
            baseline_image=baseline_image,
            suites=list(suite),
            components=list(component),
            allow_local_repos=local_repos_allowed(allow_local_repos),
        ),
        engine=LazyEngine(timeout=120),  # every container of the suites
        clock=SystemClock(),
    )
    if signing_key is not None:  # the key is read only now, after every container has gone
        from releasekit.signing import load_signer
        from releasekit.signing.statements import sign_test_receipt_file

        signer = load_signer(signing_key)
        for rel in result.receipts:
            sign_test_receipt_file(signer, outdir / rel)
    if json_out:
        print_json(
            {
                "passed": result.passed,
                "image_id": result.image_id,
                "lock_sha256": result.lock_sha256,
                "receipts": result.receipts,
                "findings": result.findings,
            }
        )
    else:
        console = stdout_console()
        console.print(f"image {result.image_id}")
        for rel, receipt in result.receipts.items():
            c = receipt.counts
            line = (
                f"{receipt.component}/{receipt.suite}: {receipt.status} — {c.passed} passed, {c.failed} failed, "
                f"{c.errors} errors, {c.skipped} skipped in {receipt.run.seconds:.1f} s"
            )
            if receipt.expected:
                line += (
                    " (expected: "
                    + ", ".join(f"{r.rule} {'ok' if r.ok else 'NOT MET'}" for r in receipt.expected)
                    + ")"
                )
            if receipt.skip_reason:
                line += f" ({receipt.skip_reason})"
            console.print(line, markup=False)
            for failure in receipt.failures:
                console.print(f"  {failure.verdict}: {failure.test}", markup=False)
            console.print(f"  receipt: {outdir / rel}", markup=False)
        render_findings(result.findings, console, ok_message="no regressions")
        console.print("[green]TESTS PASSED[/green]" if result.passed else "[red]TESTS FAILED[/red]")
    raise typer.Exit(0 if result.passed else 1)


def _signing_policy(manifest: Path, lock: Path | None, given: list[Path]) -> tuple[bool, list[Path]]:
    """The manifest's ``publish.signed`` (a staged candidate's staging.json must then be signed) and
    the keys its signature is checked with: --trusted-key, else the manifest's ``publish.trusted_keys``,
    only as the manifest the lock was made from (issue 43: any other is LOCK_MANIFEST_MISMATCH)."""
    from releasekit.manifest import load_manifest, trusted_key_files_for_lock
    from releasekit.records.lock import read_lock

    loaded = load_manifest(manifest)
    publish = loaded.manifest.publish
    lock_manifest = read_lock(lock).manifest.sha256 if lock is not None else None
    return bool(publish and publish.signed), trusted_key_files_for_lock(loaded, lock_manifest, given, "test")


def hygiene_command(
    manifest: Path = typer.Argument(..., help="The release manifest (its components' hygiene: sections)."),
    lock: Path = typer.Option(
        ..., "--lock", help="The lock: the tree is its canonical head plus the planned PRs."
    ),
    outdir: Path = typer.Option(
        ..., "-o", "--output", help="Release directory: hygiene.json is written there."
    ),
    component: list[str] = typer.Option([], "--component", help="Only this component (repeatable)."),
    allow_local_repos: bool = _LOCAL,
    mirror: list[str] = MIRROR,
    offline: bool = OFFLINE,
    json_out: bool = _JSON,
) -> None:
    """Run ruff, ruff format --check, git diff --check and the repository's hooks on the composed tree."""
    from releasekit.git.mirrors import use_options

    use_options(mirror, offline)
    from releasekit.docker_engine import LazyEngine
    from releasekit.git import local_repos_allowed
    from releasekit.suites.hygiene import (
        HygieneOptions,
        blocking_components,
        required_components,
        run_hygiene,
        shown_findings,
    )

    receipt = run_hygiene(
        HygieneOptions(
            manifest=manifest,
            lock=lock,
            outdir=outdir,
            components=list(component),
            allow_local_repos=local_repos_allowed(allow_local_repos),
        ),
        LazyEngine(timeout=120),  # the hook sandbox's containers (reached only for a pre-commit step)
    )
    # Exit 1 only for a component whose hygiene is required (the publish gate's rule): problems of a
    # `required: false` component are warnings, and a workflow step running this goes on.
    required = required_components(manifest)
    blocking = blocking_components(receipt, required)
    if json_out:
        print_json(receipt)
    else:
        _render_hygiene(receipt, shown_findings(receipt, required), blocking, outdir)
    raise typer.Exit(1 if blocking else 0)


def _render_hygiene(receipt: HygieneReceipt, shown: Findings, blocking: list[str], outdir: Path) -> None:
    """The terminal report: each component's scope and steps, the findings as the gate judges them."""
    from releasekit.records.test_receipt import HYGIENE_FILE

    console = stdout_console()
    for comp in receipt.components:
        console.print(
            f"{comp.component}: {len(comp.files)} file(s) in scope ({comp.scope}), tree {comp.composed_tree[:12]}",
            markup=False,
        )
        for step in comp.steps:
            console.print(f"  {step.step} ({step.tool} {step.version or ''}): {step.status}", markup=False)
    render_findings(shown, console, ok_message="clean")
    note = ""
    if receipt.status != "passed" and not blocking:
        note = " (no component whose hygiene is required failed: warnings, as the publish gate will say)"
    console.print(f"hygiene: {receipt.status.upper()}{note}  ({outdir / HYGIENE_FILE})", markup=False)


def register(app: typer.Typer) -> None:
    """Add this stage's commands to the root app."""
    app.command("test")(test_command)
    app.command("hygiene")(hygiene_command)
