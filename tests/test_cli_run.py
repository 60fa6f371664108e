"""The one CLI runner (tests/cli_run.py): ``invoke`` in this process gives what ``python -m releasekit``
gives, and leaves nothing behind for the next call."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
from cli_run import REPO, invoke, run_cli

from releasekit.git import mirrors

SAME_AS_A_PROCESS = [
    ["--version"],
    ["no-such-command"],
    ["matrix", "manifests/ff-next.yaml", "--json"],
    ["manifest", "validate", "manifests/no-such.yaml"],
    ["plan", "lock", "manifests/ff-next.yaml", "--no-such-option"],
]


@pytest.mark.parametrize("args", SAME_AS_A_PROCESS, ids=lambda a: " ".join(a)[:40])
def test_in_process_is_what_the_process_gives(args: list[str]) -> None:
    here, child = invoke(*args), run_cli(*args, timeout=120)
    assert (here.returncode, here.stdout, here.stderr) == (child.returncode, child.stdout, child.stderr)


def test_an_internal_error_is_exit_2_with_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    from releasekit import cli

    def broken(args: list[str]) -> int:
        raise RuntimeError("boom\nsecond line")

    monkeypatch.setattr(cli, "_fast", broken)
    r = invoke("--version")
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr == (
        "releasekit: internal error: RuntimeError: boom second line (set RELEASEKIT_DEBUG=1 for a traceback)\n"
    )
    debug = invoke("--version", env={"RELEASEKIT_DEBUG": "1"})
    assert "Traceback" in debug.stderr and debug.stderr.endswith("for a traceback)\n")


def test_the_environment_the_directory_and_the_signals_are_put_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RELEASEKIT_MIRRORS", str(tmp_path / "none.txt"))
    monkeypatch.chdir(tmp_path)
    before = dict(os.environ)
    alarm = signal.getsignal(signal.SIGALRM)
    # The variable is seen by the command (a mirrors file it cannot read), removed by None.
    r = invoke("plan", "lock", str(REPO / "manifests" / "ff-next.yaml"), "-o", str(tmp_path / "l.json"))
    assert r.returncode == 2 and "RELEASEKIT_MIRRORS" in r.stderr, r.stderr
    r = invoke("manifest", "validate", "manifests/ff-next.yaml", env={"RELEASEKIT_MIRRORS": None})
    assert r.returncode == 0, r.stderr  # run in the checkout (cwd), as run_cli does
    assert dict(os.environ) == before and Path.cwd() == tmp_path
    assert signal.getsignal(signal.SIGALRM) is alarm


def test_a_root_mirror_option_stays_with_its_call(tmp_path: Path) -> None:
    r = invoke(
        "--mirror",
        f"https://example.invalid/x.git={tmp_path}",
        "manifest",
        "validate",
        "manifests/ff-next.yaml",
    )
    assert r.returncode == 0, r.stderr
    assert mirrors._GIVEN == {}
