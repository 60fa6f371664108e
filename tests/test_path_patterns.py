"""Path patterns of the manifest: gitignore semantics, and ff-next's exclusions proven on the fork's real tree."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from forge import Forge
from plan_world import plan_check

from releasekit.manifest import load_manifest
from releasekit.manifest.path_patterns import PathPattern, matching
from releasekit.plan.check import PlanCheckOptions

REPO = Path(__file__).resolve().parent.parent
FF_NEXT = REPO / "manifests" / "ff-next.yaml"
# `git ls-tree -r --name-only` of the vLLM fork (see the file's header): data, not code.
FORK_PATHS = [
    line
    for line in (REPO / "tests" / "fixtures" / "vllm-fork-paths.txt").read_text().splitlines()
    if line and not line.startswith("#")
]
FORK_LAUNCHERS = ["scripts/run-glm51-vllm", "scripts/run-kimi26-vllm"]


@pytest.mark.parametrize(
    ("pattern", "path", "matches"),
    [
        (
            "*/launch_*.sh",
            "tools/launch_scripts/warm_glm51_runtime_cache.sh",
            False,
        ),  # '*' stays in a segment
        ("*/launch_*.sh", "tools/launch_x.sh", True),
        ("**/launch_*.sh", "a/b/launch_x.sh", True),  # '**' crosses directories
        ("*numa*.sh", "vllm/utils/numa_wrapper.sh", True),  # no '/': the name at any depth
        ("/*numa*.sh", "vllm/utils/numa_wrapper.sh", False),  # a leading '/' anchors
        ("scripts/run-*-vllm", "scripts/run-glm51-vllm", True),  # a '/' inside anchors too
        ("scripts/run-*-vllm", "tools/scripts/run-glm51-vllm", False),
        ("deploy/", "a/deploy/x/y.sh", True),  # a directory, and everything under it
        ("deploy/", "deploy", False),  # trailing '/': directories only
        ("a/**", "a/x/y", True),
        ("a/**/b", "a/b", True),
        ("a/**/b", "a/x/y/b", True),
        ("file?.txt", "file/.txt", False),
        ("[!a]x", "bx", True),
        ("\\*x", "*x", True),
    ],
)
def test_gitignore_semantics(pattern: str, path: str, matches: bool) -> None:
    assert PathPattern(pattern).matches(path) is matches


@pytest.mark.parametrize("bad", ["!keep", "", " x", "/"])
def test_unsupported_patterns_are_refused(bad: str, tmp_path: Path) -> None:
    data = yaml.safe_load(FF_NEXT.read_text())
    data["exclusions"][1]["paths"] = [bad]
    path = tmp_path / "m.yaml"
    path.write_text(yaml.safe_dump(data))
    from releasekit.errors import InputError

    with pytest.raises(InputError):
        load_manifest(path)


def test_ff_next_exclusions_on_the_real_fork_tree() -> None:
    exclusions = {e["id"]: e for e in yaml.safe_load(FF_NEXT.read_text())["exclusions"]}
    hits = {
        eid: sorted({p for found in matching(e["paths"], FORK_PATHS).values() for p in found})
        for eid, e in exclusions.items()
        if e.get("paths")
    }
    # The fork's own launchers are found, and nothing else of the 4,988 files.
    assert hits == {"deployment-launchers": FORK_LAUNCHERS, "docker-ab-overlays": []}
    for upstream_file in (
        "vllm/utils/numa_wrapper.sh",
        "tools/launch_scripts/warm_glm51_runtime_cache.sh",
        ".buildkite/performance-benchmarks/scripts/launch-server.sh",
        "examples/observability/prometheus_grafana/docker-compose.yaml",
    ):
        assert upstream_file in FORK_PATHS
    assert set(FORK_LAUNCHERS) <= set(FORK_PATHS)


def test_plan_check_flags_only_the_launchers_in_a_fork_shaped_repository(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RELEASEKIT_ALLOW_LOCAL_REPOS", "1")
    monkeypatch.setenv("RELEASEKIT_CACHE", str(tmp_path / "cache"))
    forge = Forge(tmp_path, "vllm", default_branch="main")
    upstream_like = {
        "vllm/utils/numa_wrapper.sh": 'numactl --cpunodebind=$NODE "$@"\n',
        "tools/launch_scripts/warm_cache.sh": "curl localhost\n",
        "examples/observability/prometheus_grafana/docker-compose.yaml": "services: {}\n",
        ".buildkite/performance-benchmarks/scripts/launch-server.sh": "vllm serve\n",
    }
    forge.init(upstream_like)
    forge.push("main")
    ff_next = yaml.safe_load(FF_NEXT.read_text())
    launchers = next(e for e in ff_next["exclusions"] if e["id"] == "deployment-launchers")
    launchers.pop("message_pattern")
    manifest = {
        "schema": "releasekit/v1",
        "name": "fork-paths",
        "components": {"vllm": {"kind": "git", "repo": forge.url, "canonical_branch": "main"}},
        "toolchain": {"base_image": {"name": "x", "digest": "to-be-locked"}, "cuda_arch_list": ["12.0a"]},
        "exclusions": [launchers],
    }
    path = tmp_path / "m.json"
    path.write_text(json.dumps(manifest))
    result = plan_check(load_manifest(path), PlanCheckOptions(allow_local=True))
    assert result.passed, [f.render() for f in result.findings]
    forge.commit({"scripts/run-glm51-vllm": "vllm serve --gpu-memory-utilization 0.865\n"}, "build: launcher")
    forge.push("main")
    result = plan_check(load_manifest(path), PlanCheckOptions(allow_local=True))
    hits = [f.message for f in result.findings if f.code == "EXCLUDED_CHANGE_PRESENT"]
    assert len(hits) == 1 and "path scripts/run-glm51-vllm matches '/scripts/run-*-vllm'" in hits[0], hits
    # A name git would quote ("deploy/z\303\274rich.sh") is matched as it is.
    forge.commit({"deploy/zürich.sh": "vllm serve\n"}, "deploy: launcher")
    forge.push("main")
    result = plan_check(load_manifest(path), PlanCheckOptions(allow_local=True))
    hits = [f.message for f in result.findings if f.code == "EXCLUDED_CHANGE_PRESENT"]
    assert any("path deploy/zürich.sh matches '/deploy/'" in h for h in hits), hits


def test_ff_next_pin_scope_on_the_real_fork_tree() -> None:
    from releasekit.plan.pins import release_inputs

    vllm = yaml.safe_load(FF_NEXT.read_text())["components"]["vllm"]
    patterns = [p for skip in vllm["pin_inputs"]["skip"] for p in skip["paths"]]
    inputs = [rel for rel, _ in release_inputs(FORK_PATHS)]
    skipped = sorted({p for found in matching(patterns, inputs).values() for p in found})
    kept = [rel for rel in inputs if rel not in skipped]
    # Every other platform's requirement file and image is out of scope ...
    assert skipped == [
        "docker/Dockerfile.cpu",
        "docker/Dockerfile.ppc64le",
        "docker/Dockerfile.rocm",
        "docker/Dockerfile.rocm_base",
        "docker/Dockerfile.s390x",
        "docker/Dockerfile.tpu",
        "docker/Dockerfile.xpu",
        "requirements/build/cpu.txt",
        "requirements/build/rocm.txt",
        "requirements/cpu.txt",
        "requirements/kv_connectors_rocm.txt",
        "requirements/rocm.txt",
        "requirements/test/rocm.in",
        "requirements/test/rocm.txt",
        "requirements/test/xpu.in",
        "requirements/test/xpu.txt",
        "requirements/tpu.txt",
        "requirements/xpu.txt",
    ]
    # ... and every CUDA input stays in.
    for cuda in (
        "docker/Dockerfile",
        "requirements/cuda.txt",
        "requirements/build/cuda.txt",
        "requirements/common.txt",
        "requirements/test/cuda.txt",
        "pyproject.toml",
        "setup.py",
    ):
        assert cuda in kept
