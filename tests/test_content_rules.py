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
from plan_world import FF, VLLM_PLAN, World

from releasekit.findings import Severity
from releasekit.git.runner import Git
from releasekit.manifest import load_manifest
from releasekit.manifest.content_rules import CONTENT_RULES
from releasekit.plan.check import check_plan
from releasekit.plan.content import scan_commit
from releasekit.plan.content.registry import RECOGNISERS
from releasekit.plan.content.scan import MAX_FILE_BYTES

REPO = Path(__file__).resolve().parent.parent

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
    clean = check_plan(load_manifest(world.write_manifest(data)), allow_local=True)
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
    result = check_plan(load_manifest(world.write_manifest(data)), allow_local=True)
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
    }, sorted(got, key=str)
    launcher = next(f for f in result.findings if f.location.file == "scripts/serve-model")
    assert "exclusion 'deployment-launchers'" in launcher.message and "engine-launcher" in launcher.message
    assert not result.passed
