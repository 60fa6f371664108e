"""Issue 43, "keys live where component code never ran": no command holds a signing key in its
environment. A variable stays in ``/proc/<pid>/environ`` for the life of the process, where a build
backend or a hook of the same user reads it; so the command line refuses one before any command
reads or starts anything (one check at the edge, in ``releasekit/cli.py``), ``sign`` included: it
reads the key only from ``--key FILE`` or ``--key-fd N``.
"""

from __future__ import annotations

import pytest
import typer
from cli_run import invoke

from releasekit.cli import app
from releasekit.signing.keys import ENV_KEY, ENV_KEY_FILE

PEM = "-----BEGIN PRIVATE KEY-----\nZk3yM4t3r1al\n-----END PRIVATE KEY-----\n"


def _leaves(command: object, path: list[str], ctx: typer.Context) -> list[list[str]]:
    if not hasattr(command, "list_commands"):
        return [path]
    found: list[list[str]] = []
    for name in command.list_commands(ctx):
        found += _leaves(command.get_command(ctx, name), [*path, name], ctx)
    return found


def _every_command() -> list[list[str]]:
    root = typer.main.get_command(app)
    return _leaves(root, [], typer.Context(root))


COMMANDS = _every_command()


def test_the_list_is_every_command():
    """The parametrisation below reaches every leaf command, the ones a hostile hook could run under."""
    names = {" ".join(path) for path in COMMANDS}
    assert {"hygiene", "test", "plan lock", "build", "verify-provenance", "sign", "stage"} <= names
    assert {"publish", "promote", "validate run", "audit release-only", "keys generate", "demo"} <= names


@pytest.mark.parametrize("variable", [ENV_KEY, ENV_KEY_FILE, "RELEASEKIT_SIGNING_KEY_PASSPHRASE"])
@pytest.mark.parametrize("path", COMMANDS, ids=lambda p: "-".join(p))
def test_a_key_in_the_environment_is_refused_by_every_command(tmp_path, path, variable):
    """Exit 2, one line naming the variable, nothing read or written: the refusal comes before the
    command parses its own arguments, so none of them are needed to reach it."""
    value = PEM if variable != ENV_KEY_FILE else str(tmp_path / "releasekit.key")
    run = invoke(*path, env={variable: value}, cwd=tmp_path)
    assert run.returncode == 2, run.stdout + run.stderr
    assert run.stderr.count("\n") == 1, run.stderr
    assert f"${variable} is set" in run.stderr, run.stderr
    assert "Zk3y" not in run.stdout + run.stderr
    assert list(tmp_path.iterdir()) == []


def test_audit_release_only_fast_entry_refuses_too(tmp_path):
    """``audit release-only`` has a typer-free entry (timed against git): it refuses the same way."""
    run = invoke("audit", "release-only", str(tmp_path), "--json", env={ENV_KEY: PEM}, cwd=tmp_path)
    assert run.returncode == 2 and run.stderr.count("\n") == 1 and f"${ENV_KEY} is set" in run.stderr


def test_an_empty_variable_is_no_key(tmp_path):
    """A variable set to nothing (a workflow's unset secret) holds no key: not refused for that."""
    run = invoke("matrix", "--help", env={ENV_KEY: ""}, cwd=tmp_path)
    assert run.returncode == 0, run.stderr
