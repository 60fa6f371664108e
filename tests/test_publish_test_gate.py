"""The publish gate's test and hygiene rules: the test stage's records on disk, judged for this image and lock."""

from __future__ import annotations

import json

import pytest
from publish_support import IMAGE_ID, MANIFEST, Release, codes, gate

from releasekit.findings import Findings, Severity
from releasekit.publish.attachments import FetchedAttachments
from releasekit.records.base import write_record
from releasekit.records.test_receipt import (
    CountRuleResult,
    Counts,
    FailedTest,
    HygieneComponent,
    HygieneReceipt,
    HygieneStepResult,
    RunEvidence,
    TestReceipt,
)

TESTS = """\
    tests:
      - name: unit
        pytest: {paths: [tests/unit]}
        expect: ["passed >= 3"]
      - name: gpu
        pytest: {paths: [tests/gpu]}
        needs: {gpus: 2}
        required: %s
    hygiene:
      scope: all
      steps: [git-diff-check, pre-commit]
      tools: {pre-commit: "4.6.2"}
      required: %s
"""


def manifest_with_tests(gpu_required: bool = True, hygiene_required: bool = True) -> str:
    anchor = "    canonical_branch: main\n"
    block = TESTS % ("true" if gpu_required else "false", "true" if hygiene_required else "false")
    return MANIFEST.replace(anchor, anchor + block, 1)


class TestRelease(Release):
    __test__ = False

    def test_receipt(self, suite: str, **update: object) -> TestReceipt:
        fields: dict[str, object] = dict(
            component="tiny",
            suite=suite,
            status="passed",
            image="candidate",
            image_id=self.image_id,
            lock_sha256=self.lock_sha256,
            started_at="2026-12-02T00:00:00Z",
            counts=Counts(passed=3),
        )
        fields.update(update)
        receipt = TestReceipt.model_validate(fields)
        write_record(receipt, self.evidence / "tests" / f"tiny.{suite}.json")
        return receipt

    def hygiene(
        self, *statuses: str, lock_sha256: str | None = None, findings: Findings | None = None
    ) -> None:
        steps = [
            HygieneStepResult(step=step, status=status)  # type: ignore[arg-type]
            for step, status in zip(
                ["git-diff-check", "pre-commit"], statuses or ("passed", "passed"), strict=False
            )
        ]
        overall = (
            "failed"
            if "failed" in statuses
            else ("incomplete" if any(s != "passed" for s in statuses) else "passed")
        )
        receipt = HygieneReceipt(
            status=overall,
            lock_sha256=lock_sha256 or self.lock_sha256,
            findings=findings or Findings(),  # type: ignore[arg-type]
            components=[
                HygieneComponent(
                    component="tiny",
                    repo="https://example.invalid/tiny.git",
                    base="a" * 40,
                    composed_commit="a" * 40,
                    composed_tree="b" * 40,
                    scope="all",
                    steps=steps,
                )
            ],
        )
        write_record(receipt, self.evidence / "hygiene.json")

    def all_green(self) -> None:
        self.test_receipt("unit")
        self.test_receipt("gpu")
        self.hygiene("passed", "passed")


def release_with(tmp_path, **kw: bool) -> TestRelease:
    return TestRelease(tmp_path, IMAGE_ID, manifest_text=manifest_with_tests(**kw))


def messages(report, code: str) -> list[str]:
    return [f.message for f in report.findings if f.code == code]


def test_a_manifest_without_tests_requires_no_test_receipts(tmp_path):
    release = TestRelease(tmp_path, IMAGE_ID)
    # A stray receipt the manifest does not ask for is reported, never required.
    release.test_receipt("unit", status="failed")
    report = gate(release)
    assert report.passed, [f.render() for f in report.findings]
    assert [f.code for f in report.findings] == ["TEST_RECEIPT_UNKNOWN_SUITE"]


