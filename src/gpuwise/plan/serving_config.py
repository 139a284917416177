"""The serving plan's configuration: per-GPU VRAM of one replica and the engine command lines.

A serving plan that names a deployment must also say what to type and where the memory goes,
or its reader has to redo the sizing by hand. The VRAM parts come from the same models the
simulator used (``gpuwise.memory`` for weights, context and working buffers; the KV budget of
``gpuwise.perf.kv_capacity``), so they add up to the engine's memory share of the device. The
command lines use each engine's documented flags (vLLM engine arguments, SGLang server
arguments, ``trtllm-serve`` options) with the knobs the simulation assumed.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from gpuwise.catalog import get_gpu
from gpuwise.memory import estimate_memory
from gpuwise.perf.kv_capacity import kv_capacity
from gpuwise.plan import knowledge as K
from gpuwise.plan.snippets import hf_repo
from gpuwise.plan.types import ToolAdvice
from gpuwise.serving.engines import scheduler_config
from gpuwise.serving.evaluate import Deployment
from gpuwise.workload import Workload, workload_from_mapping
from gpuwise.workload.serving import LengthDist

__all__ = ["ServingConfig", "VramPart", "engine_commands", "max_model_len", "serving_config", "serving_tools"]

# memory estimate keys folded into "working buffers" (activations of one prefill chunk, temporaries,
# allocator slack): what the engine keeps besides weights, context and the KV pool
_BUFFER_KEYS = ("activations", "temporaries", "logits_loss", "allocator_reserve")


@dataclass(frozen=True)
class VramPart:
    """One part of a replica GPU's memory, in bytes per GPU, with what it holds."""

    name: str
    bytes_per_gpu: float
    note: str

    def to_dict(self) -> dict[str, Any]:
        """JSON form: name, bytes per GPU and GiB per GPU, note."""
        return {
            "name": self.name,
            "bytes_per_gpu": self.bytes_per_gpu,
            "gib_per_gpu": self.bytes_per_gpu / 2**30,
            "note": self.note,
        }


@dataclass(frozen=True)
class ServingConfig:
    """What to launch: the deployment, the workload changes it carries, VRAM per GPU, commands."""

    where: str
    replicas: int
    total_gpus: int
    changes: dict[str, Any]
    capacity_bytes_per_gpu: float
    vram: list[VramPart]
    kv_max_sequences: int
    commands: dict[str, str] = field(default_factory=dict)  # engine -> command line

    def to_dict(self) -> dict[str, Any]:
        """The ``serving.config`` object of ``plan --json``."""
        return {
            "where": self.where,
            "replicas": self.replicas,
            "total_gpus": self.total_gpus,
            "changes": dict(self.changes),
            "capacity_bytes_per_gpu": self.capacity_bytes_per_gpu,
            "vram": [p.to_dict() for p in self.vram],
            "kv_max_sequences": self.kv_max_sequences,
            "commands": dict(self.commands),
        }


def serving_config(workload: Workload, deployment: Deployment, changes: dict[str, Any]) -> ServingConfig:
    """The recommended deployment's replica configuration: ``workload`` with ``changes`` on its GPU/tp."""
    data = {**workload.to_dict(), **changes, "gpu": deployment.gpu, "tp": deployment.tp, "pp": deployment.pp}
    data["num_gpus"] = deployment.tp * deployment.pp
    w = workload_from_mapping(data, source=workload.source)
    gpu = get_gpu(deployment.gpu)
    est = estimate_memory(w.with_changes(batch_size=1, concurrency=1), gpu)
    kv = kv_capacity(w, gpu)
    capacity = float(est.gpu_memory_bytes)
    parts = [
        VramPart(
            "weights",
            est.breakdown.get("weights", 0.0),
            f"{w.precision} weights"
            + (f", 1/{w.tp * w.pp} per GPU" if w.tp * w.pp > 1 else ", whole on each GPU"),
        ),
        VramPart(
            "cuda context", est.breakdown.get("cuda_context", 0.0), "driver and kernels, outside the pool"
        ),
        VramPart(
            "working buffers",
            sum(est.breakdown.get(k, 0.0) for k in _BUFFER_KEYS),
            "activations of one prefill chunk, temporaries, allocator slack",
        ),
        VramPart(
            "kv cache",
            kv.budget_bytes_per_gpu,
            f"{kv.blocks:,} blocks of {kv.block_size} tokens ({w.kv_cache_dtype} KV): "
            f"{kv.max_sequences} sequences of {kv.tokens_per_sequence:,} tokens",
        ),
        VramPart(
            "left free by the engine",
            max(capacity * (1 - kv.gpu_memory_utilization), 0.0),
            f"the engine takes {kv.gpu_memory_utilization:.2f} of the device",
        ),
    ]
    return ServingConfig(
        where=deployment.where,
        replicas=deployment.replicas,
        total_gpus=deployment.total_gpus,
        changes=dict(changes),
        capacity_bytes_per_gpu=capacity,
        vram=parts,
        kv_max_sequences=kv.max_sequences,
        commands=engine_commands(w, gpu.vendor),
    )


