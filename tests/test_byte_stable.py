"""Every file releasekit writes is a function of its inputs (issue 22): run a stage twice, compare bytes.

The plan stage runs here on repositories made in the test; the later stages' records are
compared in ``tests/test_demo.py`` over the demo's release directory. The fields that may
differ between runs (wall-clock times) are listed in docs/architecture.md.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

from cli_run import invoke
from plan_world import World

from releasekit.findings import Finding, Findings

REPO = Path(__file__).resolve().parent.parent


def test_findings_are_written_in_the_documented_order_whatever_order_they_were_found_in() -> None:
    found = Findings()
    for pr in (109, 103, 97):
        for commit in ("c" * 40, "a" * 40, "b" * 40):
            found.add(
                "DUPLICATED_PREREQUISITE_COMMIT", f"{pr} {commit}", component="vllm", pr=pr, commit=commit
            )
    found.add("LOCK_MANIFEST_MISMATCH", "no location")
    found.add("UNKNOWN_COMPONENT", "a file", file="m.yaml", line=3)
    written = found.model_dump_json()
    for seed in range(5):
        shuffled = Findings(findings=random.Random(seed).sample(found.findings, len(found.findings)))
        assert shuffled.model_dump_json() == written
    order = [Finding.model_validate(f) for f in json.loads(written)["findings"]]
    assert order[0].code == "LOCK_MANIFEST_MISMATCH"  # no location sorts first
    assert [(f.location.pr, f.location.commit) for f in order[1:4]] == [(97, c * 40) for c in "abc"]
    assert order[-1].location.file == "m.yaml"  # the file comes first in the key: a value sorts after none


def test_plan_lock_and_plan_check_write_the_same_bytes_twice(tmp_path: Path) -> None:
    world = World(tmp_path / "w")
    # Duplicated prerequisite commits in two PRs: the warnings issue 22 saw in three orders.
    for pr, prereq in ((103, 97), (109, 108)):
        head = world.vllm.pr_head(prereq)
        files = world.vllm.git("show", "--format=", "--name-only", head).split()
        copied = {f: world.vllm.git("show", f"{head}:{f}") for f in files}
        world.vllm.force_push_pr(pr, [copied, {f"vllm/pr{pr}_own.py": "A = 1\n"}])
    world.land_b12x()
    world.land_vllm([108, 97, 103, 98])
    manifest = world.write_manifest()
    outputs: dict[str, list[bytes]] = {"lock": [], "plan-check": []}
    for run in (1, 2):
        cache = tmp_path / f"cache{run}"  # a fresh cache each time: mirror state is no input
        lock = tmp_path / f"lock{run}.json"
        env = {"RELEASEKIT_CACHE": str(cache), "RELEASEKIT_ALLOW_LOCAL_REPOS": "1"}
        made = invoke("plan", "lock", manifest, "-o", lock, env=env)
        assert made.returncode == 0, made.stdout + made.stderr
        check = tmp_path / f"plan-check{run}.json"
        checked = invoke("plan", "check", manifest, "--lock", lock, "--output", check, env=env)
        assert checked.returncode == 1, checked.stdout + checked.stderr
        outputs["lock"].append(lock.read_bytes())
        outputs["plan-check"].append(check.read_bytes())
    assert b"locked_at" not in outputs["lock"][0]
    record = json.loads(outputs["plan-check"][0])
    codes = [f["code"] for f in record["findings"]["findings"]]
    assert codes.count("DUPLICATED_PREREQUISITE_COMMIT") >= 2 and "PR_NOT_MERGED" in codes
    written = [Finding.model_validate(f) for f in record["findings"]["findings"]]
    assert written == sorted(written, key=Finding.sort_key)
    for name, (first, second) in outputs.items():
        assert first == second, f"{name} differs between two runs on the same inputs"
