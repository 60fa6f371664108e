"""What releasekit needs from a serving engine: how to start it and where it reports.

An adapter renders a cell into a command and environment, and owns its engine's
vocabulary: the flags that only express a cell's coordinates and placement (the publish
gate asks for them), the names of its metrics (the checks parse with them), where it
reports readiness, and the log lines it prints. The container runner, the checks and the
gates are engine-neutral. SGLang or TokenSpeed adapters implement the same class.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping

from pydantic import BaseModel, ConfigDict, Field

from releasekit.manifest.validation import Cell, QuantizationScheme
from releasekit.validate.topology import PortPlan, Topology


class ServeCommand(BaseModel):
    argv: list[str]
    env: dict[str, str] = Field(default_factory=dict)
    port: int
    served_model_name: str
    problems: list[str] = Field(default_factory=list, description="cell settings the engine cannot express")
    expected: dict[str, object] = Field(
        default_factory=dict,
        description="engine-argument values this command must parse to (pre-flight compares them), by the engine's own field names",
    )


class SpecDecodeMetricNames(BaseModel):
    """Where an engine's /metrics reports speculative decoding (counters, summed over label sets)."""

    model_config = ConfigDict(frozen=True)

    prefix: str = Field(description="every speculative-decoding metric starts with this")
    drafts: str
    draft_tokens: str
    accepted_tokens: str
    accepted_per_position: str
    position_label: str = "position"


class DecodeTimingMetricNames(BaseModel):
    """Where an engine's /metrics times each finished request's decode phase on the engine's own
    clock (histograms: ``NAME_sum`` and ``NAME_count``, summed over label sets)."""

    model_config = ConfigDict(frozen=True)

    decode_time: str = Field(
        description="histogram of seconds from a request's first output token to its last"
    )
    generation_tokens: str = Field(
        description="histogram of output tokens per request, the first one (from prefill) included"
    )


class LogPatterns(BaseModel):
    """Regular expressions over the server log."""

    model_config = ConfigDict(frozen=True)

    ready: str | None = Field(default=None, description="a line the server prints once it serves")
    fatal: tuple[str, ...] = Field(default=(), description="lines that mean the server cannot serve")


class Engine(ABC):
    name: str
    # The adapter's own version: bump it when its vocabulary or its rendering of a cell
    # changes, so a receipt says which adapter judged it.
    version: str
    health_path: str = "/health"
    models_path: str = "/v1/models"
    metrics_path: str = "/metrics"
    spec_decode_metrics: SpecDecodeMetricNames
    # None: the engine does not time decode itself, and the decode check measures it by difference.
    decode_timing: DecodeTimingMetricNames | None = None
    log_patterns: LogPatterns = LogPatterns()
    bench_name: str | None = None  # the engine's own serving benchmark, as its users call it

    @property
    def readiness_paths(self) -> list[str]:
        """HTTP paths that all answer once the server is ready."""
        return [self.health_path, self.models_path]

    @abstractmethod
    def placement_flags(self) -> frozenset[str]:
        """Flags through which the adapter expresses a cell's own coordinates and where the server
        runs and listens: passing them is the cell itself, not a hidden switch."""

    @abstractmethod
    def serve_command(
        self,
        cell: Cell,
        model_path: str,
        *,
        port: int = 8000,
        schemes: Mapping[str, QuantizationScheme] | None = None,
    ) -> ServeCommand:
        """The argv (inside the image) and the extra environment that start this cell's server.

        ``schemes``: the manifest's ``validation.quantization_schemes`` (what a scheme's arguments are).
        Every cell setting is rendered or named in ``problems``; none is dropped.
        """

    def preflight_script(self) -> str | None:
        """Python source run inside the candidate image (no network, no GPU, no model load) that parses
        rendered commands with the image's own engine; None: this engine has no pre-flight yet.

        Protocol: ``python3 -c SCRIPT JSON`` where JSON is ``[{"id", "argv"}]``; the script prints one
        line ``PREFLIGHT_MARKER`` + ``[{"id", "error": str|None, "values": {field: value}}]``."""
        return None

    def preflight_args(self, cell: Cell, command: ServeCommand) -> list[str]:
        """What the pre-flight script parses for ``command``: by default the whole argv."""
        return list(command.argv)

    def bench_serve(
        self,
        *,
        port: int,
        served_model: str,
        tokenizer: str,
        input_len: int,
        output_len: int,
        num_prompts: int,
        concurrency: int,
        seed: int,
    ) -> list[str] | None:
        """The engine's own serving benchmark for one throughput level, as argv run inside the server's
        container against ``127.0.0.1:port``: random prompts of exactly ``input_len`` tokens, exactly
        ``output_len`` tokens out (EOS ignored), ``num_prompts`` requests, ``concurrency`` in flight.
        It prints one line ``BENCH_MARKER`` + JSON ``{"completed", "output_tokens", "duration_s",
        "output_tok_s"}``. None: this engine has no such tool (the cross-check cannot run)."""
        return None

    def topology(self, cell: Cell, model_path: str, ports: PortPlan, gpus: list[int]) -> Topology | None:
        """The processes of a prefill/decode cell (``validate/topology.py``): each worker's argv,
        ports, GPUs, readiness and metric names, and the router or gateway in front. None: this
        adapter has no prefill/decode topology."""
        return None


PREFLIGHT_MARKER = "RELEASEKIT-PREFLIGHT "
BENCH_MARKER = "RELEASEKIT-BENCH "
