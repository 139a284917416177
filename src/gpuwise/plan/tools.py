"""Which tools to use, each with the reason that applies to this workload.

The reason names the technique or finding it serves and, where the models computed one,
the number. Tools whose benefit the models do not predict (torch.compile) say so.
"""

from __future__ import annotations

from gpuwise.catalog import GPU, get_gpu, get_model
from gpuwise.diagnose import Finding
from gpuwise.diagnose import thresholds as T
from gpuwise.diagnose.finding import FindingId
from gpuwise.plan import knowledge as K
from gpuwise.plan.input_sizing import size_input_pipeline
from gpuwise.plan.scaling import NODE_GPUS
from gpuwise.plan.techniques import describe
from gpuwise.plan.types import HardwareOption, Outcome, ScalingDecision, Technique, ToolAdvice
from gpuwise.plan.xla_advice import xla_tools
from gpuwise.units import GiB
from gpuwise.workload import Workload
from gpuwise.workload.ml_framework import ml_framework

__all__ = ["advise"]

# The tools a finding calls for, whatever the techniques say.
_FINDING_TOOLS: dict[FindingId, tuple[str, ...]] = {
    "input_bound": ("dali",),
    "loader_cpu_saturated": ("dali",),
    "launch_bound": ("torch.compile",),
    "no_flash_attention": ("flash-attention",),
    "comm_bound": ("nccl",),
    "kv_cache_dominant": ("vllm",),
    "decode_memory_bound": ("vllm", "tensorrt-llm"),
    "no_mixed_precision": ("torch-amp",),
}


class _Advice:
    """Tool advice in the order first given; a tool keeps its first (most specific) reason."""

    def __init__(self) -> None:
        self.items: dict[str, ToolAdvice] = {}

    def add(self, tool_id: str, why: str) -> None:
        """Advise `tool_id` (a key of `knowledge.TOOLS`) for `why`, unless it is already advised."""
        if tool_id in self.items:
            return
        tool = K.TOOLS[tool_id]
        self.items[tool_id] = ToolAdvice(tool.id, tool.name, why, tool.does, tool.source)


def advise(
    original: Workload,
    config: Workload,
    outcome: Outcome,
    techniques: list[Technique],
    findings: list[Finding],
    scaling: ScalingDecision,
    hardware: list[HardwareOption],
    measured: bool,
    fit_needed: bool = False,
) -> list[ToolAdvice]:
    """Tools for the recommended `config` (`outcome` its prediction), each once with its reason:
    first those serving recommended techniques and findings, then by workload kind, then checks."""
    if ml_framework(config.framework) != "pytorch":  # JAX / TensorFlow: that framework's tools
        return xla_tools(config, techniques, findings)
    a = _Advice()
    _for_techniques_and_findings(a, config, techniques, findings)
    gpu = get_gpu(config.gpu)
    if config.is_inference and not config.is_cv:
        _serving(a, config, outcome, gpu, hardware)
        _stay_on_own_gpu(a, original, gpu)
    if config.is_training:
        _training(a, config, scaling, fit_needed)
    if config.is_training and config.is_cv:  # helper "vision"
        _vision_input(a, config, outcome, findings)
    if config.num_gpus > 1:
        a.add(
            "nccl",
            f"{scaling.strategy}: run once with NCCL_DEBUG=INFO to confirm the collectives use "
            + ("NVLink" if gpu.nvlink_gbps > 0 else "the links you expect (this GPU has no NVLink)")
            + ".",
        )
    if not measured:
        a.add(
            "gpuwise-profile",
            "Everything above is predicted (confidence low): measure the real loop and re-plan with "
            "--evidence.",
        )
    return list(a.items.values())