def engine_commands(w: Workload, vendor: str = "NVIDIA") -> dict[str, str]:
    """One replica's launch line for vLLM, SGLang and TensorRT-LLM (the planned engine first).

    Knobs the ``serving:`` section sets are passed as set; the others are each engine's own
    documented defaults (``workload/engine_defaults.py``), written out so the simulated
    configuration is the launched one.
    """
    spec = w.serving
    assert spec is not None
    writers = {"vllm": _vllm, "sglang": _sglang, "tensorrt-llm": _trtllm}
    if vendor.upper() != "NVIDIA":
        del writers["tensorrt-llm"]  # NVIDIA only; vLLM and SGLang have ROCm builds
    lines = {}
    for engine, write in writers.items():
        cfg = scheduler_config(replace(spec, engine=engine))  # type: ignore[arg-type]
        lines[engine] = write(w, cfg.max_num_seqs, cfg.max_num_batched_tokens, cfg.gpu_memory_utilization)
    first = spec.engine if spec.engine in lines else "vllm"
    return {first: lines[first], **{k: v for k, v in lines.items() if k != first}}


def max_model_len(w: Workload) -> int:
    """The longest request the engine must accept: the largest stated prompt and output lengths
    (p99 when given), rounded up to a multiple of 1,024. Paged KV engines reserve nothing per
    sequence for it; a request above it is refused, so it errs long."""
    spec = w.serving
    if spec is None:
        return w.seq_len + w.output_len

    def longest(d: LengthDist | None, fallback: int) -> float:
        if d is None:
            return float(fallback)
        return max(v for v in (d.mean, d.p50, d.p90, d.p99) if v is not None)

    tokens = longest(spec.prompt_len, w.seq_len) + longest(spec.output_len, w.output_len)
    return int(-(-tokens // 1024) * 1024)


def _joined(notes: list[str], args: list[str]) -> str:
    return "".join(f"# {n}\n" for n in notes) + " \\\n    ".join(args) + "\n"


def _quant_note(w: Workload) -> list[str]:
    if w.precision in {"int4", "nf4"}:
        return ["serve an AWQ or GPTQ 4-bit checkpoint of the model"]
    if w.precision == "fp4":
        return ["serve an NVFP4 checkpoint of the model (ModelOpt / llm-compressor)"]
    return []


def _vllm(w: Workload, seqs: int, tokens: int, share: float) -> str:
    """vLLM engine arguments (docs.vllm.ai, `vllm serve --help`)."""
    args = [f"vllm serve {hf_repo(w.model)}", f"--tensor-parallel-size {w.tp}"]
    if w.pp > 1:
        args.append(f"--pipeline-parallel-size {w.pp}")
    if w.expert_parallel > 1:
        args.append("--enable-expert-parallel")
    quant = {"fp8": "fp8", "int8": "fp8", "int4": "awq", "nf4": "awq", "fp4": "modelopt_fp4"}
    if w.precision in quant:
        args.append(f"--quantization {quant[w.precision]}")
    if w.kv_cache_dtype in {"fp8", "int8"}:
        args.append("--kv-cache-dtype fp8")
    args += [
        f"--max-model-len {max_model_len(w)}",
        f"--max-num-seqs {seqs}",
        f"--max-num-batched-tokens {tokens}",
        f"--gpu-memory-utilization {share:.2f}",
    ]
    spec = w.serving
    if spec is not None and spec.prefix_hit_rate > 0:
        args.append("--enable-prefix-caching")
    if spec is not None and spec.speculative_tokens:
        draft = f'{{"method": "ngram", "num_speculative_tokens": {spec.speculative_tokens}}}'
        args.append(f"--speculative-config '{draft}'")
    return _joined(_quant_note(w), args)


def _sglang(w: Workload, seqs: int, tokens: int, share: float) -> str:
    """SGLang server arguments (docs.sglang.io, `python -m sglang.launch_server --help`)."""
    args = [f"python -m sglang.launch_server --model-path {hf_repo(w.model)}", f"--tp {w.tp}"]
    if w.pp > 1:
        args.append(f"--pp-size {w.pp}")
    if w.expert_parallel > 1:
        args.append(f"--ep-size {w.expert_parallel}")
    if w.precision in {"fp8", "int8"}:
        args.append("--quantization fp8")
    elif w.precision in {"int4", "nf4"}:
        args.append("--quantization awq")
    if w.kv_cache_dtype in {"fp8", "int8"}:
        args.append("--kv-cache-dtype fp8_e4m3")
    args += [
        f"--context-length {max_model_len(w)}",
        f"--max-running-requests {seqs}",
        f"--chunked-prefill-size {tokens}",
        f"--mem-fraction-static {share:.2f}",
    ]
    spec = w.serving
    if spec is not None and spec.prefix_hit_rate == 0:
        args.append("--disable-radix-cache")  # SGLang caches prefixes by default
    return _joined(_quant_note(w), args)


def _trtllm(w: Workload, seqs: int, tokens: int, share: float) -> str:
    """trtllm-serve options (nvidia.github.io/TensorRT-LLM, commands/trtllm-serve)."""
    notes = _quant_note(w)
    if w.precision in {"fp8", "int8"} or w.kv_cache_dtype in {"fp8", "int8"}:
        notes.append("FP8 weights/KV: serve a ModelOpt FP8 checkpoint (its config sets the quantization)")
    args = [f"trtllm-serve {hf_repo(w.model)}", f"--tp_size {w.tp}"]
    if w.pp > 1:
        args.append(f"--pp_size {w.pp}")
    if w.expert_parallel > 1:
        args.append(f"--ep_size {w.expert_parallel}")
    args += [
        f"--max_batch_size {seqs}",
        f"--max_num_tokens {tokens}",
        f"--max_seq_len {max_model_len(w)}",
        f"--kv_cache_free_gpu_memory_fraction {share:.2f}",
    ]
    return _joined(notes, args)


def serving_tools(workload: Workload, config: ServingConfig, rate_rps: float) -> list[ToolAdvice]:
    """Tools for a serving plan: the engine that runs the command above, then the load test that
    turns the simulated latencies into measured ones."""
    spec = workload.serving
    assert spec is not None
    engine = spec.engine if spec.engine in K.TOOLS else "vllm"
    first = next(iter(config.commands), engine)
    engine_tool = K.TOOLS[first if first in K.TOOLS else engine]
    out = [
        ToolAdvice(
            engine_tool.id,
            engine_tool.name,
            f"Runs each of the {config.replicas} replica(s) of {config.where} with the command above.",
            engine_tool.does,
            engine_tool.source,
        )
    ]
    tool = K.TOOLS["gpuwise-loadtest"]
    out.append(
        ToolAdvice(
            tool.id,
            tool.name,
            f"The latencies above are simulated (confidence low): drive one replica at "
            f"{rate_rps / max(config.replicas, 1):.2f} req/s (the rate / {config.replicas}) and re-plan "
            "with --evidence to calibrate the step model.",
            tool.does,
            tool.source,
        )
    )
    return out
