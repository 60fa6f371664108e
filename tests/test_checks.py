"""The one check shape: AllOf, declared codes of every stage's checks, read-only contexts."""

from __future__ import annotations

import ast
import copy
import importlib
import json
import pkgutil
from pathlib import Path
from typing import Any

import pytest

from releasekit.checks import AllOf, Check
from releasekit.findings import Findings, Severity

ROOT = Path(__file__).resolve().parent.parent
CHECK_PACKAGES = [
    "releasekit.manifest.checks",
    "releasekit.plan.checks",
    "releasekit.publish.checks",
    "releasekit.provenance.checks",
    "releasekit.suites.checks",
    "releasekit.validate.checks",
]


# --- AllOf ---------------------------------------------------------------------------------


class _Emits:
    def __init__(self, name: str, *codes: str) -> None:
        self.name = name
        self.codes = codes

    def run(self, context: list[str]) -> Findings:
        found = Findings()
        for code in self.codes:
            context.append(code)  # a record of the call order, kept outside the findings
            found.add(
                code,
                f"{self.name} says {code}",
                severity=Severity.warning if code.startswith("W") else Severity.error,
            )
        return found


def test_all_of_runs_every_check_in_order_and_concatenates_findings() -> None:
    calls: list[str] = []
    both = AllOf(_Emits("first", "A_ONE", "W_TWO"), _Emits("quiet"), _Emits("second", "B_THREE"), name="both")
    found = both.run(calls)
    assert found.codes() == ["A_ONE", "W_TWO", "B_THREE"]
    assert calls == ["A_ONE", "W_TWO", "B_THREE"]
    assert [f.message for f in found] == ["first says A_ONE", "first says W_TWO", "second says B_THREE"]
    assert not found.passed
    assert both.name == "both"


def test_all_of_codes_are_the_union_without_repeats() -> None:
    both = AllOf(_Emits("a", "X_CODE", "Y_CODE"), _Emits("b", "Y_CODE", "Z_CODE"))
    assert both.codes == ("X_CODE", "Y_CODE", "Z_CODE")


def test_all_of_is_itself_a_check_and_nests() -> None:
    inner: Check[list[str]] = AllOf(_Emits("a", "W_ONLY"))
    outer = AllOf(inner, _Emits("b"))
    found = outer.run([])
    assert found.codes() == ["W_ONLY"] and found.passed
    assert [(c.name, got.codes()) for c, got in outer.each([])] == [("all", ["W_ONLY"]), ("b", [])]


def test_an_empty_all_of_passes() -> None:
    assert AllOf[list[str]]().run([]).passed


class _OnlyWhen(_Emits):
    def __init__(self, name: str, flag: str, *codes: str) -> None:
        super().__init__(name, *codes)
        self.flag = flag

    def applies(self, context: list[str]) -> bool:
        return self.flag in context


def test_all_of_runs_only_the_checks_that_apply() -> None:
    checks = AllOf(_Emits("always", "A_ONE"), _OnlyWhen("files", "read", "B_TWO"))
    assert checks.run([]).codes() == ["A_ONE"]
    assert [c.name for c, _ in checks.each([])] == ["always"]
    assert checks.run(["read"]).codes() == ["A_ONE", "B_TWO"]


def test_no_check_starts_after_the_deadline_and_the_cut_is_a_finding() -> None:
    import time

    from releasekit.checks import Deadline

    checks = AllOf(_Emits("first", "A_ONE"), _OnlyWhen("skipped", "never", "C_X"), _Emits("second", "B_TWO"))
    passed = Deadline(at=time.monotonic() - 1, code="LIMIT_REACHED", message="too late for {check}")
    report = checks.report([], deadline=passed)
    assert report.ran == [] and report.findings.codes() == ["LIMIT_REACHED"]
    assert [f.message for f in report.findings] == ["too late for first"]
    ahead = Deadline(at=time.monotonic() + 60, code="LIMIT_REACHED", message="{check}")
    report = checks.report([], deadline=ahead)
    assert [c.name for c, _ in report.ran] == ["first", "second"] and not report.cut_off
    assert checks.run([], deadline=ahead).codes() == ["A_ONE", "B_TWO"]


