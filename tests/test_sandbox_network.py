"""Issue 43: a sandboxed step has a network only where the locked manifest grants it for that step.

The grant is ``sandbox: {network: [build, test, hygiene]}`` on a git component. Without Docker: the
manifest model refuses an unknown or repeated step (exit 2 at ``manifest validate``), ``build --plan``
shows the granted build's ``docker run`` without ``--network=none``, and the wheel cache keeps a
network-built wheel apart. With Docker, for real: two components, one granted every step, one
granted none, each of whose PEP 517 backend, test suite and pre-commit hook asks an HTTP server
this test runs on the host, on the Docker bridge's gateway address. Only the granted component's
requests arrive; a remote hook repository (served by the same server, over git's dumb HTTP) is
fetched and run only for it; every record says which steps had a network.
"""

from __future__ import annotations

import http.server
import json
import threading
import uuid
from pathlib import Path

import pytest
from cli_run import invoke
from forge import Forge
from plan_world import written_and_locked
from ruamel.yaml import YAML
from sandbox_support import WHEEL_WRITER

from releasekit.manifest import load_manifest

TOKEN = uuid.uuid4().hex[:12]
SECRET = f"rk-net-secret-{TOKEN}"

# Every step of a component asks the server for /probe/<step>-<component>; each fails quietly without a network.
PROBE = """
import os, sys, urllib.request

URL = "{url}/probe/"
NAME = "{name}"


def probe(step):
    # A network is no licence for credentials: the environment is still the allow-listed one.
    leaked = any("{secret}" in value for value in os.environ.values())
    try:
        urllib.request.urlopen(f"{{URL}}{{step}}-{{NAME}}{{'-LEAKED' if leaked else ''}}", timeout=5).read()
        return "reached"
    except Exception as exc:
        return f"unreachable: {{exc}}"


if __name__ == "__main__":
    print(f"rk-net {{sys.argv[1]}}: {{probe(sys.argv[1])}}")
    if len(sys.argv) > 2:
        with open(sys.argv[2], "w") as fh:
            fh.write('<testsuite tests="1"><testcase classname="probe" name="reach"/></testsuite>')
"""

BACKEND = (
    WHEEL_WRITER
    + """
import sys

sys.path.insert(0, ".")
from probe import NAME, probe


def get_requires_for_build_wheel(config_settings=None):
    return []


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    print("rk-net build:", probe("build"))
    return write_wheel(wheel_directory, f"rknet{NAME}", {f"rknet{NAME}/__init__.py": b""})
"""
)

PYPROJECT = """\
[build-system]
requires = []
build-backend = "rk_backend"
backend-path = ["_backend"]

[project]
name = "rknet{name}"
version = "1.0"
"""

HOOKS = """\
repos:
  - repo: local
    hooks:
      - id: probe
        name: probe
        language: system
        entry: python3 probe.py hook
        pass_filenames: false
        always_run: true
  - repo: {url}/hooks.git
    rev: {rev}
    hooks:
      - id: remote-probe
"""

REMOTE_HOOKS = """\
- id: remote-probe
  name: a hook of a remote repository
  language: system
  entry: python3 -c "import urllib.request; urllib.request.urlopen('{url}/probe/remote-hook', timeout=5)"
  pass_filenames: false
  always_run: true
"""


class _Recorder(http.server.SimpleHTTPRequestHandler):
    """Serves the forge's directory (the remote hook repository, over git's dumb HTTP) and answers
    every /probe/ request; records each path asked for."""

    seen: list[str]

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        self.seen.append(self.path)
        if self.path.startswith("/probe/"):
            self.send_response(200)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"ok")
            return
        super().do_GET()

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the base class's name
        return


@pytest.fixture
def gateway_server(docker_client, tmp_path):
    """An HTTP server on the default bridge network's gateway: what a container with a network reaches."""
    config = docker_client.networks.get("bridge").attrs["IPAM"]["Config"]
    gateway = next((c["Gateway"] for c in config if c.get("Gateway")), None)
    served = tmp_path / "served"
    served.mkdir()
    seen: list[str] = []
    handler = type("Handler", (_Recorder,), {"seen": seen})
    try:
        server = http.server.ThreadingHTTPServer((gateway, 0), lambda *a: handler(*a, directory=str(served)))
    except (OSError, TypeError):
        pytest.skip(f"cannot listen on the Docker bridge's gateway {gateway} here")
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://{gateway}:{server.server_address[1]}", served, seen
    server.shutdown()
    server.server_close()


