"""The tests' one way to run the command line: ``invoke`` in this process, ``run_cli`` in a child.

``invoke(*args)`` calls ``releasekit.cli.main`` here, as ``python -m releasekit ARGS`` would, and
returns a ``subprocess.CompletedProcess``: the exit code (``SystemExit`` turned into it, and an
internal error into exit 2 with one line, by ``main`` itself) and stdout and stderr, captured
apart at the descriptors 1 and 2, so what git, pip or Docker children of the command print is
caught too (what the test's own threads write, a fake server's request log, is not). For the duration of the call it applies ``env`` (laid over
this process's environment; ``None`` removes a variable) and ``cwd``; afterwards it restores the
whole environment, the working directory, the signal handlers, the logging configuration and the
caches that releasekit keeps for the life of a process (``PROCESS_CACHES``), so one call leaves
nothing behind for the next.

``run_cli(*args)`` starts ``python -m releasekit ARGS`` in a child process. Use it only where the
process itself is what the test is about: signals and a deadline that stops the process, file
descriptors handed over (``--key-fd``, ``pass_fds``), the environment a child is started with,
start-up time and imports, and leave a comment at the call saying which.
"""

from __future__ import annotations

import copy
import io
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent

Result = subprocess.CompletedProcess[str]


def releasekit_argv(*args: str) -> list[str]:
    """The command line of ``python -m releasekit ARGS``, for a test that starts it its own way (a
    launcher that measures the child)."""
    return [sys.executable, "-m", "releasekit", *args]


def run_cli(
    *args: str,
    env: Mapping[str, str | None] | None = None,
    timeout: float = 600,
    cwd: Path | str | None = None,
    **popen: Any,
) -> Result:
    """``python -m releasekit ARGS`` in a child process.

    ``env`` is laid over this process's environment (``None`` removes a variable); the checkout's
    releasekit is the one run; ``popen`` goes to ``subprocess.run`` (``pass_fds``, ``input``).
    """
    full = _overlay(dict(os.environ), {"PYTHONPATH": str(REPO), **(env or {})})
    return subprocess.run(
        releasekit_argv(*args),
        capture_output=True,
        text=True,
        env=full,
        cwd=cwd or REPO,
        timeout=timeout,
        **popen,
    )


def start_cli(
    *args: str, env: Mapping[str, str | None] | None = None, cwd: Path | str | None = None, **popen: Any
) -> subprocess.Popen[str]:
    """``python -m releasekit ARGS`` started in a child process, its stdout and stderr piped, for a
    test that signals or kills it while it runs; ``env`` and ``cwd`` as for ``run_cli``."""
    full = _overlay(dict(os.environ), {"PYTHONPATH": str(REPO), **(env or {})})
    return subprocess.Popen(
        releasekit_argv(*args),
        env=full,
        cwd=cwd or REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **popen,
    )


def invoke(
    *args: str | Path,
    env: Mapping[str, str | None] | None = None,
    cwd: Path | str | None = None,
    input: str | None = None,  # noqa: A002 - subprocess.run's name for it
) -> Result:
    """``releasekit ARGS`` in this process; the same result ``run_cli`` gives (see the module's doc)."""
    from releasekit.cli import main

    argv = [str(a) for a in args]
    out: list[str] = []
    err: list[str] = []
    with _process_state(env, cwd), _caches_kept(), _captured(input, out, err):
        try:
            main(argv)
            code = 0
        except SystemExit as exc:
            code = _exit_code(exc)
    return subprocess.CompletedProcess(["releasekit", *argv], code, "".join(out), "".join(err))


def _overlay(base: dict[str, str], env: Mapping[str, str | None]) -> dict[str, str]:
    for key, value in env.items():
        if value is None:
            base.pop(key, None)
        else:
            base[key] = value
    return base


def _exit_code(exc: SystemExit) -> int:
    """What the interpreter makes of ``sys.exit(code)``: None is 0, a string is printed and is 1."""
    if exc.code is None:
        return 0
    if isinstance(exc.code, int):
        return exc.code
    sys.stderr.write(f"{exc.code}\n")
    return 1


# What releasekit keeps for the life of a process (module, name), put back after each call as it
# was before: what a call added (a --mirror, a private repository, the verifier cache) goes.
PROCESS_CACHES: tuple[tuple[str, str], ...] = (
    ("releasekit.git.mirrors", "_GIVEN"),  # --mirror URL=PATH of the root command
    ("releasekit.git.mirrors", "_OFFLINE"),  # --offline
    ("releasekit.git.mirror", "_VIEWS"),  # private repositories of cache entries
    ("releasekit.git.scratch", "_OBJECTS"),  # object directory of a repository
    ("releasekit.git.private", "_IN_PLACE"),  # private repositories of --repo directories
    ("releasekit.atomic", "_KEPT"),  # the files written, which an interrupt's line names
)
VERIFIER_CACHE = ("releasekit.provenance.vcache", "_shared")


def _cache(module: str, name: str) -> Any:
    loaded = sys.modules.get(module)  # a module not imported yet holds nothing yet
    return getattr(loaded, name) if loaded is not None else None


