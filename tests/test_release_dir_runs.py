"""One run per release directory (issue 44), without Docker: the readers refuse records of two runs,
a stage's commit replaces the later stages' records, and an interrupt is one line and exit 130.

The kills and interrupts of real builds, verifications, stagings and publishes are in
tests/test_crash_concurrency.py (Docker, a registry).
"""

from __future__ import annotations

import hashlib
import signal
import subprocess
import time
from pathlib import Path

import pytest
from cli_run import invoke, start_cli
from publish_support import Release, publish_args
from records_support import notes_build_record

from releasekit.atomic import abandon_run, begin_run, commit_run
from releasekit.records.base import write_record
from releasekit.records.release_dir import STAGE_FILES, refuse_mixed_runs, replaced_by
from releasekit.records.staging import StagingRecord

IMAGE = "sha256:" + "5" * 64
OTHER = "sha256:" + "6" * 64


def _build_json(release: Release, image_id: str) -> Path:
    record = notes_build_record("pubtest").model_copy(
        update={"image_id": image_id, "lock_sha256": release.lock_sha256}
    )
    path = release.evidence / "build.json"
    write_record(record, path)
    return path


def _staging_json(release: Release, image_id: str, summary_sha256: str) -> Path:
    record = StagingRecord(
        image_id=image_id,
        lock_sha256=release.lock_sha256,
        registry="127.0.0.1:9",
        repository="team/staging",
        digest="sha256:" + "3" * 64,
        tag="lock-" + release.lock_sha256,
        media_type="application/vnd.oci.image.manifest.v1+json",
        verification_summary_sha256=summary_sha256,
    )
    path = release.evidence / "staging.json"
    write_record(record, path)
    return path


def _one_line(run: subprocess.CompletedProcess[str], *names: str) -> str:
    assert run.returncode == 2, run.stdout + run.stderr
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1, run.stderr
    assert "records of two runs" in lines[0], lines[0]
    for name in names:
        assert name in lines[0], lines[0]
    return lines[0]


def test_stage_refuses_a_summary_left_beside_a_later_build(tmp_path):
    """The issue's directory: a rebuild's build.json (another image) beside the earlier run's PASSED
    summary. Before the fix stage went on to the engine with the summary's image."""
    release = Release(tmp_path, IMAGE)  # its verification summary says PASSED for IMAGE
    _build_json(release, OTHER)
    run = invoke(
        "stage",
        "--image",
        IMAGE,
        "--lock",
        str(release.lock),
        "--manifest",
        str(release.manifest),
        "--staging",
        "127.0.0.1:9/team/staging",
        env={"DOCKER_HOST": "unix:///nonexistent.sock"},
    )
    line = _one_line(run, "verification_summary.json", "build.json", IMAGE[:19], OTHER[:19])
    assert "rerun the stage that wrote verification_summary.json" in line
    assert not (release.evidence / "staging.json").exists()


def test_publish_refuses_a_staging_json_of_an_older_summary(tmp_path):
    release = Release(tmp_path, IMAGE)
    _build_json(release, IMAGE)
    _staging_json(release, IMAGE, "7" * 64)  # staged before verify-provenance ran again
    run = invoke(
        *publish_args(release, IMAGE, "127.0.0.1:9/team/release", "v1"),
        env={"DOCKER_HOST": "unix:///nonexistent.sock"},
    )
    _one_line(run, "staging.json", "verification_summary.json", "7" * 12)
    assert not (release.evidence / "published").exists()


def test_the_records_of_one_run_pass_and_a_foreign_lock_is_refused(tmp_path):
    release = Release(tmp_path, IMAGE)
    _build_json(release, IMAGE)
    summary = (release.evidence / "verification_summary.json").read_bytes()
    _staging_json(release, IMAGE, hashlib.sha256(summary).hexdigest())
    refuse_mixed_runs(release.evidence)  # one run: nothing to say
    record = notes_build_record("pubtest").model_copy(update={"image_id": IMAGE, "lock_sha256": "9" * 64})
    write_record(record, release.evidence / "build.json")
    with pytest.raises(
        Exception, match=r"records of two runs: verification_summary\.json .* lock 999999999999"
    ):
        refuse_mixed_runs(release.evidence)


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _earlier_run(directory: Path) -> dict[str, bytes]:
    """Every stage's files of an earlier run (their bytes name the run), and a test receipt."""
    for stage, names in STAGE_FILES.items():
        for name in names:
            path = directory / name / "publish.json" if name == "published" else directory / name
            if name in ("archive", "wheels", "logs"):
                path = directory / name / "old.txt"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(f"earlier {stage}\n")
    (directory / "tests").mkdir()
    (directory / "tests" / "runtime.unit.json").write_text("a receipt of its own image\n")
    return _tree(directory)


