"""``releasekit test``: each suite runs inside the candidate image; failures are judged on a baseline.

For every suite: skip it (with the reason) when the host lacks what it needs; otherwise run
it in the candidate with networking disabled (unless the locked manifest's ``sandbox.network``
grants the component's ``test`` one; never without a lock), the image's own interpreter and installed
code, and the test files of the component's locked commit copied in. Every failing test is
rerun in the candidate (passes: flaky), then on the baseline image (fails there too:
pre-existing, both results kept; passes there: regression). Only regressions, failures
nobody could judge, timeouts and count rules fail the gate.
"""

from __future__ import annotations

import datetime as dt
import glob
import os
import platform
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from releasekit.clock import Clock
from releasekit.docker_engine import Engine
from releasekit.errors import InputError
from releasekit.findings import Findings
from releasekit.manifest import LoadedManifest, load_manifest
from releasekit.manifest.models import GitComponent
from releasekit.manifest.testing import AllowedFailure, TestSuite
from releasekit.records.lock import Lock, lock_file_sha256, read_lock
from releasekit.records.test_receipt import (
    Counts,
    FailedTest,
    RunEvidence,
    SuiteRun,
    TestReceipt,
    Verdict,
    write_record,
)
from releasekit.suites import runner_docker
from releasekit.suites.checks import suite_checks
from releasekit.suites.checks.counts import evaluate_rules
from releasekit.suites.context import SuiteContext
from releasekit.suites.junit import Case, parse_junit
from releasekit.suites.sources import locked_checkout, stage_suite

SRC = "/releasekit/src"
JUNIT = "/releasekit/out/junit.xml"
HOME = "/releasekit/home"
_RERUN_LIMIT = 200  # failing tests rerun one by one beyond this would take longer than the suite


@dataclass
class TestOptions:
    __test__ = False

    manifest: Path
    image: str
    outdir: Path
    lock: Path | None = None
    baseline_image: str | None = None
    suites: list[str] = field(default_factory=list)
    components: list[str] = field(default_factory=list)
    allow_local_repos: bool = False
    cache_dir: Path | None = None
    today: dt.date | None = None
    image_digest: str | None = None  # the registry digest the image was pulled by (--staged)


@dataclass
class TestResult:
    __test__ = False

    image: str
    image_id: str
    lock_sha256: str | None
    receipts: dict[str, TestReceipt]  # receipt path (relative to outdir) -> receipt
    findings: Findings

    @property
    def passed(self) -> bool:
        return self.findings.passed


def host_gpus() -> int:
    """GPUs this host can hand to a container (NVIDIA device files)."""
    return len(glob.glob("/dev/nvidia[0-9]*"))


def unmet_needs(suite: TestSuite) -> str | None:
    have = host_gpus()
    if suite.needs.gpus > have:
        return f"needs {suite.needs.gpus} GPU(s); this host has {have}"
    missing = [d for d in suite.needs.devices if not os.path.exists(d)]
    if missing:
        return f"needs device(s) {', '.join(missing)}, absent on this host"
    return None


def _argv(suite: TestSuite, selection: list[str] | None) -> list[str]:
    """The command; ``selection``: rerun exactly these test ids instead of the suite's selection."""
    if suite.command is not None:
        return list(suite.command.argv)
    assert suite.pytest is not None
    argv = [
        suite.python,
        "-m",
        "pytest",
        "-p",
        "no:cacheprovider",
        "-o",
        "junit_family=xunit1",
        f"--junitxml={JUNIT}",
        "-rs",
        *suite.pytest.args,
    ]
    if selection is not None:
        return [*argv, *selection]
    argv += suite.pytest.paths
    if suite.pytest.k:
        argv += ["-k", suite.pytest.k]
    if suite.pytest.markers:
        argv += ["-m", suite.pytest.markers]
    return argv


@dataclass
class _Run:
    image_id: str
    cases: list[Case] | None  # None: no report
    exit_code: int | None
    timed_out: bool
    seconds: float
    logs: str