class _SlowThenLate(_Emits):
    """A check that uses up the deadline: the next one is not started."""

    def __init__(self, name: str, deadline: list[float]) -> None:
        super().__init__(name, "A_ONE")
        self.deadline = deadline

    def run(self, context: list[str]) -> Findings:
        self.deadline[0] = 0.0
        return super().run(context)


def test_the_deadline_is_read_before_each_check() -> None:
    from releasekit.checks import Deadline

    class _Moving(Deadline):
        def passed(self) -> bool:
            return moving[0] == 0.0

    moving = [1.0]
    checks = AllOf(_SlowThenLate("slow", moving), _Emits("next", "B_TWO"))
    report = checks.report([], deadline=_Moving(at=0.0, code="LIMIT_REACHED", message="before {check}"))
    assert [c.name for c, _ in report.ran] == ["slow"]
    assert [(f.code, f.message) for f in report.findings][-1] == ("LIMIT_REACHED", "before next")


def test_verify_checks_that_need_files_do_not_apply_without_them() -> None:
    import dataclasses

    from releasekit.provenance.checks import all_checks
    from releasekit.provenance.context import VerifyContext

    assert dataclasses.fields(VerifyContext) and VerifyContext.__dataclass_params__.frozen  # type: ignore[attr-defined]
    unread = [c.name for c in all_checks() if getattr(c, "applies", None) is not None]
    without = {c.name for c in all_checks()} - set(unread)
    assert without == {"labels", "reproduction", "image-config", "runtime-switches"}


# --- every check declares the codes it emits (read from its source) ------------------------


def _check_modules() -> list[str]:
    names: list[str] = []
    for package in CHECK_PACKAGES:
        pkg = importlib.import_module(package)
        for info in pkgutil.iter_modules(pkg.__path__):
            names.append(f"{package}.{info.name}")
    return names


def _check_classes(module: Any) -> list[type]:
    return [
        obj
        for obj in vars(module).values()
        if isinstance(obj, type)
        and obj.__module__ == module.__name__
        and isinstance(getattr(obj, "codes", None), tuple)
        and callable(getattr(obj, "run", None))
    ]


def _codes_added(source: str) -> set[str]:
    """String constants a module passes as the code of ``findings.add(...)`` (directly, or through a variable)."""
    tree = ast.parse(source)
    variables: dict[str, set[str]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            consts = {
                c.value
                for c in ast.walk(node.value)
                if isinstance(c, ast.Constant) and isinstance(c.value, str)
            }
            for target in node.targets:
                if isinstance(target, ast.Name):
                    variables.setdefault(target.id, set()).update(consts)
    found: set[str] = set()
    for node in ast.walk(tree):
        if not (
            isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "add"
        ):
            continue
        code = node.args[0] if node.args else next((k.value for k in node.keywords if k.arg == "code"), None)
        if isinstance(code, ast.Constant) and isinstance(code.value, str):
            found.add(code.value)
        elif isinstance(code, ast.Name):
            found |= variables.get(code.id, set())
        elif code is not None:
            found |= {
                c.value for c in ast.walk(code) if isinstance(c, ast.Constant) and isinstance(c.value, str)
            }
    return {c for c in found if c.isupper()}


def test_every_stage_has_checks_of_the_one_shape() -> None:
    per_package = {p: 0 for p in CHECK_PACKAGES}
    for name in _check_modules():
        module = importlib.import_module(name)
        for cls in _check_classes(module):
            per_package[name.rsplit(".", 1)[0]] += 1
            assert cls.codes, f"{cls.__name__} declares no codes"
            assert all(isinstance(c, str) and c.isupper() for c in cls.codes)
    assert all(per_package.values()), per_package


@pytest.mark.parametrize("name", _check_modules())
def test_a_check_module_emits_only_codes_its_checks_declare(name: str) -> None:
    module = importlib.import_module(name)
    classes = _check_classes(module)
    emitted = _codes_added(Path(module.__file__ or "").read_text(encoding="utf-8"))
    if not classes:
        assert not emitted, f"{name} adds findings {sorted(emitted)} but holds no check"
        return
    declared = {c for cls in classes for c in cls.codes}
    assert emitted <= declared, f"{name} emits undeclared {sorted(emitted - declared)}"


def test_the_scanner_sees_codes_through_variables_and_conditionals() -> None:
    source = 'code = "A_X" if y else "B_Y"\nf.add(code, "m")\nf.add("C_Z", "m")\nf.add("A_X" if q else "D_W", "m")\n'
    assert _codes_added(source) == {"A_X", "B_Y", "C_Z", "D_W"}


# --- plan checks: declared codes on a real scenario, and no check changes its context -------


@pytest.fixture()
def plan_world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):  # noqa: ANN201 - plan_world.World
    from plan_world import World

    monkeypatch.setenv("RELEASEKIT_ALLOW_LOCAL_REPOS", "1")
    monkeypatch.setenv("RELEASEKIT_CACHE", str(tmp_path / "cache"))
    return World(tmp_path / "w")


