"""The test stage against the real Docker Engine and real git repositories.

One candidate and one baseline image (FROM the shared test base image, pytest installed
from wheels downloaded on the host) are built once for the module. The component's
repository (made here) holds the tests; its own copy of the package under test differs
from what the images ship, so a test that imported the checkout would be caught.
"""

from __future__ import annotations

import datetime as dt
import io
import json
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from cli_run import invoke
from forge import Forge
from plan_world import written_and_locked
from stable import assert_same_record, without_times

pytestmark = pytest.mark.docker

TESTS = """\
import os
import sys

import rkpkg


def test_ships_installed_code():
    assert "-packages" in rkpkg.__file__, rkpkg.__file__
    # A suite is the component's code (issue 43): it runs as nobody, with no capability.
    assert os.getuid() == 65534, os.getuid()
    with open("/proc/self/status") as status:
        assert "CapEff:\\t0000000000000000" in status.read()


def test_value_is_one():
    assert rkpkg.VALUE == 1


def test_not_broken():
    assert not rkpkg.BROKEN, "broken before this release"


def test_known_broken():
    assert not rkpkg.BROKEN, "also broken before this release"


def test_order_dependent():
    # Fails in the full run, passes when selected alone: flaky.
    assert any("::" in arg for arg in sys.argv)


def test_gpu_only():
    pass
"""

HANG = "import time\n\n\ndef test_hangs():\n    time.sleep(600)\n"

HOOKS = """\
repos:
  - repo: local
    hooks:
      - id: no-fixme
        name: no FIXME
        language: pygrep
        entry: FIXME
        files: '\\.py$'
  - repo: https://github.com/pre-commit/pre-commit-hooks
    rev: v4.6.0
    hooks:
      - id: end-of-file-fixer
"""

CLEAN_PR = {"pkg/clean.py": "VALUE = [1, 2]\n", "notes.txt": "fine\n"}
BAD_PR = {
    "pkg/unused.py": "import os\n",
    "pkg/fmt.py": "x = [1,2]\n",
    "notes.txt": "fine\ntrailing   \n",
    "pkg/todo.py": "VALUE = 1\n# FIXME: later\n",
}


def _context(files: dict[str, bytes]) -> io.BytesIO:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    buf.seek(0)
    return buf


def _image(client, base_id: str, wheels: Path, value: int, tag: str) -> str:
    files = {f"wheels/{w.name}": w.read_bytes() for w in wheels.glob("*.whl")}
    files["rkpkg/__init__.py"] = f"VALUE = {value}\nBROKEN = True\n".encode()
    files["Dockerfile"] = (
        f"FROM {base_id}\nCOPY wheels/ /tmp/w/\n"
        "RUN python3 -m pip install -q --break-system-packages --no-index /tmp/w/*.whl && rm -rf /tmp/w\n"
        "COPY rkpkg/ /tmp/rkpkg/\n"
        "RUN python3 -c \"import shutil, sysconfig; shutil.copytree('/tmp/rkpkg', sysconfig.get_paths()['purelib'] + '/rkpkg')\"\n"
    ).encode()
    image, _ = client.images.build(
        fileobj=_context(files), custom_context=True, tag=tag, rm=True, forcerm=True
    )
    return str(image.id)


@pytest.fixture(scope="module")
def images(docker_client, base_image, tmp_path_factory):
    wheels = tmp_path_factory.mktemp("wheels")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "-q",
            "-d",
            str(wheels),
            "--only-binary",
            ":all:",
            "--python-version",
            "3.11",
            "pytest",
        ],
        check=True,
        capture_output=True,
    )
    candidate = _image(
        docker_client, base_image.image_id, wheels, 2, "releasekit-test/test-stage-candidate:1"
    )
    baseline = _image(docker_client, base_image.image_id, wheels, 1, "releasekit-test/test-stage-baseline:1")
    return candidate, baseline


@pytest.fixture(scope="module")
def repo(tmp_path_factory) -> Forge:
    forge = Forge(tmp_path_factory.mktemp("forge") / "comp", "comp")
    forge.init(
        {
            "rkpkg/__init__.py": "VALUE = 99\nBROKEN = False\n",  # the checkout's copy: must not be what tests import
            "tests/__init__.py": "",
            "tests/test_suite.py": TESTS,
            "tests/test_hang.py": HANG,
            "pyproject.toml": "[tool.pytest.ini_options]\nmarkers = ['gpu']\n",
            ".pre-commit-config.yaml": HOOKS,
        }
    )
    forge.open_pr(1, [CLEAN_PR])
    forge.open_pr(2, [BAD_PR])
    return forge


