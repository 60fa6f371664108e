"""verify-provenance against an attacker who prepared the release directory itself (issue 27).

A FIFO named like a wheel, links planted where the verifier writes, a 1 GiB ``build.json``
and sparse wheels of 9 and 7 GiB: each is built for real in a copy of a real release directory
(``releasekit demo`` up to ``build``) and run through the real CLI in a subprocess. Each must end
in one line on stderr and exit 2 (or, for a stale temp-file link, a normal run), fast, in bounded
memory, and with the file outside the release directory unchanged.
"""

from __future__ import annotations

import os
import shutil
import signal
from pathlib import Path

import pytest
from crash_support import (
    assert_interrupted,
    interrupt_after,
    plant_later_records,
    remove_leftover_containers,
    run_tree,
    work_dirs,
)
from crash_support import run as crash_run
from demo_release import DemoBuild
from release_dir_child import Run, verify_in_child

pytestmark = [pytest.mark.docker, pytest.mark.slow]

GIB = 1 << 30
VICTIM_TEXT = "a file outside the release directory\n"


def _copy(rel: DemoBuild, tmp_path: Path) -> Path:
    copy = tmp_path / "release"
    shutil.copytree(rel.artifacts, copy)
    for stale in copy.glob("verification_summary*"):
        stale.unlink()
    return copy


def _wheel(release_dir: Path, stem: str) -> Path:
    (found,) = sorted((release_dir / "wheels").glob(f"{stem}-*.whl"))
    return found


def _refused(run: Run, *fragments: str) -> None:
    assert run.code == 2, f"exit {run.code}\n{run.stdout[-2000:]}\n{run.stderr}"
    assert len(run.lines) == 1, run.stderr
    for fragment in fragments:
        assert fragment in run.lines[0], run.lines[0]


@pytest.mark.parametrize("target", ["wheel", "build.json", "provenance.intoto.json"])
def test_a_fifo_is_refused_not_opened(demo_build, tmp_path, target):
    # Opening a FIFO for reading blocks until a writer comes: before the fix, forever (past --deadline).
    copy = _copy(demo_build, tmp_path)
    path = _wheel(copy, "rkdemo_kernels") if target == "wheel" else copy / target
    path.unlink()
    os.mkfifo(path)
    run = verify_in_child(demo_build, copy, timeout=20)
    _refused(run, str(path), "FIFO")
    assert run.seconds < 20


def test_a_wheel_linked_to_a_device_outside_is_refused(demo_build, tmp_path):
    copy = _copy(demo_build, tmp_path)
    wheel = _wheel(copy, "rkdemo_runtime")
    wheel.unlink()
    wheel.symlink_to("/dev/zero")
    run = verify_in_child(demo_build, copy, timeout=20)
    _refused(run, str(wheel), "outside")


def _victim(tmp_path: Path) -> Path:
    victim = tmp_path / "outside" / "victim.txt"
    victim.parent.mkdir()
    victim.write_text(VICTIM_TEXT)
    return victim


def test_a_planted_temp_file_link_writes_nothing_outside(demo_build, tmp_path, docker_client):
    # Before the fix the summary was written to "verification_summary.json.tmp", following the link.
    copy = _copy(demo_build, tmp_path)
    victim = _victim(tmp_path)
    (copy / "verification_summary.json.tmp").symlink_to(victim)
    _killed_and_interrupted_first(demo_build, copy, docker_client)
    run = verify_in_child(demo_build, copy)
    assert run.code == 0, run.stdout[-3000:] + run.stderr
    assert victim.read_text() == VICTIM_TEXT
    summary = copy / "verification_summary.json"
    assert summary.is_file() and not summary.is_symlink()
    assert '"verificationResult": "PASSED"' in summary.read_text()
    assert not [p.name for p in copy.iterdir() if p.name.startswith(".")]  # no temp file left
    # The rerun's commit removed the later stages' records of the earlier run (issue 44).
    assert not (copy / "staging.json").exists() and not (copy / "published").exists()


def _killed_and_interrupted_first(rel: DemoBuild, copy: Path, docker_client) -> None:
    """One run per release directory (issue 44), on this test's full run, which is then its rerun: the
    directory also holds an earlier run's later records; verify-provenance is SIGKILLed (1.5 s) and
    interrupted (SIGTERM, 4 s) mid-reproduction, each time leaving the directory as it was."""
    plant_later_records(copy)
    for name in ("verification_summary.json", "sbom.cdx.json"):
        (copy / name).unlink()
    before = run_tree(copy)
    args = ["verify-provenance", rel.image_id, "--lock", str(rel.lock), "--artifacts", str(copy)]
    args.append("--allow-local-repos")
    env = dict(os.environ)
    killed = crash_run(args, env, copy.parent, after=1.5)
    interrupted = interrupt_after(args, env, copy.parent, 4.0, signal.SIGTERM)
    remove_leftover_containers(docker_client, {killed.pid, interrupted.pid})
    assert killed.killed, killed.stderr[-600:]
    assert_interrupted(interrupted, "verify-provenance")
    assert run_tree(copy) == before and work_dirs(copy) == []