def _plan_snapshot(ctx: Any) -> Any:
    return copy.deepcopy(
        (
            ctx.loaded.manifest.model_dump(),
            ctx.lock.model_dump() if ctx.lock else None,
            {
                name: (
                    cs.name,
                    cs.branch,
                    cs.checked,
                    cs.canonical_head,
                    [s.model_dump() for s in cs.statuses],
                    dict(cs.states),
                    dict(cs.heads),
                    dict(cs.times),
                    cs.mirror.refs("refs/"),
                )
                for name, cs in ctx.components.items()
            },
            [(n, r.model_dump()) for n, r in ctx.release_only],
            [audit.model_dump() for audit in ctx.pins],
        )
    )


def test_plan_checks_emit_declared_codes_and_leave_their_context_alone(
    plan_world: Any, tmp_path: Path
) -> None:
    from plan_world import FF, VLLM_PLAN, plan_lock

    from releasekit.forge import GitHubForges
    from releasekit.manifest import load_manifest
    from releasekit.plan.check import PlanCheckOptions, plan_context, statuses_with_codes
    from releasekit.plan.checks import all_checks, plan_checks

    world = plan_world
    world.land_b12x([28, 32])  # #34/#35 missing: PR_NOT_MERGED, and vLLM #104's after: is violated
    world.land_vllm([108, 103, *[p for p in VLLM_PLAN if p not in (108, 103)]])  # #103 before #97
    world.vllm.cherry_pick(world.vllm.pr_head(106), FF)  # a superseded PR's copy
    world.vllm.merge_pr(88, "merge")  # a closed PR
    world.vllm.cherry_pick(world.launcher, FF)  # an excluded change
    world.vllm.commit({"requirements.txt": "apache-tvm-ffi==0.1.11\n"}, "a pin input", branch=FF)
    world.vllm.push(FF)
    data = world.manifest(pins=[{"package": "apache-tvm-ffi", "version": "0.1.12"}])
    loaded = load_manifest(world.write_manifest(data))
    lock = plan_lock(loaded)
    world.vllm.force_push_pr(101, [{"vllm/pr101_0.py": "REWRITTEN = 1\n"}])  # a moved head
    world.vllm.commit({"vllm/later.py": "LATER = 1\n"}, "after the lock", branch=FF)
    world.vllm.push(FF)  # canonical moved on since the lock
    options = PlanCheckOptions(lock=lock, releases={"vllm": "release/v17"}, pins=("vllm",))
    ctx = plan_context(loaded, options, forges=GitHubForges())
    before = _plan_snapshot(ctx)
    emitted: set[str] = set()
    for check in all_checks():
        got = check.run(ctx)
        assert set(got.codes()) <= set(check.codes), (check.name, got.codes())
        emitted |= set(got.codes())
    assert _plan_snapshot(ctx) == before
    assert all(not s.codes for cs in ctx.components.values() for s in cs.statuses)
    expected = {
        "PR_NOT_MERGED",
        "AFTER_VIOLATED",
        "MERGED_OUT_OF_ORDER",
        "SUPERSEDED_PR_MERGED",
        "CLOSED_PR_MERGED",
        "EXCLUDED_CHANGE_PRESENT",
        "PR_HEAD_MOVED",
        "PIN_MISMATCH",
        "CANONICAL_ADVANCED",
    }
    assert expected <= emitted, sorted(expected - emitted)

    # The statuses' codes are computed from the findings, for the PR and role each is about.
    findings = plan_checks().run(ctx)
    assert findings.codes() == [c for check in all_checks() for c in check.run(ctx).codes()]
    vllm = {(s.pr, s.role): s.codes for s in statuses_with_codes(ctx.components["vllm"], findings)}
    b12x = {(s.pr, s.role): s.codes for s in statuses_with_codes(ctx.components["b12x"], findings)}
    assert vllm[(103, "planned")] == ["MERGED_OUT_OF_ORDER"]
    assert "AFTER_VIOLATED" in vllm[(104, "planned")]
    assert vllm[(101, "planned")] == ["PR_HEAD_MOVED"]
    assert vllm[(106, "superseded")] == ["SUPERSEDED_PR_MERGED"]
    assert vllm[(88, "closed")] == ["CLOSED_PR_MERGED"]
    assert vllm[(97, "planned")] == []
    assert b12x[(34, "planned")] == ["PR_NOT_MERGED"]
    assert _plan_snapshot(ctx) == before