def _ruff_version() -> str:
    return subprocess.run(["ruff", "--version"], capture_output=True, text=True, check=True).stdout.split()[
        -1
    ]


def _manifest(
    root: Path,
    repo: Forge,
    pr: int,
    suites: list[dict],
    *,
    hygiene_required: bool = True,
    base: str = "releasekit-test/none",
) -> tuple[Path, Path]:
    data = {
        "schema": "releasekit/v1",
        "name": "test-stage",
        "components": {
            "comp": {
                "kind": "git",
                "repo": repo.url,
                "canonical_branch": "main",
                "distribution": "rkpkg",
                "merge_plan": [{"pr": pr, "title": f"PR {pr}"}],
                "tests": suites,
                "hygiene": {
                    "scope": "changed",
                    "steps": ["ruff-check", "ruff-format", "git-diff-check", "pre-commit"],
                    "tools": {"ruff": _ruff_version(), "pre-commit": "4.6.2"},
                    "required": hygiene_required,
                },
            }
        },
        "toolchain": {
            "base_image": {"name": base, "digest": "to-be-locked"},
            "cuda_arch_list": ["12.0a"],
        },
    }
    root.mkdir(parents=True, exist_ok=True)
    return written_and_locked(root, data)


SUITES = [
    {
        "name": "mixed",
        "pytest": {"paths": ["tests/test_suite.py"], "k": "not gpu_only"},
        "timeout": 120,
        "expect": ["passed >= 1"],
    },
    {
        "name": "preexisting",
        "pytest": {"paths": ["tests/test_suite.py"], "k": "ships or known_broken or not_broken"},
        "timeout": 120,
        "allowlist": [
            {
                "test": "tests/test_suite.py::test_known_broken",
                "reason": "fails on unmodified main",
                "expires": "2099-01-01",
            },
            {
                "test": "tests/test_suite.py::test_ships_installed_code",
                "reason": "fixed since",
                "expires": "2099-01-01",
            },
        ],
    },
    {
        "name": "counts",
        "pytest": {"paths": ["tests/test_suite.py"], "k": "ships"},
        "timeout": 120,
        "expect": ["passed >= 366", "skipped == 0"],
    },
    {"name": "gpu", "pytest": {"paths": ["tests/test_suite.py"], "k": "gpu_only"}, "needs": {"gpus": 64}},
    {"name": "hang", "pytest": {"paths": ["tests/test_hang.py"]}, "timeout": 4},
]


@pytest.fixture(scope="module")
def suite_run(tmp_path_factory, images, repo):
    """One `releasekit test` run over all suites (through the CLI), its receipts read back."""
    root = tmp_path_factory.mktemp("release")
    manifest, lock = _manifest(root / "bad", repo, 2, SUITES)
    out = root / "out"
    candidate, baseline = images
    proc = invoke(
        "test",
        str(manifest),
        "--image",
        candidate,
        "--lock",
        str(lock),
        "--baseline-image",
        baseline,
        "-o",
        str(out),
        "--allow-local-repos",
        "--json",
    )
    receipts = {p.stem.split(".", 1)[1]: json.loads(p.read_text()) for p in (out / "tests").glob("*.json")}
    return proc, receipts, candidate, baseline


def _verdicts(receipt: dict) -> dict[str, str]:
    return {f["test"].split("::")[-1]: f["verdict"] for f in receipt["failures"]}


def test_regression_fails_the_gate_and_names_the_test(suite_run):
    proc, receipts, candidate, baseline = suite_run
    assert proc.returncode == 1, proc.stderr
    mixed = receipts["mixed"]
    assert mixed["status"] == "failed"
    assert mixed["image_id"] == candidate and mixed["baseline_image_id"] == baseline
    assert len(mixed["lock_sha256"]) == 64
    assert _verdicts(mixed) == {
        "test_value_is_one": "regression",
        "test_not_broken": "pre-existing",
        "test_known_broken": "pre-existing",
        "test_order_dependent": "flaky",
    }
    codes = {(f["code"], f["location"].get("path")) for f in mixed["findings"]["findings"]}
    assert ("TEST_REGRESSION", "tests/test_suite.py::test_value_is_one") in codes
    assert ("FLAKY_TEST", "tests/test_suite.py::test_order_dependent") in codes
    assert mixed["counts"] == {"passed": 1, "failed": 4, "skipped": 0, "errors": 0}
    # The checkout's rkpkg (VALUE = 99) was not what the tests imported.
    regression = next(f for f in mixed["failures"] if f["verdict"] == "regression")
    assert "assert 2 == 1" in regression["output"] and regression["baseline"]["outcome"] == "passed"


