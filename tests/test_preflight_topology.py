"""Two rendering faults issue 24's rehearsal found: `validate --dry-run` of a prefill/decode cell, plan check's "where it landed".

Issue 24's rehearsal: seed 000's TP2/EP2 1P+1D TokenSpeed cell was reported as
CELL_SETTING_NOT_RENDERED ("a single TokenSpeed worker serves gRPC for its gateway") because
the dry run rendered only the single-server command. Rendering only: no image is needed.
"""

from __future__ import annotations

from pathlib import Path

from releasekit.manifest import load_manifest
from releasekit.validate.preflight import render_cell

REPO = Path(__file__).resolve().parent.parent


def test_a_prefill_decode_cell_is_rendered_as_its_topology() -> None:
    loaded = load_manifest(REPO / "manifests" / "ds4-sm120.yaml")
    cell = loaded.manifest.validation.cell("ds4-sm120-tp2-ep2-1p1d")
    assert cell is not None
    pre, engine, command = render_cell(cell, loaded, {})
    assert engine is not None and command is not None
    codes = {f.code for f in pre.findings}
    assert "CELL_SETTING_NOT_RENDERED" not in codes, [f.message for f in pre.findings]
    # The model is not pinned in the manifest: still reported.
    assert "MODEL_NOT_PINNED" in codes
    names = [p.name for p in pre.processes]
    assert sorted(names) == ["decode-0", "gateway", "prefill-0"]
    by_name = {p.name: p.argv for p in pre.processes}
    prefill = by_name["prefill-0"]
    assert prefill[prefill.index("--disaggregation-mode") + 1] == "prefill"
    assert "--disaggregation-bootstrap-port" in prefill
    assert prefill[prefill.index("--tensor-parallel-size") + 1] == "2"
    assert pre.argv == prefill  # the first worker's argv, as validate records it
    assert "--pd-disaggregation" in by_name["gateway"]


def test_a_single_server_cell_keeps_its_command() -> None:
    loaded = load_manifest(REPO / "manifests" / "ff-next.yaml")
    cell = next(
        c for c in loaded.manifest.validation.cells if c.engine == "vllm" and not c.parallel.prefill_replicas
    )
    pre, _, command = render_cell(cell, loaded, {})
    assert command is not None
    assert pre.processes == [] and pre.argv == command.argv


def test_where_a_pr_landed_names_a_position_not_a_pr() -> None:
    # Issue 24: plan check printed "8a8802ce16cf (#471 on first-parent, squash)" for tokenspeed#644,
    # where 471 is the commit's index on main's first-parent chain, which reads as PR #471.
    from releasekit.plan.commands import landed_where

    text = landed_where("8a8802ce16cfb8c7fa8ca10a9e152032a4c576f2", 471, "squash")
    assert text == "8a8802ce16cf (squash, first-parent position 471)"
    assert "#" not in text
