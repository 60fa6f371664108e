"""`releasekit matrix` on the real manifests, the GitHub Actions matrix, and `validate aggregate`."""

from __future__ import annotations

import json
from pathlib import Path

from cli_run import invoke

from releasekit.manifest.validation import Cell
from releasekit.records.receipt import CheckResult, GateResult, Metric, Receipt, cell_sha256, write_receipt

REPO = Path(__file__).resolve().parent.parent


def rows(manifest: str) -> dict[str, dict]:
    proc = invoke("matrix", f"manifests/{manifest}", "--json")
    assert proc.returncode == 0, proc.stderr
    return {r["id"]: r for r in json.loads(proc.stdout)["cells"]}


def test_ff_next_yields_every_cell_of_seed_003_items_5_to_8() -> None:
    cells = rows("ff-next.yaml")
    # Item 5: GLM-5.2 TP8/DCP1 MTP-off and MTP:3, acceptance and CC1 decode, target-step gate.
    off, mtp3 = cells["glm52-tp8-dcp1-mtp0"], cells["glm52-tp8-dcp1-mtp3"]
    assert (off["tp"], off["dcp"], off["speculative"]) == (8, 1, "off")
    assert (mtp3["speculative"], "acceptance" in mtp3["checks"], "decode" in mtp3["checks"]) == (
        "mtp:3",
        True,
        True,
    )
    assert mtp3["gates"] == [
        "decode.target_step_rate vs v17-fixed-width-mtp3",
        "acceptance.rate vs v17-fixed-width-mtp3",
    ]
    # Item 6: TP6 with MTP and DCP; A4, A16, online quantisation, NVFP4 KV, NF3 hybrid.
    tp6 = [c for c in cells.values() if c["tp"] == 6]
    assert all(c["dcp"] > 1 and c["speculative"].startswith("mtp") for c in tp6)
    assert {c["quantization"] for c in tp6} >= {"a4", "a16", "online-fp8+online", "nf3-hybrid"}
    assert any(c["kv_cache_dtype"] == "nvfp4" for c in tp6)
    assert next(c for c in tp6 if c["quantization"] == "nf3-hybrid")["where_applicable"]
    # Item 7: DS4 TP2 and TP4 x MTP-off, MTP:2, DSpark; long context and throughput.
    ds4 = {
        (c["tp"], c["speculative"])
        for c in cells.values()
        if c["model"] == "DeepSeek-V4" and "throughput" in c["checks"]
    }
    assert ds4 == {(tp, s) for tp in (2, 4) for s in ("off", "mtp:2", "dspark")}
    assert all(
        "long_context" in c["checks"]
        for c in cells.values()
        if c["model"] == "DeepSeek-V4" and c["tp"] in (2, 4) and "throughput" in c["checks"]
    )
    # Item 8: A8 W4A8 capture with aux streams on; the stream-disabling switch is forbidden.
    a8 = cells["a8-w4a8-aux-streams-capture"]
    assert a8["quantization"] == "a8-w4a8" and a8["options"] == {"aux_streams": True}
    assert "VLLM_DISABLE_SHARED_EXPERTS_STREAM" not in " ".join(a8["serve_argv"])
    assert len(cells) == 14


def test_ds4_sm120_yields_seed_000_qualification() -> None:
    cells = rows("ds4-sm120.yaml")
    (cell,) = cells.values()
    assert cell["tp"] == 2 and cell["ep"] == 2 and cell["engine"] == "tokenspeed"
    assert {"gsm8k", "throughput"} <= set(cell["checks"])
    # The TokenSpeed adapter renders the 1P+1D topology (tests/test_validate_pd.py checks it in full).
    assert [p["role"] for p in cell["processes"]] == ["router", "prefill", "decode"] and cell[
        "serve_problems"
    ] == []


def test_github_matrix_maps_cells_to_runner_sizes() -> None:
    proc = invoke("matrix", "manifests/ff-next.yaml", "--format", "github")
    assert proc.returncode == 0 and proc.stdout.count("\n") == 1
    include = {e["cell"]: e for e in json.loads(proc.stdout)["include"]}
    assert include["glm52-tp8-dcp1-mtp3"]["runs-on"] == ["self-hosted", "linux", "gpu-8"]
    assert include["glm52-tp6-dcp2-mtp3-a4"]["runs-on"][-1] == "gpu-8"  # six GPUs need an 8-GPU runner
    assert include["ds4-tp2-mtp0"]["runs-on"][-1] == "gpu-2"
    assert include["ds4-tp4-dspark"]["gpus"] == 4


