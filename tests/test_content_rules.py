"""Content rules: overlays, fixed-commit fetches, patches and deployment files recognised in a
commit's tree by what they do (releasekit/plan/content), on real git repositories.

The files below are written in the shapes of the real vLLM fork's recipes (multi-line shell
with continuations, Dockerfiles with ARG/ENV, Compose YAML) and of upstream vLLM's own files
that must not be taken for them (a NUMA wrapper that passes the bindings it is given, a CI
server started in the background, an example's Prometheus Compose file).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
import yaml
from plan_world import FF, VLLM_PLAN, World, plan_check

from releasekit.findings import Severity
from releasekit.git.runner import Git
from releasekit.manifest import load_manifest, validate_manifest
from releasekit.manifest.content_rules import CONTENT_RULES
from releasekit.plan.check import PlanCheckOptions
from releasekit.plan.content import scan_commit
from releasekit.plan.content.claims import accepted_by, claiming
from releasekit.plan.content.registry import RECOGNISERS
from releasekit.plan.content.scan import MAX_FILE_BYTES

REPO = Path(__file__).resolve().parent.parent
FF_NEXT = REPO / "manifests" / "ff-next.yaml"
FORK_FIXTURE = REPO / "tests" / "fixtures" / "vllm-fork-content.txt"

SHA = "0123abc4567def89012345678901234567890abc"

BUNDLE = {
    "docker/Dockerfile.serve-bundle": f"""# syntax=docker/dockerfile:1.7
FROM example/engine:base

ARG KERNELS_REPO=https://example.invalid/kernels.git
ARG KERNELS_COMMIT={SHA}
ENV PIP_NO_CACHE_DIR=1 \\
    TORCH_CUDA_ARCH_LIST=12.0a

RUN git clone --filter=blob:none "${{KERNELS_REPO}}" /tmp/kernels \\
  && cd /tmp/kernels \\
  && git checkout "${{KERNELS_COMMIT}}" \\
  && python -m pip install --no-deps .
RUN python -m pip install "tool @ git+https://example.invalid/tool.git@4f5e6d7c8b9a"
RUN curl -L https://github.com/example/lib/archive/${{KERNELS_COMMIT}}.tar.gz | tar xz
COPY attn_fix.py /opt/venv/lib/python3.12/site-packages/vllm/attention/
RUN echo /opt/src > /opt/venv/lib/python3.12/site-packages/zz-overlay.pth
ENV PYTHONPATH /opt/vllm-src
COPY patches/fix.patch /tmp/
RUN cd /opt/vllm-src && git apply /tmp/fix.patch
ENTRYPOINT ["vllm", "serve", "--gpu-memory-utilization", "0.9"]
""",
    "scripts/make-editable-image.sh": """#!/usr/bin/env bash
set -euo pipefail
docker exec "$NAME" bash -lc "
  cd /opt/vllm
  env \\
    MAX_JOBS=8 \\
    /opt/venv/bin/python -m pip install -e . --no-deps
"
docker commit --change 'ENV PYTHONPATH=/opt/vllm' "$NAME" img
""",
    "scripts/serve-model": """#!/usr/bin/env bash
set -euo pipefail
export VLLM_SOME_SWITCH="${VLLM_SOME_SWITCH:-1}"
MEM="${MEM:-0.88}"
exec /opt/venv/bin/vllm serve "$MODEL" \\
  --port 8000 \\
  --gpu-memory-utilization "$MEM" \\
  --max-cudagraph-capture-size 256 \\
  "$@"
""",
    "patches/fix.patch": """--- attention.py
+++ attention.py
@@ -10,3 +10,4 @@
 a = 1
+b = 2
 c = 3
""",
    "deploy/docker-compose.yml": """services:
  engine:
    image: example/vllm:release
    environment:
      - VLLM_FLAG=1
    cpuset: "0-31"
""",
    "run/pinned.sh": """#!/bin/sh
numactl --cpunodebind=0 --membind=0 vllm serve m --tensor-parallel-size 2 &
wait
""",
    "tools/warm.sh": """#!/usr/bin/env bash
