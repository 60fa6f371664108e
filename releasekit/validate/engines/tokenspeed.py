"""The TokenSpeed adapter: prefill and decode workers with a bootstrap port, TokenSpeed's gateway in front.

Modelled on TokenSpeed's own prefill/decode smoke topology (its CI launch scripts for a
1P+1D deployment, ``test/ci_system/serve_*_pd_1p1d.sh`` in lightseekorg/tokenspeed): each
role is one worker (``python3 -m smg_grpc_servicer.tokenspeed``) started with
``--disaggregation-mode prefill|decode``, the prefill worker with a
``--disaggregation-bootstrap-port``, each with its own ``--dist-init-addr``, and a gateway
(``python3 -m smg launch --pd-disaggregation --prefill grpc://HOST:PORT BOOTSTRAP_PORT
--decode grpc://HOST:PORT``) that exposes the OpenAI API over HTTP. The workers speak gRPC
to the gateway, so a worker is ready when its log says so, not when an HTTP path answers;
the gateway is ready when ``/v1/models`` answers.

ASSUMPTIONS TO CONFIRM against the TokenSpeed revision being released (the names below were
read from a later revision of TokenSpeed's scripts, not the one seed 000 qualified, and none
has been run here — TokenSpeed needs a GPU):
- the worker module and flags (``WORKER_LAUNCHER``, ``--world-size``, ``--tensor-parallel-size``,
  ``--enable-expert-parallel`` — expert parallelism spans the role's world size; there is no
  separate EP-size flag —, ``--dist-init-addr``, ``--disaggregation-transfer-backend``);
- the gateway module and flags (``GATEWAY_LAUNCHER``, ``--prometheus-port``, the round-robin
  policies), and that the gateway ships in the candidate image;
- the readiness line ``health status -> SERVING`` (``WORKER_READY_LOG``);
- the speculative flag ``--speculative-algorithm`` and its values (only DSPARK is known);
- ``--kv-cache-dtype`` and ``--quantization`` (SGLang-style names, not seen in the scripts);
- the metric names (``SPEC_DECODE_METRICS``, ``GATEWAY_METRICS``): not seen at all.
"""

from __future__ import annotations

from collections.abc import Mapping

from releasekit.manifest.validation import Cell, QuantizationScheme
from releasekit.validate.engines.interface import Engine, LogPatterns, ServeCommand, SpecDecodeMetricNames
from releasekit.validate.topology import PortPlan, ProcessSpec, Topology, roles, worker_gpus

WORKER_LAUNCHER = ["python3", "-m", "smg_grpc_servicer.tokenspeed"]
GATEWAY_LAUNCHER = ["python3", "-m", "smg", "launch"]
WORKER_READY_LOG = r"health status -> SERVING"
TRANSFER_BACKEND = "mooncake"
# Per-role rendezvous addresses: TokenSpeed reserves a small port cluster around each, so
# the roles' addresses are kept far apart (the script uses 12579 and 13580).
DIST_INIT_BASE = 12579
DIST_INIT_STRIDE = 1001

_SPEC_ALGORITHM = {"dspark": "DSPARK"}

PLACEMENT_FLAGS = frozenset(
    {
        "-m",
        "--model",
        "--served-model-name",
        "--host",
        "--port",
        "--world-size",
        "--tensor-parallel-size",
        "--enable-expert-parallel",
        "--dist-init-addr",
        "--disaggregation-mode",
        "--disaggregation-bootstrap-port",
        "--disaggregation-transfer-backend",
        "--speculative-algorithm",
        "--kv-cache-dtype",
        "--quantization",
        "--max-model-len",
        "--load-format",
        # The gateway's.
        "--pd-disaggregation",
        "--prefill",
        "--decode",
        "--model-path",
        "--tokenizer-path",
        "--prefill-policy",
        "--decode-policy",
        "--prometheus-port",
    }
)

# Assumed (see the module docstring): SGLang-style names under a tokenspeed: prefix.
SPEC_DECODE_METRICS = SpecDecodeMetricNames(
    prefix="tokenspeed:spec_",
    drafts="tokenspeed:spec_num_drafts",
    draft_tokens="tokenspeed:spec_num_draft_tokens",
    accepted_tokens="tokenspeed:spec_num_accepted_tokens",
    accepted_per_position="tokenspeed:spec_num_accepted_tokens_per_pos",
)
GATEWAY_METRICS = ("smg_requests_total",)

LOG_PATTERNS = LogPatterns(
    ready=WORKER_READY_LOG,
    fatal=(r"CUDA out of memory", r"Traceback \(most recent call last\)"),
)


