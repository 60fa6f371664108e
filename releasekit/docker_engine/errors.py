"""What the Docker adapter raises instead of the SDK's exceptions.

Callers never see a ``docker`` exception: an engine that cannot be reached is an
``EngineUnreachable`` (an EnvironmentProblem, exit 2); an operation the engine refuses is an
``EngineError`` carrying the engine's own one-line explanation; an image the engine does not
have is ``NoSuchImage``. Each stage words its own message from these.
"""

from __future__ import annotations

from releasekit.errors import EnvironmentProblem


class EngineUnreachable(EnvironmentProblem):
    """No usable Docker Engine; ``cause`` names the underlying failure's type."""

    def __init__(self, message: str, *, hint: str | None = None, cause: str = "") -> None:
        super().__init__(message, hint=hint)
        self.cause = cause


class EngineError(Exception):
    """The engine refused or broke an operation; ``explanation`` is its reason on one line."""

    def __init__(self, explanation: str) -> None:
        super().__init__(explanation)
        self.explanation = explanation


class NoSuchImage(EngineError):
    """The engine has no image of that name, tag or ID."""

    def __init__(self, reference: str) -> None:
        super().__init__(f"no such image: {reference}")
        self.reference = reference


class ContainerTimeout(EngineError):
    """A container did not exit within its time limit."""


def explain(exc: BaseException) -> str:
    """The engine's explanation of an SDK error (or the error itself), on one line."""
    text = getattr(exc, "explanation", None) or str(exc)
    return " ".join(str(text).split())