def _component(name: str, forge: Forge, grant: list[str]) -> dict:
    component: dict = {
        "kind": "git",
        "repo": forge.url,
        "canonical_branch": "main",
        "distribution": f"rknet{name}",
        "import_names": [f"rknet{name}"],
        "build": {
            "environment": {"kind": "venv"},
            "version_policy": {"policy": "static", "reason": "the probe's own fixed version"},
        },
        "tests": [
            {
                "name": "probe",
                "command": {
                    "argv": ["python3", "probe.py", "test", "/releasekit/out/junit.xml"],
                    "junit": "/releasekit/out/junit.xml",
                },
                "files": ["probe.py"],
                "timeout": 120,
            }
        ],
        "hygiene": {"scope": "all", "steps": ["pre-commit"], "tools": {"pre-commit": "4.6.2"}},
    }
    if grant:
        component["sandbox"] = {"network": grant}
    return component


def _world(root: Path, url: str, served: Path, base_image: str) -> tuple[Path, Path]:
    """The hook repository (served), the two component repositories, the manifest and its lock."""
    hooks = Forge(served, "hooks")
    rev = hooks.init({".pre-commit-hooks.yaml": REMOTE_HOOKS.format(url=url)})
    hooks.remote_git("update-server-info")  # what git's dumb HTTP reads
    components = {}
    for name, grant in (("open", ["build", "test", "hygiene"]), ("shut", [])):
        forge = Forge(root / "forge", name)
        forge.init(
            {
                "probe.py": PROBE.format(url=url, name=name, secret=SECRET),
                "_backend/rk_backend.py": BACKEND,
                "pyproject.toml": PYPROJECT.format(name=name),
                f"rknet{name}/__init__.py": "",
                ".pre-commit-config.yaml": HOOKS.format(url=url, rev=rev),
            }
        )
        components[name] = _component(name, forge, grant)
    data = {
        "schema": "releasekit/v1",
        "name": f"sbx-net-{TOKEN}",
        "components": components,
        "toolchain": {
            "base_image": {"name": base_image, "digest": "to-be-locked"},
            "cuda_arch_list": ["12.0a"],
        },
    }
    return written_and_locked(root, data)


def _probes(seen: list[str]) -> list[str]:
    return sorted({p.removeprefix("/probe/") for p in seen if p.startswith("/probe/")})


@pytest.mark.docker
def test_only_the_granted_steps_reach_the_network(tmp_path, gateway_server, base_image, docker_client):
    url, served, seen = gateway_server
    manifest, lock = _world(tmp_path, url, served, base_image.name)
    out = tmp_path / "out"
    common = ["--lock", str(lock), "-o", str(out), "--allow-local-repos"]
    # Credentials in releasekit's environment: none reaches a step, granted a network or not.
    env = {
        "RELEASEKIT_CACHE": str(tmp_path / "cache"),
        "GITHUB_TOKEN": SECRET,
        "AWS_SECRET_ACCESS_KEY": SECRET,
    }
    built = invoke("build", str(manifest), *common, env=env)
    assert built.returncode == 0, built.stdout + built.stderr
    assert _probes(seen) == ["build-open"]
    record = json.loads((out / "build.json").read_text())
    assert {c["name"]: c["network"] for c in record["components"]} == {"open": True, "shut": False}
    provenance = json.loads((out / "provenance.intoto.json").read_text())
    assert provenance["predicate"]["buildDefinition"]["internalParameters"]["networkGranted"] == ["open"]
    assert "network granted by the manifest" in (out / "logs" / "open.log").read_text()
    assert "sandbox, no network" in (out / "logs" / "shut.log").read_text()
    try:
        tested = invoke("test", str(manifest), "--image", record["image_id"], *common, env=env)
        assert tested.returncode == 0, tested.stdout + tested.stderr
        assert _probes(seen) == ["build-open", "test-open"]
        receipts = {n: json.loads((out / "tests" / f"{n}.probe.json").read_text()) for n in ("open", "shut")}
        assert {n: r["network"] for n, r in receipts.items()} == {"open": True, "shut": False}
    finally:
        docker_client.images.remove(record["image_id"], force=True)
    cleaned = invoke("hygiene", str(manifest), *common, env=env)
    assert cleaned.returncode == 0, cleaned.stdout + cleaned.stderr  # not-runnable: a warning here
    # The granted component's local hook reached the server, and its remote hook was fetched and ran.
    assert _probes(seen) == ["build-open", "hook-open", "remote-hook", "test-open"]
    assert any(p.startswith("/hooks.git/") for p in seen)
    hygiene = json.loads((out / "hygiene.json").read_text())
    steps = {c["component"]: c["steps"][0] for c in hygiene["components"]}
    assert {n: (s["status"], s["network"]) for n, s in steps.items()} == {
        "open": ("passed", True),
        "shut": ("not-runnable", False),
    }
    (unrunnable,) = [f for f in hygiene["findings"]["findings"] if f["code"] == "HOOK_NOT_RUNNABLE"]
    assert "sandbox.network can grant hygiene" in unrunnable["message"]


