"""The CLI with no signing key in its environment unless a test gives one: what the signing tests
share."""

from __future__ import annotations

import subprocess

from cli_run import invoke, run_cli

from releasekit.signing import ENV_KEY, ENV_KEY_FILE


def cli(*args: str, env: dict[str, str] | None = None, **child: object) -> subprocess.CompletedProcess[str]:
    """``releasekit ARGS`` without a signing key in its environment unless ``env`` gives one; in this
    process, or in a child when ``child`` holds arguments for it (``pass_fds``: a descriptor is handed
    over)."""
    unset: dict[str, str | None] = {ENV_KEY: None, ENV_KEY_FILE: None}
    if child:
        return run_cli(*args, env={**unset, **(env or {})}, timeout=120, **child)
    return invoke(*args, env={**unset, **(env or {})})
