"""The one place releasekit runs the ``git`` program.

Every call has a fixed argv (no shell), refs only after ``--`` or as checked values,
no terminal prompts, no system config, replace objects off (``refs/replace/*`` never stands in
for an object), and a protocol allow-list: https and ssh
always, ``file`` only for releasekit's own mirrors or when local repositories are
explicitly allowed, ``ext`` never. The repository a ``Git`` is bound to is one releasekit made in
this process (git/private.py), so no configuration but releasekit's own is read.
"""

from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from releasekit.deadline import since_command_start
from releasekit.errors import EnvironmentProblem, InputError, ReleasekitError

# Every git process has a deadline (issue 43: a FIFO in a borrowed object directory hung plan lock
# and build): killed past it, one line, exit 2. Commands that talk to a remote get longer.
TIMEOUT_ENV = "RELEASEKIT_GIT_TIMEOUT"
LOCAL_TIMEOUT_S = 600.0
NETWORK_TIMEOUT_S = 3600.0
_NETWORK = frozenset({"fetch", "clone", "ls-remote", "push"})
# And all of one command's git processes together: none runs past this many seconds from the
# command's start (``deadline.start_command``, called as the CLI starts; a library caller's count
# starts at its first git process), however long each may run by itself.
TOTAL_TIMEOUT_ENV = "RELEASEKIT_GIT_TOTAL_TIMEOUT"
TOTAL_TIMEOUT_S = 4 * 3600.0


def _seconds_env(name: str, default: float) -> float:
    told = os.environ.get(name, "").strip()
    if not told:
        return default
    try:
        seconds = float(told)
    except ValueError:
        seconds = 0.0
    if not 0 < seconds < 1e9:
        raise InputError(f"{name}={told[:40]!r}: not a positive number of seconds")
    return seconds


def first_git_error(stderr: str, returncode: int = 1) -> str:
    """git's own first ``fatal:``/``error:`` line (else its last line, else the exit status)."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    for line in lines:
        if line.startswith(("fatal:", "error:")):
            return line
    return lines[-1] if lines else f"exit {returncode}"


def _named_args(argv: Sequence[str]) -> str:
    """The subcommand and the refs/objects/paths it was given (options left out), for the one line."""
    words = [
        a
        for i, a in enumerate(argv)
        if not a.startswith("-") and "\n" not in a and (i == 0 or argv[i - 1] != "-c")
    ]
    text = " ".join(words[:6]) + (" …" if len(words) > 6 else "")
    return text[:300]


class GitFailed(ReleasekitError):
    """A git command exited non-zero: one line naming the repository, what git was asked and git's error.

    Exit 2 when nothing catches it (never an "internal error"); callers that can say more
    turn it into an InputError or a finding.
    """

    def __init__(self, argv: Sequence[str], returncode: int, stderr: str, *, where: str = "") -> None:
        self.argv = list(argv)
        self.returncode = returncode
        self.stderr = stderr.strip()
        self.where = where
        self.reason = first_git_error(self.stderr, returncode)
        prefix = f"{where}: " if where else ""
        super().__init__(f"{prefix}git {_named_args(self.argv)}: {self.reason}")


class GitTimedOut(GitFailed):
    """A git process killed at its deadline (a blocking file, a stalled remote)."""

    def __init__(
        self,
        argv: Sequence[str],
        seconds: float,
        *,
        where: str = "",
        setting: str = TIMEOUT_ENV,
        spent: bool = False,
    ) -> None:
        message = (
            f"fatal: the command's {seconds:g} s for all its git processes are spent; not started "
            f"({setting} sets the limit)"
            if spent
            else f"fatal: no answer within {seconds:g} s (killed; {setting} sets the limit)"
        )
        super().__init__(argv, -9, message, where=where)


def _subcommand(args: Sequence[str]) -> str:
    """The git subcommand in ``args`` (after any ``-c key=value`` and other global options)."""
    skip = False
    for arg in args:
        if skip:
            skip = False
        elif arg in ("-c", "-C", "--git-dir"):
            skip = True
        elif not arg.startswith("-"):
            return arg
    return ""


def git_timeout(args: Sequence[str]) -> float:
    """The deadline of ``git ARGS`` in seconds: ``RELEASEKIT_GIT_TIMEOUT`` when set, else longer for
    a command that talks to a remote than for one that reads the repository."""
    default = NETWORK_TIMEOUT_S if _subcommand(args) in _NETWORK else LOCAL_TIMEOUT_S
    return _seconds_env(TIMEOUT_ENV, default)


def _deadline(args: Sequence[str], where: str) -> tuple[float, float, str]:
    """How long ``git ARGS`` may run, the limit that decides it and its setting: its own deadline, or
    what is left of the command's total. A total already spent starts nothing (GitTimedOut at once)."""
    own = git_timeout(args)
    total = _seconds_env(TOTAL_TIMEOUT_ENV, TOTAL_TIMEOUT_S)
    left = total - since_command_start()
    if left <= 0:
        raise GitTimedOut(args, total, where=where, setting=TOTAL_TIMEOUT_ENV, spent=True)
    return (own, own, TIMEOUT_ENV) if own <= left else (left, total, TOTAL_TIMEOUT_ENV)