@contextmanager
def _caches_kept() -> Iterator[None]:
    saved = {key: copy.copy(_cache(*key)) for key in PROCESS_CACHES}
    shared = _cache(*VERIFIER_CACHE)
    try:
        yield
    finally:
        for key, before in saved.items():
            live = _cache(*key)
            if live is None:
                continue
            live.clear()
            if isinstance(live, list):
                live.extend(before or [])
            else:
                live.update(before or {})
        made = _cache(*VERIFIER_CACHE)
        if made is not shared:
            # A process removes its verifier cache when it exits (atexit); this one goes now.
            setattr(sys.modules[VERIFIER_CACHE[0]], VERIFIER_CACHE[1], shared)
            shutil.rmtree(made.root, ignore_errors=True)


@contextmanager
def _process_state(env: Mapping[str, str | None] | None, cwd: Path | str | None) -> Iterator[None]:
    environ = dict(os.environ)
    directory = os.getcwd()
    handlers = {s: signal.getsignal(s) for s in (signal.SIGALRM, signal.SIGINT, signal.SIGTERM)}
    timer = signal.getitimer(signal.ITIMER_REAL)
    loggers = _logging_state()
    _replace_environ(_overlay(dict(environ), {"PYTHONPATH": str(REPO), **(env or {})}))
    try:
        os.chdir(cwd or REPO)
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, *timer)
        for number, handler in handlers.items():
            signal.signal(number, handler)
        os.chdir(directory)
        _replace_environ(environ)
        _restore_logging(loggers)


def _replace_environ(wanted: dict[str, str]) -> None:
    """The whole environment made ``wanted`` (the runner's own job; no test writes it)."""
    for key in [k for k in os.environ if k not in wanted]:
        del os.environ[key]
    for key, value in wanted.items():
        if os.environ.get(key) != value:
            os.environ[key] = value


_LoggerState = tuple[list[logging.Handler], bool, int, bool]


def _logging_state() -> dict[str, _LoggerState]:
    loggers: dict[str, logging.Logger] = {
        name: lg for name, lg in logging.root.manager.loggerDict.items() if isinstance(lg, logging.Logger)
    }
    loggers[""] = logging.root
    return {name: (list(lg.handlers), lg.propagate, lg.level, lg.disabled) for name, lg in loggers.items()}


def _restore_logging(saved: dict[str, _LoggerState]) -> None:
    for name, lg in [*logging.root.manager.loggerDict.items(), ("", logging.root)]:
        if not isinstance(lg, logging.Logger):
            continue
        handlers, propagate, level, disabled = saved.get(name, ([], True, logging.NOTSET, False))
        lg.handlers[:] = handlers
        lg.propagate, lg.disabled = propagate, disabled
        lg.setLevel(level)


@contextmanager
def _descriptor(fd: int, errors: str, text: list[str]) -> Iterator[io.TextIOWrapper]:
    """A temporary file on descriptor ``fd`` (1 or 2) for the call; what was written, decoded, into ``text``."""
    with tempfile.TemporaryFile() as file, open(fd, "wb", closefd=False) as raw:
        saved = os.dup(fd)
        os.dup2(file.fileno(), fd)
        stream = io.TextIOWrapper(raw, encoding="utf-8", errors=errors)
        try:
            yield stream
        finally:
            stream.flush()
            stream.detach()
            os.dup2(saved, fd)
            os.close(saved)
            file.seek(0)
            written = file.read().decode("utf-8", errors="replace")
            # As subprocess.run(text=True) reads it: universal newlines.
            text.append(written.replace("\r\n", "\n").replace("\r", "\n"))


class _ThisThread:
    """``sys.stdout``/``sys.stderr`` during a call: the command's thread writes to the capture; the
    test's other threads (a fake server logging its requests) keep writing where they did."""

    def __init__(self, mine: io.TextIOWrapper, other: Any) -> None:
        self._mine, self._other, self._owner = mine, other, threading.get_ident()

    def _stream(self) -> Any:
        return self._mine if threading.get_ident() == self._owner else self._other

    def write(self, text: str) -> int:
        return int(self._stream().write(text))

    def flush(self) -> None:
        self._stream().flush()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream(), name)


@contextmanager
def _captured(input: str | None, out: list[str], err: list[str]) -> Iterator[None]:  # noqa: A002
    """The command's stdin is ``input`` (or empty); its stdout and stderr go to ``out`` and ``err``."""
    streams = sys.stdin, sys.stdout, sys.stderr
    for stream in streams[1:]:
        stream.flush()
    with _descriptor(1, "strict", out) as stdout, _descriptor(2, "backslashreplace", err) as stderr:
        sys.stdin = io.TextIOWrapper(io.BytesIO((input or "").encode("utf-8")), encoding="utf-8")
        sys.stdout = _ThisThread(stdout, streams[1])
        sys.stderr = _ThisThread(stderr, streams[2])
        try:
            yield
        finally:
            sys.stdin, sys.stdout, sys.stderr = streams
