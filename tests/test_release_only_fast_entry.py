"""The typer-free entry of ``audit release-only --json`` is the typer command, minus typer's start."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from forge import Forge
from typer.testing import CliRunner

from releasekit.cli import app, stage_commands
from releasekit.plan.fast_commands import (
    RELEASE_ONLY_FLAGS,
    RELEASE_ONLY_OPTIONS,
    RELEASE_ONLY_REPEATED,
    parse_release_only,
)

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture()
def merged_forge(tmp_path: Path) -> Forge:
    f = Forge(tmp_path / "r", "vllm")
    f.init({"a.py": "A = 0\n"})
    f.switch("upstream", "main")
    f.commit({"u.py": "U = 1\n"}, "upstream work")
    f.switch("release", "main")
    f.commit({"b.py": "B = 1\n"}, "release-only")
    f.git("merge", "--no-ff", "-m", "merge upstream", "upstream")
    return f


def test_the_fast_parser_knows_exactly_the_typer_command_options() -> None:
    command = stage_commands("releasekit.plan.commands")["audit"].commands["release-only"]
    names = {opt for param in command.params for opt in param.opts}
    assert names == set(RELEASE_ONLY_OPTIONS) | set(RELEASE_ONLY_FLAGS) | set(RELEASE_ONLY_REPEATED)
    bools = {opt for param in command.params if param.is_flag for opt in param.opts}
    assert bools == set(RELEASE_ONLY_FLAGS)


@pytest.mark.parametrize(
    "args",
    [
        ["--release", "r", "--canonical", "c"],  # text output: typer renders it
        ["--release", "r", "--canonical", "c", "--json", "--help"],
        ["--release", "r", "--json"],  # incomplete: typer says what is missing
        ["--release", "r", "--canonical", "c", "--json", "--repo"],
        ["--release", "r", "--canonical", "c", "--json", "--json"],
        ["--release", "--canonical", "c", "--json"],
        ["--release", "r", "--canonical", "c", "--json=yes"],
        ["--release", "r", "--canonical", "c", "--json", "extra"],
    ],
)
def test_what_the_fast_parser_does_not_fully_understand_goes_to_typer(args: list[str]) -> None:
    assert parse_release_only(args) is None


def _fast(merged_forge: Forge, *extra: str) -> subprocess.CompletedProcess[str]:
    code = (
        "import sys\nfrom releasekit import cli\n"
        "try:\n    cli.main(sys.argv[1:])\nfinally:\n"
        "    sys.stderr.write('typer loaded' if 'typer' in sys.modules else 'no typer')\n"
    )
    return subprocess.run(
        [sys.executable, "-c", code, "audit", "release-only", "--repo", str(merged_forge.work), *extra],
        capture_output=True,
        text=True,
        cwd=REPO,
    )


@pytest.mark.parametrize("upstream", [[], ["--upstream", "upstream"], ["--upstream=upstream"]])
def test_fast_entry_output_is_the_typer_command_output(merged_forge: Forge, upstream: list[str]) -> None:
    args = ["--release=release", "--canonical", "main", *upstream, "--json"]
    fast = _fast(merged_forge, *args)
    assert fast.stderr == "no typer", fast.stderr
    typed = CliRunner().invoke(app, ["audit", "release-only", "--repo", str(merged_forge.work), *args])
    assert fast.returncode == typed.exit_code == 1
    assert fast.stdout == typed.stdout and '"release_only"' in fast.stdout


def test_fast_entry_bad_input_is_one_line_exit_2(merged_forge: Forge) -> None:
    r = _fast(merged_forge, "--release", "nope", "--canonical", "main", "--json")
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.startswith("releasekit: error:") and r.stderr.count("\n") == 1, r.stderr
    # Left to typer: its own usage error, still one line and exit 2.
    r = _fast(merged_forge, "--release", "release", "--json")
    assert r.returncode == 2 and "--canonical" in r.stderr and "typer loaded" in r.stderr
