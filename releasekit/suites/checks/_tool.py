"""Running a hygiene tool in the composed tree: argv in, (exit code, output) out."""

from __future__ import annotations

import subprocess
from pathlib import Path

from releasekit.child_env import child_env
from releasekit.errors import EnvironmentProblem

TOOL_TIMEOUT = 900.0


def run_tool(argv: list[str], cwd: Path, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    try:
        proc = subprocess.run(
            argv,
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=TOOL_TIMEOUT,
            check=False,
            # pre-commit and ruff run hooks and plugins the component's tree names: an allow-list, no credential.
            env=child_env(prefixes=("PRE_COMMIT", "RUFF_"), set_=env),
        )
    except FileNotFoundError:
        raise EnvironmentProblem(f"cannot run {argv[0]}: not found") from None
    except subprocess.TimeoutExpired:
        raise EnvironmentProblem(f"{Path(argv[0]).name} ran longer than {TOOL_TIMEOUT:g} s") from None
    return proc.returncode, proc.stdout, proc.stderr


def python_files(files: list[str]) -> list[str]:
    return [f for f in files if f.endswith((".py", ".pyi"))]
