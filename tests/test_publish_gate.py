"""The publish gate's rules on their own: real files on disk, no engine or registry needed."""

from __future__ import annotations

import json

from publish_support import IMAGE_ENV, IMAGE_ID, codes, facts, gate


def test_complete_evidence_passes_every_check(release):
    report = gate(release)
    assert report.passed, [f.render() for f in report.findings]
    assert all(check.passed for check in report.checks)
    assert sorted(r.cell for r in report.receipts) == ["tiny-tp1", "tiny-tp1-ngram"]


def test_an_optional_cell_without_receipt_is_not_a_finding(release):
    assert "tiny-optional" not in {f.location.cell for f in gate(release).findings}


def test_a_plan_check_that_claims_to_pass_while_listing_errors_fails(release):
    release.write_plan_check(errors=["PR_NOT_MERGED"], passed=True)
    assert "PLAN_CHECK_FAILED" in codes(gate(release))


def test_plan_check_warnings_do_not_block(release):
    release.write_plan_check(warnings=["NOTE"])
    assert gate(release).passed


def test_a_plan_check_that_names_no_lock_is_not_trusted(release):
    path = release.evidence / "plan-check.json"
    data = json.loads(path.read_text())
    data["lock_sha256"] = None
    path.write_text(json.dumps(data))
    assert codes(gate(release)) == ["PLAN_CHECK_WRONG_LOCK"]


def test_a_plan_check_with_a_renamed_field_is_unusable_not_read_as_none(release):
    path = release.evidence / "plan-check.json"
    data = json.loads(path.read_text())
    data["lock"] = data.pop("lock_sha256")
    path.write_text(json.dumps(data))
    report = gate(release)
    assert codes(report) == ["PLAN_CHECK_MISSING"]
    message = next(f.message for f in report.findings if f.code == "PLAN_CHECK_MISSING")
    assert "unknown field 'lock'" in message and "\n" not in message


def test_verification_summary_listing_errors_is_not_verified(release):
    path = release.evidence / "verification_summary.json"
    data = json.loads(path.read_text())
    data["predicate"]["releasekit"]["findings"] = [
        {"code": "LABEL_COMMIT_MISMATCH", "severity": "error", "message": "x"}
    ]
    path.write_text(json.dumps(data))
    assert codes(gate(release)) == ["PROVENANCE_NOT_VERIFIED"]


def test_a_summary_made_against_another_lock_is_refused(release):
    path = release.evidence / "verification_summary.json"
    data = json.loads(path.read_text())
    data["predicate"]["releasekit"]["lock_sha256"] = "6" * 64
    path.write_text(json.dumps(data))
    assert codes(gate(release)) == ["VERIFICATION_WRONG_LOCK"]


def test_provenance_changed_after_verification_is_refused(release):
    path = release.evidence / "provenance.intoto.json"
    path.write_text(path.read_text() + "\n")
    assert codes(gate(release)) == ["PROVENANCE_NOT_VERIFIED"]


def test_a_bare_summary_predicate_is_refused(release):
    """The summary is an in-toto Statement, signed or not: the bare predicate is not read."""
    path = release.evidence / "verification_summary.json"
    path.write_text(json.dumps(json.loads(path.read_text())["predicate"]))
    report = gate(release)
    assert codes(report) == ["VERIFICATION_MISSING"]
    assert "no '_type' field" in next(f.message for f in report.findings if f.code == "VERIFICATION_MISSING")


def test_a_summary_statement_about_another_image_is_refused(release):
    path = release.evidence / "verification_summary.json"
    data = json.loads(path.read_text())
    data["subject"][0]["digest"]["sha256"] = "5" * 64  # resourceUri still names the image
    path.write_text(json.dumps(data))
    assert codes(gate(release)) == ["VERIFICATION_WRONG_IMAGE"]


def test_provenance_about_another_image_is_refused(release):
    path = release.evidence / "provenance.intoto.json"
    data = json.loads(path.read_text())
    data["subject"][0]["digest"]["sha256"] = "5" * 64
    path.write_text(json.dumps(data))
    release.write_verification()  # verified as it now is: only the subject is wrong
    assert codes(gate(release)) == ["PROVENANCE_WRONG_IMAGE"]


def test_a_switch_the_image_sets_by_default_is_not_hidden(release):
    release.write_receipt("tiny-tp1", args=["--max-num-seqs", "8"], env={"PYTHONUNBUFFERED": "1"})
    assert gate(release).passed


