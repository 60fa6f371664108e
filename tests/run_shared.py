"""What the processes of one test run share: a directory per run, and locks.

Under pytest-xdist every worker is its own process with its own session fixtures. A session
fixture that must be made once per run (the demo build) makes it in ``run_directory()`` under
``run_lock``: the first worker to get there builds, the others wait and read what it left.
A thing made once per *machine* and found by name afterwards (a Docker image found by its tag)
is made under ``machine_lock``, so two workers, or two runs, never make it at the same time.

Not pytest's ``tmp_path_factory``: on a shared machine other pytest runs rotate those away
mid-session, and its directories are per worker.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

# Set by pytest-xdist in each worker's environment: the id of the run the worker belongs to.
XDIST_RUN_ID = "PYTEST_XDIST_TESTRUNUID"
RUN_PREFIX = "releasekit-tests-run-"
RUN_ID_KEY = pytest.StashKey[str]()


def is_worker() -> bool:
    return bool(os.environ.get(XDIST_RUN_ID))


def start_run(config: pytest.Config) -> None:
    """In the controller (or the one process): choose the run's id and hand it to xdist's workers."""
    if is_worker():
        return
    chosen = getattr(config.option, "testrunuid", None) or uuid.uuid4().hex
    if hasattr(config.option, "testrunuid"):  # pytest-xdist is installed: its workers get this id
        config.option.testrunuid = chosen
    config.stash[RUN_ID_KEY] = chosen


def end_run(config: pytest.Config) -> None:
    """In the controller (or the one process), after every worker ended: the run's directory goes."""
    if not is_worker() and RUN_ID_KEY in config.stash:
        shutil.rmtree(
            Path(tempfile.gettempdir()) / f"{RUN_PREFIX}{config.stash[RUN_ID_KEY]}", ignore_errors=True
        )


def run_id(config: pytest.Config) -> str:
    """This run's id: xdist's (the same in every worker and in the controller), else this session's."""
    return os.environ.get(XDIST_RUN_ID) or config.stash[RUN_ID_KEY]


def run_directory(config: pytest.Config) -> Path:
    """The directory of this run, the same for every worker; removed when the run ends."""
    path = Path(tempfile.gettempdir()) / f"{RUN_PREFIX}{run_id(config)}"
    path.mkdir(mode=0o700, exist_ok=True)
    return path


@contextlib.contextmanager
def _flock(path: Path) -> Iterator[None]:
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


@contextlib.contextmanager
def run_lock(config: pytest.Config, name: str) -> Iterator[None]:
    """Held by one process of this run at a time."""
    with _flock(run_directory(config) / f"{name}.lock"):
        yield


@contextlib.contextmanager
def machine_lock(name: str) -> Iterator[None]:
    """Held by one process of this machine at a time (any run, any worker)."""
    with _flock(Path(tempfile.gettempdir()) / f"releasekit-tests-{name}.lock"):
        yield


# Modules that run on one worker, in this order, as they would in one process: those sharing a session
# fixture whose result one module changes for the next, and those sharing what one process keeps. ``demo_run`` (the whole demo, once): test_demo
# checks it, test_validate_e2e takes its spec-off receipt, test_workflow_act restarts its registry and
# builds on its cache.
#
# ``verifier``: verify-provenance in the test process keeps what it rebuilt and the base image's file
# table in that process's memory (releasekit/provenance/vcache.py); its first run in a process is the
# slow one, so the modules that verify in-process share one worker and pay it once.
SHARED_GROUPS = {
    "test_demo.py": "demo-run",
    "test_validate_e2e.py": "demo-run",
    "test_workflow_act.py": "demo-run",
    "test_verify_redteam.py": "verifier",
    "test_verify_tamper.py": "verifier",
    "test_verify_nocache.py": "verifier",
}
# The groups that take longest, longest first, so that no worker starts a long one at the end while
# the others sit idle, by the modules' summed times of a quiet four-worker run: the whole demo with the
# act workflow and the e2e cells (629 s), the PD cells (195 s), the in-process verifications (195 s),
# the dress rehearsal (187 s), the crash series (171 s), the B12X rehearsal (124 s), the reproduction
# (110 s), the CUDA builder (49 s). Refresh from the modules' summed times that
# benchmarks/suite_durations.py prints at the end of CI's log.
LONGEST_FIRST = (
    "demo-run",
    "test_validate_pd.py",
    "verifier",
    "test_rehearsal.py",
    "test_crash_concurrency.py",
    "test_rehearsal_b12x.py",
    "test_reproduce.py",
    "test_build_cuda_builder.py",
)


def group_for_workers(items: list[pytest.Item]) -> None:
    """Mark every test with its ``xdist_group`` (its module's, or its shared group) and put the longest
    groups first, keeping the order of the tests inside each group."""
    groups: dict[str, list[pytest.Item]] = {}
    for item in items:
        module = item.path.name
        name = SHARED_GROUPS.get(module, module)
        item.add_marker(pytest.mark.xdist_group(name))
        groups.setdefault(name, []).append(item)
    rank = {name: index for index, name in enumerate(LONGEST_FIRST)}
    ordered = sorted(groups, key=lambda name: rank.get(name, len(rank)))
    items[:] = [item for name in ordered for item in groups[name]]