curl -s http://127.0.0.1:8000/v1/completions -d '{"prompt": "x"}'
du -sh ~/.cache/vllm
""",
    "docs/image.md": """# The image

Keep PYTHONPATH=/opt/prose in mind (prose, not a recipe).

```bash
docker run -e PYTHONPATH=/opt/vllm img
```
""",
}

UPSTREAM_SHAPED = {
    "vllm/utils/numa_wrapper.sh": """#!/bin/sh
if ! command -v numactl >/dev/null 2>&1; then exit 1; fi
[ -n "${NODE:-}" ] && exec numactl --cpunodebind="$NODE" --membind="$NODE" "$@"
exec numactl ${_NUMACTL_ARGS} "${_PYTHON}" "$@"
""",
    "ci/launch-server.sh": """#!/bin/bash
vllm serve "$MODEL" \\
  --tensor-parallel-size "$TP" \\
  --gpu-memory-utilization 0.9 &
pid=$!
kill $pid
""",
    "examples/monitoring/docker-compose.yaml": """services:
  prometheus:
    image: prom/prometheus:latest
  grafana:
    image: grafana/grafana:latest
""",
    "ci/run-tests.sh": """#!/bin/bash
export PYTHONPATH=".."
pip install -e tests/test_utils
git checkout main
apt-get install -y numactl
""",
    "docs/notes.diff": "Not a diff at all, only a note named like one.\n",
    "docker/Dockerfile.upstream": """FROM base