def test_passed_suites_and_hygiene_pass_the_gate(tmp_path):
    release = release_with(tmp_path)
    release.all_green()
    report = gate(release)
    assert report.passed, [f.render() for f in report.findings]
    assert {c.name for c in report.checks if c.passed} >= {
        "every required test suite passed in this image",
        "source hygiene passed on the composed tree of this lock",
    }


def test_required_suites_and_hygiene_without_records_fail(tmp_path):
    report = gate(release_with(tmp_path))
    assert codes(report) == ["TEST_RECEIPT_MISSING", "TEST_RECEIPT_MISSING", "HYGIENE_MISSING"]


def test_a_regression_fails_the_gate_and_names_the_test(tmp_path):
    release = release_with(tmp_path)
    release.all_green()
    release.test_receipt(
        "unit",
        status="failed",
        counts=Counts(passed=3, failed=1),
        failures=[
            FailedTest(
                test="tests/unit/test_a.py::test_new",
                outcome="failed",
                verdict="regression",
                baseline=RunEvidence(image_id="sha256:" + "b" * 64, outcome="passed"),
            )
        ],
    )
    report = gate(release)
    assert codes(report) == ["TEST_SUITE_FAILED"]
    assert "regression: tests/unit/test_a.py::test_new" in messages(report, "TEST_SUITE_FAILED")[0]


def test_a_pre_existing_failure_is_accepted_as_the_receipt_says(tmp_path):
    release = release_with(tmp_path)
    release.all_green()
    release.test_receipt(
        "unit",
        counts=Counts(passed=3, failed=1),
        failures=[
            FailedTest(
                test="tests/unit/test_a.py::test_old",
                outcome="failed",
                verdict="pre-existing",
                candidate_rerun=RunEvidence(image_id=IMAGE_ID, outcome="failed"),
                baseline=RunEvidence(image_id="sha256:" + "b" * 64, outcome="failed"),
            )
        ],
    )
    assert gate(release).passed


def test_a_receipt_that_says_passed_while_listing_a_regression_is_not_trusted(tmp_path):
    release = release_with(tmp_path)
    release.all_green()
    release.test_receipt("unit", failures=[FailedTest(test="t::x", outcome="failed", verdict="unjudged")])
    assert codes(gate(release)) == ["TEST_SUITE_FAILED"]


def test_an_unmet_count_rule_fails_the_suite(tmp_path):
    release = release_with(tmp_path)
    release.all_green()
    release.test_receipt("unit", expected=[CountRuleResult(rule="passed >= 3", actual=2, ok=False)])
    report = gate(release)
    assert codes(report) == ["TEST_SUITE_FAILED"]
    assert "count rule 'passed >= 3' not met (actual 2)" in messages(report, "TEST_SUITE_FAILED")[0]


def test_a_receipt_for_another_image_or_lock_does_not_count(tmp_path):
    release = release_with(tmp_path)
    release.all_green()
    release.test_receipt("unit", image_id="sha256:" + "9" * 64)
    assert codes(gate(release)) == ["TEST_RECEIPT_FOR_OTHER_IMAGE", "TEST_RECEIPT_MISSING"]
    release.test_receipt("unit", lock_sha256=None)
    report = gate(release)
    assert codes(report) == ["TEST_RECEIPT_FOR_OTHER_LOCK", "TEST_RECEIPT_MISSING"]
    assert "no lock" in messages(report, "TEST_RECEIPT_FOR_OTHER_LOCK")[0]


def test_a_required_suite_skipped_for_want_of_gpus_fails_the_gate(tmp_path):
    release = release_with(tmp_path)
    release.all_green()
    release.test_receipt(
        "gpu", status="skipped", skip_reason="needs 2 GPU(s); this host has 0", counts=Counts()
    )
    report = gate(release)
    assert codes(report) == ["TEST_SUITE_SKIPPED"]
    assert "needs 2 GPU(s); this host has 0" in messages(report, "TEST_SUITE_SKIPPED")[0]
    assert "required: false" in messages(report, "TEST_SUITE_SKIPPED")[0]