def test_a_commit_replaces_its_own_files_and_the_later_stages_records_in_one_step(tmp_path):
    directory = tmp_path / "release"
    directory.mkdir()
    before = _earlier_run(directory)
    # A run that fails before its commit leaves the directory as it was.
    work = begin_run(directory, "verify-provenance")
    (work / "verification_summary.json").write_text("half\n")
    abandon_run(work)
    assert _tree(directory) == before
    assert sorted(p.name for p in directory.iterdir() if p.name.startswith(".")) == []
    # A build that commits: its files, and nothing of the later stages' earlier run.
    work = begin_run(directory, "build")
    (work / "build.json").write_text("new build\n")
    (work / "wheels").mkdir()
    (work / "wheels" / "x.whl").write_text("new wheel\n")
    commit_run(work, directory, remove=replaced_by("build"), last="build.json")
    after = _tree(directory)
    assert after == {
        "build.json": b"new build\n",
        "wheels/x.whl": b"new wheel\n",
        "tests/runtime.unit.json": b"a receipt of its own image\n",  # judged by its image and lock
    }


def test_a_work_directory_a_killed_run_left_is_removed_by_the_next_run(tmp_path):
    directory = tmp_path / "release"
    directory.mkdir()
    left = directory / ".build-run.999999999.abcd.tmp"  # no such pid
    (left / "wheels").mkdir(parents=True)
    work = begin_run(directory, "build")
    assert not left.exists() and work.is_dir()


def test_an_interrupt_is_one_line_and_exit_130(tmp_path):
    """The process is the subject (a signal it receives): ``start_cli``. Paused in its first write,
    then interrupted (Ctrl-C): before the fix it exited 130 with no line at all (typer turned the
    KeyboardInterrupt into a silent exit 130)."""
    release = Release(tmp_path, IMAGE)  # two validation receipts to aggregate
    out = tmp_path / "report"
    env = {"RELEASEKIT_TEST_PAUSE_AT": "release-partial:*.png", "RELEASEKIT_TEST_PAUSE_S": "60"}
    proc = start_cli("validate", "aggregate", str(release.receipts), "-o", str(out), env=env)
    deadline = time.monotonic() + 30
    while not any(out.glob(".*.tmp")) and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.02)
    assert any(out.glob(".*.tmp")), "the command never reached its first write"
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 130, stderr
    assert stderr.splitlines() == ["releasekit: interrupted during validate aggregate; nothing written"]
    assert list(out.iterdir()) == []  # the half-written file went with it


def test_an_interrupt_after_a_write_names_what_it_kept(tmp_path):
    """The process is the subject (a signal it receives): ``start_cli``. The plots were written when
    the report was stopped (SIGTERM, as a cancelled job is): the line says so rather than "nothing
    written". Before the fix SIGTERM killed the process with no line and no clean-up."""
    release = Release(tmp_path, IMAGE)
    out = tmp_path / "report"
    env = {"RELEASEKIT_TEST_PAUSE_AT": "release-partial:REPORT.md", "RELEASEKIT_TEST_PAUSE_S": "60"}
    proc = start_cli("validate", "aggregate", str(release.receipts), "-o", str(out), env=env)
    deadline = time.monotonic() + 30
    while not any(out.glob(".REPORT.md.*.tmp")) and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.02)
    proc.send_signal(signal.SIGTERM)
    _, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 130, stderr
    assert stderr.splitlines() == [
        f"releasekit: interrupted during validate aggregate; kept what it had written: {out / 'gates.png'}"
    ]
    assert sorted(p.name for p in out.iterdir()) == ["gates.png"]