def _run(
    engine: Engine,
    image: str,
    suite: TestSuite,
    staged: Path | None,
    selection: list[str] | None,
    *,
    network: bool = False,
) -> _Run:
    junit = suite.command.junit if suite.command else JUNIT
    env = {"PYTHONSAFEPATH": "1", "PYTHONDONTWRITEBYTECODE": "1", "HOME": HOME, **suite.env}
    # The suite runs as nobody (issue 43): its report's directory and HOME are made writable for it.
    report_dir = str(PurePosixPath(junit).parent)
    writable = [HOME] + ([] if report_dir in ("/", "/tmp", "/var/tmp") else [report_dir])
    outcome = runner_docker.run_in_image(
        engine,
        image,
        _argv(suite, selection),
        source=staged,
        source_dest=SRC,
        workdir=SRC if staged is not None else suite.workdir,
        env=env,
        timeout=suite.timeout,
        gpus=suite.needs.gpus,
        devices=suite.needs.devices,
        collect=[junit],
        writable=writable,
        network=network,
    )
    report = outcome.files.get(junit)
    cases = parse_junit(report) if report is not None else None
    return _Run(
        image_id=image,
        cases=cases,
        exit_code=outcome.exit_code,
        timed_out=outcome.timed_out,
        seconds=outcome.seconds,
        logs=outcome.logs,
    )


def _evidence(run: _Run, test: str) -> RunEvidence:
    case = next((c for c in run.cases or [] if c.id == test), None)
    if case is None:
        tail = run.logs[-600:] if run.logs else None
        return RunEvidence(
            image_id=run.image_id,
            outcome="missing",
            message="killed at the timeout" if run.timed_out else "no result for this test",
            output=tail,
        )
    return RunEvidence(image_id=run.image_id, outcome=case.outcome, message=case.message, output=case.output)  # type: ignore[arg-type]


def _counts(cases: list[Case]) -> tuple[Counts, dict[str, int]]:
    counts = Counts()
    reasons: dict[str, int] = {}
    for case in cases:
        if case.outcome == "passed":
            counts.passed += 1
        elif case.outcome == "failed":
            counts.failed += 1
        elif case.outcome == "error":
            counts.errors += 1
        else:
            counts.skipped += 1
            reason = case.message or "no reason given"
            reasons[reason] = reasons.get(reason, 0) + 1
    return counts, reasons


def judge_suite(
    suite: TestSuite,
    image_id: str,
    staged: Path | None,
    baseline: tuple[str, str] | None,
    base: TestReceipt,
    *,
    engine: Engine,
) -> TestReceipt:
    """Run ``suite`` in the candidate (``image_id``), rerun its failures, judge them on the baseline
    (image, ID); ``base`` is the receipt so far (component, images, lock, the network grant); the receipt."""
    network = base.network
    first = _run(engine, image_id, suite, staged, None, network=network)
    receipt = base.model_copy(
        update={
            "command": _argv(suite, None),
            "run": SuiteRun(
                exit_code=first.exit_code,
                timed_out=first.timed_out,
                report_found=first.cases is not None,
                seconds=round(first.seconds, 3),
                log_tail=first.logs[-4000:],
            ),
        }
    )
    if first.cases is None:
        receipt.status = "timed-out" if first.timed_out else "failed"
        return receipt
    receipt.counts, receipt.skip_reasons = _counts(first.cases)
    receipt.expected = evaluate_rules(list(suite.expect), receipt.counts)
    failing = [c for c in first.cases if c.outcome in ("failed", "error")]
    allowed = {a.test: a for a in suite.allowlist}
    selection = [c.id for c in failing] if suite.pytest is not None else None
    rerun: _Run | None = None
    base_run: _Run | None = None
    if failing and len(failing) <= _RERUN_LIMIT:
        rerun = _run(engine, image_id, suite, staged, selection, network=network)
        base_run = _run(engine, baseline[1], suite, staged, selection, network=network) if baseline else None
    # Reruns on the baseline only matter for tests that failed twice; one baseline run covers them all.
    receipt.failures.extend(_judged(case, rerun, base_run, allowed) for case in failing)
    return receipt