def test_a_suite_marked_not_required_is_reported_but_does_not_block(tmp_path):
    release = release_with(tmp_path, gpu_required=False)
    release.all_green()
    release.test_receipt(
        "gpu", status="skipped", skip_reason="needs 2 GPU(s); this host has 0", counts=Counts()
    )
    report = gate(release)
    assert report.passed
    skipped = [f for f in report.findings if f.code == "TEST_SUITE_SKIPPED"]
    assert [f.severity for f in skipped] == [Severity.warning]
    (release.evidence / "tests" / "tiny.gpu.json").unlink()
    assert gate(release).passed  # not required: no receipt at all is fine too


def test_an_unreadable_test_receipt_is_a_finding_not_a_crash(tmp_path):
    release = release_with(tmp_path)
    release.all_green()
    path = release.evidence / "tests" / "tiny.unit.json"
    data = json.loads(path.read_text())
    data["surprise"] = 1
    path.write_text(json.dumps(data))
    report = gate(release)
    assert codes(report) == ["TEST_RECEIPT_INVALID", "TEST_RECEIPT_MISSING"]
    assert "surprise" in messages(report, "TEST_RECEIPT_INVALID")[0]


def test_hygiene_findings_fail_with_file_and_line(tmp_path):
    release = release_with(tmp_path)
    release.all_green()
    found = Findings()
    found.add(
        "WHITESPACE_ERROR", "trailing whitespace", component="tiny", file="tests/fixtures/data.py", line=3
    )
    release.hygiene("failed", "passed", findings=found)
    report = gate(release)
    assert codes(report) == ["HYGIENE_FAILED"]
    assert "tests/fixtures/data.py:3" in messages(report, "HYGIENE_FAILED")[0]


def test_hooks_not_runnable_here_are_incomplete_never_passed(tmp_path):
    release = release_with(tmp_path)
    release.all_green()
    release.hygiene("passed", "not-runnable")
    assert codes(gate(release)) == ["HYGIENE_INCOMPLETE"]
    release.hygiene("passed")  # the manifest's pre-commit step is not in the receipt at all
    report = gate(release)
    assert codes(report) == ["HYGIENE_INCOMPLETE"]
    assert "pre-commit not run" in messages(report, "HYGIENE_INCOMPLETE")[0]


def test_hygiene_of_another_lock_does_not_count(tmp_path):
    release = release_with(tmp_path)
    release.all_green()
    release.hygiene("passed", "passed", lock_sha256="f" * 64)
    assert codes(gate(release)) == ["HYGIENE_WRONG_LOCK"]


def test_hygiene_not_required_reports_warnings(tmp_path):
    release = release_with(tmp_path, hygiene_required=False)
    release.all_green()
    release.hygiene("failed", "not-runnable")
    report = gate(release)
    assert report.passed
    assert sorted(f.code for f in report.findings) == ["HYGIENE_FAILED", "HYGIENE_INCOMPLETE"]
    (release.evidence / "hygiene.json").unlink()
    assert [f.severity for f in gate(release).findings if f.code == "HYGIENE_MISSING"] == [Severity.warning]


@pytest.mark.parametrize("broken", ["not json", json.dumps({"schema": "releasekit.hygiene/v1"})])
def test_an_unusable_hygiene_file_is_a_finding(tmp_path, broken):
    release = release_with(tmp_path)
    release.all_green()
    (release.evidence / "hygiene.json").write_text(broken)
    assert codes(gate(release)) in (["HYGIENE_MISSING"], ["HYGIENE_INVALID"])


def test_attached_test_records_come_back_as_the_same_evidence(tmp_path):
    """promote runs the gate on the attachments: the test and hygiene records travel with them."""
    release = release_with(tmp_path)
    release.all_green()
    files = {f"tests/{p.name}": p.read_text() for p in (release.evidence / "tests").glob("*.json")}
    files["hygiene.json"] = (release.evidence / "hygiene.json").read_text()
    evidence = FetchedAttachments(digest="sha256:" + "c" * 64, files=files).evidence()
    assert sorted(e.path for e in evidence.test_receipts) == [
        "attached:tests/tiny.gpu.json",
        "attached:tests/tiny.unit.json",
    ]
    assert evidence.hygiene is not None and evidence.hygiene.ok


