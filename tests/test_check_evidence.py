"""What each check examined, and no pass on nothing (issue 35).

verify-provenance reported ``native-arches`` (no native component), ``toolchain`` (the lock's
versions all null) and ``forbidden-distributions`` (an empty list) as passed. The check layer
now asks each check what it examines: a legitimately absent subject is ``not applicable`` with
the reason, a check that must examine something and got nothing fails, and the verification
summary lists every check with its status and count. The publish gate accepts ``not
applicable`` and refuses a check that failed or never ran.
"""

from __future__ import annotations

import json
from pathlib import Path

from publish_support import IMAGE_ID, Release, codes, gate
from verify_support import toolchain_context

from releasekit.checks import NOTHING_EXAMINED, AllOf, Deadline, Examined
from releasekit.findings import Findings

# --- the layer --------------------------------------------------------------------------------


class _Looks:
    """A check over a list of words: it examines the words that start with its prefix."""

    def __init__(self, name: str, prefix: str, *, absent: str | None = None, bad: str = "") -> None:
        self.name = name
        self.codes = ("BAD_WORD",)
        self.prefix = prefix
        self.absent = absent
        self.bad = bad
        self.runs = 0

    def examines(self, words: list[str]) -> Examined:
        return Examined.of("words", (w for w in words if w.startswith(self.prefix)), absent=self.absent)

    def run(self, words: list[str]) -> Findings:
        self.runs += 1
        found = Findings()
        for word in words:
            if self.bad and word == self.bad:
                found.add("BAD_WORD", word)
        return found


def _statuses(report) -> list[tuple[str, str, int, str | None]]:  # noqa: ANN001 - Report[list[str]]
    return [
        (o.check.name, o.status, o.examined.count if o.examined else 0, o.reason) for o in report.outcomes
    ]


def test_each_check_gets_a_status_a_count_and_a_reason() -> None:
    native = _Looks("native", "lib", absent="no native component")
    must = _Looks("files", "file")
    good = _Looks("labels", "label", bad="label-x")
    report = AllOf(good, native, must).report(["label-a", "label-b", "other"])
    assert _statuses(report) == [
        ("labels", "passed", 2, None),
        ("native", "not applicable", 0, "no native component"),
        ("files", "failed", 0, None),
    ]
    # Not applicable: not run, no finding. Must-examine with nothing: run, and NOTHING_EXAMINED.
    assert native.runs == 0 and must.runs == 1
    assert report.findings.codes() == [NOTHING_EXAMINED]
    assert "files check examined no words" in report.findings.findings[0].message
    assert [c.name for c, _ in report.ran] == ["labels", "files"]
    assert report.outcomes[0].examined == Examined("words", ("label-a", "label-b"))
    # With a subject, the same checks pass or fail on what they found.
    report = AllOf(good, native, must).report(["label-x", "lib.so", "file.py"])
    assert [(n, s, c) for n, s, c, _ in _statuses(report)] == [
        ("labels", "failed", 1),
        ("native", "passed", 1),
        ("files", "passed", 1),
    ]


def test_a_check_that_does_not_say_what_it_examines_keeps_its_old_outcome() -> None:
    class Plain:
        name = "plain"
        codes = ("X_CODE",)

        def run(self, words: list[str]) -> Findings:
            return Findings()

    report = AllOf(Plain()).report([])
    assert _statuses(report) == [("plain", "passed", 0, None)]
    assert AllOf(Plain()).codes == ("X_CODE",)
    assert NOTHING_EXAMINED in AllOf(Plain(), _Looks("a", "a")).codes


def test_a_check_that_does_not_apply_or_is_cut_off_is_not_run() -> None:
    class Unread(_Looks):
        not_applied_reason = "the filesystem could not be read"

        def applies(self, words: list[str]) -> bool:
            return False

    report = AllOf(Unread("files", "f"), _Looks("a", "a")).report(
        ["a"], deadline=Deadline(at=0.0, code="LIMIT_REACHED", message="before {check}")
    )
    assert _statuses(report) == [
        ("files", "not run", 0, "the filesystem could not be read"),
        ("a", "not run", 0, "the deadline passed before it started"),
    ]
    assert report.findings.codes() == ["LIMIT_REACHED"]


def test_examined_items_are_sorted_without_repeats() -> None:
    assert Examined.of("files", ["b", "a", "b"]).items == ("a", "b")
    assert Examined.of("files", ["a"], absent="why").absent is None  # a subject is there after all


# --- verify-provenance's checks on issue 35's case ------------------------------------------