def _run(
    argv: list[str], args: Sequence[str], where: str, **kwargs: object
) -> subprocess.CompletedProcess[bytes]:
    """``subprocess.run(argv)`` under ``args``'s deadline; past it git is killed (GitTimedOut)."""
    seconds, limit, setting = _deadline(args, where)
    try:
        return subprocess.run(argv, capture_output=True, timeout=seconds, **kwargs)  # type: ignore[call-overload, no-any-return]
    except subprocess.TimeoutExpired:
        raise GitTimedOut(args, limit, where=where, setting=setting) from None


def _git_binary() -> str:
    found = shutil.which("git")
    if not found:
        raise EnvironmentProblem("git is not installed (apt-get install git)")
    return found


# What a git process may inherit from releasekit's own environment: where programs and the home
# directory are, temporary space, and what https and ssh need to reach a remote. Nothing else: a
# signing key (RELEASEKIT_SIGNING_KEY), a forge token (GITHUB_TOKEN) or a registry password in
# releasekit's environment never reaches git, nor any program a hostile repository could make
# git run.
INHERITED = frozenset(
    {
        "PATH", "HOME", "USER", "LOGNAME", "TMPDIR", "TZ",
        "SSL_CERT_FILE", "SSL_CERT_DIR", "CURL_CA_BUNDLE",
        "http_proxy", "https_proxy", "no_proxy", "all_proxy",
        "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "ALL_PROXY",
        "SSH_AUTH_SOCK",
    }
)  # fmt: skip


def git_env() -> dict[str, str]:
    """The environment of every git process: an allow-list of the caller's (INHERITED), then
    releasekit's own settings; no inherited ``GIT_*``, no system or global config."""
    env = {k: v for k, v in os.environ.items() if k in INHERITED}
    env.update(
        GIT_TERMINAL_PROMPT="0",
        GIT_CONFIG_NOSYSTEM="1",
        # A user's ~/.gitconfig (autocrlf, filters, url rewrites) must not change what is checked out.
        GIT_CONFIG_GLOBAL="/dev/null",
        GIT_ASKPASS="true",
        SSH_ASKPASS="true",
        # ssh must never ask a question either.
        GIT_SSH_COMMAND="ssh -o BatchMode=yes -o StrictHostKeyChecking=accept-new",
        LC_ALL="C",
        # refs/replace/* in a repository (a mirror the build or a bundle filled) would make git show
        # another object under a locked object's name: a commit's tree, a file's blob. Never.
        GIT_NO_REPLACE_OBJECTS="1",
        # Fixed identity/dates for commits releasekit makes itself (plan compose merges).
        GIT_AUTHOR_NAME="releasekit",
        GIT_AUTHOR_EMAIL="releasekit@localhost",
        GIT_COMMITTER_NAME="releasekit",
        GIT_COMMITTER_EMAIL="releasekit@localhost",
    )
    return env


def protocol_options(*, allow_file: bool) -> list[str]:
    return [
        "-c",
        "protocol.allow=never",
        "-c",
        "protocol.https.allow=always",
        "-c",
        "protocol.ssh.allow=always",
        "-c",
        f"protocol.file.allow={'always' if allow_file else 'never'}",
        "-c",
        "protocol.ext.allow=never",
        "-c",
        "core.hooksPath=/dev/null",
        "-c",
        "core.fsmonitor=false",
        # The same as GIT_NO_REPLACE_OBJECTS (git_env), for a caller that builds its own environment.
        "-c",
        "core.useReplaceRefs=false",
        # A fetch lists the refs of every repository it borrows objects from by running
        # ``git for-each-ref`` inside it, a git process in a repository releasekit did not make
        # (git/private.py). ``true`` lists nothing: the private repository's own refs are the
        # fetch's "haves".
        "-c",
        "core.alternateRefsCommand=true",
    ]


