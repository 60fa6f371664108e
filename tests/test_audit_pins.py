"""audit pins over a real build/release repository layout."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

MANIFEST = {
    "schema": "releasekit/v1",
    "name": "pins-test",
    "components": {"tvm": {"kind": "wheel", "requirement": "apache-tvm-ffi==0.1.12", "sha256": "to-be-locked"}},
    "toolchain": {"base_image": {"name": "x", "digest": "to-be-locked"}, "cuda_arch_list": ["12.0a"]},
    "pins": [
        {"package": "apache-tvm-ffi", "version": "0.1.12"},
        {"package": "flashinfer-python", "version": "0.6.2", "scopes": ["runtime"]},
    ],
}


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "releasekit", *args], capture_output=True, text=True)


def _write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


GOOD = {
    "pyproject.toml": '[build-system]\nrequires = ["setuptools>=68", "apache-tvm-ffi==0.1.12"]\n\n[project]\nname = "x"\n'
    'dependencies = [\n  "apache_tvm_ffi==0.1.12",  # the same package, other spelling\n  "flashinfer-python==0.6.2",\n]\n',
    "requirements.txt": "apache-tvm-ffi==0.1.12\nflashinfer-python==0.6.2\n",
    "requirements-build.txt": "Apache-TVM-FFI == 0.1.12\n",
    "docker/Dockerfile": "FROM scratch\nARG APACHE_TVM_FFI_VERSION=0.1.12\nRUN pip install apache-tvm-ffi==${APACHE_TVM_FFI_VERSION}\n"
    "# flashinfer-python is installed at runtime: not a Dockerfile pin\nRUN pip install flashinfer-python==0.5.0\n",
    ".github/workflows/release.yml": "env:\n  TVM_FFI_VERSION: 0.1.12\njobs:\n  b:\n    steps:\n      - run: pip install apache-tvm-ffi==0.1.12\n",
    "README.md": "apache-tvm-ffi==0.0.1 in prose is not a release input\n",
}


@pytest.fixture()
def manifest(tmp_path: Path) -> Path:
    path = tmp_path / "m.yaml"
    path.write_text(json.dumps(MANIFEST))
    return path


def test_agreeing_inputs_pass(tmp_path: Path, manifest: Path) -> None:
    repo = tmp_path / "repo"
    _write(repo, GOOD)
    r = _cli("audit", "pins", str(manifest), "--repo", str(repo), "--json")
    assert r.returncode == 0, r.stdout
    data = json.loads(r.stdout)
    where = {(o["file"], o["line"]) for o in data["occurrences"]}
    assert ("pyproject.toml", 2) in where and ("pyproject.toml", 7) in where
    assert ("docker/Dockerfile", 2) in where and (".github/workflows/release.yml", 2) in where
    assert all(o["agrees"] for o in data["occurrences"])
    # The runtime-only pin is not applied to the Dockerfile (release scope).
    assert not any(o["file"] == "docker/Dockerfile" and o["package"] == "flashinfer-python" for o in data["occurrences"])


def test_each_disagreeing_file_line_is_listed(tmp_path: Path, manifest: Path) -> None:
    repo = tmp_path / "repo"
    bad = dict(GOOD)
    bad["requirements.txt"] = "apache-tvm-ffi>=0.1.10\nflashinfer-python==0.6.2\n"
    bad["docker/Dockerfile"] = "FROM scratch\nARG APACHE_TVM_FFI_VERSION=0.1.11\nRUN pip install apache-tvm-ffi\n"
    bad[".github/workflows/release.yml"] = "env:\n  TVM_FFI_VERSION: '0.1.12'\n"
    bad["requirements-extra.txt"] = "git+https://github.com/org/tvm-ffi@main#egg=apache-tvm-ffi\nfoo @ https://example.com/foo.whl\n"
    _write(repo, bad)
    r = _cli("audit", "pins", str(manifest), "--repo", str(repo), "--json")
    assert r.returncode == 1
    got = sorted((f["code"], f["location"]["file"], f["location"]["line"]) for f in json.loads(r.stdout)["findings"]["findings"])
    assert got == [
        ("PIN_MISMATCH", "docker/Dockerfile", 2),
        ("PIN_MISMATCH", "requirements.txt", 1),
        ("PIN_UNPINNED", "docker/Dockerfile", 3),
        ("VCS_DEPENDENCY", "requirements-extra.txt", 1),
        ("VCS_DEPENDENCY", "requirements-extra.txt", 2),
    ]
    text = _cli("audit", "pins", str(manifest), "--repo", str(repo))
    assert "requirements.txt:1" in text.stdout and text.returncode == 1


def test_missing_repo_is_exit_2(tmp_path: Path, manifest: Path) -> None:
    r = _cli("audit", "pins", str(manifest), "--repo", str(tmp_path / "nope"))
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1