def test_verify_checks_on_an_image_with_nothing_to_examine() -> None:
    """No native component, a lock whose toolchain versions are all null, no forbidden patterns,
    and (for the checks that must examine something) no distribution and no file at all."""
    from releasekit.provenance.checks import all_checks

    ctx = toolchain_context({"torch_present": False}, None, None)
    report = AllOf(*all_checks()).report(ctx)
    outcome = {o.check.name: o for o in report.outcomes}
    for name in ("native-arches", "toolchain", "forbidden-distributions"):
        assert outcome[name].status == "not applicable", name
        assert outcome[name].reason and outcome[name].examined and outcome[name].examined.count == 0
    assert "no installed component is built for a CUDA arch" in (outcome["native-arches"].reason or "")
    assert "pins no PyTorch, CUDA or NCCL" in (outcome["toolchain"].reason or "")
    for name in ("records", "unowned-files", "file-accounting"):
        assert outcome[name].status == "failed", name
        assert NOTHING_EXAMINED in outcome[name].findings.codes(), name
    assert outcome["labels"].status == "failed"  # the image has none of the lock's labels
    # The lock sha256, the manifest sha256 and the base name (this lock has no base digest).
    assert outcome["labels"].examined and outcome["labels"].examined.count == 3
    assert not report.findings.passed
    # Nothing passed on nothing: every passed check examined something.
    assert all(o.examined and o.examined.count for o in report.outcomes if o.status == "passed")


def test_toolchain_values_are_examined_when_torch_reports_them() -> None:
    from releasekit.checks import examines
    from releasekit.provenance.checks.toolchain import ToolchainCheck

    torch = {"torch_present": True, "torch": "2.13.0+cpu", "cuda": None}
    got = examines(ToolchainCheck(), toolchain_context(torch, "2.13.0", None))
    assert got == Examined("values", ("torch=2.13.0",))
    unreadable = examines(ToolchainCheck(), toolchain_context({"torch_present": False}, "2.13.0", None))
    assert unreadable is not None and unreadable.count == 0
    assert unreadable.absent == "torch is not importable in the image, so torch cannot be read"


# --- the summary and the gate ---------------------------------------------------------------


def _summary_checks(release: Release, checks: list[dict]) -> None:
    path = release.evidence / "verification_summary.json"
    data = json.loads(path.read_text())
    data["predicate"]["releasekit"]["checks"] = checks
    path.write_text(json.dumps(data))


GOOD = [
    {
        "name": "records",
        "status": "passed",
        "passed": True,
        "findings": 0,
        "examined": "distributions",
        "count": 3,
    },
    {
        "name": "native-arches",
        "status": "not applicable",
        "passed": False,
        "findings": 0,
        "examined": "libraries",
        "count": 0,
        "reason": "no installed component is built for a CUDA arch",
    },
]


def test_the_gate_accepts_not_applicable_and_refuses_a_failed_or_unrun_check(tmp_path: Path) -> None:
    release = Release(tmp_path, IMAGE_ID)
    _summary_checks(release, GOOD)
    report = gate(release)
    assert report.passed, [f.render() for f in report.findings]
    for status in ("failed", "not run"):
        _summary_checks(
            release, [*GOOD, {"name": "toolchain", "status": status, "passed": False, "findings": 0}]
        )
        report = gate(release)
        assert codes(report) == ["PROVENANCE_NOT_VERIFIED"]
        assert f"toolchain ({status})" in next(
            f.message for f in report.findings if f.severity.value == "error"
        )


def test_the_summary_records_status_count_and_items(tmp_path: Path) -> None:
    from releasekit.checks import Outcome
    from releasekit.provenance.verify import outcome_record
    from releasekit.records.verification import MAX_EXAMINED_LISTED, CheckOutcome

    class Files:
        name = "file-accounting"
        codes = ("X",)

    many = Examined.of("files", (f"/f{i:03}" for i in range(120)))
    record = outcome_record(Outcome(Files(), "passed", Findings(), many))  # type: ignore[arg-type]
    assert (record.status, record.passed, record.examined, record.count) == ("passed", True, "files", 120)
    assert record.items == [f"/f{i:03}" for i in range(MAX_EXAMINED_LISTED)]
    absent = Examined.of("libraries", (), absent="no native component")
    na = outcome_record(Outcome(Files(), "not applicable", Findings(), absent, reason="no native component"))  # type: ignore[arg-type]
    assert (na.status, na.passed, na.count, na.reason) == ("not applicable", False, 0, "no native component")
    assert CheckOutcome.model_validate(json.loads(na.model_dump_json(by_alias=True))) == na