def _for_techniques_and_findings(
    a: _Advice, config: Workload, techniques: list[Technique], findings: list[Finding]
) -> None:
    """The first tool of each recommended technique, then the tools each finding calls for."""
    for t in techniques:
        if t.verdict != "recommended":
            continue
        choices = K.TECHNIQUE_TOOLS.get(t.id, ())
        if t.id == "sharding" and config.framework.strip().lower() == "deepspeed":
            choices = ("deepspeed",)  # the stack you already run has ZeRO
        for tool_id in choices[:1]:
            a.add(tool_id, f"{t.title}: {describe(t.impact, t.after)}.")
    for f in findings:
        for tool_id in _FINDING_TOOLS.get(f.id, ()):
            a.add(tool_id, f"{f.title} ({f.summary.rstrip('.')}).")


def _stay_on_own_gpu(a: _Advice, original: Workload, gpu: GPU) -> None:
    """The plan moved serving off a small consumer GPU: llama.cpp is how to stay on it anyway."""
    mine = get_gpu(original.gpu)
    if mine.consumer and mine.memory_gb <= T.SMALL_GPU_MEMORY_GB and mine.id != gpu.id:
        a.add(
            "llama.cpp",
            f"To stay on your {mine.memory_gb:.0f} GB {mine.id}: GGUF 4-bit weights with some layers "
            "offloaded to the CPU "
            "(slower per token, but it runs).",
        )


def _vision_input(a: _Advice, config: Workload, outcome: Outcome, findings: list[Finding]) -> None:
    """Vision training: the input pipeline must decode as many images/s per GPU as the GPU consumes."""
    sizing = size_input_pipeline(config, outcome)
    if sizing is not None:
        first = sizing.options[0]
        lead = (
            "Ranked first: the node's cores are short for a CPU loader. "
            if "DALI" in first.name
            else f"Not needed on {sizing.node.split(':')[0]} ({sizing.verdict}); when `gpuwise profile` "
            "shows data wait, it moves decoding onto the GPU. "
            if sizing.node
            else "When `gpuwise profile` shows data wait, it moves decoding onto the GPU. "
        )
        a.add("dali", lead + sizing.summary + ".")
    if "dali" not in a.items and any(f.id == "low_utilization" for f in findings):
        a.add(
            "dali",
            "Low utilization in a vision job: if `gpuwise profile` shows data wait, decoding/augmenting on "
            "the GPU removes it.",
        )


def _serving(a: _Advice, w: Workload, outcome: Outcome, gpu: GPU, hardware: list[HardwareOption]) -> None:
    """Serving engines for the request mix (concurrency, latency goal, RAG prefixes, small GPUs, MIG)."""
    conc = f"{w.concurrency} concurrent requests" if w.concurrency > 1 else "single-stream requests"
    cap = (
        f"; the KV cache holds up to {outcome.max_concurrency} sequences of {w.seq_len + w.output_len} tokens"
        if outcome.max_concurrency
        else ""
    )
    engine = w.framework.strip().lower()
    if engine in {"tensorrt-llm", "sglang"}:  # the engine you run first, with the same reasons
        a.add(engine, f"Your serving engine: {conc} with in-flight batching and paged KV memory{cap}.")
    a.add("vllm", f"Serves {conc} with continuous batching and paged KV memory{cap}.")
    if gpu.vendor.upper() == "NVIDIA" and gpu.fp8_tflops and w.goal == "latency":
        a.add(
            "tensorrt-llm",
            f"Goal is latency on a GPU with FP8 tensor cores ({gpu.id}): compiled, fused kernels cut "
            "per-token time further.",
        )
    if w.task == "rag":
        a.add(
            "sglang",
            "RAG prompts share long prefixes (instructions, retrieved documents): prefix caching computes "
            "them once.",
        )
    if gpu.consumer and gpu.memory_gb <= T.SMALL_GPU_MEMORY_GB:
        a.add(
            "llama.cpp",
            f"{gpu.memory_gb:.0f} GB consumer GPU: GGUF 4-bit models and partial CPU offload when the model "
            "and "
            f"{w.seq_len:,}-token context do not both fit.",
        )
    if "mig" in w.requirements or any(
        c.startswith("fits one MIG slice") for h in hardware[:5] for c in h.caveats
    ):
        a.add(
            "mig",
            "The model fits a MIG slice: isolate tenants on one A100/H100-class GPU instead of renting "
            "several.",
        )