def _judged(
    case: Case, rerun: _Run | None, base_run: _Run | None, allowed: dict[str, AllowedFailure]
) -> FailedTest:
    """One failing test's verdict: flaky (passed again), pre-existing or regression (by the baseline),
    allowlisted, or unjudged."""
    again = _evidence(rerun, case.id) if rerun else None
    verdict: Verdict
    on_base = None
    if again is not None and again.outcome == "passed":
        verdict = "flaky"
    else:
        on_base = _evidence(base_run, case.id) if base_run else None
        if on_base is not None and on_base.outcome in ("failed", "error"):
            verdict = "pre-existing"
        elif on_base is not None and on_base.outcome == "passed":
            verdict = "regression"
        elif case.id in allowed:
            verdict = "allowlisted"
        else:
            verdict = "unjudged"
    entry = allowed.get(case.id)
    return FailedTest(
        test=case.id,
        outcome=case.outcome,
        message=case.message,
        output=case.output,  # type: ignore[arg-type]
        verdict=verdict,
        candidate_rerun=again,
        baseline=on_base,
        allowlist_reason=entry.reason if entry else None,
    )


def _baseline_for(suite: TestSuite, override: str | None) -> tuple[str | None, str | None]:
    """(reference, reason it is unavailable)."""
    if override:
        return override, None
    if suite.baseline is None:
        return None, "the suite names no baseline"
    if suite.baseline == "canonical":
        return None, "baseline 'canonical' needs an image of the canonical branch: pass --baseline-image"
    return suite.baseline, None


def _selected(loaded: LoadedManifest, opts: TestOptions) -> list[tuple[str, GitComponent, TestSuite]]:
    """(component, its manifest entry, suite) for every suite the options select; none is an input error."""
    selected = [
        (name, comp, suite)
        for name, comp in loaded.manifest.git_components().items()
        if not opts.components or name in opts.components
        for suite in comp.tests
        if not opts.suites or suite.name in opts.suites
    ]
    if not selected:
        raise InputError(
            f"{opts.manifest}: no test suite matches" + (f" {', '.join(opts.suites)}" if opts.suites else "")
        )
    return selected


def _baseline(
    suite: TestSuite, opts: TestOptions, baseline_ids: dict[str, str | None], engine: Engine
) -> tuple[tuple[str, str] | None, str | None]:
    """((baseline image, its ID) or None, why there is none); IDs are looked up once per image."""
    ref, why_not = _baseline_for(suite, opts.baseline_image)
    if ref is None:
        return None, why_not
    if ref not in baseline_ids:
        baseline_ids[ref] = runner_docker.image_id(engine, ref)
    if baseline_ids[ref] is None:
        raise InputError(f"baseline image {ref} is not in the local Docker Engine")
    return (ref, str(baseline_ids[ref])), why_not


@dataclass(frozen=True)
class _Sources:
    """Where the suites' test files come from: the lock, the manifest, the options (local repositories,
    the cache), the run's scratch directory and the locked checkouts made so far (one per component)."""

    lock: Lock
    loaded: LoadedManifest
    opts: TestOptions
    tmp: Path
    checkouts: dict[str, Path] = field(default_factory=dict)


def _stage(sources: _Sources, name: str, comp: GitComponent, suite: TestSuite) -> tuple[Path, str]:
    """The suite's files staged from the locked checkout (made once per component); (staged, commit)."""
    checkouts, tmp = sources.checkouts, sources.tmp
    locked = sources.lock.git_components().get(name)
    if locked is None:
        raise InputError(f"the lock has no git component {name!r}")
    if name not in checkouts:
        checkouts[name] = locked_checkout(
            comp,
            locked,
            sources.loaded,
            tmp / "checkout" / name,
            allow_local=sources.opts.allow_local_repos,
            cache_dir=sources.opts.cache_dir,
        )
    staged = tmp / "staged" / name / suite.name
    stage_suite(checkouts[name], suite, staged)
    return staged, locked.commit


