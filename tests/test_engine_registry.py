"""One registry of engine adapters (``releasekit/engine_adapters.py``): the manifest accepts
exactly the engines validate has an adapter for, and adding one is one module and one entry.

The fake engine below lives only in this file: registered for a test, the manifest accepts it
and validate renders its cells with it; unregistered, ``manifest validate`` refuses it (exit 2),
as it refuses ``sglang``, for which releasekit has no adapter.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from pathlib import Path

import pytest
from cli_run import invoke

from releasekit.engine_adapters import ENGINE_ADAPTERS, engine_names
from releasekit.manifest import load_manifest
from releasekit.manifest.models import Manifest
from releasekit.manifest.validation import Cell, QuantizationScheme
from releasekit.validate.engines import Engine, ServeCommand, SpecDecodeMetricNames, adapter_for, engine_for
from releasekit.validate.matrix import matrix_rows

REPO = Path(__file__).resolve().parent.parent
ENGINES_DIR = REPO / "releasekit" / "validate" / "engines"

MANIFEST = """\
schema: releasekit/v1
name: engines
components:
  wheel:
    kind: wheel
    requirement: somewheel==1.2.3
    sha256: to-be-locked
    source: {{repo: "https://example.invalid/w.git", ref: dev, commit: "{sha}"}}
toolchain:
  base_image: {{name: base, digest: to-be-locked}}
  cuda: "13.0"
  pytorch: "2.13.0"
  cuda_arch_list: ["12.0a"]
pins: [{{package: somewheel, version: 1.2.3}}]
validation:
  quantization_schemes:
    q: {{engine: {engine}, method: fp8}}
  cells:
    - id: c1
      engine: {engine}
      model: {{name: m, hub: org/m}}
"""


class FakeEngine(Engine):
    name = "fake"
    version = "0"
    spec_decode_metrics = SpecDecodeMetricNames(
        prefix="fake:spec_",
        drafts="fake:spec_drafts",
        draft_tokens="fake:spec_draft_tokens",
        accepted_tokens="fake:spec_accepted_tokens",
        accepted_per_position="fake:spec_accepted_per_position",
    )

    def placement_flags(self) -> frozenset[str]:
        return frozenset({"--port"})

    def serve_command(
        self,
        cell: Cell,
        model_path: str,
        *,
        port: int = 8000,
        schemes: Mapping[str, QuantizationScheme] | None = None,
    ) -> ServeCommand:
        return ServeCommand(
            argv=["fake-serve", model_path, "--port", str(port)], port=port, served_model_name=cell.model.name
        )


@pytest.fixture
def fake_engine(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(ENGINE_ADAPTERS, "fake", f"{__name__}:FakeEngine")


def manifest(tmp_path: Path, engine: str) -> Path:
    path = tmp_path / "manifest.yaml"
    path.write_text(MANIFEST.format(engine=engine, sha="a" * 40), encoding="utf-8")
    return path


def adapter_modules() -> dict[str, str]:
    """Each ``Engine`` subclass defined in ``validate/engines/`` -> its ``module:Class``, by its ``name``."""
    found: dict[str, str] = {}
    for path in sorted(ENGINES_DIR.glob("*.py")):
        module = f"releasekit.validate.engines.{path.stem}"
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.ClassDef) and any(
                isinstance(b, ast.Name) and b.id == "Engine" for b in node.bases
            ):
                name = next(
                    s.value.value
                    for s in node.body
                    if isinstance(s, ast.Assign)
                    and [t.id for t in s.targets if isinstance(t, ast.Name)] == ["name"]
                    and isinstance(s.value, ast.Constant)
                )
                found[name] = f"{module}:{node.name}"
    return found


def test_the_manifest_and_validate_know_the_same_engines():
    # Every adapter module is in the registry, and the registry lists nothing else.
    assert adapter_modules() == ENGINE_ADAPTERS
    # validate finds an adapter for exactly the names the manifest accepts.
    for name in engine_names():
        adapter = engine_for(name)
        assert (
            adapter.name == name
            and type(adapter).__module__ + ":" + type(adapter).__name__ == (ENGINE_ADAPTERS[name])
        )
    schema = Manifest.model_json_schema(by_alias=True)["$defs"]
    for model in ("Cell", "QuantizationScheme"):
        assert schema[model]["properties"]["engine"]["enum"] == list(engine_names())
    candidates = (*engine_names(), "sglang", "fake")
    accepted = {n for n in candidates if _accepts(n)}
    assert accepted == {n for n in candidates if adapter_for(n) is not None} == set(engine_names())


def _accepts(engine: str) -> bool:
    try:
        Cell.model_validate({"id": "c", "model": {"name": "m"}, "engine": engine})
    except ValueError:
        return False
    return True


@pytest.mark.parametrize("engine", ["sglang", "fake"])
def test_manifest_validate_refuses_an_engine_with_no_adapter(tmp_path, engine):
    path = manifest(tmp_path, engine)
    r = invoke("manifest", "validate", str(path))
    assert r.returncode == 2, r.stderr
    assert "validation.cells[0].engine: Input should be 'vllm' or 'tokenspeed'" in r.stderr
    assert "validation.quantization_schemes.q.engine: Input should be 'vllm' or 'tokenspeed'" in r.stderr
    assert "Traceback" not in r.stderr


def test_a_registered_engine_is_accepted_by_the_manifest_and_found_by_validate(tmp_path, fake_engine):
    path = manifest(tmp_path, "fake")
    r = invoke("manifest", "validate", str(path))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "fake" in engine_names() and isinstance(engine_for("fake"), FakeEngine)
    spec = load_manifest(path).manifest.validation
    (row,) = matrix_rows(spec)
    assert (row.engine, row.serve_argv) == ("fake", ["fake-serve", "org/m", "--port", "8000"])


def test_a_registry_entry_that_is_no_adapter_is_refused(monkeypatch):
    monkeypatch.setitem(ENGINE_ADAPTERS, "fake", f"{__name__}:manifest")
    with pytest.raises(TypeError, match="no Engine adapter named 'fake'"):
        engine_for("fake")