def test_release_notes_show_the_counts_next_to_the_plans_stated_counts(tmp_path):
    from releasekit.manifest import load_manifest
    from releasekit.publish.evidence import load_evidence
    from releasekit.publish.gate import policy_from_manifest
    from releasekit.publish.notes import release_notes

    release = release_with(tmp_path, gpu_required=False)
    release.all_green()
    release.test_receipt(
        "unit",
        counts=Counts(passed=3, failed=1),
        expected=[CountRuleResult(rule="passed >= 3", actual=3, ok=True)],
        failures=[
            FailedTest(test="tests/unit/test_a.py::test_old", outcome="failed", verdict="pre-existing")
        ],
    )
    release.test_receipt(
        "gpu", status="skipped", skip_reason="needs 2 GPU(s); this host has 0", counts=Counts()
    )
    report = gate(release)
    evidence = load_evidence(release.evidence, release.receipts)
    notes = release_notes(
        build_notes=None,
        report=report,
        policy=policy_from_manifest(load_manifest(release.manifest).manifest),
        repository="r/x",
        digest="sha256:" + "d" * 64,
        tags=["beta"],
        evidence=evidence,
    )
    assert (
        "| tiny/unit | passed | 3 passed, 1 failed, 0 errors, 0 skipped | passed >= 3: 3 ok | 1 pre-existing |"
        in notes
    )
    assert "| tiny/gpu | skipped: needs 2 GPU(s); this host has 0 (optional) |" in notes
    assert "| tiny | git-diff-check passed, pre-commit passed |" in notes
    # Without tests: or hygiene: in the manifest the notes have no tests section.
    plain = TestRelease(tmp_path / "plain", IMAGE_ID)
    policy = policy_from_manifest(load_manifest(plain.manifest).manifest)
    text = release_notes(
        build_notes=None,
        report=gate(plain),
        policy=policy,
        repository="r/x",
        digest="sha256:" + "d" * 64,
        tags=["beta"],
        evidence=load_evidence(plain.evidence, plain.receipts),
    )
    assert "## Tests" not in text


def test_the_validation_report_lists_the_suites_with_the_stated_counts(tmp_path):
    from releasekit.validate.report import aggregate_directory, markdown

    release = release_with(tmp_path)
    release.test_receipt(
        "unit", counts=Counts(passed=2), expected=[CountRuleResult(rule="passed >= 3", actual=2, ok=False)]
    )
    receipts = tmp_path / "out" / "receipts"
    receipts.mkdir()
    agg = aggregate_directory(receipts, None)  # tests/ beside receipts/ in the release directory
    assert [(s.component, s.suite, s.stated) for s in agg.suites] == [
        ("tiny", "unit", "passed >= 3: 2 NOT MET")
    ]
    text = markdown(agg, [], [])
    assert (
        "| tiny/unit | passed | 2 passed, 0 failed, 0 errors, 0 skipped | passed >= 3: 2 NOT MET | - |"
        in text
    )


def test_the_release_workflow_hands_the_test_records_to_the_publish_gate():
    from pathlib import Path

    from ruamel.yaml import YAML

    workflow = Path(__file__).resolve().parent.parent / ".github" / "workflows" / "release.yml"
    jobs = YAML(typ="safe").load(workflow.read_text(encoding="utf-8"))["jobs"]
    uploads = [s for s in jobs["test"]["steps"] if s.get("with", {}).get("name") == "test-evidence"]
    assert (
        uploads and "/tests/" in uploads[0]["with"]["path"] and "hygiene.json" in uploads[0]["with"]["path"]
    )
    downloads = [s for s in jobs["publish"]["steps"] if s.get("with", {}).get("name") == "test-evidence"]
    # Into the evidence directory the publish step passes as --evidence.
    assert downloads and downloads[0]["with"]["path"] == "${{ env.OUT }}"
    assert any('--evidence "$OUT"' in s.get("run", "") for s in jobs["publish"]["steps"])
