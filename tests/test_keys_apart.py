"""Issue 34, "keys apart": no program releasekit starts sees a signing key or a credential.

Real programs: a PEP 517 in-tree backend in a git repository made here, whose ``build_wheel`` writes
the environment it got to a file; a hygiene tool (``sh -c env``) run as the hygiene stage runs one.
"""

from __future__ import annotations

import json
import subprocess
import textwrap
from pathlib import Path

import pytest
from sandbox_support import WHEEL_WRITER, base_sandbox

from releasekit import child_env, registry
from releasekit.builder.wheel import Log, build_wheel
from releasekit.forge import github
from releasekit.manifest.models import BuildRecipe
from releasekit.signing import keys
from releasekit.suites.checks._tool import run_tool

SECRETS = {
    "RELEASEKIT_SIGNING_KEY": "-----BEGIN PRIVATE KEY-----Zk3yM4t3r1al",
    "RELEASEKIT_SIGNING_KEY_FILE": "/nonexistent/Zk3yFile.key",
    "RELEASEKIT_REGISTRY_USERNAME": "Zk3yUser",
    "RELEASEKIT_REGISTRY_PASSWORD": "Zk3yPassw0rd",
    "RELEASEKIT_FORGE_TOKEN": "Zk3yForge",
    "GITHUB_TOKEN": "ghp_Zk3yT0k3n",
    "GH_TOKEN": "gho_Zk3yT0k3n",
}

BACKEND = (
    WHEEL_WRITER
    + """
import json, os

def get_requires_for_build_wheel(config_settings=None):
    return []

def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    # What a hostile backend would exfiltrate: its whole environment (into the build's log).
    print("ENV-DUMP " + json.dumps(dict(os.environ)), flush=True)
    return write_wheel(wheel_directory, "envdump", {"envdump/__init__.py": b""})
"""
)


def _git(repo: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t.invalid", *args],
        cwd=repo,
        check=True,
        capture_output=True,
    )


@pytest.fixture
def secrets_set(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)


def test_every_credential_releasekit_reads_is_on_the_list() -> None:
    read = {keys.ENV_KEY, keys.ENV_KEY_FILE, registry.ENV_USERNAME, registry.ENV_PASSWORD, *github.TOKEN_ENV}
    assert read <= child_env.SECRET_VARIABLES
    assert set(SECRETS) <= child_env.SECRET_VARIABLES


@pytest.mark.docker
def test_a_build_backend_sees_no_credential(
    tmp_path: Path, secrets_set: None, monkeypatch, docker_client, base_image
) -> None:
    """Even a manifest whose ``pass_env`` names every credential passes none of them to the backend."""
    source = tmp_path / "src"
    project = source / "python"
    (project / "_backend").mkdir(parents=True)
    (project / "_backend" / "envdump_backend.py").write_text(BACKEND, encoding="utf-8")
    (project / "pyproject.toml").write_text(
        textwrap.dedent(
            """
            [build-system]
            requires = []
            build-backend = "envdump_backend"
            backend-path = ["_backend"]
            """
        ),
        encoding="utf-8",
    )
    _git(source, "init", "-q", "-b", "main")
    _git(source, "add", "-A")
    _git(source, "commit", "-q", "-m", "envdump")
    # A credential inside an index URL is no more passed than one in a variable of its own.
    monkeypatch.setenv("PIP_INDEX_URL", "https://user:Zk3yIndex@index.invalid/simple")
    monkeypatch.setenv("RK_MIRROR", "https://user:Zk3yMirror@mirror.invalid/")
    recipe = BuildRecipe.model_validate(
        {
            "subdirectory": "python",
            "version_policy": {"policy": "static", "reason": "test"},
            "pass_env": [*sorted(SECRETS), "PIP_INDEX_URL", "RK_MIRROR"],
        }
    )
    built = build_wheel(
        source,
        tmp_path / "out",
        recipe=recipe,
        commit="0" * 40,
        source_date_epoch=1_700_000_000,
        arches=[],
        log=Log(tmp_path / "build.log"),
        component="envdump",
        builder=base_sandbox(docker_client, base_image),
    )
    assert built.filename == "envdump-1.0-py3-none-any.whl"
    log = (tmp_path / "build.log").read_text()
    dump = next(line for line in log.splitlines() if line.startswith("ENV-DUMP "))
    seen = json.loads(dump.removeprefix("ENV-DUMP "))
    assert not set(seen) & set(SECRETS), sorted(set(seen) & set(SECRETS))
    assert "Zk3y" not in log
    assert "PATH" in seen and seen["SOURCE_DATE_EPOCH"] == "1700000000"  # what a build needs still gets there


def test_a_hygiene_tool_sees_no_credential(tmp_path: Path, secrets_set: None, monkeypatch) -> None:
    monkeypatch.setenv("PRE_COMMIT_HOME", str(tmp_path / "pc"))
    code, out, _err = run_tool(["sh", "-c", "env"], tmp_path, {"RUFF_CACHE_DIR": str(tmp_path / "rc")})
    assert code == 0
    names = {line.split("=", 1)[0] for line in out.splitlines() if "=" in line}
    assert not names & set(SECRETS), names & set(SECRETS)
    assert "Zk3y" not in out
    assert {"PATH", "PRE_COMMIT_HOME", "RUFF_CACHE_DIR"} <= names


def test_child_env_never_sets_a_credential_a_caller_asks_for() -> None:
    env = child_env.child_env(
        ["GITHUB_TOKEN"],
        prefixes=("RELEASEKIT_",),
        set_={"RELEASEKIT_REGISTRY_PASSWORD": "x", "OK": "1"},
        source={**SECRETS, "PATH": "/bin", "RELEASEKIT_CACHE": "/c", "OTHER": "no"},
    )
    assert env == {"PATH": "/bin", "RELEASEKIT_CACHE": "/c", "OK": "1"}