# --- the grant in the manifest (no Docker) ---------------------------------------------------------


def _manifest_file(tmp_path: Path, sandbox: object) -> Path:
    app = {
        "kind": "git",
        "repo": "https://example.invalid/app.git",
        "canonical_branch": "main",
        "distribution": "app",
        "build": {"environment": {"kind": "venv"}},
        "sandbox": sandbox,
    }
    data = {
        "schema": "releasekit/v1",
        "name": "grant",
        "components": {"app": app},
        "toolchain": {"base_image": {"name": "base", "digest": "to-be-locked"}, "cuda_arch_list": ["12.0a"]},
    }
    path = tmp_path / "m.yaml"
    with path.open("w") as handle:
        YAML(typ="safe", pure=True).dump(data, handle)
    return path


def test_a_grant_names_known_steps_once(tmp_path):
    good = _manifest_file(tmp_path, {"network": ["build", "hygiene"]})
    assert invoke("manifest", "validate", str(good)).returncode == 0
    app = load_manifest(good).manifest.git_components()["app"]
    assert [app.network_granted(s) for s in ("build", "test", "hygiene")] == [True, False, True]
    for sandbox, needle in (
        ({"network": ["build", "publish"]}, "components.app.sandbox.network[1]"),
        ({"network": ["test", "test"]}, "a step is named twice"),
        ({"network": True}, "components.app.sandbox.network"),
        ({"network": ["build"], "mounts": ["/"]}, "components.app.sandbox.mounts"),
    ):
        r = invoke("manifest", "validate", str(_manifest_file(tmp_path, sandbox)))
        assert r.returncode == 2 and needle in r.stderr, (sandbox, r.stderr)


def test_no_grant_means_no_network_for_any_step(tmp_path):
    app = load_manifest(_manifest_file(tmp_path, {})).manifest.git_components()["app"]
    assert not any(app.network_granted(s) for s in ("build", "test", "hygiene"))


def test_build_plan_shows_the_granted_network(tmp_path):
    for sandbox, network_none in (({"network": ["build"]}, False), ({"network": ["test"]}, True)):
        r = invoke("build", str(_manifest_file(tmp_path, sandbox)), "--plan", "--json")
        assert r.returncode == 0, r.stderr
        (command,) = json.loads(r.stdout)["components"][0]["command"]
        assert ("--network=none" in command) is network_none, command


def test_a_wheel_built_with_a_network_is_cached_apart():
    from releasekit.builder.cache import wheel_key
    from releasekit.manifest.models import BuildRecipe
    from releasekit.records.lock import LockedGitComponent, LockedToolchain

    locked = LockedGitComponent.model_construct(commit="a" * 40, tree="b" * 40, commit_time=1)
    toolchain = LockedToolchain.model_construct(cuda=None, pytorch=None, nccl=None)
    recipe = BuildRecipe()
    shut = wheel_key(locked, recipe, toolchain, [], "sha256:" + "c" * 64)
    assert shut == wheel_key(locked, recipe, toolchain, [], "sha256:" + "c" * 64, network=False)
    assert shut != wheel_key(locked, recipe, toolchain, [], "sha256:" + "c" * 64, network=True)
