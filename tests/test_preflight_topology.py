"""`validate --dry-run` renders a prefill/decode cell as the topology `validate` would serve.

Issue 24's rehearsal: seed 000's TP2/EP2 1P+1D TokenSpeed cell was reported as
CELL_SETTING_NOT_RENDERED ("a single TokenSpeed worker serves gRPC for its gateway") because
the dry run rendered only the single-server command. Rendering only: no image is needed.
"""

from __future__ import annotations

from pathlib import Path

from releasekit.manifest import load_manifest
from releasekit.validate.preflight import _render

REPO = Path(__file__).resolve().parent.parent


def test_a_prefill_decode_cell_is_rendered_as_its_topology() -> None:
    loaded = load_manifest(REPO / "manifests" / "ds4-sm120.yaml")
    cell = loaded.manifest.validation.cell("ds4-sm120-tp2-ep2-1p1d")
    assert cell is not None
    pre, engine, command = _render(cell, loaded, {})
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
    pre, _, command = _render(cell, loaded, {})
    assert command is not None
    assert pre.processes == [] and pre.argv == command.argv