# --- publish gate rules: declared codes on tampered evidence -------------------------------


def test_gate_rules_emit_declared_codes_on_tampered_evidence(tmp_path: Path) -> None:
    from publish_support import IMAGE_CMD, IMAGE_ENV, Release

    from releasekit.docker_engine import ImageFacts
    from releasekit.manifest import load_manifest
    from releasekit.publish.checks import GateSubject, all_checks
    from releasekit.publish.evidence import load_evidence
    from releasekit.publish.gate import policy_from_manifest

    image_id = "sha256:" + "4" * 64
    release = Release(tmp_path, image_id)
    release.write_plan_check(lock_sha256="0" * 64, errors=["PR_NOT_MERGED"])
    release.write_verification(image_id="sha256:" + "5" * 64, result="FAILED")
    statement = json.loads((release.evidence / "provenance.intoto.json").read_text())
    statement["subject"][0]["digest"]["sha256"] = "6" * 64
    (release.evidence / "provenance.intoto.json").write_text(json.dumps(statement))
    release.write_receipt(
        "tiny-tp1",
        passed=False,
        env={"HF_TOKEN": "hf_x", "VLLM_DISABLE_SHARED_EXPERTS_STREAM": "1"},
        args=["--enforce-eager", "--disable-aux-streams"],
    )
    release.write_receipt("tiny-tp1", image_id="sha256:" + "7" * 64, name="other-image.json")
    release.write_receipt("tiny-tp1", lock_sha256="8" * 64, name="other-lock.json")
    release.write_receipt("tiny-tp1-ngram", cell_sha256="9" * 64)
    (release.receipts / "broken.json").write_text("{not json")
    loaded = load_manifest(release.manifest)
    subject = GateSubject(
        image=ImageFacts(id=image_id, env=dict(IMAGE_ENV), cmd=list(IMAGE_CMD)),
        lock_sha256=release.lock_sha256,
        manifest_sha256=loaded.sha256,
        lock_manifest_sha256="1" * 64,
        evidence=load_evidence(release.evidence, release.receipts),
        policy=policy_from_manifest(loaded.manifest),
    )
    before = subject.model_dump()
    emitted: set[str] = set()
    for check in all_checks():
        got = check.run(subject)
        assert set(got.codes()) <= set(check.codes), (check.name, got.codes())
        emitted |= set(got.codes())
    assert subject.model_dump() == before
    expected = {
        "LOCK_MANIFEST_MISMATCH",
        "PLAN_CHECK_WRONG_LOCK",
        "PLAN_CHECK_FAILED",
        "VERIFICATION_WRONG_IMAGE",
        "PROVENANCE_NOT_VERIFIED",
        "PROVENANCE_WRONG_IMAGE",
        "RECEIPT_INVALID",
        "RECEIPT_WRONG_IMAGE",
        "RECEIPT_WRONG_LOCK",
        "RECEIPT_STALE_CELL",
        "RECEIPT_MISSING",
        "RECEIPT_FAILED",
        "FORBIDDEN_SWITCH",
        "HIDDEN_SWITCH",
        "CREDENTIAL_IN_RECEIPT",
    }
    assert expected <= emitted, sorted(expected - emitted)


