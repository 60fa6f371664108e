"""Runtime switches named (issue 44): what a release's recipes and its image's config set for the engine.

The tree holds a Dockerfile in the shape of the vLLM fork's ``docker/Dockerfile.glm51-kimi-b12x013``,
with the twelve ``ENV`` switches it bakes (names and values as the fork has them, among the plain
variables of the same ``ENV`` line), and upstream-shaped scripts under ``examples/`` and
``.buildkite/`` that export ``VLLM_*`` for themselves: ``plan check`` names each of the twelve at its
line and none of upstream's. On the real fork (``RELEASEKIT_VLLM_FORK``), the same for ff-next.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest
from cli_run import invoke
from plan_world import FF, VLLM_PLAN, World, plan_check
from verify_support import toolchain_context

from releasekit.checks import AllOf
from releasekit.docker_engine import ImageFacts
from releasekit.findings import Severity
from releasekit.git.runner import Git
from releasekit.manifest import load_manifest
from releasekit.manifest.models import Policy, RuntimeSwitch
from releasekit.plan.check import PlanCheckOptions
from releasekit.plan.content import scan_commit
from releasekit.provenance.checks import all_checks

REPO = Path(__file__).resolve().parent.parent
FF_NEXT = REPO / "manifests" / "ff-next.yaml"

# The twelve switches the fork's docker/Dockerfile.glm51-kimi-b12x013 bakes into its image with ENV.
TWELVE = {
    "NCCL_GRAPH_FILE": "",
    "NCCL_P2P_LEVEL": "SYS",
    "NCCL_PROTO": "LL,LL128,Simple",
    "VLLM_ENABLE_PCIE_ALLREDUCE": "1",
    "VLLM_PCIE_ALLREDUCE_BACKEND": "cpp",
    "VLLM_CPP_AR_1STAGE_NCCL_CUTOFF": "56KB",
    "VLLM_CPP_AR_IGNORE_CUTOFF_MAX_ROWS": "0",
    "VLLM_RTX6K_FUSED_ALLREDUCE_ADD": "0",
    "VLLM_RTX6K_FUSED_ALLREDUCE_ADD_END_BARRIER": "0",
    "VLLM_DISABLE_SHARED_EXPERTS_STREAM": "0",
    "VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS": "1",
    "VLLM_DISABLED_KERNELS": "MarlinFP8ScaledMMLinearKernel",
}
PLAIN = ("HF_OVERRIDES", "MODEL", "SERVED_MODEL_NAME", "PORT", "TP_SIZE", "MAX_MODEL_LEN")


def dockerfile() -> str:
    settings = [f'{name}=""' for name in PLAIN[:3]]
    settings += [f'{name}="{value}"' if not value else f"{name}={value}" for name, value in TWELVE.items()]
    settings[4:4] = [f'{name}=""' for name in PLAIN[3:]]
    body = " \\\n    ".join(settings)
    return (
        "# syntax=docker/dockerfile:1.7\n"
        "FROM example/vllm:glm51-kimi\n"
        "ARG B12X_REPO=https://example.invalid/b12x.git\n"
        "ARG B12X_COMMIT=c929144c7689668b07ca65af10ceadf1c745165d\n"
        "COPY . /opt/vllm\n"
        "WORKDIR /\n"
        f"ENV {body}\n"
    )


UPSTREAM = {
    "examples/online_serving/run_cluster.sh": (
        "#!/bin/bash\nexport VLLM_HOST_IP=$(hostname -I)\nexport NCCL_DEBUG=INFO\n"
        "VLLM_LOGGING_LEVEL=DEBUG python -m vllm.entrypoints.openai.api_server --port 8000 &\nwait\n"
    ),
    ".buildkite/scripts/run-benchmarks.sh": (
        "#!/bin/bash\nset -ex\nexport VLLM_USE_V1=1\nexport TORCH_COMPILE_DEBUG=1\npytest -v tests/\n"
    ),
    "examples/deploy/docker-compose.yaml": (
        "services:\n  prometheus:\n    image: prom/prometheus\n    environment:\n      - NCCL_DEBUG=INFO\n"
    ),
}


def _line(text: str, needle: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), start=1) if needle in line)


def test_plan_check_names_the_twelve_switches_and_not_upstream_examples_or_ci(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RELEASEKIT_ALLOW_LOCAL_REPOS", "1")
    monkeypatch.setenv("RELEASEKIT_CACHE", str(tmp_path / "cache"))
    world = World(tmp_path / "w")
    world.land_b12x()
    world.land_vllm(VLLM_PLAN)
    text = dockerfile()
    world.vllm.commit({"docker/Dockerfile.glm": text, **UPSTREAM}, "build: the image recipe", branch=FF)
    world.vllm.push(FF)
    data = world.manifest()
    data["components"]["vllm"]["scan_content"] = True
    result = plan_check(load_manifest(world.write_manifest(data)), PlanCheckOptions(allow_local=True))
    named = {
        (f.location.file, f.location.line, f.severity, f.message.split(": ", 2)[1].split(" ", 1)[1])
        for f in result.findings
        if f.code == "RUNTIME_SWITCH_UNDECLARED"
    }
    assert named == {
        ("docker/Dockerfile.glm", _line(text, f"{name}="), Severity.error, f"{name}={value}")
        for name, value in TWELVE.items()
    }, sorted(named)
    assert not result.passed
    message = next(f.message for f in result.findings if "NCCL_P2P_LEVEL" in f.message)
    line = _line(text, "NCCL_P2P_LEVEL")
    assert message == (
        f"docker/Dockerfile.glm:{line}: ENV NCCL_P2P_LEVEL=SYS: a runtime switch of the engine; "
        "policy.runtime_switches does not declare it"
    )

    # Declared on purpose (one with another value than the recipe's): shown, not failed.
    data["policy"] = {
        "runtime_switches": [
            {"name": name, "value": value, "reason": "the PCIe host's tuning"}
            for name, value in TWELVE.items()
        ]
    }
    data["policy"]["runtime_switches"][1]["value"] = "NVL"
    manifest = world.write_manifest(data)
    declared = plan_check(load_manifest(manifest), PlanCheckOptions(allow_local=True))
    codes = [f.code for f in declared.findings if f.code.startswith("RUNTIME_SWITCH")]
    assert codes.count("RUNTIME_SWITCH_DECLARED") == 11
    (wrong,) = [f for f in declared.findings if f.code == "RUNTIME_SWITCH_UNDECLARED"]
    assert "NCCL_P2P_LEVEL=SYS" in wrong.message and "declares NCCL_P2P_LEVEL=NVL" in wrong.message
    run = invoke("plan", "check", str(manifest), "--no-forge", "--json")
    assert run.returncode == 1, run.stderr
    assert "RUNTIME_SWITCH_UNDECLARED" in run.stdout and "examples/" not in run.stdout.split("RUNTIME")[0]


def _repo(path: Path, files: dict[str, str]) -> tuple[Git, str]:
    path.mkdir(parents=True)
    for rel, content in files.items():
        (path / rel).parent.mkdir(parents=True, exist_ok=True)
        (path / rel).write_text(content)
    ident = ["-c", "user.name=t", "-c", "user.email=t@t.invalid"]
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], [*ident, "commit", "-q", "-m", "tree"]):
        subprocess.run(["git", *args], cwd=path, check=True, capture_output=True)
    git = Git(path)
    return git, git.run("rev-parse", "HEAD").strip()


def test_recipes_named_by_the_manifest_narrow_the_scan(tmp_path: Path) -> None:
    rocm = "FROM rocm/base\nENV VLLM_ROCM_USE_AITER=1\n"
    files = {"docker/Dockerfile.glm": dockerfile(), "docker/Dockerfile.rocm": rocm, **UPSTREAM}
    git, commit = _repo(tmp_path / "r", files)
    everything = {s.file for s in scan_commit(git, commit).switches}
    assert everything == {"docker/Dockerfile.glm", "docker/Dockerfile.rocm"}
    narrowed = scan_commit(git, commit, recipes=("/docker/Dockerfile.glm",))
    assert {s.file for s in narrowed.switches} == {"docker/Dockerfile.glm"}
    named = scan_commit(git, commit, recipes=("examples/",))
    assert {s.name for s in named.switches} == {"VLLM_HOST_IP", "NCCL_DEBUG", "VLLM_LOGGING_LEVEL"}


def test_the_image_config_switches_are_named() -> None:
    ctx = toolchain_context({"torch_present": False}, None, None)
    env = {"PATH": "/usr/bin", "VLLM_X": "1", "NCCL_P2P_LEVEL": "SYS", "CUDA_VERSION": "12.8.1"}
    ctx = dataclasses.replace(ctx, image=ImageFacts(id=ctx.image.id, env=env))
    policy = Policy(runtime_switches=[RuntimeSwitch(name="NCCL_P2P_LEVEL", value="SYS", reason="PCIe")])

    def switches(manifest: object) -> list[tuple[str, str, str | None]]:
        report = AllOf(*all_checks()).report(dataclasses.replace(ctx, manifest=manifest))
        return sorted(
            (f.code, f.message, f.location.field)
            for _, found in report.ran
            for f in found
            if f.code.startswith("RUNTIME_SWITCH")
        )

    assert switches(None) == [
        (
            "RUNTIME_SWITCH_UNDECLARED",
            "the image's config sets NCCL_P2P_LEVEL=SYS: a runtime switch of the engine; "
            "policy.runtime_switches does not declare it",
            "Env.NCCL_P2P_LEVEL",
        ),
        (
            "RUNTIME_SWITCH_UNDECLARED",
            "the image's config sets VLLM_X=1: a runtime switch of the engine; "
            "policy.runtime_switches does not declare it",
            "Env.VLLM_X",
        ),
    ]
    declared = switches(SimpleNamespace(policy=policy))
    assert [c for c, _, _ in declared] == ["RUNTIME_SWITCH_DECLARED", "RUNTIME_SWITCH_UNDECLARED"]
    assert declared[0][1] == "the image's config sets NCCL_P2P_LEVEL=SYS; declared: PCIe"


def test_the_fork_s_switches_are_named() -> None:
    where = os.environ.get("RELEASEKIT_VLLM_FORK")
    if not where or not Path(where).is_dir():
        pytest.skip("RELEASEKIT_VLLM_FORK names no snapshot of local-inference-lab/vllm (not in the corpus)")
    git = Git(Path(where))
    vllm = load_manifest(FF_NEXT).manifest.git_components()["vllm"]
    recipes = tuple(vllm.runtime_recipes or ())
    for scope in (recipes, None):  # ff-next's recipes, and the default scope
        scan = scan_commit(git, git.run("rev-parse", "main").strip(), packages=("vllm",), recipes=scope)
        bundle = {s.name: s.value for s in scan.switches if s.file == "docker/Dockerfile.glm51-kimi-b12x013"}
        assert {k: bundle.get(k) for k in TWELVE} == TWELVE
        upstream = ("examples/", ".buildkite/", "tests/", "benchmarks/")
        assert not [s for s in scan.switches if s.file.startswith(upstream)]
