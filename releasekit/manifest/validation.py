"""The validation matrix part of the manifest: cells, their checks, gates and baselines.

A *cell* is one serving configuration (model x parallelism x speculative mode x
quantisation x options) with the checks it must pass. ``defaults`` are deep-merged
into every cell, so a cell states only what makes it different.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    GetCoreSchemaHandler,
    GetJsonSchemaHandler,
    model_validator,
)
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema, PydanticCustomError, core_schema

from releasekit.engine_adapters import engine_names

CellId = Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9._-]{0,95}$")]
MetricName = Annotated[str, Field(pattern=r"^[a-z0-9_]+(\.[a-z0-9_]+)*$")]


def _known_engine(value: object) -> str:
    """``value`` when an engine adapter has that name (``releasekit/engine_adapters.py``); else the
    error a ``Literal`` of the adapters' names gives."""
    names = engine_names()
    if isinstance(value, str) and value in names:
        return value
    quoted = [repr(n) for n in names]
    expected = " or ".join([", ".join(quoted[:-1]), quoted[-1]] if len(quoted) > 1 else quoted)
    raise PydanticCustomError("literal_error", "Input should be {expected}", {"expected": expected})


class _EngineNames:
    """A ``Literal`` of the engine registry's names, read when a manifest is validated (and its
    JSON Schema generated), so that an adapter added to the registry is a name the manifest accepts."""

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: GetCoreSchemaHandler) -> CoreSchema:
        return core_schema.no_info_plain_validator_function(_known_engine)

    @classmethod
    def __get_pydantic_json_schema__(
        cls, schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        return {"enum": list(engine_names()), "type": "string"}


# The name of a serving engine releasekit has an adapter for.
EngineName = Annotated[str, _EngineNames]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


# A model's served name: an identifier, never a display name (no spaces).
ModelName = Annotated[str, Field(min_length=1, max_length=200, pattern=r"^[A-Za-z0-9][A-Za-z0-9._:+/-]*$")]
# A model path or hub repository: never whitespace, so never a display name.
ModelPath = Annotated[str, Field(min_length=1, max_length=1000, pattern=r"^[^\s]+$")]
HubRepo = Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*$")]
# sha256 of one file of the model directory, or a pin still to be made.
FileHash = Annotated[str, Field(pattern=r"^([0-9a-f]{64}|to-be-locked)$")]
TO_BE_LOCKED = "to-be-locked"


class ModelFile(_Strict):
    path: ModelPath = Field(description="relative to the model directory, e.g. config.json")
    sha256: FileHash

    @model_validator(mode="after")
    def _relative(self) -> ModelFile:
        if self.path.startswith("/") or ".." in self.path.split("/"):
            raise ValueError(f"model file '{self.path}' must be relative to the model directory")
        return self


# A model's identity files: small, and they say what a model is. ``plan lock --models`` hashes
# them when the manifest lists no files; validate hashes and records them whenever present.
IDENTITY_FILES = (
    "config.json",
    "generation_config.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "tokenizer.model",
    "model.safetensors.index.json",
)


class ModelRef(_Strict):
    """A model as a pinned input: where its files come from, which revision, and their expected hashes.

    ``name`` is what the server is asked for (``--served-model-name``); ``display_name`` is for
    people. The source is ``hub`` + ``revision`` (a commit SHA, or ``to-be-locked``) or ``path``
    (a directory on the runner, relative to the manifest or absolute), or both (``path`` is the
    runner's local copy of that hub revision). ``files`` pins files of the model directory
    (``config.json``, tokenizer files, the weight index, weight shards) by sha256: the runner
    refuses a directory whose files are missing or differ before the server starts.
    """

    name: ModelName
    display_name: str | None = None
    hub: HubRepo | None = Field(default=None, description="hub repository, org/name")
    path: ModelPath | None = Field(default=None, description="the model directory on the runner")
    revision: str | None = Field(
        default=None, pattern=r"^([0-9a-f]{40}|to-be-locked)$", description="a commit SHA"
    )
    files: list[ModelFile] = Field(
        default_factory=list, description="files of the model directory and their sha256"
    )
    load_format: str | None = None
    tokenizer: ModelPath | None = None
    note: str | None = None

    @model_validator(mode="after")
    def _source(self) -> ModelRef:
        if self.revision is not None and self.hub is None:
            raise ValueError("a model revision needs 'hub' (the repository the revision belongs to)")
        if self.display_name is not None and self.path is not None and self.display_name == self.path:
            raise ValueError("a model path must not be its display name")
        names = [f.path for f in self.files]
        if len(set(names)) != len(names):
            raise ValueError("a model file is listed twice")
        return self

    @property
    def sha256(self) -> dict[str, str]:
        """file -> pinned sha256 (or ``to-be-locked``)."""
        return {f.path: f.sha256 for f in self.files}

    @property
    def source(self) -> str | None:
        """Where the engine loads the model from: the path, else the hub repository."""
        return self.path or self.hub


class Parallelism(_Strict):
    tp: int = Field(default=1, ge=1, le=1024)
    pp: int = Field(default=1, ge=1, le=1024)
    dcp: int = Field(
        default=1, ge=1, le=1024, description="decode context parallel size (shares the TP GPUs)"
    )
    ep: int | None = Field(default=None, ge=1, le=1024, description="expert parallel size; None: off")
    prefill_replicas: int = Field(
        default=0, ge=0, le=64, description="disaggregated prefill servers (0: not split)"
    )
    decode_replicas: int = Field(default=0, ge=0, le=64)

    @property
    def gpus(self) -> int:
        replicas = max(1, self.prefill_replicas + self.decode_replicas)
        return self.tp * self.pp * replicas


class Speculative(_Strict):
    mode: Literal["off", "mtp", "dspark", "dflash", "ngram", "eagle", "eagle3", "draft_model"] = "off"
    num_tokens: int | None = Field(default=None, ge=1, le=64)
    params: dict[str, Any] = Field(
        default_factory=dict, description="extra keys of the engine's speculative config"
    )

    @model_validator(mode="after")
    def _tokens(self) -> Speculative:
        if self.mode == "off" and self.num_tokens is not None:
            raise ValueError("num_tokens given with speculative mode 'off'")
        if self.mode in ("mtp", "ngram") and self.num_tokens is None:
            raise ValueError(f"speculative mode '{self.mode}' needs num_tokens")
        return self

    def label(self) -> str:
        return (
            "off"
            if self.mode == "off"
            else f"{self.mode}:{self.num_tokens}"
            if self.num_tokens
            else self.mode
        )


class Quantization(_Strict):
    scheme: str | None = Field(default=None, description="a name under validation.quantization_schemes")
    method: str | None = Field(
        default=None, description="the engine's --quantization value (without a scheme)"
    )
    online: bool = Field(default=False, description="weights quantised when the server loads them")


class QuantizationScheme(_Strict):
    """Exactly which engine arguments a quantisation scheme means (the fork's options have no upstream name).

    The adapter of ``engine`` renders ``method`` as its quantisation argument, then ``args``
    verbatim, and adds ``env``; pre-flight checks that the engine parsed ``method``.
    """

    engine: EngineName = "vllm"
    method: str | None = Field(
        default=None, description="the engine's quantisation method (vLLM: --quantization)"
    )
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    online: bool = Field(default=False, description="the scheme quantises weights at load time")
    note: str | None = Field(
        default=None, description="what is assumed and must be confirmed against the engine"
    )


class _Check(_Strict):
    required: bool = True


class Gsm8kCheck(_Check):
    """lm-eval's gsm8k protocol: every question of ``dataset`` scored, few-shot examples from a separate file.

    The number of scored questions must equal the dataset's ``samples`` and, when a baseline
    is named, the baseline's ``gsm8k.n``; both datasets must be pinned by sha256. All of that
    is checked before the server starts.
    """

    kind: Literal["gsm8k"]
    dataset: str = Field(description="a name under validation.datasets: the scored questions (all of them)")
    fewshot: str | None = Field(
        default=None,
        description="a name under validation.datasets: the few-shot examples (its first num_fewshot records), "
        "a separate file such as GSM8K's train split; never the scored file",
    )
    num_fewshot: int = Field(default=5, ge=0, le=64)
    filter: Literal["flexible-extract", "strict-match"] = "flexible-extract"
    min_accuracy: float | None = Field(default=None, ge=0, le=1)
    baseline: str | None = Field(
        default=None, description="a name under validation.baselines (default: any that has the metric)"
    )
    baseline_metric: str | None = Field(
        default=None, description="baseline value the Wilson bound is held to"
    )
    rtol: float = Field(default=0.08, ge=0, le=1)
    confidence: float = Field(default=0.95, gt=0, lt=1)
    max_tokens: int = Field(default=512, ge=1)
    concurrency: int = Field(
        default=1,
        ge=1,
        le=1024,
        description="questions in flight at once (lm-eval's num_concurrent); answers are scored in dataset order",
    )

    @model_validator(mode="after")
    def _fewshot_is_separate(self) -> Gsm8kCheck:
        if self.num_fewshot > 0 and self.fewshot is None:
            raise ValueError(
                "num_fewshot > 0 needs 'fewshot': a separate dataset (e.g. the train split) to take examples from"
            )
        if self.fewshot is not None and self.fewshot == self.dataset:
            raise ValueError(
                "'fewshot' names the scored dataset: few-shot examples must come from a separate file"
            )
        if self.baseline is not None and self.baseline_metric is None:
            self.baseline_metric = "gsm8k.accuracy"
        return self


class AcceptanceCheck(_Check):
    kind: Literal["acceptance"]
    prompts: str | None = Field(
        default=None, description="a dataset name; default: a fixed built-in prompt set"
    )
    num_prompts: int = Field(default=16, ge=1)
    max_tokens: int = Field(default=128, ge=1)
    min_mean_length: float | None = Field(default=None, ge=0)
    min_rate: float | None = Field(default=None, ge=0, le=1)


class DecodeCheck(_Check):
    kind: Literal["decode"]
    concurrency: int = Field(default=1, ge=1)
    input_len: int = Field(default=128, ge=1)
    output_len: int = Field(default=256, ge=1)
    num_prompts: int = Field(default=4, ge=1)
    min_output_tok_s: float | None = Field(default=None, ge=0)


class ThroughputCrossCheck(_Strict):
    """The engine's own serving benchmark (``vllm bench serve``) on the same workload, in the server's
    container: each listed level's output tok/s must agree with releasekit's within ``tolerance``."""

    tolerance: float = Field(gt=0, le=1, description="largest allowed |ours - theirs| / theirs")
    concurrency: list[int] | None = Field(
        default=None, description="levels to cross-check (default: every level)"
    )
    timeout_s: float = Field(default=600, gt=0, le=86_400)
    attempts: int = Field(
        default=3,
        ge=1,
        le=10,
        description="rounds (ours, then the engine's) before a disagreement fails; the best rate of "
        "each side is compared (docs/validate.md)",
    )


class ThroughputCheck(_Check):
    kind: Literal["throughput"]
    input_len: int = Field(ge=1, le=10_000_000)
    output_len: int = Field(ge=1, le=10_000_000)
    concurrency: list[int] = Field(min_length=1)
    num_prompts: int | None = Field(default=None, ge=1, description="per concurrency level, fixed")
    prompts_per_concurrency: int = Field(
        default=8, ge=1, le=1000, description="used when num_prompts is absent"
    )
    require_all_complete: bool = True
    cross_check: ThroughputCrossCheck | None = None

    @model_validator(mode="after")
    def _cross_checked_levels_are_measured(self) -> ThroughputCheck:
        extra = (
            sorted(set(self.cross_check.concurrency or []) - set(self.concurrency))
            if self.cross_check
            else []
        )
        if extra:
            raise ValueError(
                f"cross_check.concurrency {extra} is not among the sweep's levels {self.concurrency}"
            )
        return self


class LongContextCheck(_Check):
    kind: Literal["long_context"]
    context_len: int = Field(ge=16, le=10_000_000)
    needle_depths: list[float] = Field(default_factory=lambda: [0.5])
    max_tokens: int = Field(default=32, ge=1)


class LogScanCheck(_Check):
    kind: Literal["log_scan"]
    forbid: list[str] = Field(
        default_factory=lambda: [
            r"Traceback \(most recent call last\)",
            r"CUDA error",
            r"graph capture failed",
        ],
        description="regular expressions that must not occur in the server log",
    )
    require: list[str] = Field(default_factory=list, description="regular expressions that must occur")


Check = Annotated[
    Gsm8kCheck | AcceptanceCheck | DecodeCheck | ThroughputCheck | LongContextCheck | LogScanCheck,
    Field(discriminator="kind"),
]


def _fraction(value: object) -> object:
    """``4.5%`` -> 0.045; a number stays as it is (validated as a float in (0, 1))."""
    if isinstance(value, str) and value.strip().endswith("%"):
        try:
            return float(value.strip()[:-1]) / 100
        except ValueError:
            raise PydanticCustomError("fraction", "expected a percentage such as 4.5%") from None
    return value


# A fraction in (0, 1), written as a number (0.045) or a percentage ("4.5%").
Fraction = Annotated[float, BeforeValidator(_fraction), Field(gt=0, lt=1)]


class Gate(_Strict):
    """A metric held to a bound or to a baseline value.

    ``metric`` names a receipt metric such as ``decode.target_step_rate`` or
    ``throughput.c32.output_tok_s``. With ``baseline`` it is compared as a ratio
    (candidate / baseline >= min_ratio, judged on the lower confidence bound over
    ``runs`` repetitions); without, against ``min``/``max``.
    """

    metric: MetricName
    baseline: str | None = None
    min_ratio: float | None = Field(default=None, gt=0)
    max_ratio: float | None = Field(default=None, gt=0)
    min: float | None = None
    max: float | None = None
    runs: int = Field(default=1, ge=1, le=100)
    guards: Fraction | None = Field(
        default=None,
        description="the regression the gate exists to catch, as a fraction or a percentage (4.5% or 0.045); "
        "default: 1 - min_ratio (max_ratio - 1)",
    )
    note: str | None = None

    @model_validator(mode="after")
    def _has_bound(self) -> Gate:
        if self.baseline is None and self.min is None and self.max is None:
            raise ValueError("a gate needs a baseline or a min/max bound")
        if self.baseline is not None and self.min_ratio is None and self.max_ratio is None:
            raise ValueError("a baseline gate needs min_ratio or max_ratio")
        if self.guards is not None and self.baseline is None:
            raise ValueError("'guards' is for a gate with a baseline (a ratio gate)")
        return self

    @property
    def guarded(self) -> float | None:
        """The regression the gate must catch: ``guards``, else what its ratio threshold allows."""
        if self.guards is not None:
            return self.guards
        if self.min_ratio is not None and self.min_ratio < 1:
            return 1 - self.min_ratio
        if self.max_ratio is not None and self.max_ratio > 1:
            return self.max_ratio - 1
        return None


class Cell(_Strict):
    id: CellId
    description: str | None = None
    model: ModelRef
    engine: EngineName = "vllm"
    parallel: Parallelism = Field(default_factory=Parallelism)
    speculative: Speculative = Field(default_factory=Speculative)
    quantization: Quantization = Field(default_factory=Quantization)
    kv_cache_dtype: str | None = None
    options: dict[str, bool | int | str] = Field(default_factory=dict, description="e.g. aux_streams: true")
    env: dict[str, str] = Field(default_factory=dict)
    extra_args: list[str] = Field(default_factory=list)
    engine_command: list[str] | None = Field(
        default=None,
        description="the program inside the image that starts the engine; default: the engine's own",
    )
    max_model_len: int | None = Field(default=None, ge=16)
    startup_timeout_s: float = Field(default=900, gt=0, description="deadline for /health and /v1/models")
    request_timeout_s: float = Field(
        default=600, gt=0, description="deadline for one request: a hung server fails the cell"
    )
    expected_duration_s: float | None = Field(default=None, gt=0, description="for the scheduler's packing")
    gpus: int | None = Field(
        default=None, ge=0, le=1024, description="default: tp x pp x replicas; 0 = CPU cell"
    )
    checks: list[Check] = Field(default_factory=list)
    gates: list[Gate] = Field(default_factory=list)
    required: bool = True
    where_applicable: str | None = Field(
        default=None, description="why this cell exists only for some checkpoints"
    )
    source: str | None = Field(default=None, description="which line of the release plan this cell encodes")

    @property
    def gpu_count(self) -> int:
        return self.parallel.gpus if self.gpus is None else self.gpus


class Dataset(_Strict):
    path: str = Field(description="relative to the manifest's directory")
    format: Literal["gsm8k-jsonl", "prompts-jsonl"] = "gsm8k-jsonl"
    sha256: str | None = Field(
        default=None, pattern=r"^[0-9a-f]{64}$", description="the file's sha256; a scored set must have one"
    )
    samples: int | None = Field(
        default=None, ge=1, description="the number of records the file has (1,319 for GSM8K's test split)"
    )


class Baseline(_Strict):
    """Named values, and/or a receipt to take values from: ours (``releasekit.receipt/v1``) or today's
    tool's validation receipt (its ``evidence`` numbers, named ``<profile>.<name>[.<key>]``); or a
    baseline measured beside the candidate: ``image`` (another image serving the gated cell) and/or
    ``cell`` (another cell's server), whose runs alternate with the candidate's on the same host in
    the same job (docs/validate.md, *Side by side*)."""

    source: str = Field(min_length=1, description="where the numbers come from")
    image: str | None = Field(
        default=None,
        min_length=1,
        description="an image reference (tag, ID or digest) to serve the baseline from, interleaved with the "
        "candidate; `validate --baseline-image NAME=REF` gives the exact image",
    )
    cell: CellId | None = Field(
        default=None,
        description="the cell whose server is the baseline, interleaved with the candidate (default: the gated "
        "cell itself, served from `image`)",
    )
    receipt: str | None = Field(
        default=None, description="a receipt file to take values from, relative to the manifest"
    )
    receipt_metrics: dict[MetricName, str] = Field(
        default_factory=dict,
        description="our metric name -> the receipt's name for it, where they differ (e.g. a receipt of today's tool: "
        "acceptance.rate: mtp3.strict_draft_acceptance)",
    )
    values: dict[MetricName, float] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _has_values(self) -> Baseline:
        if self.interleaved:
            if self.receipt is not None or self.values:
                raise ValueError(
                    "a baseline measured beside the candidate ('image'/'cell') takes no 'values' or 'receipt'"
                )
            return self
        if self.receipt is None and not self.values:
            raise ValueError(
                "a baseline needs 'values', a 'receipt', or an 'image'/'cell' to measure beside the candidate"
            )
        if self.receipt_metrics and self.receipt is None:
            raise ValueError("'receipt_metrics' without a 'receipt'")
        return self

    @property
    def interleaved(self) -> bool:
        """Measured in the same job as the candidate, runs alternating (an image or a cell, not a number)."""
        return self.image is not None or self.cell is not None


class ForbiddenSwitches(_Strict):
    env: list[str] = Field(default_factory=list, description="NAME or NAME=value that no cell may set")
    args: list[str] = Field(default_factory=list, description="engine flags no cell may pass")
    reason: str | None = None


class ValidationSpec(_Strict):
    datasets: dict[str, Dataset] = Field(default_factory=dict)
    quantization_schemes: dict[str, QuantizationScheme] = Field(
        default_factory=dict, description="scheme name -> the engine arguments it means"
    )
    models: dict[str, ModelRef] = Field(
        default_factory=dict, description="models as pinned inputs; a cell's `model: KEY` names one"
    )
    baselines: dict[str, Baseline] = Field(default_factory=dict)
    forbidden: ForbiddenSwitches = Field(default_factory=ForbiddenSwitches)
    defaults: dict[str, Any] = Field(default_factory=dict, description="deep-merged into every cell")
    cells: list[Cell] = Field(default_factory=list)

    @model_validator(mode="before")
    @classmethod
    def _apply_defaults(cls, data: Any) -> Any:
        if (
            isinstance(data, dict)
            and isinstance(data.get("defaults"), dict)
            and isinstance(data.get("cells"), list)
        ):
            defaults = data["defaults"]
            data = dict(data)
            data["cells"] = [merge_defaults(defaults, c) if isinstance(c, dict) else c for c in data["cells"]]
        if isinstance(data, dict) and isinstance(data.get("cells"), list):
            # `model: KEY` names an entry of `models` (one pinned definition, many cells).
            models: dict[str, Any] = data["models"] if isinstance(data.get("models"), dict) else {}
            cells = []
            for c in data["cells"]:
                if isinstance(c, dict) and isinstance(c.get("model"), str):
                    if c["model"] not in models:
                        raise ValueError(
                            f"cell '{c.get('id')}': model '{c['model']}' is not a key of validation.models"
                        )
                    c = {**c, "model": models[c["model"]]}
                cells.append(c)
            data = {**data, "cells": cells}
        return data

    @model_validator(mode="after")
    def _baseline_cells_exist(self) -> ValidationSpec:
        ids = {c.id for c in self.cells}
        for name, baseline in self.baselines.items():
            if baseline.cell is not None and baseline.cell not in ids:
                raise ValueError(f"baseline '{name}': cell '{baseline.cell}' is not a cell of this matrix")
        return self

    def cell(self, cell_id: str) -> Cell | None:
        return next((c for c in self.cells if c.id == cell_id), None)

    def scheme_of(self, cell: Cell) -> QuantizationScheme | None:
        """The argument set of the cell's quantisation scheme: declared switches, like its extra_args."""
        return self.quantization_schemes.get(cell.quantization.scheme) if cell.quantization.scheme else None


def merge_defaults(defaults: dict[str, Any], cell: dict[str, Any]) -> dict[str, Any]:
    """Deep merge: mappings merge key by key, everything else (lists included) is replaced by the cell's."""
    merged: dict[str, Any] = dict(defaults)
    for key, value in cell.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = merge_defaults(merged[key], value)
        else:
            merged[key] = value
    return merged
