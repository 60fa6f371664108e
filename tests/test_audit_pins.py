"""audit pins over a real build/release repository layout."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from cli_run import invoke
from pins_support import MANIFEST, commit_files

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
    commit_files(repo, GOOD)
    r = invoke("audit", "pins", str(manifest), "--repo", str(repo), "--json")
    assert r.returncode == 0, r.stdout
    data = json.loads(r.stdout)
    where = {(o["file"], o["line"]) for o in data["occurrences"]}
    assert ("pyproject.toml", 2) in where and ("pyproject.toml", 7) in where
    assert ("docker/Dockerfile", 2) in where and (".github/workflows/release.yml", 2) in where
    assert all(o["agrees"] for o in data["occurrences"])
    # The runtime-only pin is not applied to the Dockerfile (release scope).
    assert not any(
        o["file"] == "docker/Dockerfile" and o["package"] == "flashinfer-python" for o in data["occurrences"]
    )


def test_each_disagreeing_file_line_is_listed(tmp_path: Path, manifest: Path) -> None:
    repo = tmp_path / "repo"
    bad = dict(GOOD)
    bad["requirements.txt"] = "apache-tvm-ffi>=0.1.10\nflashinfer-python==0.6.2\n"
    bad["docker/Dockerfile"] = (
        "FROM scratch\nARG APACHE_TVM_FFI_VERSION=0.1.11\nRUN pip install apache-tvm-ffi\n"
    )
    bad[".github/workflows/release.yml"] = "env:\n  TVM_FFI_VERSION: '0.1.12'\n"
    bad["requirements-extra.txt"] = (
        "git+https://github.com/org/tvm-ffi@main#egg=apache-tvm-ffi\nfoo @ https://example.com/foo.whl\n"
    )
    commit_files(repo, bad)
    r = invoke("audit", "pins", str(manifest), "--repo", str(repo), "--json")
    assert r.returncode == 1
    got = sorted(
        (f["code"], f["location"]["file"], f["location"]["line"])
        for f in json.loads(r.stdout)["findings"]["findings"]
    )
    assert got == [
        ("PIN_MISMATCH", "docker/Dockerfile", 2),
        ("PIN_MISMATCH", "requirements.txt", 1),
        ("PIN_UNPINNED", "docker/Dockerfile", 3),
        ("VCS_DEPENDENCY", "requirements-extra.txt", 1),
        ("VCS_DEPENDENCY", "requirements-extra.txt", 2),
    ]
    text = invoke("audit", "pins", str(manifest), "--repo", str(repo))
    assert "requirements.txt:1" in text.stdout and text.returncode == 1


def test_missing_repo_is_exit_2(tmp_path: Path, manifest: Path) -> None:
    r = invoke("audit", "pins", str(manifest), "--repo", str(tmp_path / "nope"))
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1


# --- seed 000's #640 and the other real shapes ------------------------------------------

SEED_MANIFEST = {
    "schema": "releasekit/v1",
    "name": "pins-seed-000",
    "components": {
        "flashinfer": {"kind": "wheel", "requirement": "flashinfer-python==0.6.14", "sha256": "to-be-locked"},
        "deepgemm": {
            "kind": "wheel",
            "requirement": "tokenspeed-deepgemm==2.5.0.post20260629",
            "sha256": "to-be-locked",
        },
    },
    "toolchain": {"base_image": {"name": "x", "digest": "to-be-locked"}, "cuda_arch_list": ["12.0a"]},
    "policy": {"forbid_vcs_dependencies": True},
    "pins": [{"package": "apache-tvm-ffi", "version": "0.1.12"}],
}

SEED_REPO = {
    # 1: the #640 shape: the pin on a continuation line of a multi-line workflow install.
    ".github/workflows/release.yml": (
        "jobs:\n"
        "  wheel:\n"
        "    steps:\n"
        "      - name: deps\n"
        "        run: |\n"
        "          # pip install apache-tvm-ffi==0.1.1 is an old comment\n"
        "          python -m pip install --upgrade \\\n"
        "            build \\\n"
        '            "apache-tvm-ffi>=0.1.5,<=0.1.11" \\\n'
        "            flashinfer-python==0.6.14\n"
    ),
    # 2: Dockerfile RUN with continuations; PEP 440 equality (0.1.12.0 == 0.1.12).
    "docker/Dockerfile": (
        "FROM scratch\n"
        "RUN pip install --no-cache-dir \\\n"
        "    apache-tvm-ffi==0.1.12.0 \\\n"
        "    tokenspeed-deepgemm==2.5.0.post20260601 && \\\n"
        "    echo done\n"
    ),
    # 3: nested requirement folders and an -r include; a constraints file.
    "python/requirements/common.txt": "# apache-tvm-ffi==0.0.9 commented out\n-r cuda.txt\nnumpy\napache-tvm-ffi<=0.1.11\n",
    "python/requirements/cuda.txt": "flashinfer-python==0.6.13  # the old one\n",
    "constraints.txt": "apache-tvm-ffi==0.1.12\ntokenspeed-deepgemm!=2.5.0.post20260629\n",
    "extra/deps.in": "-c ../constraints.txt\n",
    # 4: setup.py reads a requirement file and lists install_requires (ast, not text).
    "setup.py": (
        '"""Old notes: apache-tvm-ffi==0.1.3 was used once."""\n'
        "from pathlib import Path\n"
        "from setuptools import setup\n"
        'EXTRA = open("third_party/reqs.txt").read()\n'
        "RUNTIME = [\n"
        '    "apache-tvm-ffi==0.1.12",\n'
        '    "flashinfer-python",\n'
        "]\n"
        'setup(name="x", install_requires=RUNTIME, setup_requires=["tokenspeed-deepgemm==2.5.0.post20260629"])\n'
    ),
    "third_party/reqs.txt": "apache_tvm_ffi == 0.1.10\nbad@https://example.com/bad.whl\n",
    # 5: pixi.toml with feature tables and both value forms.
    "pixi.toml": (
        '[workspace]\nname = "x"\n\n'
        "[dependencies]\n"
        'python = "3.12.*"\n'
        '# apache-tvm-ffi = "==0.1.1"\n'
        "\n[pypi-dependencies]\n"
        'apache-tvm-ffi = "==0.1.11"\n'
        'flashinfer-python = { version = "==0.6.14" }\n'
        "\n[feature.cuda.pypi-dependencies]\n"
        'tokenspeed-deepgemm = { git = "https://github.com/org/deepgemm", rev = "abc" }\n'
        'apache-tvm-ffi = { version = ">=0.1.12,<0.1.13" }\n'
    ),
    # Unrelated mentions: a module docstring and a markdown file.
    "python/tokenspeed/about.py": '"""Needs apache-tvm-ffi==0.1.11 (old note)."""\n',
    "docs/install.md": "pip install apache-tvm-ffi==0.1.11\n",
}


def test_seed_000_shapes_each_at_their_file_line(tmp_path: Path) -> None:
    manifest = tmp_path / "m.json"
    manifest.write_text(json.dumps(SEED_MANIFEST))
    repo = tmp_path / "repo"
    commit_files(repo, SEED_REPO)
    r = invoke("audit", "pins", str(manifest), "--repo", str(repo), "--json")
    assert r.returncode == 1, r.stdout + r.stderr
    data = json.loads(r.stdout)
    got = sorted(
        (f["code"], f["location"]["file"], f["location"]["line"]) for f in data["findings"]["findings"]
    )
    assert got == [
        (
            "PIN_MISMATCH",
            ".github/workflows/release.yml",
            9,
        ),  # the continuation line, not the 'pip install' line
        ("PIN_MISMATCH", "constraints.txt", 2),  # a specifier set that excludes the wheel's version
        ("PIN_MISMATCH", "docker/Dockerfile", 4),  # wheel component version, on its continuation line
        ("PIN_MISMATCH", "pixi.toml", 9),
        ("PIN_MISMATCH", "pixi.toml", 14),  # admits 0.1.12 but also 0.1.12.x
        ("PIN_MISMATCH", "python/requirements/common.txt", 4),
        ("PIN_MISMATCH", "python/requirements/cuda.txt", 1),  # reached through -r
        ("PIN_MISMATCH", "third_party/reqs.txt", 1),  # the file setup.py opens
        ("PIN_UNPINNED", "setup.py", 7),
        ("VCS_DEPENDENCY", "pixi.toml", 13),
        ("VCS_DEPENDENCY", "third_party/reqs.txt", 2),  # name@https without spaces
    ]
    agreeing = {(o["file"], o["line"]) for o in data["occurrences"] if o["agrees"]}
    assert ("docker/Dockerfile", 3) in agreeing  # ==0.1.12.0 is 0.1.12 (PEP 440)
    assert {("setup.py", 6), ("setup.py", 9), ("constraints.txt", 1), ("pixi.toml", 10)} <= agreeing
    assert (".github/workflows/release.yml", 10) in agreeing
    # Comments, docstrings and prose are not release inputs.
    files = {o["file"] for o in data["occurrences"]}
    assert not files & {"python/tokenspeed/about.py", "docs/install.md"}
    assert not any(o["file"] == "setup.py" and o["line"] == 1 for o in data["occurrences"])
    assert not any(
        o["file"] == ".github/workflows/release.yml" and o["line"] == 6 for o in data["occurrences"]
    )
    assert not any(o["file"] == "pixi.toml" and o["line"] == 6 for o in data["occurrences"])
    text = invoke("audit", "pins", str(manifest), "--repo", str(repo))
    assert ".github/workflows/release.yml:9" in text.stdout and "wheel component deepgemm" in text.stdout


def test_fixed_seed_000_repo_passes(tmp_path: Path) -> None:
    manifest = tmp_path / "m.json"
    manifest.write_text(json.dumps(SEED_MANIFEST))
    repo = tmp_path / "repo"
    commit_files(
        repo,
        {
            ".github/workflows/release.yml": SEED_REPO[".github/workflows/release.yml"].replace(
                '"apache-tvm-ffi>=0.1.5,<=0.1.11"', '"apache-tvm-ffi==0.1.12"'
            ),
            "requirements/cuda-thirdparty.txt": "apache-tvm-ffi===0.1.12\nflashinfer-python==0.6.14.0\n",
            "pixi.toml": '[pypi-dependencies]\napache-tvm-ffi = "==0.1.12"\n[feature.gpu.dependencies]\ntokenspeed-deepgemm = "2.5.0.post20260629"\n',
        },
    )
    r = invoke("audit", "pins", str(manifest), "--repo", str(repo), "--json")
    assert r.returncode == 0, r.stdout
    assert {o["file"] for o in json.loads(r.stdout)["occurrences"]} == {
        ".github/workflows/release.yml",
        "requirements/cuda-thirdparty.txt",
        "pixi.toml",
    }


# --- issue 23: pins at a commit, read through git objects --------------------------------


def _audit(manifest: Path, repo: Path, *extra: str) -> tuple[int, dict[str, object]]:
    r = invoke("audit", "pins", str(manifest), "--repo", str(repo), "--json", *extra)
    assert r.returncode in (0, 1), r.stderr
    return r.returncode, json.loads(r.stdout)


def _codes(data: dict[str, object]) -> list[tuple[str, object, object]]:
    findings = data["findings"]["findings"]  # type: ignore[index]
    return sorted((f["code"], f["location"]["file"], f["location"]["line"]) for f in findings)  # type: ignore[union-attr]


def test_pins_are_read_from_the_commit_not_the_work_tree(tmp_path: Path, manifest: Path) -> None:
    repo = tmp_path / "repo"
    old = commit_files(repo, {"requirements.txt": "apache-tvm-ffi==0.1.11\nflashinfer-python==0.6.2\n"})
    new = commit_files(repo, {"requirements.txt": "apache-tvm-ffi==0.1.12\nflashinfer-python==0.6.2\n"})
    # An uncommitted edit of the work tree is not what is released: it is not read.
    commit_files(repo, {"requirements.txt": "apache-tvm-ffi==0.0.1\n"}, commit=False)
    code, data = _audit(manifest, repo)
    assert code == 0, data
    assert data["commit"] == new and data["files"] == ["requirements.txt"] and data["files_scanned"] == 1
    code, data = _audit(manifest, repo, "--commit", old)
    assert code == 1 and data["commit"] == old
    assert _codes(data) == [("PIN_MISMATCH", "requirements.txt", 1)]
    # A bare clone (no work tree at all) gives the same answer.
    bare = tmp_path / "bare.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(repo), str(bare)], check=True)
    code, data = _audit(manifest, bare)
    assert code == 0 and data["commit"] == new and data["files_scanned"] == 1


def test_nothing_scanned_is_an_error_and_every_pin_is_accounted_for(tmp_path: Path) -> None:
    manifest = tmp_path / "m.json"
    manifest.write_text(json.dumps(SEED_MANIFEST))
    empty = tmp_path / "empty"
    empty.mkdir()
    r = invoke("audit", "pins", str(manifest), "--repo", str(empty))
    assert (
        r.returncode == 2 and "not a git repository" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    )
    repo = tmp_path / "repo"
    commit_files(repo, {"README.md": "apache-tvm-ffi==0.1.12 in prose\n"})
    code, data = _audit(manifest, repo)
    assert code == 1 and data["files_scanned"] == 0 and data["passed"] is False
    assert "PINS_NOTHING_SCANNED" in [c for c, _, _ in _codes(data)]
    # One input naming none of them: every pin, the wheel components' too, is PIN_NOT_FOUND.
    commit_files(repo, {"requirements.txt": "numpy==2.0\n"})
    code, data = _audit(manifest, repo)
    assert code == 0 and data["files_scanned"] == 1
    messages = sorted(f["message"].split(" ")[0] for f in data["findings"]["findings"])  # type: ignore[index]
    assert messages == [
        "apache-tvm-ffi==0.1.12",
        "flashinfer-python==0.6.14",
        "tokenspeed-deepgemm==2.5.0.post20260629",
    ]


def test_dockerfile_from_tags_are_pin_inputs(tmp_path: Path) -> None:
    manifest = tmp_path / "m.json"
    manifest.write_text(json.dumps(SEED_MANIFEST))
    repo = tmp_path / "repo"
    commit_files(
        repo,
        {
            "docker/Dockerfile.nvidia": "ARG BASE=x\nFROM --platform=linux/amd64 lmsysorg/base:cu130-torch-2.13.0-flashinfer-0.6.16 AS base\n",
            "docker/Dockerfile.release": "FROM reg.example/team/base:flashinfer-python-0.6.14-cu130\nFROM base:${TAG}\n",
        },
    )
    code, data = _audit(manifest, repo)
    assert code == 1
    assert [c for c in _codes(data) if c[0] != "PIN_NOT_FOUND"] == [
        ("PIN_MISMATCH", "docker/Dockerfile.nvidia", 2)
    ]
    agreeing = {(o["file"], o["line"]) for o in data["occurrences"] if o["agrees"]}  # type: ignore[attr-defined,index]
    assert agreeing == {("docker/Dockerfile.release", 1)}


def test_pin_inputs_scope_skips_files_with_the_reason(tmp_path: Path) -> None:
    data = {
        **SEED_MANIFEST,
        "components": {
            **SEED_MANIFEST["components"],  # type: ignore[dict-item]
            "app": {
                "kind": "git",
                "repo": "https://example.com/app.git",
                "pin_inputs": {
                    "skip": [{"paths": ["/requirements/**/*xpu*"], "reason": "an SM120 CUDA image: no XPU"}]
                },
            },
        },
    }
    manifest = tmp_path / "m.json"
    manifest.write_text(json.dumps(data))
    repo = tmp_path / "repo"
    commit_files(
        repo,
        {
            "requirements/cuda.txt": "-r xpu.txt\napache-tvm-ffi==0.1.12\n",
            "requirements/xpu.txt": "kernels @ https://example.com/k.whl\n",
            "requirements/test/xpu.in": "git+https://example.com/x.git#egg=x\n",
        },
    )
    code, unscoped = _audit(manifest, repo)
    assert code == 1 and [c[0] for c in _codes(unscoped)].count("VCS_DEPENDENCY") == 2
    code, scoped = _audit(manifest, repo, "--component", "app")
    assert code == 0, scoped
    assert scoped["files"] == ["requirements/cuda.txt"] and scoped["component"] == "app"
    assert scoped["skipped"] == [
        {"file": f, "pattern": "/requirements/**/*xpu*", "reason": "an SM120 CUDA image: no XPU"}
        for f in ("requirements/test/xpu.in", "requirements/xpu.txt")
    ]


# --- issue 33: one module per input format --------------------------------------------------


def test_the_registry_lists_each_source_module_once() -> None:
    """A format module that the registry does not list would be silently never read."""
    from releasekit.plan.pins import registry, sources

    folder = Path(sources.__file__).parent
    modules = sorted(f"{sources.__name__}.{p.stem}" for p in folder.glob("*.py") if p.stem != "__init__")
    listed = [type(source).__module__ for source in registry.SOURCES]
    assert sorted(listed) == modules
    assert len({source.kind for source in registry.SOURCES}) == len(listed)