class TokenSpeedEngine(Engine):
    name = "tokenspeed"
    version = "1"
    spec_decode_metrics = SPEC_DECODE_METRICS
    log_patterns = LOG_PATTERNS

    def placement_flags(self) -> frozenset[str]:
        return PLACEMENT_FLAGS

    def _worker_args(self, cell: Cell, model_path: str, port: int) -> tuple[list[str], list[str]]:
        """The flags every worker of this cell gets, and what the adapter cannot express."""
        par = cell.parallel
        problems: list[str] = []
        world = par.tp * par.pp
        argv = [
            *(cell.engine_command or WORKER_LAUNCHER),
            "--model",
            model_path,
            "--served-model-name",
            cell.model.name,
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--world-size",
            str(world),
            "--tensor-parallel-size",
            str(par.tp),
        ]
        if par.pp > 1:
            problems.append(f"pp={par.pp}: no TokenSpeed pipeline-parallel flag is known")
        if par.dcp > 1:
            problems.append(f"dcp={par.dcp}: no TokenSpeed decode-context-parallel flag is known")
        if par.ep is not None:
            if par.ep != world:
                problems.append(
                    f"ep={par.ep}: TokenSpeed's expert parallelism spans the role's world size ({world})"
                )
            argv.append("--enable-expert-parallel")
        spec = cell.speculative
        if spec.mode != "off":
            algorithm = _SPEC_ALGORITHM.get(spec.mode)
            if algorithm is None:
                problems.append(f"speculative mode '{spec.mode}' has no known TokenSpeed algorithm name")
            else:
                argv += ["--speculative-algorithm", algorithm]
            if spec.num_tokens is not None:
                problems.append(
                    "speculative num_tokens: no TokenSpeed flag is known (DSPARK takes it from the checkpoint)"
                )
        if cell.quantization.method:
            argv += ["--quantization", cell.quantization.method]
        if cell.kv_cache_dtype:
            argv += ["--kv-cache-dtype", cell.kv_cache_dtype]
        if cell.model.load_format:
            argv += ["--load-format", cell.model.load_format]
        if cell.max_model_len:
            argv += ["--max-model-len", str(cell.max_model_len)]
        for option in sorted(cell.options):
            problems.append(f"option '{option}' has no TokenSpeed mapping")
        argv += list(cell.extra_args)
        return argv, problems

    def serve_command(
        self,
        cell: Cell,
        model_path: str,
        *,
        port: int = 8000,
        schemes: Mapping[str, QuantizationScheme] | None = None,
    ) -> ServeCommand:
        argv, problems = self._worker_args(cell, model_path, port)
        if cell.quantization.scheme is not None:
            problems.append(
                f"quantisation scheme '{cell.quantization.scheme}' has no TokenSpeed rendering yet"
            )
        problems.append(
            "a single TokenSpeed worker serves gRPC for its gateway; only prefill/decode cells "
            "(prefill_replicas, decode_replicas) are rendered as a runnable topology"
        )
        return ServeCommand(argv=argv, port=port, served_model_name=cell.model.name, problems=problems)

    def topology(self, cell: Cell, model_path: str, ports: PortPlan, gpus: list[int]) -> Topology | None:
        gateway_port = ports.take()
        prometheus_port = ports.take()
        groups = worker_gpus(cell, gpus)
        processes: list[ProcessSpec] = []
        problems: list[str] = []
        prefill_args: list[str] = []
        decode_args: list[str] = []
        for name, role, index in roles(cell):
            port = ports.take()
            argv, worker_problems = self._worker_args(cell, model_path, port)
            problems += [p for p in worker_problems if p not in problems]
            extra: dict[str, int] = {}
            dist_init = DIST_INIT_BASE + index * DIST_INIT_STRIDE if ports.base is not None else ports.take()
            argv += [
                "--dist-init-addr",
                f"127.0.0.1:{dist_init}",
                "--disaggregation-mode",
                role,
                "--disaggregation-transfer-backend",
                TRANSFER_BACKEND,
            ]
            extra["dist_init"] = dist_init
            if role == "prefill":
                bootstrap = ports.take()
                argv += ["--disaggregation-bootstrap-port", str(bootstrap)]
                extra["bootstrap"] = bootstrap
                prefill_args += ["--prefill", f"grpc://127.0.0.1:{port}", str(bootstrap)]
            else:
                decode_args += ["--decode", f"grpc://127.0.0.1:{port}"]
            processes.append(
                ProcessSpec(
                    name=name,
                    role=role,
                    argv=argv,
                    env=dict(cell.env),
                    port=port,
                    ports=extra,
                    gpus=groups[index],
                    ready_log=WORKER_READY_LOG,
                )
            )
        gateway = [
            *GATEWAY_LAUNCHER,
            "--pd-disaggregation",
            *prefill_args,
            *decode_args,
            "--host",
            "127.0.0.1",
            "--port",
            str(gateway_port),
            "--model-path",
            model_path,
            "--tokenizer-path",
            model_path,
            "--prefill-policy",
            "round_robin",
            "--decode-policy",
            "round_robin",
            "--prometheus-port",
            str(prometheus_port),
        ]
        processes.insert(
            0,
            ProcessSpec(
                name="gateway",
                role="router",
                argv=gateway,
                port=gateway_port,
                ports={"prometheus": prometheus_port},
                readiness_paths=[self.models_path],
                metrics_path="/metrics",
                metrics_port=prometheus_port,
                metric_names=list(GATEWAY_METRICS),
            ),
        )
        return Topology(processes=processes, entry="gateway", problems=problems)
