"""The crash tests' runner: ``releasekit`` as its own process group, killed (SIGKILL) or interrupted
(SIGINT, SIGTERM) at a time or at a named instant, and what a release directory may hold after it
(issue 27, issue 44). tests/test_crash_concurrency.py and tests/test_release_dir_hostile.py use it."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import docker
from cli_run import start_cli
from publish_support import staging_file

from releasekit.docker_engine.containers import OWNER_LABEL

KILLED = -signal.SIGKILL


@dataclass
class Run:
    returncode: int
    pid: int
    stdout: str
    stderr: str

    @property
    def killed(self) -> bool:
        return self.returncode == KILLED


def start(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.Popen[str]:
    # A child process: the test kills it mid-run, with its git/pip children (its own process group).
    gone: dict[str, str | None] = {k: None for k in os.environ if k not in env}
    return start_cli(*args, env={**env, **gone}, cwd=cwd, start_new_session=True)


def finish(proc: subprocess.Popen[str], *, after: float | None = None) -> Run:
    """Wait for ``proc``; with ``after``, SIGKILL its whole process group once that many seconds passed."""
    try:
        out, err = proc.communicate(timeout=after if after is not None else 300)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)  # whatever it left running (a killpoint kills only itself)
    return Run(proc.returncode, proc.pid, out, err)


def run(args: list[str], env: dict[str, str], cwd: Path, *, after: float | None = None) -> Run:
    return finish(start(args, env, cwd), after=after)


def run_tree(directory: Path) -> dict[str, bytes]:
    """Every file of a release directory but those under a run's work directory (``.<stage>-run.*.tmp``)."""
    return {
        str(p.relative_to(directory)): p.read_bytes()
        for p in sorted(directory.rglob("*"))
        if p.is_file() and not any(part.endswith(".tmp") and "-run." in part for part in p.parts)
    }


def work_dirs(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.glob(".*-run.*.tmp"))


def interrupt_in_write(
    args: list[str], env: dict[str, str], cwd: Path, at: tuple[Path, str, str], sig
) -> Run:
    """Run the command, paused half-way into writing ``name`` in its work directory in ``directory``
    (``at``: directory, stage, name), then send ``sig`` to its process group, as Ctrl-C (SIGINT) or a
    cancelled job (SIGTERM) does."""
    directory, stage, name = at
    proc = start(
        args,
        {**env, "RELEASEKIT_TEST_PAUSE_AT": f"release-partial:{name}", "RELEASEKIT_TEST_PAUSE_S": "120"},
        cwd,
    )
    deadline = time.monotonic() + 300
    while not list(directory.glob(f".{stage}-run.*/.{name}.*.tmp")) and proc.poll() is None:
        assert time.monotonic() < deadline, f"{args[0]} never reached {name}"
        time.sleep(0.05)
    assert proc.poll() is None, f"{args[0]} ended before it wrote {name}: {proc.communicate()[1][-600:]}"
    os.killpg(proc.pid, sig)
    return finish(proc)


def interrupt_after(args: list[str], env: dict[str, str], cwd: Path, seconds: float, sig) -> Run:
    """Run the command and send ``sig`` to its process group ``seconds`` after its start."""
    proc = start(args, env, cwd)
    try:
        out, err = proc.communicate(timeout=seconds)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, sig)
        return finish(proc)
    return Run(proc.returncode, proc.pid, out, err)


def assert_interrupted(r: Run, command: str) -> None:
    assert r.returncode == 130, r.stderr[-800:]
    lines = r.stderr.strip().splitlines()
    assert lines[-1] == f"releasekit: interrupted during {command}; nothing written", r.stderr[-800:]
    assert "Traceback" not in r.stderr and sum("interrupted" in line for line in lines) == 1, r.stderr


def plant_later_records(directory: Path) -> None:
    """What the stages after build wrote in an earlier run (a foreign image and lock)."""
    staging_file(directory, "sha256:" + "1" * 64)
    (directory / "verification_summary.json").write_text('{"earlier": "verify-provenance"}\n')
    (directory / "sbom.cdx.json").write_text('{"earlier": "sbom"}\n')
    (directory / "published").mkdir(exist_ok=True)
    (directory / "published" / "publish.json").write_text('{"earlier": "publish"}\n')


LATER = ("verification_summary.json", "sbom.cdx.json", "staging.json", "published")


def remove_leftover_containers(client: docker.DockerClient, pids: set[int]) -> None:
    """Throwaway containers of killed builds (they never reached their ``finally``).

    ``sparse``: the list call alone, no per-container inspect, so a container that goes away between
    the list and its removal (the engine finishing its own clean-up) is no error."""
    for pid in pids:
        found = client.containers.list(all=True, sparse=True, filters={"label": f"{OWNER_LABEL}={pid}"})
        for container in found:
            with contextlib.suppress(docker.errors.APIError):
                container.remove(force=True)