def _training(a: _Advice, w: Workload, scaling: ScalingDecision, fit_needed: bool) -> None:
    """Training: adapters and quantization, then parallelism, then kernels."""
    _adapters_and_quantization(a, w)
    _parallelism(a, w, scaling)
    _kernels(a, w, fit_needed)


def _adapters_and_quantization(a: _Advice, w: Workload) -> None:
    if w.is_lora:
        a.add(
            "peft",
            f"{'QLoRA' if w.task == 'qlora' else 'LoRA'} adapters (rank {w.lora_rank}, targets "
            f"{', '.join(w.lora_targets)}).",
        )
    if w.task == "qlora" or w.optimizer in {"adamw-8bit", "paged-adamw-8bit"}:
        parts = ["NF4 base weights"] * (w.task == "qlora") + ["8-bit optimizer states"] * (
            "8bit" in w.optimizer
        )
        a.add("bitsandbytes", f"Provides the {' and '.join(parts)}.")


def _parallelism(a: _Advice, w: Workload, scaling: ScalingDecision) -> None:
    deepspeed = w.framework.strip().lower() == "deepspeed"
    if w.sharding in {"zero1", "zero2", "zero3"} or (deepspeed and w.sharding == "fsdp"):
        stage = 3 if w.sharding == "fsdp" else int(w.sharding[-1])
        a.add(
            "deepspeed",
            f"{scaling.strategy}: ZeRO stage {stage}"
            + (" (your framework)" if deepspeed else "")
            + " as decided in the scaling section.",
        )
    elif w.sharding == "fsdp":
        a.add(
            "fsdp",
            f"{scaling.strategy}: parameters, gradients and optimizer states sharded over {w.data_parallel} "
            "GPUs.",
        )
    if w.task in {"pretrain", "full-finetune"} and (
        w.tp > 1 or w.pp > 1 or (w.task == "pretrain" and w.num_gpus >= NODE_GPUS)
    ):
        what = "Pretraining" if w.task == "pretrain" else "Full fine-tuning"
        a.add(
            "torchtitan",
            f"{what} with {scaling.strategy}: a tested FSDP2/TP/PP recipe with float8 and async "
            "checkpointing.",
        )
        if w.num_gpus > NODE_GPUS or w.pp > 1:
            a.add("megatron", f"{scaling.strategy}: tensor/pipeline parallelism across nodes.")
    elif w.tp > 1 or w.pp > 1:  # adapters: torchtitan has no LoRA; Megatron (NeMo) and nanotron do TP
        a.add(
            "megatron",
            f"{scaling.strategy} for adapters: NeMo (Megatron-Core) runs LoRA with tensor/pipeline "
            "parallelism; the Hugging Face Trainer does not split layers across GPUs.",
        )


def _kernels(a: _Advice, w: Workload, fit_needed: bool) -> None:
    if w.precision == "fp8":
        a.add(
            "transformer-engine",
            "FP8 training recipe (scaling, amax history) for the FP8 matmuls in the config.",
        )
    if w.attention == "flash" and not w.is_cv:
        a.add("flash-attention", f"Attention at {w.seq_len:,} tokens without the S×S score matrices.")
    if not w.is_cv and fit_needed:
        vocab = get_model(w.model).vocab_size
        logits = (
            w.batch_size * w.seq_len * vocab * 4
        )  # fp32 logits for the loss, as Hugging Face models upcast them
        a.add(
            "liger-kernel",
            f"Memory is tight: chunked cross-entropy never materializes the {logits / GiB:.1f} GiB of fp32 "
            "logits "
            f"(micro-batch {w.batch_size} × {w.seq_len:,} tokens × {vocab:,} vocabulary).",
        )
    a.add(
        "torch.compile",
        "Fuses elementwise kernels and cuts launches; the gain is not in these predictions: measure it.",
    )