@pytest.mark.parametrize("planted", ["verification_summary.dsse.json", "verification_summary.json"])
def test_a_planted_output_link_is_refused(demo_build, tmp_path, planted):
    # The envelope was written with write_bytes (through the link) when a key was given; verify-provenance
    # signs nothing now, but still removes a stale envelope there, so a link there is refused all the same.
    copy = _copy(demo_build, tmp_path)
    victim = _victim(tmp_path)
    (copy / planted).symlink_to(victim)
    run = verify_in_child(demo_build, copy)
    _refused(run, str(copy / planted), "symbolic link")
    assert victim.read_text() == VICTIM_TEXT
    assert run.seconds < 10  # refused before the image is read


def test_a_one_gib_build_record_is_refused_in_bounded_memory(demo_build, tmp_path):
    copy = _copy(demo_build, tmp_path)
    record = copy / "build.json"
    with record.open("r+b") as handle:  # the real record, then a sparse tail: 1 GiB apparent, ~no disk
        handle.truncate(GIB)
    run = verify_in_child(demo_build, copy, timeout=30)
    _refused(run, str(record), str(GIB), str(16 << 20))
    # Measured: about 85 MiB refused on stat; 2.1 GiB before the fix (the file read, then decoded);
    # a whole clean verify-provenance run peaks near 330 MiB.
    assert run.max_rss_kib < 200 * 1024, f"peak RSS {run.max_rss_kib} KiB"
    assert run.seconds < 10


@pytest.mark.parametrize("gib", [9, 7])
def test_a_sparse_multi_gib_wheel_is_refused_on_stat(demo_build, tmp_path, gib):
    # A real wheel after gib GiB of holes: still a valid zip (the central directory is at the end), so
    # before the fix every byte was read and hashed: time grew with the apparent size.
    copy = _copy(demo_build, tmp_path)
    wheel = _wheel(copy, "rkdemo_kernels")
    data = wheel.read_bytes()
    with wheel.open("r+b") as handle:
        handle.seek(gib * GIB)
        handle.write(data)
    size = wheel.stat().st_size
    assert wheel.stat().st_blocks * 512 < 64 << 20  # sparse: the attacker paid almost no disk
    run = verify_in_child(demo_build, copy, timeout=60)
    _refused(run, str(wheel), str(size), str(4 * GIB))
    assert run.seconds < 10


# --- the helpers themselves (bounded_read.py, atomic.py), without an image ---------------------------


def test_bounded_read_reads_only_regular_files_inside(tmp_path):
    from releasekit.bounded_read import UnsafeFileError, read_bounded

    root = tmp_path / "release"
    root.mkdir()
    (root / "a.json").write_bytes(b"{}")
    (root / "inside").symlink_to("a.json")
    (root / "outside").symlink_to(_victim(tmp_path))
    os.mkfifo(root / "fifo")
    assert read_bounded(root / "inside", 10, within=root) == b"{}"
    for name, why in (("outside", "outside"), ("fifo", "FIFO")):
        with pytest.raises(UnsafeFileError, match=why):
            read_bounded(root / name, 10, within=root)
    with pytest.raises(UnsafeFileError, match="over the limit of 1 bytes"):
        read_bounded(root / "a.json", 1)


def test_the_atomic_writer_refuses_links_and_leaves_no_temporary(tmp_path):
    from releasekit.atomic import copy_file, write_atomic, write_bytes
    from releasekit.bounded_read import UnsafeFileError

    victim = _victim(tmp_path)
    root = tmp_path / "release"
    root.mkdir()
    (root / "out.json").symlink_to(victim)
    with pytest.raises(UnsafeFileError, match="symbolic link"):
        write_atomic(root / "out.json", "x")
    # The cache writers are the same writer: a link at the target is refused there too.
    with pytest.raises(UnsafeFileError, match="symbolic link"):
        write_bytes(root / "out.json", b"x")
    with pytest.raises(UnsafeFileError, match="symbolic link"):
        copy_file(victim, root / "out.json")
    write_atomic(root / "new.json", "new\n")
    write_atomic(root / "new.json", "newer\n")
    assert victim.read_text() == VICTIM_TEXT
    assert (root / "new.json").read_text() == "newer\n"
    assert sorted(p.name for p in root.iterdir()) == ["new.json", "out.json"]