class Git:
    """git bound to one repository directory (a bare mirror or a work tree)."""

    def __init__(
        self, directory: Path, *, allow_file: bool = False, bare: bool = False, label: str | None = None
    ) -> None:
        self.directory = Path(directory)
        self.allow_file = allow_file
        self.bare = bare
        # What error lines call this repository (a mirror's public URL; else its directory).
        self.label = label or str(self.directory)

    def argv(self, args: Sequence[str]) -> list[str]:
        where = ["--git-dir", str(self.directory)] if self.bare else ["-C", str(self.directory)]
        return [_git_binary(), *where, *protocol_options(allow_file=self.allow_file), *args]

    def run(
        self,
        *args: str,
        input: bytes | None = None,
        check: bool = True,
        extra_env: dict[str, str] | None = None,
    ) -> str:
        env = git_env()
        if extra_env:
            env.update(extra_env)
        proc = _run(
            self.argv(args),
            args,
            self.label,
            input=input,
            env=env,
            stdin=None if input is not None else subprocess.DEVNULL,
        )
        if check and proc.returncode != 0:
            raise GitFailed(args, proc.returncode, proc.stderr.decode(errors="replace"), where=self.label)
        return proc.stdout.decode(errors="replace")

    def ok(self, *args: str) -> bool:
        proc = _run(self.argv(args), args, self.label, env=git_env(), stdin=subprocess.DEVNULL)
        return proc.returncode == 0

    @contextmanager
    def stream(self, *args: str) -> Iterator[subprocess.Popen[bytes]]:
        """A running git whose stdout is read as it is produced (for large logs), killed at its
        deadline (the reader then sees the end of the output, and GitTimedOut is raised)."""
        seconds, limit, setting = _deadline(args, self.label)
        proc = subprocess.Popen(
            self.argv(args),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=git_env(),
            stdin=subprocess.DEVNULL,
        )
        fired = threading.Event()

        def expire() -> None:
            fired.set()
            proc.kill()

        watchdog = threading.Timer(seconds, expire)
        watchdog.daemon = True
        watchdog.start()
        try:
            yield proc
        finally:
            # Still under the watchdog: a git that hangs after its output is killed here too.
            if proc.stdout:
                proc.stdout.close()
            stderr = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
            if proc.stderr:
                proc.stderr.close()
            code = proc.wait()
            watchdog.cancel()
            if fired.is_set():
                raise GitTimedOut(args, limit, where=self.label, setting=setting)
            if code != 0:
                raise GitFailed(args, code, stderr, where=self.label)


_NOWHERE: list[str] = []


def _nowhere() -> str:
    """An empty directory of this process's own: where git runs when it is in no repository.

    From the caller's directory, git would look for a repository there and upward and read its
    configuration (``git bundle list-heads`` does); here it finds none, and looks no higher.
    """
    if not _NOWHERE:
        _NOWHERE.append(tempfile.mkdtemp(prefix="releasekit-nowhere-"))
        atexit.register(shutil.rmtree, _NOWHERE[0], True)
    return _NOWHERE[0]


def run_git(args: Sequence[str], *, cwd: Path | None = None, allow_file: bool = False) -> str:
    """git outside any repository (init, bundle list-heads); paths in ``args`` must be absolute."""
    where = ["-C", str(cwd)] if cwd else []
    env = git_env()
    if cwd is None:
        env["GIT_CEILING_DIRECTORIES"] = os.path.dirname(_nowhere())
    proc = _run(
        [_git_binary(), *where, *protocol_options(allow_file=allow_file), *args],
        args,
        "",
        env=env,
        stdin=subprocess.DEVNULL,
        cwd=_nowhere() if cwd is None else None,
    )
    if proc.returncode != 0:
        raise GitFailed(list(args), proc.returncode, proc.stderr.decode(errors="replace"))
    return proc.stdout.decode(errors="replace")