ENV VLLM_USAGE_SOURCE production-docker-image
ENTRYPOINT ["vllm", "serve"]
""",
}


def _line(text: str, needle: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), start=1) if needle in line)


EXPECTED = {
    ("docker/Dockerfile.serve-bundle", "git-at-commit", 'git checkout "${KERNELS_COMMIT}"'),
    ("docker/Dockerfile.serve-bundle", "pip-vcs-url", "git+https://example.invalid/tool.git"),
    ("docker/Dockerfile.serve-bundle", "commit-archive-url", "/archive/"),
    ("docker/Dockerfile.serve-bundle", "site-packages-overlay", "COPY attn_fix.py"),
    ("docker/Dockerfile.serve-bundle", "pth-injection", "zz-overlay.pth"),
    ("docker/Dockerfile.serve-bundle", "pythonpath-source-tree", "ENV PYTHONPATH"),
    ("docker/Dockerfile.serve-bundle", "patch-applied", "git apply"),
    ("docker/Dockerfile.serve-bundle", "engine-launcher", "ENTRYPOINT"),
    ("scripts/make-editable-image.sh", "editable-install", "pip install -e ."),
    ("scripts/make-editable-image.sh", "pythonpath-source-tree", "ENV PYTHONPATH=/opt/vllm"),
    ("scripts/serve-model", "engine-launcher", "exec /opt/venv/bin/vllm serve"),
    ("patches/fix.patch", "patch-file", "--- attention.py"),
    ("deploy/docker-compose.yml", "compose-engine", "image: example/vllm"),
    ("deploy/docker-compose.yml", "numa-pinning", "cpuset"),
    ("run/pinned.sh", "numa-pinning", "numactl --cpunodebind"),
    ("tools/warm.sh", "cache-warmup", ".cache/vllm"),
    ("docs/image.md", "pythonpath-source-tree", "docker run -e PYTHONPATH"),
}


def _repo(path: Path, files: dict[str, str | bytes]) -> tuple[Git, str]:
    path.mkdir(parents=True)
    env = {
        **os.environ,
        "GIT_AUTHOR_DATE": "2026-01-01T00:00:00Z",
        "GIT_COMMITTER_DATE": "2026-01-01T00:00:00Z",
    }

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", "-c", "user.name=t", "-c", "user.email=t@t.invalid", *args],
            cwd=path,
            env=env,
            check=True,
            capture_output=True,
            text=True,
        ).stdout

    git("init", "--quiet", "-b", "main")
    for rel, content in files.items():
        target = path / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            target.write_bytes(content)
        else:
            target.write_text(content)
    git("add", "-A")
    git("commit", "--quiet", "-m", "tree")
    return Git(path), git("rev-parse", "HEAD").strip()


def test_every_rule_has_one_recogniser_module_and_a_name_in_the_manifest_table() -> None:
    modules = sorted(
        p.stem for p in (REPO / "releasekit/plan/content/recognisers").glob("*.py") if p.stem != "__init__"
    )
    assert sorted(r.rule.replace("-", "_") for r in RECOGNISERS) == modules
    assert [r.rule for r in RECOGNISERS] == list(CONTENT_RULES)


def test_each_rule_finds_its_files_at_their_lines_and_not_upstream_shaped_ones(tmp_path: Path) -> None:
    files: dict[str, str | bytes] = {**BUNDLE, **UPSTREAM_SHAPED}
    files["scripts/blob"] = b"#!/bin/sh\n\0exec vllm serve --gpu-memory-utilization 0.9\n"
    files["docker/huge.sh"] = "#!/bin/sh\n" + "# padding\n" * (MAX_FILE_BYTES // 10 + 1)
    git, commit = _repo(tmp_path / "r", files)
    scan = scan_commit(git, commit, packages=("vllm",))
    found = {(h.file, h.rule, h.line) for h in scan.hits}
    want = {(f, rule, _line(BUNDLE[f], needle)) for f, rule, needle in EXPECTED}
    assert found == want, sorted(found ^ want)
    assert [p for p, _ in scan.unread] == ["docker/huge.sh"]
    by_rule = {(h.file, h.rule): h.shown for h in scan.hits}
    assert SHA[:12] in by_rule[("docker/Dockerfile.serve-bundle", "git-at-commit")]
    assert "KERNELS_COMMIT" in by_rule[("docker/Dockerfile.serve-bundle", "git-at-commit")]
    assert "--gpu-memory-utilization" in by_rule[("scripts/serve-model", "engine-launcher")]


@pytest.fixture(autouse=False)
def _local(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("RELEASEKIT_ALLOW_LOCAL_REPOS", "1")
    monkeypatch.setenv("RELEASEKIT_CACHE", str(tmp_path / "cache"))


def test_plan_check_reports_claimed_accepted_and_unanswered_hits_at_file_and_line(
    _local: None, tmp_path: Path
) -> None:
    world = World(tmp_path / "w")
    world.land_b12x()
    world.land_vllm(VLLM_PLAN)
    data = world.manifest()
    data["components"]["vllm"]["release_refs"] = ["release/v1"]
    data["exclusions"] = [
        {
            "id": "deployment-launchers",
            "description": "Deployment launchers",
            "component": "vllm",
            "rules": ["engine-launcher", "numa-pinning"],
            "disposition": "own-pr-required",
            "reason": "own PR",
        }
    ]
    # Nothing planted: vLLM's tree is scanned (an exclusion with rules names it) and holds nothing.
    clean = plan_check(load_manifest(world.write_manifest(data)), PlanCheckOptions(allow_local=True))
    assert not [f for f in clean.findings if f.location.file], [f.render() for f in clean.findings]
    world.vllm.switch("release/v1", FF)
    world.vllm.commit({"tools/warm.sh": BUNDLE["tools/warm.sh"]}, "warm caches", branch="release/v1")
    world.vllm.push("release/v1")
    world.vllm.commit(
        {k: BUNDLE[k] for k in ("scripts/serve-model", "run/pinned.sh", "docker/Dockerfile.serve-bundle")},
        "build: add image recipes",
        branch=FF,
    )
    world.vllm.push(FF)
    data["components"]["vllm"]["accepted_files"] = [
        {"paths": ["/docker/"], "rules": ["pip-vcs-url"], "reason": "a pinned tool of the image, reviewed"}
    ]
    result = plan_check(load_manifest(world.write_manifest(data)), PlanCheckOptions(allow_local=True))
    got = {(f.code, f.location.file, f.location.line, f.severity) for f in result.findings if f.location.file}
    dockerfile = BUNDLE["docker/Dockerfile.serve-bundle"]
    df = "docker/Dockerfile.serve-bundle"
    assert got == {
        ("EXCLUDED_CHANGE_PRESENT", "scripts/serve-model", 5, Severity.error),
        ("EXCLUDED_CHANGE_PRESENT", "run/pinned.sh", 2, Severity.error),
        ("EXCLUDED_CHANGE_PRESENT", df, _line(dockerfile, "ENTRYPOINT"), Severity.error),
        ("VCS_FETCH_IN_TREE", df, _line(dockerfile, "git checkout"), Severity.error),
        ("VCS_FETCH_IN_TREE", df, _line(dockerfile, "/archive/"), Severity.error),
        ("CONTENT_ACCEPTED", df, _line(dockerfile, "git+https"), Severity.info),
        ("SOURCE_OVERLAY_IN_TREE", df, _line(dockerfile, "COPY attn_fix.py"), Severity.error),
        ("SOURCE_OVERLAY_IN_TREE", df, _line(dockerfile, "zz-overlay.pth"), Severity.error),
        ("SOURCE_OVERLAY_IN_TREE", df, _line(dockerfile, "ENV PYTHONPATH"), Severity.error),
        ("UNPUBLISHED_PATCH_IN_TREE", df, _line(dockerfile, "git apply"), Severity.error),
        ("CONTENT_ON_RELEASE_REF", "tools/warm.sh", 3, Severity.warning),
        # Issue 44: the recipes' runtime switches (ENV TORCH_CUDA_ARCH_LIST, export VLLM_SOME_SWITCH).
        ("RUNTIME_SWITCH_UNDECLARED", df, _line(dockerfile, "TORCH_CUDA_ARCH_LIST"), Severity.error),
        ("RUNTIME_SWITCH_UNDECLARED", "scripts/serve-model", 3, Severity.error),
    }, sorted(got, key=str)
    launcher = next(f for f in result.findings if f.location.file == "scripts/serve-model")
    assert "exclusion 'deployment-launchers'" in launcher.message and "engine-launcher" in launcher.message
    assert not result.passed


def test_manifest_validate_names_the_rules_that_recognise_each_exclusion() -> None:
    found = {
        f.message.split("'")[1]: f.message
        for f in validate_manifest(FF_NEXT).findings
        if f.code == "EXCLUSION_RECOGNISED_BY"
    }
    assert (
        "content rules engine-launcher, compose-engine, numa-pinning, cache-warmup (deployment)"
        in found["deployment-launchers"]
    )
    assert (
        "pythonpath-source-tree" in found["docker-ab-overlays"]
        and "path globs (3)" in found["docker-ab-overlays"]
    )
    assert set(found) == {e["id"] for e in yaml.safe_load(FF_NEXT.read_text())["exclusions"]}


# Every hit in the corpus snapshots, at their default branches' heads, and why it is right.
CORPUS_HITS = {
    "b12x": {
        ("validation/performance/mxfp8_linear_output_plan_sm120.md", "pythonpath-source-tree"):
        # A measurement note runs kernels from a source checkout; ff-next accepts /validation/.
        "accepted",
    },
    "tokenspeed": {
        **{
            (f"test/agentic_benchmark/{m}/agentic_bench.sh", "pip-vcs-url"): "VCS_FETCH_IN_TREE"
            for m in (
                "glm5.2/tokenspeed",
                "glm5.2/trtllm",
                "inkling/tokenspeed",
                "kimi_k2.5/sglang",
                "kimi_k2.5/tokenspeed",
                "kimi_k2.5/trtllm",
                "kimi_k2.5/vllm",
                "minimax_m3/tokenspeed",
            )
        },
        # Benchmark configs that exec a tuned vLLM server to compare against: launchers by what they do.
        ("test/agentic_benchmark/kimi_k2.5/vllm/configs/attn_tp4_moe_ep4.sh", "engine-launcher"): "launcher",
        ("test/agentic_benchmark/kimi_k2.5/vllm/configs/attn_tp4_moe_tp4.sh", "engine-launcher"): "launcher",
    },
}


def test_corpus_repositories_give_only_explained_hits(corpus) -> None:
    for name, explained in CORPUS_HITS.items():
        git = Git(corpus.path(name))
        scan = scan_commit(git, git.run("rev-parse", "HEAD").strip(), packages=(name,))
        assert {(h.file, h.rule) for h in scan.hits} == set(explained), name
        assert scan.read > 10  # the scan read the tree, not an empty list
    b12x = yaml.safe_load(FF_NEXT.read_text())["components"]["b12x"]
    loaded = validate_manifest(FF_NEXT)
    comp = loaded.manifest.git_components()["b12x"]
    assert b12x["scan_content"] is True
    git = Git(corpus.path("b12x"))
    for hit in scan_commit(git, git.run("rev-parse", "HEAD").strip(), packages=("b12x",)).hits:
        assert accepted_by(comp, hit) is not None


def _fork() -> Path:
    where = os.environ.get("RELEASEKIT_VLLM_FORK")
    if not where or not Path(where).is_dir():
        pytest.skip("RELEASEKIT_VLLM_FORK names no snapshot of local-inference-lab/vllm (not in the corpus)")
    return Path(where)


# The fork's commit "build: add canonical GLM and Kimi image recipes" (cherry-picked onto main).
BUNDLE_COMMIT = "3ff722e555314a3d2feaae87054081fda31f4eb8"
# Upstream vLLM's own files that must not be taken for deployment files.
UPSTREAM_OWN = (
    "vllm/utils/numa_wrapper.sh",
    ".buildkite/performance-benchmarks/scripts/launch-server.sh",
    "examples/observability/prometheus_grafana/docker-compose.yaml",
    "examples/deployment/sagemaker-entrypoint.sh",
    "benchmarks/auto_tune/auto_tune.sh",
    "benchmarks/disagg_benchmarks/disagg_performance_benchmark.sh",
)


def fork_verdicts(git: Git, ref: str) -> list[str]:
    """One line per file with hits at ``ref``: ref, path, rules, and what ff-next makes of them."""
    loaded = validate_manifest(FF_NEXT)
    manifest = loaded.manifest
    comp = manifest.git_components()["vllm"]
    scan = scan_commit(git, git.run("rev-parse", ref).strip(), packages=("vllm",))
    per_file: dict[str, list[str]] = {}
    for hit in scan.hits:
        accepted = accepted_by(comp, hit)
        excl = next(claiming(manifest, "vllm", hit), None)
        verdict = (
            "accepted"
            if accepted
            else f"exclusion {excl.id}"
            if excl
            else f"{CONTENT_RULES[hit.rule][0]} finding"
        )
        entry = f"{hit.rule} -> {verdict}"
        if entry not in per_file.setdefault(hit.file, []):
            per_file[hit.file].append(entry)
    return [f"{ref}\t{path}\t{'; '.join(v)}" for path, v in sorted(per_file.items())]


def test_the_fork_bundle_is_found_and_upstream_files_are_not() -> None:
    git = Git(_fork())
    bundle = git.run("show", "--name-only", "--format=", BUNDLE_COMMIT).split()
    lines = fork_verdicts(git, "main") + fork_verdicts(git, "dev/unholy-fusion")
    expected = [line for line in FORK_FIXTURE.read_text().splitlines() if line and not line.startswith("#")]
    assert lines == expected, "\n".join(sorted(set(lines) ^ set(expected)))
    found_main = {line.split("\t")[1] for line in lines if line.startswith("main\t")}
    # .dockerignore is upstream's file; the bundle adds one line (/.git) that does nothing the seed forbids.
    assert set(bundle) - found_main == {".dockerignore"}
    found = {line.split("\t")[1] for line in lines}
    assert not found & set(UPSTREAM_OWN)
    for line in lines:
        path = line.split("\t")[1]
        if path in bundle or path == "start-ds4-flash.sh":
            assert "accepted" not in line, line  # every fork file is an exclusion's change or a finding
