"""``releasekit verify-provenance`` in a child process whose own peak memory is measured (the
hostile-release-directory and disk-full tests: the process is the subject)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from cli_run import releasekit_argv
from demo_release import DemoBuild


@dataclass
class Run:
    code: int
    stdout: str
    stderr: str
    seconds: float
    max_rss_kib: int

    @property
    def lines(self) -> list[str]:
        return self.stderr.splitlines()


# The child's peak RSS must not include its parent's: Linux carries the high-water mark of the
# memory a process had at exec (a fork of a big pytest process) into ru_maxrss. So a small
# launcher (``python3 -S``, a few MiB) forks and execs releasekit and reports wait4's figure.
LAUNCHER = """
import os, sys
rss_file, argv = sys.argv[1], sys.argv[2:]
pid = os.fork()
if pid == 0:
    os.execv(argv[0], argv)
_, status, usage = os.wait4(pid, 0)
with open(rss_file, "w") as out:
    out.write(str(usage.ru_maxrss))
code = os.waitstatus_to_exitcode(status)
sys.exit(code if code >= 0 else 128 - code)
"""


def verify_in_child(
    rel: DemoBuild, artifacts: Path, *extra: str, timeout: float = 60.0, logs: Path | None = None
) -> Run:
    """``releasekit verify-provenance`` in a child: its exit, output, time and own peak RSS (``wait4``).
    Its stdout and stderr go to files in ``logs`` (default: beside the release directory)."""
    # A child process: its own peak RSS and wall time are measured, and it is killed if it overruns.
    argv = releasekit_argv("verify-provenance", rel.image_id, "--lock", str(rel.lock))
    argv += ["--artifacts", str(artifacts), "--allow-local-repos", "--deadline", str(int(timeout)), *extra]
    logs = logs or artifacts.parent
    out, err, rss = logs / "stdout.txt", logs / "stderr.txt", logs / "rss.txt"
    started = time.monotonic()
    with out.open("wb") as o, err.open("wb") as e:
        launched = [sys.executable, "-S", "-c", LAUNCHER, str(rss), *argv]
        proc = subprocess.Popen(launched, stdout=o, stderr=e, start_new_session=True)
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        if time.monotonic() - started > timeout + 10:
            os.killpg(proc.pid, signal.SIGKILL)
            os.wait4(proc.pid, 0)
            pytest.fail(
                f"verify-provenance still running after {timeout + 10:.0f} s (--deadline {timeout:.0f})"
            )
        time.sleep(0.05)
    proc.returncode = os.waitstatus_to_exitcode(status)
    seconds = time.monotonic() - started
    del usage  # the launcher's own figure would include pytest's memory at fork; the child's is in rss.txt
    return Run(proc.returncode, out.read_text(), err.read_text(), seconds, int(rss.read_text()))
