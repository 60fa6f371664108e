"""The error hierarchy. The CLI turns every one of these into one line and an exit code.

Business logic raises these; it never prints and never calls ``sys.exit``.
"""

from __future__ import annotations


class ReleasekitError(Exception):
    """Base class. ``exit_code`` is what the CLI exits with."""

    exit_code = 2

    def __init__(self, message: str, *, hint: str | None = None, details: list[str] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
        # Extra lines (one per problem) printed after the summary line, e.g. one per schema error.
        self.details = details or []

    def one_line(self) -> str:
        text = " ".join(self.message.split())
        if self.hint:
            text += f" ({' '.join(self.hint.split())})"
        return text


class InputError(ReleasekitError):
    """Unusable input: a file that does not parse, a bad argument, an unsafe URL or ref."""


class EnvironmentProblem(ReleasekitError):
    """The environment cannot do what was asked: no Docker Engine, no git, no nvcc, no base image."""


class BuildFailed(ReleasekitError):
    """A build step ran and failed: findings-like, so exit 1."""

    exit_code = 1


class LockManifestMismatch(ReleasekitError):
    """The manifest given is not the one whose sha256 the lock records (``LOCK_MANIFEST_MISMATCH``):
    a finding, so exit 1, raised where no gate report carries it (stage, validate, test)."""

    exit_code = 1
