"""Today's tool's files imported whole: supersession, base, lock and receipt baseline."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from forge import Forge

from releasekit.manifest import load_manifest
from releasekit.records.legacy import read_integration_lock, read_merge_manifest, read_validation_receipt
from releasekit.records.lock import read_lock

REPO = Path(__file__).resolve().parents[1]
REFERENCE = REPO.parent / "shared" / "reference"
REF_MANIFEST = REFERENCE / "blackwell-llm-docker.manifest.vllm.gilded-gnosis-v20.json"
REF_LOCK = REFERENCE / "blackwell-llm-docker.integration.lock.gilded-gnosis-v20-r34.json"
REF_RECEIPT = REFERENCE / "blackwell-llm-docker.validation-receipt.gilded-gnosis-v20-r34.json"
needs_reference = pytest.mark.skipif(
    not REF_MANIFEST.exists(), reason="shared/reference is not beside this checkout"
)


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "releasekit", *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={**os.environ, **(env or {})},
    )


@needs_reference
def test_the_three_reference_files_round_trip(tmp_path: Path) -> None:
    out = tmp_path / "gg.yaml"
    r = cli(
        "manifest",
        "import",
        str(REF_MANIFEST),
        "--lock",
        str(REF_LOCK),
        "--receipt",
        str(REF_RECEIPT),
        "-o",
        str(out),
        "--base-image",
        "local/base",
        "--json",
    )
    assert r.returncode == 0, r.stdout + r.stderr
    m = load_manifest(out).manifest
    ref = read_merge_manifest(REF_MANIFEST)
    lock = read_integration_lock(REF_LOCK)
    receipt = read_validation_receipt(REF_RECEIPT)
    comp = m.components["vllm"]
    assert [p.pr for p in comp.merge_plan] == [p.number for p in ref.pull_requests]
    assert [p.head for p in comp.merge_plan] == [p.head for p in ref.pull_requests]
    # Supersession kept as supersedes:, never as an exclusion of the older head.
    sup = {p.pr: set(p.supersedes) for p in comp.merge_plan}
    assert {228, 279} <= sup[280] and {165, 197} <= sup[254] and {212, 227} <= sup[229]
    excluded = {e.pr for e in m.exclusions}
    assert not excluded & {279, 228, 197, 165, 186, 187, 212, 227}
    assert {154, 171, 240, 271} <= excluded  # #171's superseder #189 is not in the plan: it stays excluded
    # Base kept: the integration lock's base commit is the component's pinned commit.
    assert comp.commit == lock.base.commit == receipt.source_composition["vllm"]["base"]
    # The receipt's numbers are a named baseline.
    base = m.validation.baselines["gilded-gnosis-v20-r34"]
    assert base.values["mtp0.decode_tps.c1"] == receipt.evidence["mtp0"]["decode_tps"]["c1"]
    assert base.values["mtp3.strict_draft_acceptance"] == receipt.evidence["mtp3"]["strict_draft_acceptance"]
    assert base.values["mtp0.uncached_prefill_tps.64000_median"] == 3236.0
    assert len(base.values) == len(receipt.metrics()) >= 20


@needs_reference
def test_lock_out_refuses_a_repository_without_the_locked_commits(tmp_path: Path) -> None:
    forge = Forge(tmp_path / "other", default_branch="dev/gilded-gnosis")
    forge.init()
    r = cli(
        "manifest",
        "import",
        str(REF_MANIFEST),
        "--lock",
        str(REF_LOCK),
        "--lock-out",
        str(tmp_path / "lock.json"),
        "-o",
        str(tmp_path / "gg.yaml"),
        "--base-image",
        "b",
        "--repo",
        forge.url,
        "--allow-local-repos",
        env={"RELEASEKIT_CACHE": str(tmp_path / "cache")},
    )
    assert r.returncode == 2 and "e2666d9a65f4" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "lock.json").exists()


def test_legacy_readers_refuse_other_files(tmp_path: Path) -> None:
    bad = tmp_path / "x.json"
    bad.write_text('{"schema_version": 1, "name": "x"}')
    for args in (["--lock", str(bad)], ["--receipt", str(bad)]):
        good = tmp_path / "m.json"
        good.write_text(
            json.dumps(
                {
                    "schema_version": 1,
                    "name": "n",
                    "repository": "https://example.invalid/r.git",
                    "base_ref": "refs/heads/main",
                    "pull_requests": [],
                }
            )
        )
        r = cli("manifest", "import", str(good), *args, "-o", str(tmp_path / "o.yaml"), "--base-image", "b")
        assert r.returncode == 2 and "of today's tool" in r.stderr, r.stderr


def _reference_shape(tmp_path: Path) -> tuple[Forge, Path, Path]:
    """A repository and today's files in the reference's supersession shape (#279->#280, #197->#254)."""
    forge = Forge(tmp_path / "vllm", default_branch="dev/gilded-gnosis")
    base = forge.init({"README": "vllm\n", "exl3.py": "v0\n"})
    forge.open_pr(279, [{"exl3.py": "r7 part 1\n"}, {"exl3_k.py": "r7 contract\n"}], title="R7 EXL3")
    # #280 retains #279's commits (same objects) and adds its own.
    forge.open_pr(280, [{"transport.py": "topology\n"}], start="pr-279", title="topology transport")
    forge.open_pr(197, [{"tier.py": "stale hits\n"}], title="secondary tier")
    forge.open_pr(254, [{"test_tier.py": "regression\n"}], start="pr-197", title="tier with test")
    forge.open_pr(240, [{"qwen.py": "rank sliced\n"}], title="qwen loader")
    forge.merge_pr(254)
    head = forge.merge_pr(280)
    manifest = tmp_path / "ref.manifest.vllm.gg.json"
    manifest.write_text(
        json.dumps(
            {
                "schema_version": 1,
                "name": "gg-test",
                "repository": forge.url,
                "base_ref": "refs/heads/dev/gilded-gnosis",
                "pull_requests": [
                    {"number": 254, "head": forge.pr_head(254), "title": "tier with test"},
                    {"number": 280, "head": forge.pr_head(280), "title": "topology transport"},
                ],
                "reviewed_exclusions": [
                    {
                        "number": 197,
                        "head": forge.pr_head(197),
                        "disposition": "superseded",
                        "reason": "Included with original authorship and a focused regression test in PR #254.",
                    },
                    {
                        "number": 279,
                        "head": forge.pr_head(279),
                        "disposition": "superseded",
                        "reason": "Superseded by PR #280 against dev/gilded-gnosis; PR #280 retains the R7 implementation commits and authorship.",
                    },
                    {
                        "number": 240,
                        "head": forge.pr_head(240),
                        "disposition": "out_of_scope",
                        "reason": "Qwen-only loader.",
                    },
                ],
            }
        )
    )
    lock = tmp_path / "ref.integration.lock.gg-r1.json"
    lock.write_text(
        json.dumps(
            {
                "schema_version": 1,
                "name": "gg-test",
                "base": {"repository": forge.url, "ref": "refs/heads/dev/gilded-gnosis", "commit": base},
                "manifest": {"sha256": hashlib.sha256(manifest.read_bytes()).hexdigest()},
                "pull_requests": [
                    {
                        "number": n,
                        "ref": f"refs/pull/{n}/head",
                        "head": forge.pr_head(n),
                        "title": t,
                        "disposition": "merged",
                    }
                    for n, t in ((254, "tier with test"), (280, "topology transport"))
                ],
                "result": {"tree": forge.tree(head), "patch": "integration.patch"},
            }
        )
    )
    return forge, manifest, lock


def test_supersession_shape_gives_no_false_positive_in_plan_check(tmp_path: Path) -> None:
    forge, manifest, _ = _reference_shape(tmp_path)
    env = {"RELEASEKIT_CACHE": str(tmp_path / "cache"), "RELEASEKIT_ALLOW_LOCAL_REPOS": "1"}
    out = tmp_path / "gg.yaml"
    r = cli("manifest", "import", str(manifest), "-o", str(out), "--base-image", "b", env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    check = cli("plan", "check", str(out), "--json", env=env)
    codes = {f["code"] for f in json.loads(check.stdout)["findings"]["findings"]}
    assert check.returncode == 0, check.stdout + check.stderr
    assert not codes & {"EXCLUDED_CHANGE_PRESENT", "SUPERSEDED_PR_MERGED"}
    # What the old import did (an exclusion on #279's head) is a false error on the same repository.
    text = out.read_text() + (
        f"- id: vllm-pr-279\n  description: old import\n  component: vllm\n  pr: 279\n"
        f"  commits: [{forge.pr_head(279)}]\n  disposition: superseded\n  reason: superseded by 280\n"
    )
    old = tmp_path / "old.yaml"
    old.write_text(text)
    check = cli("plan", "check", str(old), "--json", env=env)
    assert check.returncode == 1 and "EXCLUDED_CHANGE_PRESENT" in check.stdout


def test_integration_lock_becomes_a_releasekit_lock(tmp_path: Path) -> None:
    forge, manifest, legacy_lock = _reference_shape(tmp_path)
    env = {"RELEASEKIT_CACHE": str(tmp_path / "cache"), "RELEASEKIT_ALLOW_LOCAL_REPOS": "1"}
    out, lock_out = tmp_path / "gg.yaml", tmp_path / "lock.json"
    r = cli(
        "manifest",
        "import",
        str(manifest),
        "--lock",
        str(legacy_lock),
        "--lock-out",
        str(lock_out),
        "-o",
        str(out),
        "--base-image",
        "b",
        env=env,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    lock = read_lock(lock_out)
    legacy = read_integration_lock(legacy_lock)
    comp = lock.git_components()["vllm"]
    assert comp.commit == legacy.base.commit == load_manifest(out).manifest.components["vllm"].commit
    assert [(p.number, p.head) for p in comp.pull_requests] == [
        (p.number, p.head) for p in legacy.pull_requests
    ]
    assert comp.composed_tree == legacy.result.tree and comp.tree == forge.tree(legacy.base.commit)
    assert lock.manifest.sha256 == hashlib.sha256(out.read_bytes()).hexdigest()
    # Base + plan composes to today's tree: the lock is something to check against.
    compose = cli("plan", "compose", str(out), "--lock", str(lock_out), "--json", env=env)
    assert compose.returncode == 0, compose.stdout + compose.stderr