def test_pre_existing_failure_passes_with_both_results(suite_run):
    _, receipts, candidate, baseline = suite_run
    pre = receipts["preexisting"]
    assert pre["status"] == "passed", pre["findings"]
    failures = {f["test"].split("::")[-1]: f for f in pre["failures"]}
    assert set(failures) == {"test_not_broken", "test_known_broken"}
    known = failures["test_known_broken"]
    assert known["verdict"] == "pre-existing" and known["allowlist_reason"] == "fails on unmodified main"
    assert (
        known["candidate_rerun"]["image_id"] == candidate and known["candidate_rerun"]["outcome"] == "failed"
    )
    assert known["baseline"]["image_id"] == baseline and known["baseline"]["outcome"] == "failed"
    assert "also broken before this release" in known["baseline"]["output"]
    codes = [(f["code"], f["severity"]) for f in pre["findings"]["findings"]]
    # An allowlist entry whose test passes is reported so it can be removed.
    assert ("ALLOWLIST_STALE", "warning") in codes and ("PRE_EXISTING_FAILURE", "warning") in codes


def test_count_rule_fails_when_fewer_pass(suite_run):
    _, receipts, _, _ = suite_run
    counts = receipts["counts"]
    assert counts["status"] == "failed" and counts["counts"]["passed"] == 1
    assert [(r["rule"], r["actual"], r["ok"]) for r in counts["expected"]] == [
        ("passed >= 366", 1, False),
        ("skipped == 0", 0, True),
    ]
    assert [f["code"] for f in counts["findings"]["findings"]] == ["COUNT_RULE_FAILED"]


def test_gpu_suite_is_skipped_with_its_reason(suite_run):
    _, receipts, _, _ = suite_run
    gpu = receipts["gpu"]
    assert gpu["status"] == "skipped" and "needs 64 GPU(s)" in gpu["skip_reason"]
    assert gpu["counts"]["passed"] == 0 and gpu["run"]["exit_code"] is None
    assert [f["code"] for f in gpu["findings"]["findings"]] == ["SUITE_SKIPPED"]


def test_hanging_suite_is_killed_at_its_timeout(suite_run):
    _, receipts, _, _ = suite_run
    hang = receipts["hang"]
    assert hang["status"] == "timed-out" and hang["run"]["timed_out"] is True
    assert hang["run"]["seconds"] < 60
    assert [f["code"] for f in hang["findings"]["findings"]] == ["SUITE_TIMED_OUT"]


def test_a_suite_run_again_writes_the_same_receipt_apart_from_its_times(suite_run, tmp_path):
    """Byte-stable (issue 22): the module's run of the suite with reruns on both images, once more."""
    proc, receipts, candidate, baseline = suite_run
    args = list(proc.args)
    manifest, lock = args[args.index("test") + 1], args[args.index("--lock") + 1]
    again = invoke(
        "test",
        manifest,
        "--image",
        candidate,
        "--lock",
        lock,
        "--baseline-image",
        baseline,
        "--suite",
        "preexisting",
        "-o",
        str(tmp_path),
        "--allow-local-repos",
    )
    assert again.returncode == 0, again.stdout + again.stderr
    first = json.dumps(receipts["preexisting"]).encode()
    second = (tmp_path / "tests" / "comp.preexisting.json").read_bytes()
    assert receipts["preexisting"]["failures"]  # reruns on both images: the richest receipt
    assert without_times(first, "test receipt") == without_times(second, "test receipt")


def test_receipts_are_typed_records(suite_run, tmp_path):
    from releasekit.errors import InputError
    from releasekit.records.test_receipt import TestReceipt, read_test_receipt

    proc, receipts, _, _ = suite_run
    out = json.loads(proc.stdout)
    assert not out["passed"] and len(out["receipts"]) == len(SUITES)
    path = tmp_path / "r.json"
    path.write_text(json.dumps(receipts["mixed"]))
    assert isinstance(read_test_receipt(path), TestReceipt)
    path.write_text(json.dumps({**receipts["mixed"], "surprise": 1}))
    with pytest.raises(
        InputError, match=r"not a valid releasekit.test-receipt/v1 file: unknown field 'surprise'"
    ):
        read_test_receipt(path)