def _judge_and_write(
    receipt: TestReceipt, name: str, suite: TestSuite, started: float, *, today: dt.date, outdir: Path
) -> str:
    """The suite checks over the receipt, its final status and duration; written; its relative path."""
    context = SuiteContext(component=name, suite=suite, receipt=receipt, today=today)
    receipt.findings.extend(suite_checks().run(context))
    if receipt.status == "passed" and not receipt.findings.passed:
        receipt.status = "timed-out" if receipt.run.timed_out else "failed"
    receipt.duration_s = round(time.monotonic() - started, 3)
    rel = f"tests/{name}.{suite.name}.json"
    write_record(receipt, outdir / rel)
    return rel


def _inputs(opts: TestOptions) -> tuple[LoadedManifest, Lock | None, str | None]:
    """The manifest, the lock (made from that manifest) and the lock file's sha256."""
    loaded: LoadedManifest = load_manifest(opts.manifest)
    lock: Lock | None = read_lock(opts.lock) if opts.lock else None
    lock_sha = lock_file_sha256(opts.lock) if opts.lock else None
    if lock is not None and lock.manifest.sha256 != loaded.sha256:
        raise InputError(
            f"{opts.lock} was made from another manifest (sha256 {lock.manifest.sha256[:12]}), "
            f"not {opts.manifest} ({loaded.sha256[:12]})"
        )
    return loaded, lock, lock_sha


def run_tests(opts: TestOptions, *, engine: Engine, clock: Clock) -> TestResult:
    """Every selected suite run and judged; ``engine``, ``clock``: the command's."""
    loaded, lock, lock_sha = _inputs(opts)
    image_id = runner_docker.image_id(engine, opts.image)
    if image_id is None:
        raise InputError(f"image {opts.image} is not in the local Docker Engine")
    selected = _selected(loaded, opts)
    today = opts.today or clock.today()
    findings = Findings()
    receipts: dict[str, TestReceipt] = {}
    baseline_ids: dict[str, str | None] = {}
    with tempfile.TemporaryDirectory(prefix="releasekit-test-") as tmp:
        sources = _Sources(lock, loaded, opts, Path(tmp)) if lock is not None else None
        for name, comp, suite in selected:
            started = time.monotonic()
            base = TestReceipt(
                component=name,
                suite=suite.name,
                required=suite.required,
                status="passed",
                image=opts.image,
                image_id=image_id,
                image_digest=opts.image_digest,
                host=platform.node(),
                lock_sha256=lock_sha,
                # Only the lock's manifest grants a network (without --lock the manifest is anyone's).
                network=lock is not None and comp.network_granted("test"),
                started_at=clock.now().strftime("%Y-%m-%dT%H:%M:%SZ"),
            )
            baseline, why_not = _baseline(suite, opts, baseline_ids, engine)
            if baseline is not None:
                base.baseline_image, base.baseline_image_id = baseline
            reason = unmet_needs(suite)
            if reason is not None:
                receipt = base.model_copy(update={"status": "skipped", "skip_reason": reason})
            else:
                staged: Path | None = None
                if sources is not None:
                    staged, base.source_commit = _stage(sources, name, comp, suite)
                receipt = judge_suite(suite, image_id, staged, baseline, base, engine=engine)
                if why_not and any(f.verdict == "unjudged" for f in receipt.failures):
                    receipt.findings.add(
                        "BASELINE_UNAVAILABLE",
                        f"failures could not be judged: {why_not}",
                        component=name,
                        field=f"tests.{suite.name}.baseline",
                    )
            rel = _judge_and_write(receipt, name, suite, started, today=today, outdir=opts.outdir)
            receipts[rel] = receipt
            findings.extend(receipt.findings)
    return TestResult(
        image=opts.image, image_id=image_id, lock_sha256=lock_sha, receipts=receipts, findings=findings
    )
