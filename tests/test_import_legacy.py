"""Today's tool's files imported whole: supersession, base, lock and receipt baseline."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
import yaml
from cli_run import invoke
from forge import Forge

from releasekit.errors import InputError
from releasekit.legacy.models import read_integration_lock, read_merge_manifest
from releasekit.manifest import load_manifest, validate_manifest
from releasekit.records.legacy import read_validation_receipt
from releasekit.records.lock import read_lock

REPO = Path(__file__).resolve().parents[1]
# ../shared/reference beside the checkout (or beside the folder of worktrees it is in).
REFERENCE = next(
    (p / "shared" / "reference" for p in REPO.parents if (p / "shared" / "reference").is_dir()),
    REPO.parent / "shared" / "reference",
)
REF_MANIFEST = REFERENCE / "blackwell-llm-docker.manifest.vllm.gilded-gnosis-v20.json"
REF_LOCK = REFERENCE / "blackwell-llm-docker.integration.lock.gilded-gnosis-v20-r34.json"
REF_RECEIPT = REFERENCE / "blackwell-llm-docker.validation-receipt.gilded-gnosis-v20-r34.json"
needs_reference = pytest.mark.skipif(
    not REF_MANIFEST.exists(), reason="shared/reference is not beside this checkout"
)


@needs_reference
def test_the_three_reference_files_round_trip(tmp_path: Path) -> None:
    out = tmp_path / "gg.yaml"
    r = invoke(
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
    r = invoke(
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
    # Nothing is written on exit 2: neither the lock nor the manifest (-o) it would belong to.
    assert not (tmp_path / "lock.json").exists() and not (tmp_path / "gg.yaml").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cache", "other"]


@needs_reference
def test_exit_2_leaves_an_existing_output_as_it_was(tmp_path: Path) -> None:
    other = tmp_path / "other.lock.json"
    data = json.loads(REF_LOCK.read_text())
    data["manifest"]["sha256"] = "0" * 64
    other.write_text(json.dumps(data))
    out = tmp_path / "gg.yaml"
    out.write_text("previous\n")
    r = invoke(
        "manifest", "import", str(REF_MANIFEST), "--lock", str(other), "-o", str(out), "--base-image", "b"
    )
    assert r.returncode == 2 and "sha256 000000000000" in r.stderr, r.stderr
    assert out.read_text() == "previous\n" and sorted(p.name for p in tmp_path.iterdir()) == [
        "gg.yaml",
        "other.lock.json",
    ]


def _leaves(data: object, prefix: str = "") -> list[tuple[str, object]]:
    """Every JSON leaf path of a file, written here independently of the importer's own walker."""
    if isinstance(data, dict) and data:
        return [leaf for k, v in data.items() for leaf in _leaves(v, f"{prefix}.{k}" if prefix else k)]
    if isinstance(data, list) and data:
        return [
            leaf for i, v in enumerate(data) for leaf in _leaves(v, f"{prefix}.{i}" if prefix else str(i))
        ]
    return [(prefix, data)]


