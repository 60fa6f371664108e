"""``build`` and ``verify-provenance`` on a file system that fills up (issue 27).

Each test mounts a real size-limited tmpfs (``mount -t tmpfs -o size=…``; root is needed, as in
CI's container) and runs the real CLI with its output directory, its cache or the release
directory there. Each run must end in one line on stderr and exit 2, leave no partial record
(no ``build.json``, no summary, no temporary file) and no half-written cache entry.
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from cli_run import invoke
from demo_release import DemoBuild
from release_dir_child import verify_in_child

from releasekit.builder.cache import CacheEntry
from releasekit.digests import file_sha256

pytestmark = [pytest.mark.docker, pytest.mark.slow]

PAGE = 4096


@contextlib.contextmanager
def tmpfs(where: Path, size: int) -> Iterator[Path]:
    """A tmpfs of ``size`` bytes mounted at ``where`` for the block's duration."""
    where.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)], capture_output=True, text=True
    )
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root): {proc.stderr.strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def _build(rel: DemoBuild, outdir: Path, cache: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {"RELEASEKIT_ALLOW_LOCAL_REPOS": "1"}
    if cache is not None:
        env["RELEASEKIT_CACHE"] = str(cache)
    argv = ["build", str(rel.manifest), "--lock", str(rel.lock)]
    argv += ["-o", str(outdir), "--tag", f"releasekit-test/diskfull:{uuid.uuid4().hex[:12]}"]
    return invoke(*argv, env=env)


def _one_line_no_space(code: int, stderr: str) -> None:
    # build's progress lines go to stderr too; the error is one line of its own, no traceback.
    errors = [line for line in stderr.splitlines() if line.startswith("releasekit:")]
    assert code == 2, stderr
    assert len(errors) == 1 and "no space left on device" in errors[0], stderr
    assert "Traceback" not in stderr, stderr


def _temporaries(root: Path) -> list[str]:
    """Files a writer left half-done: temporary names (``.x.tmp``, ``x.tmp123``, ``.x.<hex>.tmp``)."""
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if ".tmp" in p.name)


def _pages(paths: list[Path]) -> int:
    return sum(-(-p.stat().st_size // PAGE) * PAGE for p in paths)


def test_build_outputs_on_a_full_disk_leave_no_record(demo_build, tmp_path):
    # Room for every output but the last pages: the build fails at its end, writing its records.
    # (plan check wrote plan-check.json; the demo's signing key the envelopes: this build signs nothing)
    written = [
        p
        for p in demo_build.artifacts.rglob("*")
        if p.is_file() and p.name != "plan-check.json" and not p.name.endswith(".dsse.json")
    ]
    # On a copy of the build's own cache: every entry found, as on a machine that built this lock before.
    cache = demo_build.copy_cache(tmp_path / "cache")
    with tmpfs(tmp_path / "small", _pages(written) - 2 * PAGE) as mnt:
        out = _build(demo_build, mnt / "out", cache=cache)
        _one_line_no_space(out.returncode, out.stderr)
        assert not (mnt / "out" / "build.json").exists()  # the record that says "done" is absent
        assert _temporaries(mnt) == []


def _size(root: Path) -> int:
    return _pages([p for p in root.rglob("*") if p.is_file()])


def test_build_with_its_cache_on_a_full_disk_leaves_no_half_entry(demo_build, tmp_path):
    # The demo build's wheel entries copied into a small cache (so no wheel is rebuilt), with room for
    # the git mirrors but not for the release layer (about 1 MiB): the build fails putting the layer.
    # (The demo build's own cache: what the environment's default cache holds depends on which tests
    # ran before on this worker.)
    warm = demo_build.cache / "build"
    size = _size(warm / "wheels") + _size(warm / "bases") + 640 * 1024
    with tmpfs(tmp_path / "small", size) as mnt:
        for part in ("wheels", "bases"):
            shutil.copytree(warm / part, mnt / "cache" / "build" / part)
        out = _build(demo_build, tmp_path / "out", cache=mnt / "cache")
        _one_line_no_space(out.returncode, out.stderr)
        assert "[hit]" in out.stderr  # the wheels came from the copied entries
        assert not (tmp_path / "out" / "build.json").exists()
        assert _temporaries(mnt) == []
        entries = sorted(
            p for p in (mnt / "cache" / "build" / "wheels").glob("*/*") if p.is_dir()
        )  # not <key>.lock
        for entry in entries:  # every entry a later build would serve is whole
            record = CacheEntry.model_validate_json((entry / "entry.json").read_text())
            assert file_sha256(entry / record.wheel.filename) == record.wheel.sha256
        started = list((mnt / "cache" / "build" / "layers").glob("*/*"))  # the entry's lock, at least
        assert started, "no layer entry was started: the cache's full disk was not exercised"
        for layer in (p for p in started if p.is_dir()):  # an entry is whole or absent
            assert sorted(p.name for p in layer.iterdir()) == ["layer.tar", "smoke.json"], layer


def test_verify_on_a_full_release_directory_leaves_no_summary(demo_build, tmp_path):
    size = _pages([p for p in demo_build.artifacts.rglob("*") if p.is_file()]) + 64 * PAGE
    with tmpfs(tmp_path / "small", size) as mnt:
        copy = mnt / "release"
        shutil.copytree(demo_build.artifacts, copy)
        for stale in copy.glob("verification_summary*"):
            stale.unlink()
        with (mnt / "filler").open("wb", buffering=0) as filler, contextlib.suppress(OSError):
            while True:  # fill the file system to its last page
                filler.write(b"\0" * PAGE)
        run = verify_in_child(demo_build, copy, logs=tmp_path)
        _one_line_no_space(run.code, run.stderr)
        assert not list(copy.glob("verification_summary*"))
        assert _temporaries(mnt) == []