def test_placement_env_is_not_a_switch(release):
    release.write_receipt("tiny-tp1", env={"CUDA_VISIBLE_DEVICES": "4,5,6,7"})
    assert gate(release).passed


def test_a_cell_env_used_by_another_cell_is_hidden_there(release):
    # tiny-tp1 declares VLLM_CPU_KVCACHE_SPACE; tiny-tp1-ngram does not.
    release.write_receipt("tiny-tp1-ngram", env={"VLLM_CPU_KVCACHE_SPACE": "1"})
    report = gate(release)
    hidden = [f for f in report.findings if f.code == "HIDDEN_SWITCH"]
    assert [(f.location.cell, "VLLM_CPU_KVCACHE_SPACE" in f.message) for f in hidden] == [
        ("tiny-tp1-ngram", True)
    ]


def test_a_forbidden_switch_baked_into_the_image_is_refused(release):
    image = facts(env={**IMAGE_ENV, "VLLM_DISABLE_SHARED_EXPERTS_STREAM": "1"})
    report = gate(release, image)
    assert "FORBIDDEN_SWITCH" in codes(report)
    assert any("stream-disabling" in f.message for f in report.findings)


def test_a_flaky_cell_is_reported_even_with_a_passing_rerun(release):
    release.write_receipt("tiny-tp1", passed=False, name="tiny-tp1-run1.json")
    assert codes(gate(release)) == ["RECEIPT_FAILED"]


def test_a_receipt_for_a_cell_not_in_the_matrix_is_a_warning(release):
    release.write_receipt("tiny-optional", name="tiny-optional.json")
    path = release.receipts / "tiny-optional.json"
    data = json.loads(path.read_text())
    data["cell_id"] = "retired-cell"
    path.write_text(json.dumps(data))
    report = gate(release)
    assert report.passed
    assert [f.code for f in report.findings] == ["RECEIPT_UNKNOWN_CELL"]


def test_a_manifest_changed_after_locking_is_refused(release):
    release.manifest.write_text(release.manifest.read_text() + "# edited after the lock\n")
    assert "LOCK_MANIFEST_MISMATCH" in codes(gate(release))


def test_legacy_receipts_of_todays_tool_are_understood(release):
    (release.receipts / "tiny-tp1.json").write_text(
        json.dumps(
            {
                "schema_version": 1,
                "status": "qualified",
                "cell": "tiny-tp1",
                "image_id": IMAGE_ID,
                "lock_sha256": release.lock_sha256,
                "runtime": {"env": {"VLLM_CPU_KVCACHE_SPACE": "1"}, "args": ["--enforce-eager"]},
            }
        )
    )
    assert gate(release).passed


def test_every_problem_is_reported_in_one_run(release):
    (release.evidence / "plan-check.json").unlink()
    release.write_verification(result="FAILED")
    (release.receipts / "tiny-tp1-ngram.json").unlink()
    report = gate(release)
    assert set(codes(report)) == {"PLAN_CHECK_MISSING", "PROVENANCE_NOT_VERIFIED", "RECEIPT_MISSING"}
    assert [c.passed for c in report.checks].count(False) == 3


def test_a_receipt_that_recorded_a_token_is_refused(release):
    release.write_receipt("tiny-tp1", env={"HF_TOKEN": "hf_abc"})
    report = gate(release)
    assert "CREDENTIAL_IN_RECEIPT" in codes(report)
    assert "hf_abc" not in report.model_dump_json()


def _emitted_codes() -> set[str]:
    """Every finding code the gate's check modules pass to ``Findings.add``, read from their source."""
    import ast
    from pathlib import Path

    import releasekit.publish.checks as checks

    found: set[str] = set()
    for path in sorted(Path(checks.__file__).parent.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "add"
                and node.args
            ):
                first = node.args[0]
                assert isinstance(first, ast.Constant) and isinstance(first.value, str), (
                    f"{path.name}:{node.lineno}: a finding code that is not a literal"
                )
                found.add(first.value)
    return found


def test_the_gate_codes_are_one_list_that_the_checks_declare_and_emit() -> None:
    from releasekit.publish.checks import all_checks
    from releasekit.publish.gate import FINDING_CODES

    declared = {code for check in all_checks() for code in check.codes}
    assert set(FINDING_CODES) == declared
    assert _emitted_codes() == declared
    assert all(FINDING_CODES.values())
