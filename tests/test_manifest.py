"""Manifest schema v1: every rule is proven with a manifest that breaks it."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from cli_run import invoke
from ruamel.yaml import YAML

from releasekit.errors import InputError
from releasekit.manifest import ManifestError, load_manifest, validate_manifest

REPO = Path(__file__).resolve().parents[1]
FF_NEXT = REPO / "manifests" / "ff-next.yaml"
DS4 = REPO / "manifests" / "ds4-sm120.yaml"

SHA = "a" * 40

BASE: dict = {
    "schema": "releasekit/v1",
    "name": "small",
    "components": {
        "app": {
            "kind": "git",
            "repo": "https://example.invalid/app.git",
            "canonical_branch": "main",
            "distribution": "app",
            "build": {"environment": {"kind": "venv"}},
            "merge_plan": [
                {"pr": 1, "title": "first"},
                {"pr": 2, "title": "second", "after": [1]},
                {"pr": 3, "title": "third", "after": ["lib#7"], "supersedes": [4]},
            ],
            "already_canonical": [{"commit": "d437a23cfd", "title": "already there", "supersedes": [5]}],
            "closed": [{"pr": 6, "title": "old integration", "reason": "stays closed"}],
        },
        "lib": {
            "kind": "git",
            "repo": "https://example.invalid/lib.git",
            "canonical_branch": "master",
            "merge_plan": [{"pr": 7, "title": "lib fix"}],
        },
        "wheel": {
            "kind": "wheel",
            "requirement": "somewheel==1.2.3",
            "sha256": "to-be-locked",
            "source": {"repo": "https://example.invalid/w.git", "ref": "dev", "commit": SHA},
        },
    },
    "toolchain": {
        "base_image": {"name": "base", "digest": "to-be-locked"},
        "cuda": "13.0",
        "pytorch": "2.13.0",
        "cuda_arch_list": ["12.0a"],
    },
    "pins": [{"package": "somewheel", "version": "1.2.3"}],
}


def write(tmp_path: Path, data: dict, name: str = "m.yaml") -> Path:
    path = tmp_path / name
    yaml = YAML(typ="safe", pure=True)
    yaml.default_flow_style = False
    with path.open("w") as fh:
        yaml.dump(data, fh)
    return path


def codes_for(tmp_path: Path, data: dict) -> list[str]:
    return validate_manifest(write(tmp_path, data)).findings.codes()


# --- the real manifests ---------------------------------------------------------------


def test_real_manifests_validate_exit_0():
    for path in (FF_NEXT, DS4):
        r = invoke("manifest", "validate", str(path))
        assert r.returncode == 0, r.stdout + r.stderr
        assert "SCALAR_CUT_BY_COMMENT" not in r.stdout, r.stdout


def test_plain_scalar_cut_by_a_pr_number_comment_is_reported(tmp_path):
    text = write(tmp_path, BASE).read_text()
    text += (
        "exclusions:\n"
        "- id: upstream-sp\n"
        "  description: Upstream PR #47979 sequence-parallel experiments\n"
        "  upstream: 'vllm-project/vllm#47979'  #3 a real comment after a quoted value\n"
        "  disposition: deferred  # plain note, not a number\n"
        "  reason: |\n"
        "    block text #5 is text, not a comment\n"
    )
    path = tmp_path / "cut.yaml"
    path.write_text(text)
    loaded = validate_manifest(path)
    cut = [f for f in loaded.findings if f.code == "SCALAR_CUT_BY_COMMENT"]
    line = text.splitlines().index("  description: Upstream PR #47979 sequence-parallel experiments") + 1
    assert [(f.location.line, f.location.field, f.severity.value) for f in cut] == [
        (line, "exclusions[0].description", "warning")
    ]
    assert loaded.manifest.exclusions[0].description == "Upstream PR"  # what YAML really read
    r = invoke("manifest", "validate", str(path))
    assert r.returncode == 0 and f"cut.yaml:{line}:" in r.stdout


def test_ff_next_encodes_seed_003_vllm_plan():
    m = load_manifest(FF_NEXT).manifest
    vllm = m.components["vllm"]
    assert [p.pr for p in vllm.merge_plan] == [108, 97, 103, 98, 99, 100, 101, 102, 104, 109]
    by_pr = {p.pr: p for p in vllm.merge_plan}
    assert by_pr[109].supersedes == [105, 106, 107]
    assert by_pr[109].after == [108]
    assert by_pr[103].after == [97]
    assert by_pr[104].after == ["b12x#34"]
    assert by_pr[97].carries == ["83925ac7b6"]
    assert [c.pr or c.commit for c in vllm.already_canonical] == [95, "d437a23cfd"]
    assert vllm.already_canonical[1].supersedes == [96]
    assert [c.pr for c in vllm.closed] == [88]
    b12x = m.components["b12x"]
    assert [p.pr for p in b12x.merge_plan] == [28, 32, 34, 35]
    assert b12x.merge_plan[3].supersedes == [33]
    assert [c.pr for c in b12x.already_canonical] == [31]
    assert {e.id for e in m.exclusions} >= {"upstream-47979-sp-sm120-pcie", "docker-ab-overlays"}
    assert set(m.provenance.record) == {
        "vllm",
        "b12x",
        "flashinfer",
        "instanttensor",
        "pytorch",
        "cuda",
        "nccl",
        "build-repo",
    }
    cells = {c.id: c for c in m.validation.cells}
    assert cells["glm52-tp8-dcp1-mtp3"].speculative.label() == "mtp:3"
    assert {c.id for c in cells.values() if c.id.startswith("ds4-")} == {
        f"ds4-tp{tp}-{s}" for tp in (2, 4) for s in ("mtp0", "mtp2", "dspark")
    }
    assert cells["ds4-tp4-dspark"].parallel.tp == 4
    assert "VLLM_DISABLE_SHARED_EXPERTS_STREAM" in m.validation.forbidden.env


def test_ds4_encodes_seed_000():
    m = load_manifest(DS4).manifest
    deepgemm = m.components["tokenspeed-deepgemm"]
    assert deepgemm.requirement == "tokenspeed-deepgemm==2.5.0.post20260629"
    assert deepgemm.source.commit == "a6b593d2826719dcf4892609af7b84ee23aaf32a"
    assert deepgemm.source.ref == "nv_dev"
    assert m.components["flashinfer"].version == "0.6.14"
    assert [(p.package, p.version) for p in m.pins] == [("apache-tvm-ffi", "0.1.12")]
    (cell,) = m.validation.cells
    assert (
        cell.parallel.tp,
        cell.parallel.ep,
        cell.parallel.prefill_replicas,
        cell.parallel.decode_replicas,
    ) == (2, 2, 1, 1)
    tp = next(c for c in cell.checks if c.kind == "throughput")
    assert sum(tp.prompts_per_concurrency * c for c in tp.concurrency) == 252
    base = m.validation.baselines["seed-000-qualification"].values
    assert base["gsm8k.accuracy"] == pytest.approx(0.9363)
    assert base["throughput.c32.output_tok_s"] == pytest.approx(648.5)
    assert m.validation.datasets["gsm8k"].samples == 1319


def test_show_lists_plan_in_order_with_supersession_and_cross_component_after():
    r = invoke("manifest", "show", str(FF_NEXT))
    assert r.returncode == 0, r.stderr
    order = [
        line.split("│")[2].strip()
        for line in r.stdout.splitlines()
        if line.startswith("│") and "#" in line.split("│")[2]
    ]
    assert order[:10] == ["#108", "#97", "#103", "#98", "#99", "#100", "#101", "#102", "#104", "#109"]
    row109 = next(line for line in r.stdout.splitlines() if "│ #109" in line)
    assert "#105, #106, #107" in row109 and "#108" in row109
    row104 = next(line for line in r.stdout.splitlines() if "│ #104" in line)
    assert "b12x#34" in row104
    r = invoke("manifest", "show", str(FF_NEXT), "--json")
    data = json.loads(r.stdout)
    plan = data["components"]["vllm"]["merge_plan"]
    assert [p["pr"] for p in plan] == [108, 97, 103, 98, 99, 100, 101, 102, 104, 109]
    assert data["components"]["vllm"]["must_not_merge"] == [88, 96, 105, 106, 107]


def test_schema_is_generated_json_schema():
    r = invoke("manifest", "schema")
    assert r.returncode == 0
    schema = json.loads(r.stdout)
    assert schema["additionalProperties"] is False
    assert "components" in schema["required"]
    assert "PlannedPR" in schema["$defs"]


def test_base_manifest_is_valid(tmp_path):
    assert codes_for(tmp_path, BASE) == []


# --- rules, one broken manifest each ---------------------------------------------------


def broken(mutate) -> dict:
    data = copy.deepcopy(BASE)
    mutate(data)
    return data


@pytest.mark.parametrize(
    ("code", "mutate"),
    [
        ("DUPLICATE_PR", lambda d: d["components"]["app"]["merge_plan"].append({"pr": 1, "title": "again"})),
        (
            "DUPLICATE_PR",
            lambda d: d["components"]["app"]["closed"].append({"pr": 2, "title": "x", "reason": "y"}),
        ),
        ("UNKNOWN_AFTER_TARGET", lambda d: d["components"]["app"]["merge_plan"][1].update(after=[99])),
        ("UNKNOWN_AFTER_TARGET", lambda d: d["components"]["app"]["merge_plan"][2].update(after=["lib#8"])),
        ("UNKNOWN_COMPONENT", lambda d: d["components"]["app"]["merge_plan"][2].update(after=["nolib#7"])),
        ("AFTER_TARGET_NOT_MERGED", lambda d: d["components"]["app"]["merge_plan"][1].update(after=[4])),
        ("AFTER_TARGET_NOT_MERGED", lambda d: d["components"]["app"]["merge_plan"][1].update(after=[6])),
        ("SELF_DEPENDENCY", lambda d: d["components"]["app"]["merge_plan"][1].update(after=[2])),
        ("UNKNOWN_ARRIVED_IN", lambda d: d["components"]["app"]["merge_plan"][0].update(arrived_in=99)),
        ("UNKNOWN_ARRIVED_IN", lambda d: d["components"]["app"]["merge_plan"][0].update(arrived_in=1)),
        ("ORDER_CONTRADICTS_AFTER", lambda d: d["components"]["app"]["merge_plan"][0].update(after=[2])),
        ("SUPERSEDED_PR_PLANNED", lambda d: d["components"]["app"]["merge_plan"][2].update(supersedes=[1])),
        (
            "SUPERSEDED_PR_CANONICAL",
            lambda d: (
                d["components"]["app"]["already_canonical"].append({"pr": 9, "title": "t"})
                or d["components"]["app"]["merge_plan"][2].update(supersedes=[9])
            ),
        ),
        (
            "UNRESOLVED_PLACEHOLDER",
            lambda d: d["components"]["app"]["merge_plan"][0].update(title="TODO fill in"),
        ),
        (
            "UNRESOLVED_PLACEHOLDER",
            lambda d: d["components"]["app"].update(repo="https://example.invalid/${ORG}/app.git"),
        ),
        (
            "UNRESOLVED_PLACEHOLDER",
            lambda d: d["components"]["app"]["merge_plan"][0].update(note="to-be-locked"),
        ),
        ("PIN_CONFLICT", lambda d: d["pins"][0].update(version="1.2.4")),
        ("DUPLICATE_PIN", lambda d: d["pins"].append({"package": "SomeWheel", "version": "1.2.3"})),
        ("FORBIDDEN_COMPONENT", lambda d: d.update(policy={"forbidden_distributions": ["some*"]})),
        ("UNKNOWN_PROVENANCE_ITEM", lambda d: d.update(provenance={"record": ["app", "nosuch"]})),
        (
            "DUPLICATE_EXCLUSION",
            lambda d: d.update(exclusions=[{"id": "x", "description": "d", "reason": "r", "pr": 40}] * 2),
        ),
        (
            "EXCLUDED_PR_PLANNED",
            lambda d: d.update(
                exclusions=[{"id": "x", "description": "d", "reason": "r", "component": "app", "pr": 1}]
            ),
        ),
    ],
)
def test_rule_violation_is_reported(tmp_path, code, mutate):
    assert code in codes_for(tmp_path, broken(mutate))


def test_cycle_is_reported_with_the_cycle(tmp_path):
    data = broken(lambda d: d["components"]["lib"]["merge_plan"][0].update(after=["app#3"]))
    result = validate_manifest(write(tmp_path, data))
    cycle = [f for f in result.findings if f.code == "DEPENDENCY_CYCLE"]
    assert len(cycle) == 1
    assert "app#3 -> lib#7 -> app#3" in cycle[0].message or "lib#7 -> app#3 -> lib#7" in cycle[0].message


def test_cross_component_after_is_not_an_order_error(tmp_path):
    # b12x#34-style dependencies are checked by landing time (plan check), not list position.
    assert "ORDER_CONTRADICTS_AFTER" not in codes_for(tmp_path, BASE)


def test_to_be_locked_is_allowed_only_in_lockable_fields(tmp_path):
    ok = broken(lambda d: d["components"]["app"].update(commit="to-be-locked"))
    assert codes_for(tmp_path, ok) == []
    with pytest.raises(ManifestError):
        validate_manifest(
            write(tmp_path, broken(lambda d: d["toolchain"].update(cuda_arch_list=["to-be-locked"])))
        )


def test_validation_matrix_rules(tmp_path):
    cell = {
        "id": "c1",
        "model": {"name": "m"},
        "env": {"NO_STREAMS": "1"},
        "extra_args": ["--enforce-eager"],
        "checks": [{"kind": "gsm8k", "dataset": "missing", "fewshot": "missing-train"}],
        "gates": [{"metric": "decode.target_step_rate", "baseline": "nope", "min_ratio": 0.98}],
    }
    data = broken(
        lambda d: d.update(
            validation={
                "forbidden": {"env": ["NO_STREAMS"], "args": ["--enforce-eager"]},
                "cells": [cell, dict(cell)],
            }
        )
    )
    codes = codes_for(tmp_path, data)
    assert codes.count("FORBIDDEN_SWITCH") == 4
    assert {"DUPLICATE_CELL", "UNKNOWN_DATASET", "UNKNOWN_BASELINE"} <= set(codes)


def test_defaults_merge_into_cells(tmp_path):
    data = broken(
        lambda d: d.update(
            validation={
                "defaults": {"parallel": {"tp": 2}, "options": {"aux_streams": True}},
                "cells": [{"id": "a", "model": {"name": "m"}, "parallel": {"dcp": 2}}],
            }
        )
    )
    cell = load_manifest(write(tmp_path, data)).manifest.validation.cells[0]
    assert (cell.parallel.tp, cell.parallel.dcp, cell.options["aux_streams"]) == (2, 2, True)


# --- schema errors: file:line:column and field path, exit 2 ----------------------------


def test_unknown_key_names_line_column_and_field(tmp_path):
    path = tmp_path / "m.yaml"
    text = write(tmp_path, BASE).read_text()
    path.write_text(text.replace("canonical_branch: main", "canonical_branch: main\n    colour: blue", 1))
    with pytest.raises(ManifestError) as exc:
        validate_manifest(path)
    line = next(i + 1 for i, t in enumerate(path.read_text().splitlines()) if "colour" in t)
    assert f"{path}:{line}:5: components.app.colour: unknown key" in exc.value.details


def test_wrong_type_and_missing_field_lines(tmp_path):
    data = broken(
        lambda d: (
            d["components"]["app"]["merge_plan"][0].update(pr="one"),
            d["toolchain"].pop("cuda_arch_list"),
        )
    )
    path = write(tmp_path, data)
    r = invoke("manifest", "validate", str(path))
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) >= 2 and all(line.startswith("releasekit: error: ") for line in lines)
    assert any("components.app.merge_plan[0].pr:" in line for line in lines)
    assert any("toolchain.cuda_arch_list: Field required" in line for line in lines)
    assert "Traceback" not in r.stderr


def test_version_number_as_float_gets_a_hint(tmp_path):
    data = broken(lambda d: d["toolchain"].update(cuda=13.0))
    with pytest.raises(ManifestError) as exc:
        validate_manifest(write(tmp_path, data))
    assert "quote version-like numbers" in exc.value.details[0]


def test_rule_findings_exit_1_with_location(tmp_path):
    path = write(tmp_path, broken(lambda d: d["components"]["app"]["merge_plan"][1].update(after=[99])))
    r = invoke("manifest", "validate", str(path), "--json")
    assert r.returncode == 1
    report = json.loads(r.stdout)
    (finding,) = [f for f in report["findings"]["findings"] if f["code"] == "UNKNOWN_AFTER_TARGET"]
    assert finding["location"]["field"] == "components.app.merge_plan[1].after[0]"
    assert finding["location"]["line"] and finding["location"]["column"]


def test_later_stages_refuse_a_manifest_that_breaks_rules(tmp_path):
    with pytest.raises(ManifestError):
        load_manifest(
            write(tmp_path, broken(lambda d: d["components"]["app"]["merge_plan"][1].update(after=[99])))
        )


@pytest.mark.parametrize(
    ("raw", "needle"),
    [
        (b"schema: releasekit/v1\nname: x\nname: y\n", "invalid YAML"),
        (b"a: &a [*a]\n", ""),  # ruamel resolves the self-reference to null: harmless
        (b"name: \xff\xfe\n", ":1:7: not UTF-8"),
        (b"- just\n- a list\n", "mapping at the top level"),
        (b"a: !!python/object:os.system ls\n", ""),
        (b"a: [1, 2\n", "invalid YAML"),
        (b"---\na: 1\n---\nb: 2\n", "exactly one YAML document"),
        (b"a: 1\x00\n", "NUL byte"),
        (b"", "mapping at the top level"),
    ],
)
def test_hostile_yaml_is_one_clear_error(tmp_path, raw, needle):
    path = tmp_path / "bad.yaml"
    path.write_bytes(raw)
    with pytest.raises(InputError) as exc:
        validate_manifest(path)
    assert needle in str(exc.value)


def test_alias_bomb_is_refused_fast(tmp_path):
    lines = ['a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for i in range(1, 10):
        lines.append(f"a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * 9) + "]")
    path = tmp_path / "bomb.yaml"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(InputError, match="alias bomb"):
        validate_manifest(path)


def test_deep_nesting_and_huge_file(tmp_path):
    path = tmp_path / "deep.yaml"
    path.write_text("[" * 5000 + "]" * 5000)
    with pytest.raises(InputError):
        validate_manifest(path)
    big = tmp_path / "big.yaml"
    big.write_bytes(b"a: " + b"x" * (5 * 1024 * 1024))
    with pytest.raises(InputError, match="limited"):
        validate_manifest(big)


def test_huge_numbers_are_field_errors(tmp_path):
    data = broken(lambda d: d["components"]["app"]["merge_plan"][0].update(pr=10**40))
    with pytest.raises(ManifestError) as exc:
        validate_manifest(write(tmp_path, data))
    assert "components.app.merge_plan[0].pr" in exc.value.details[0]


def test_missing_file_and_directory_exit_2(tmp_path):
    r = invoke("manifest", "validate", str(tmp_path / "nope.yaml"))
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "no such file" in r.stderr
    r = invoke("manifest", "validate", str(tmp_path))
    assert r.returncode == 2 and "is a directory" in r.stderr


# --- import of today's tool's merge manifest ------------------------------------------

REFERENCE = (
    next(
        (p / "shared" for p in REPO.parents if (p / "shared" / "reference").is_dir()), REPO.parent / "shared"
    )
    / "reference"
    / "blackwell-llm-docker.manifest.vllm.gilded-gnosis-v20.json"
)


@pytest.mark.skipif(not REFERENCE.exists(), reason="shared/reference is not beside this checkout")
def test_import_reference_manifest(tmp_path):
    out = tmp_path / "gg.yaml"
    r = invoke("manifest", "import", str(REFERENCE), "-o", str(out), "--base-image", "local/base")
    assert r.returncode == 0, r.stdout + r.stderr
    m = load_manifest(out).manifest
    ref = json.loads(REFERENCE.read_text())
    plan = m.components["vllm"].merge_plan
    assert [p.pr for p in plan] == [p["number"] for p in ref["pull_requests"]]
    assert [p.head for p in plan] == [p["head"] for p in ref["pull_requests"]]
    assert m.components["vllm"].canonical_branch == "dev/gilded-gnosis"
    by_pr = {e.pr: e for e in m.exclusions}
    superseded = {s for p in plan for s in p.supersedes}
    # A reviewed PR that a planned PR superseded is a supersession (tests/test_import_legacy.py), the rest exclusions.
    assert (
        set(by_pr) | superseded == {e["number"] for e in ref["reviewed_exclusions"]}
        and not set(by_pr) & superseded
    )
    assert by_pr[240].disposition == "out-of-scope" and by_pr[171].commits == [
        ref["reviewed_exclusions"][4]["head"]
    ]


def test_import_refuses_what_is_not_a_reference_manifest(tmp_path):
    bad = tmp_path / "x.json"
    bad.write_text('{"schema_version": 1, "name": "x"}')
    r = invoke("manifest", "import", str(bad), "-o", str(tmp_path / "o.yaml"), "--base-image", "b")
    assert r.returncode == 2 and "not a reference merge manifest" in r.stderr
    assert not (tmp_path / "o.yaml").exists()