def test_the_hidden_switch_rule_asks_the_engine_adapter(tmp_path: Path) -> None:
    from publish_support import IMAGE_CMD, IMAGE_ENV, Release

    from releasekit.docker_engine import ImageFacts
    from releasekit.manifest import load_manifest
    from releasekit.publish.checks import GateSubject
    from releasekit.publish.checks.hidden import NoHiddenSwitches, placement_flags
    from releasekit.publish.evidence import load_evidence
    from releasekit.publish.gate import policy_from_manifest
    from releasekit.validate.engines import engine_for

    assert placement_flags("vllm") == engine_for("vllm").placement_flags()
    assert {"--tensor-parallel-size", "--port", "--speculative-config"} <= placement_flags("vllm")
    assert placement_flags("no-such-engine") == frozenset()
    image_id = "sha256:" + "4" * 64
    release = Release(tmp_path, image_id)
    loaded = load_manifest(release.manifest)
    policy = policy_from_manifest(loaded.manifest)
    assert {c.engine for c in policy.cells} == {"vllm"}

    def hidden(engine: str) -> list[str]:
        cells = [c.model_copy(update={"engine": engine}) for c in policy.cells]
        subject = GateSubject(
            image=ImageFacts(id=image_id, env=dict(IMAGE_ENV), cmd=list(IMAGE_CMD)),
            lock_sha256=release.lock_sha256,
            evidence=load_evidence(release.evidence, release.receipts),
            policy=policy.model_copy(update={"cells": cells}),
        )
        return [f.message for f in NoHiddenSwitches().run(subject)]

    assert hidden("vllm") == []
    # An engine without an adapter names no placement flags: the receipts' --port and -m are switches there.
    assert any("--port" in m for m in hidden("no-such-engine"))


# --- validate checks: the same shape, measurements recorded in the context -----------------


def test_a_validate_check_returns_findings_and_records_its_measurements() -> None:
    from releasekit.manifest.validation import Cell, LogScanCheck, ValidationSpec
    from releasekit.validate.checks import CheckContext, LogScan, run_check
    from releasekit.validate.engines import engine_for

    cell = Cell.model_validate({"id": "c1", "model": {"name": "tiny"}, "checks": []})
    config = LogScanCheck(
        kind="log_scan", forbid=["Traceback"], require=["Application startup complete", "never printed"]
    )
    ctx = CheckContext(
        cell=cell,
        spec=ValidationSpec(),
        manifest_dir=ROOT,
        client=None,
        engine=engine_for("vllm"),
        read_log=lambda: "INFO Application startup complete\nTraceback (most recent call last):\n",
    )
    check = LogScan(config)
    found = check.run(ctx)
    assert isinstance(found, Findings)
    assert found.codes() == ["LOG_ERROR", "LOG_MISSING"] and set(found.codes()) <= set(check.codes)
    assert all(f.location.cell == "c1" for f in found)
    assert {m.name: m.value for m in ctx.record.metrics} == {
        "log_scan.forbidden_hits": 1,
        "log_scan.required_missing": 1,
        "log_scan.lines": 2,
    }
    result = run_check(LogScan(config), ctx)
    assert result.name == "log_scan" and not result.passed and len(result.metrics) == 3
    assert [f.code for f in result.findings] == ["LOG_ERROR", "LOG_MISSING"]
    assert len(ctx.record.metrics) == 3  # run_check gave the second run its own record


def test_spec_counters_take_their_names_from_the_adapter() -> None:
    from releasekit.validate.engines.interface import SpecDecodeMetricNames
    from releasekit.validate.metrics import SpecCounters

    names = SpecDecodeMetricNames(
        prefix="other:spec_",
        drafts="other:spec_drafts",
        draft_tokens="other:spec_draft_tokens",
        accepted_tokens="other:spec_accepted",
        accepted_per_position="other:spec_accepted_pos",
        position_label="pos",
    )
    text = (
        "other:spec_drafts_total 4\nother:spec_draft_tokens_total 12\nother:spec_accepted_total 6\n"
        'other:spec_accepted_pos_total{pos="0"} 4\nvllm:spec_decode_num_drafts_total 99\n'
    )
    got = SpecCounters.from_text(text, names)
    assert (got.drafts, got.draft_tokens, got.accepted_tokens, got.accepted_per_position, got.present) == (
        4,
        12,
        6,
        {0: 4.0},
        True,
    )


def test_a_receipt_records_the_adapter_that_judged_it() -> None:
    from releasekit.records.receipt import Receipt
    from releasekit.validate.engines import engine_for

    fields = Receipt.model_fields
    assert "engine_adapter" in fields and "engine_adapter_version" in fields
    adapter = engine_for("vllm")
    assert adapter.name == "vllm" and adapter.version