@needs_reference
def test_every_field_of_the_three_reference_files_is_carried_or_reported(tmp_path: Path) -> None:
    out = tmp_path / "gg.yaml"
    r = invoke(
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
    result = json.loads(r.stdout)
    carried: dict[str, str] = result["carried"]
    reported = {
        f"{f['location']['file']}:{f['location']['field']}"
        for f in result["findings"]["findings"]
        if f["code"] == "IMPORT_FIELD_NOT_CARRIED"
    }
    written = yaml.safe_load(out.read_text())
    strings = [v for _, v in _leaves(written) if isinstance(v, str)]
    numbers = {
        float(v) for _, v in _leaves(written) if isinstance(v, int | float) and not isinstance(v, bool)
    }
    total = 0
    for ref in (REF_MANIFEST, REF_LOCK, REF_RECEIPT):
        for path, value in _leaves(json.loads(ref.read_text())):
            key = f"{ref.name}:{path}"
            total += 1
            assert (key in carried) != (key in reported), f"{key} is neither carried nor reported (or both)"
            if key in reported or carried[key].startswith(("checked", "read")):
                continue
            # Carried: the value is in the written manifest (verbatim, or inside a note or source).
            if isinstance(value, int | float):
                assert float(value) in numbers, f"{key} = {value} was said to be carried to {carried[key]}"
            else:
                # (as releasekit spells it: a branch without refs/heads/, out-of-scope for out_of_scope)
                spelled = {str(value), str(value).removeprefix("refs/heads/"), str(value).replace("_", "-")}
                assert any(v in s for v in spelled for s in strings), f"{key} = {value!r} not in the manifest"
    assert total == len(carried) + len(reported) and len(reported) < total // 5
    m = load_manifest(out).manifest
    # Superseded PRs keep their heads and reasons.
    ref = read_merge_manifest(REF_MANIFEST)
    vllm = m.components["vllm"]
    kept = {s.pr: (s.head, s.reason) for p in vllm.merge_plan for s in p.superseded}
    for ex in ref.reviewed_exclusions:
        if ex.number in kept:
            assert kept[ex.number] == (ex.head, ex.reason)
        else:
            assert any(
                e.pr == ex.number and e.commits == [ex.head] and e.reason == ex.reason for e in m.exclusions
            )
    assert set(kept) == {165, 186, 187, 197, 212, 227, 228, 279}
    # source_composition: six components with their commits and versions; runtime_packages: the toolchain.
    assert sorted(m.components) == ["b12x", "flashinfer", "instanttensor", "launcher", "lmcache", "vllm"]
    b12x = m.components["b12x"]
    assert (b12x.commit, b12x.version) == ("7cecbb2c4819636ae7f05f8b116f2c45ee2cff7b", "1.2.1")
    assert m.components["flashinfer"].commit == "1ac6942776b383c6b03c7a5805a22e72a3e3349f"
    assert m.components["lmcache"].commit == "9cebd405d0caf4bebe01d694b5a8bf4e3e354314"
    assert m.components["launcher"].commit == "7302862b8fcfdc7c06a411a61e1f0fb072258880"
    tc = m.toolchain
    assert (tc.pytorch, tc.cuda, tc.nccl, tc.cudnn) == ("2.12.0+cu132", "13.2.1", "2.30.4", "9.22.0.52")
    assert {p.package: p.version for p in m.pins} == {
        "cublas": "13.4.1.2",
        "cutlass_dsl": "4.6.0",
        "xgrammar": "0.2.5",
    }
    model = next(iter(m.validation.models.values()))
    assert (model.hub, model.revision) == (
        "brandonmusic/GLM-5.2-EXL3-TR3v4-3.5bpw-MTP78",
        "9ab9579774cc432df91567a36f6e9e863e0d4c9f",
    )
    guessed = [f for f in result["findings"]["findings"] if f["code"] == "IMPORT_REPO_GUESSED"]
    assert sorted(f["location"]["component"] for f in guessed) == [
        "b12x",
        "flashinfer",
        "instanttensor",
        "launcher",
        "lmcache",
    ]


@needs_reference
def test_component_repo_names_a_repository_instead_of_a_guess(tmp_path: Path) -> None:
    out = tmp_path / "gg.yaml"
    url = "https://github.com/flashinfer-ai/flashinfer.git"
    args = ["manifest", "import", str(REF_MANIFEST), "--receipt", str(REF_RECEIPT), "-o", str(out)]
    r = invoke(*args, "--base-image", "b", "--component-repo", f"flashinfer={url}", "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    assert load_manifest(out).manifest.components["flashinfer"].repo == url
    guessed = {
        f["location"]["component"]
        for f in json.loads(r.stdout)["findings"]["findings"]
        if f["code"] == "IMPORT_REPO_GUESSED"
    }
    assert "flashinfer" not in guessed and "b12x" in guessed
    bad = invoke(*args, "--base-image", "b", "--component-repo", "flashinfer")
    assert bad.returncode == 2 and "NAME=URL" in bad.stderr


def test_superseded_must_name_a_superseded_pr(tmp_path: Path) -> None:
    m = tmp_path / "m.yaml"
    m.write_text(
        "schema: releasekit/v1\nname: t\ncomponents:\n  c:\n    kind: git\n    repo: https://example.invalid/c.git\n"
        "    merge_plan:\n    - pr: 2\n      title: new\n      supersedes: [1]\n      superseded:\n"
        "      - {pr: 3, head: to-be-locked, reason: old}\n"
        "toolchain:\n  base_image: {name: b, digest: to-be-locked}\n  cuda_arch_list: ['12.0a']\n"
    )
    with pytest.raises(InputError, match=r"'superseded' names PR #3, which is not in 'supersedes'"):
        validate_manifest(m)
    m.write_text(m.read_text().replace("pr: 3,", "pr: 1,"))
    plan = validate_manifest(m).manifest.components["c"].merge_plan  # type: ignore[union-attr]
    assert plan[0].superseded[0].reason == "old"


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
        r = invoke(
            "manifest", "import", str(good), *args, "-o", str(tmp_path / "o.yaml"), "--base-image", "b"
        )
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
    r = invoke("manifest", "import", str(manifest), "-o", str(out), "--base-image", "b", env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    check = invoke("plan", "check", str(out), "--json", env=env)
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
    check = invoke("plan", "check", str(old), "--json", env=env)
    assert check.returncode == 1 and "EXCLUDED_CHANGE_PRESENT" in check.stdout


def test_integration_lock_becomes_a_releasekit_lock(tmp_path: Path) -> None:
    forge, manifest, legacy_lock = _reference_shape(tmp_path)
    env = {"RELEASEKIT_CACHE": str(tmp_path / "cache"), "RELEASEKIT_ALLOW_LOCAL_REPOS": "1"}
    out, lock_out = tmp_path / "gg.yaml", tmp_path / "lock.json"
    r = invoke(
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
    compose = invoke("plan", "compose", str(out), "--lock", str(lock_out), "--json", env=env)
    assert compose.returncode == 0, compose.stdout + compose.stderr


def test_source_composition_shapes_become_git_and_wheel_components(tmp_path: Path) -> None:
    sha = "ab" * 20
    manifest = tmp_path / "m.json"
    manifest.write_text(
        json.dumps(
            {
                "schema_version": 1,
                "name": "n",
                "repository": "https://example.invalid/org/vllm.git",
                "base_ref": "refs/heads/main",
                "pull_requests": [],
            }
        )
    )
    receipt = tmp_path / "x.validation-receipt.n-r1.json"
    receipt.write_text(
        json.dumps(
            {
                "schema_version": 1,
                "status": "qualified",
                "image": "img",
                "source_composition": {
                    "vllm": sha,
                    "flashinfer-python": "0.6.14",
                    "Deep_GEMM": {"base": "cd" * 20, "package_version": "2.5.0"},
                },
                "runtime_packages": {"torch": "2.9.0", "nccl": "2.30.4", "xgrammar": "0.2.5"},
                "evidence": {"c1": {"runs": [1.5, 2.5]}, "note": "words"},
            }
        )
    )
    out = tmp_path / "o.yaml"
    r = invoke(
        "manifest",
        "import",
        str(manifest),
        "--receipt",
        str(receipt),
        "-o",
        str(out),
        "--base-image",
        "b",
        "--json",
    )
    assert r.returncode == 0, r.stdout + r.stderr
    m = load_manifest(out).manifest
    assert m.components["vllm"].commit == sha  # a bare commit for the manifest's own component: its pin
    wheel = m.components["flashinfer-python"]
    assert (
        wheel.kind == "wheel"
        and wheel.requirement == "flashinfer-python==0.6.14"
        and wheel.sha256 == "to-be-locked"
    )
    deep = m.components["deep-gemm"]  # not a releasekit name as written: slugged
    assert (deep.kind, deep.commit, deep.version, deep.repo) == (
        "git",
        "cd" * 20,
        "2.5.0",
        "https://example.invalid/org/deep-gemm.git",
    )
    assert (m.toolchain.pytorch, m.toolchain.nccl) == ("2.9.0", "2.30.4")
    assert [(p.package, p.version, p.scopes) for p in m.pins] == [("xgrammar", "0.2.5", ["runtime"])]
    assert m.validation.baselines["n-r1"].values == {"c1.runs.0": 1.5, "c1.runs.1": 2.5}
    result = json.loads(r.stdout)
    reported = [
        f["location"]["field"]
        for f in result["findings"]["findings"]
        if f["code"] == "IMPORT_FIELD_NOT_CARRIED"
    ]
    assert reported == ["evidence.note"]


def _hostile_manifests(tmp_path: Path) -> dict[str, Path]:
    """Today's tool's manifest bent four ways an attacker (or a broken exporter) bends JSON."""
    pr = '{"number": 1, "head": "' + "a" * 40 + '", "title": "one"}'
    head = '{"schema_version": 1, "name": "n", "repository": "https://github.com/o/vllm.git", "base_ref": "refs/heads/main", '
    texts = {
        # A second "pull_requests" key: a last-wins parser silently drops PR #1.
        "duplicate-key": head + f'"pull_requests": [{pr}], "reviewed_exclusions": [], "pull_requests": []}}',
        "deep": head + '"pull_requests": [], "reviewed_exclusions": ' + "[" * 100_000 + "]" * 100_000 + "}",
        "long-number": head + '"pull_requests": [], "reviewed_exclusions": [], "x": ' + "9" * 5000 + "}",
        "many-values": head
        + '"pull_requests": [], "reviewed_exclusions": ['
        + ",".join(["0"] * 2_000_000)
        + "]}",
        # Empty arrays: before the fix counted only after json.loads had built all 3 million lists.
        "empty-arrays": head + '"pull_requests": [], "reviewed_exclusions": [' + "[]," * 3_000_000 + "[]]}",
    }
    paths = {}
    for name, text in texts.items():
        paths[name] = tmp_path / f"{name}.json"
        paths[name].write_text(text, encoding="utf-8")
    return paths


@pytest.mark.parametrize("case", ["duplicate-key", "deep", "long-number", "many-values", "empty-arrays"])
def test_hostile_json_is_refused_in_one_line_and_nothing_is_written(case: str, tmp_path: Path) -> None:
    import json
    import time
    from unittest import mock

    source = _hostile_manifests(tmp_path)[case]
    out = tmp_path / "out.yaml"
    started = time.monotonic()
    # Values beyond the limit are refused before the parser builds any of them.
    parser = (
        mock.patch.object(json, "loads", side_effect=AssertionError("parsed"))
        if case == "empty-arrays"
        else mock.MagicMock()
    )
    with parser:
        r = invoke("manifest", "import", str(source), "-o", str(out), "--base-image", "local/base")
    assert r.returncode == 2, r.stdout + r.stderr
    (line,) = r.stderr.strip().splitlines()
    assert line.startswith("releasekit: error: ") and str(source) in line, line
    assert "internal error" not in line
    expected = {"duplicate-key": "duplicate key 'pull_requests'", "deep": "nested deeper than 64",
                "long-number": "a number of 5000 characters", "many-values": "more than 200000 JSON values",
                "empty-arrays": "more than 200000 JSON values"}  # fmt: skip
    assert expected[case] in line, line
    assert not out.exists()
    assert time.monotonic() - started < 60  # refused on reading, not after minutes of model building