def test_expired_allowlist_entry_is_a_finding():
    from releasekit.manifest.testing import TestSuite
    from releasekit.records.test_receipt import FailedTest, TestReceipt
    from releasekit.suites.checks.allowlist import AllowlistCheck
    from releasekit.suites.context import SuiteContext

    suite = TestSuite.model_validate(
        {
            "name": "s",
            "pytest": {"paths": ["t"]},
            "allowlist": [{"test": "t.py::a", "reason": "r", "expires": "2020-01-01"}],
        }
    )
    receipt = TestReceipt(
        component="c",
        suite="s",
        status="passed",
        image="i",
        started_at="now",
        failures=[FailedTest(test="t.py::a", outcome="failed", verdict="pre-existing")],
    )
    found = AllowlistCheck().run(SuiteContext("c", suite, receipt, dt.date(2026, 1, 1)))
    assert [(f.code, f.severity.value) for f in found] == [("ALLOWLIST_EXPIRED", "error")]


# --- hygiene ------------------------------------------------------------------------------------


def _hygiene(
    root: Path, repo: Forge, pr: int, base: str, *, required: bool = True
) -> tuple[subprocess.CompletedProcess, dict]:
    """``hygiene`` on the PR's composed tree; the hooks run in a sandbox of ``base`` (issue 43)."""
    manifest, lock = _manifest(root, repo, pr, [], hygiene_required=required, base=base)
    proc = invoke(
        "hygiene", str(manifest), "--lock", str(lock), "-o", str(root / "out"), "--allow-local-repos"
    )
    return proc, json.loads((root / "out" / "hygiene.json").read_text())


def test_hygiene_reports_each_planted_problem_at_file_line(tmp_path, repo, base_image):
    proc, receipt = _hygiene(tmp_path, repo, 2, base_image.name)
    assert proc.returncode == 1, proc.stderr
    # Byte-stable (issue 22): a second run on the same inputs writes the same hygiene.json.
    (tmp_path / "again").mkdir()
    again, _ = _hygiene(tmp_path / "again", repo, 2, base_image.name)
    assert again.returncode == 1, again.stderr
    assert_same_record(tmp_path / "out" / "hygiene.json", tmp_path / "again" / "out" / "hygiene.json")
    spots = {
        (f["code"], f["location"].get("file"), f["location"].get("line"))
        for f in receipt["findings"]["findings"]
        if f["severity"] == "error"
    }
    assert spots == {
        ("RUFF", "pkg/unused.py", 1),
        ("RUFF_FORMAT", "pkg/fmt.py", 1),
        ("WHITESPACE_ERROR", "notes.txt", 2),
        ("HOOK_FAILED", "pkg/todo.py", 2),
    }
    assert "pkg/todo.py:2" in proc.stdout
    assert {s["step"]: s["status"] for s in receipt["components"][0]["steps"]} == {
        "ruff-check": "failed",
        "ruff-format": "failed",
        "git-diff-check": "failed",
        "pre-commit": "failed",
    }


def test_hygiene_not_required_reports_the_same_problems_as_warnings_and_exits_0(tmp_path, repo, base_image):
    """`required: false`: the receipt keeps what the tools found (status failed), the command shows
    warnings and exits 0, so a workflow step running it goes on (the release workflow's test job
    stopped at the demo's planted whitespace under act); the publish gate judges it the same way."""
    proc, receipt = _hygiene(tmp_path, repo, 2, base_image.name, required=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert receipt["status"] == "failed"
    assert {f["code"] for f in receipt["findings"]["findings"] if f["severity"] == "error"} >= {"RUFF"}
    assert "warning RUFF" in proc.stdout and "error RUFF" not in proc.stdout
    assert "no component whose hygiene is required failed" in proc.stdout


def test_hygiene_clean_tree_has_no_findings_and_network_hooks_are_not_passed(tmp_path, repo, base_image):
    proc, receipt = _hygiene(tmp_path, repo, 1, base_image.name)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert receipt["status"] == "incomplete"
    findings = receipt["findings"]["findings"]
    assert [(f["code"], f["severity"]) for f in findings] == [("HOOK_NOT_RUNNABLE", "warning")]
    assert "end-of-file-fixer" in findings[0]["message"]
    comp = receipt["components"][0]
    assert comp["files"] == ["notes.txt", "pkg/clean.py"]
    assert {s["step"]: s["status"] for s in comp["steps"]} == {
        "ruff-check": "passed",
        "ruff-format": "passed",
        "git-diff-check": "passed",
        "pre-commit": "not-runnable",
    }