def test_matrix_of_a_missing_file_is_exit_2() -> None:
    proc = invoke("matrix", "manifests/nope.yaml")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr


def _receipt(cell_id: str, image_id: str, passed: bool, tok_s: list[float]) -> Receipt:
    cell = Cell(id=cell_id, model={"name": "m"}, gpus=0)
    levels = [{"concurrency": c, "output_tok_s": v} for c, v in zip((1, 2, 4), tok_s, strict=True)]
    return Receipt(
        cell_id=cell_id,
        cell=cell,
        cell_sha256=cell_sha256(cell),
        image="img",
        image_id=image_id,
        lock_sha256="a" * 64,
        manifest_sha256="b" * 64,
        manifest_name="m",
        passed=passed,
        status="passed" if passed else "failed",
        started_at="2026-12-02T00:00:00+00:00",
        finished_at="2026-12-02T00:01:00+00:00",
        duration_s=60.0,
        metrics={"decode.output_tok_s": Metric(name="decode.output_tok_s", value=tok_s[0], unit="tok/s")},
        checks=[CheckResult(name="throughput", kind="throughput", passed=True, details={"levels": levels})],
        gates=[
            GateResult(
                metric="decode.output_tok_s",
                passed=passed,
                candidate=tok_s[0],
                candidate_low=tok_s[0],
                baseline="base",
                baseline_value=10.0,
                ratio=tok_s[0] / 10,
                ratio_low=tok_s[0] / 10,
                bound="x",
            )
        ],
    )


def test_aggregate_writes_report_and_plots(tmp_path: Path) -> None:
    receipts = tmp_path / "receipts"
    write_receipt(_receipt("a", "sha256:" + "1" * 64, True, [10.0, 18.0, 30.0]), receipts)
    write_receipt(_receipt("b", "sha256:" + "1" * 64, True, [12.0, 20.0, 35.0]), receipts)
    proc = invoke("validate", "aggregate", str(receipts), "-o", str(tmp_path / "report"), "--json")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    summary = json.loads(proc.stdout)
    assert summary["passed"] and [c["cell_id"] for c in summary["cells"]] == ["a", "b"]
    report = (tmp_path / "report" / "REPORT.md").read_text()
    assert "![throughput.png](throughput.png)" in report and "| a |" in report
    for png in ("throughput.png", "gates.png"):
        assert (tmp_path / "report" / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # summary.json is its record (schema, every field), the same as --json printed
    from releasekit.records.summary import SUMMARY_FILE, read_summary

    written = read_summary(tmp_path / "report" / SUMMARY_FILE)
    assert written.model_dump(mode="json", by_alias=True) == summary
    assert summary["schema"] == "releasekit.validation-summary/v1" and SUMMARY_FILE in summary["files"]
    # Byte-stable (issue 22): the same receipts give the same report, plots included.
    again = invoke("validate", "aggregate", str(receipts), "-o", str(tmp_path / "again"), "--json")
    assert again.returncode == 0 and again.stdout == proc.stdout
    names = sorted(p.name for p in (tmp_path / "report").iterdir())
    assert names == ["REPORT.md", "gates.png", "summary.json", "throughput.png"]
    for name in names:
        assert (tmp_path / "report" / name).read_bytes() == (tmp_path / "again" / name).read_bytes(), name


def test_aggregate_refuses_mixed_images_and_failed_cells(tmp_path: Path) -> None:
    receipts = tmp_path / "receipts"
    write_receipt(_receipt("a", "sha256:" + "1" * 64, True, [1.0, 2.0, 3.0]), receipts)
    write_receipt(_receipt("b", "sha256:" + "2" * 64, False, [1.0, 2.0, 3.0]), receipts)
    proc = invoke("validate", "aggregate", str(receipts), "--json")
    assert proc.returncode == 1
    codes = [f["code"] for f in json.loads(proc.stdout)["findings"]]
    assert codes == ["RECEIPTS_DISAGREE", "CELL_FAILED"]


def test_aggregate_of_a_broken_receipt_is_exit_2(tmp_path: Path) -> None:
    (tmp_path / "x.json").write_text('{"schema": "releasekit.receipt/v1"}')
    proc = invoke("validate", "aggregate", str(tmp_path))
    assert proc.returncode == 2 and "not a valid releasekit.receipt/v1 file" in proc.stderr
