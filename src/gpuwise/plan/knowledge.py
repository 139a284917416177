"""What the planner knows that is not computed: tools, their purpose, and published caveats.

Each entry names its public source. Numbers the plan shows never come from here: they come
from re-running the memory and performance models on the changed workload.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpuwise.diagnose.finding import FindingId
from gpuwise.plan.types import Effort

__all__ = [
    "CAVEATS",
    "EFFORT",
    "GEFORCE_LICENSE",
    "IDLE_CAUSES",
    "MIG_SLICE_FRACTION",
    "TECHNIQUE_TOOLS",
    "TOOLS",
    "Tool",
]


@dataclass(frozen=True)
class Tool:
    """A tool the plan can advise: id, display name, what it is for, and its documentation or paper."""

    id: str
    name: str
    does: str  # one line: what it is for
    source: str  # paper or official documentation


TOOLS: dict[str, Tool] = {
    t.id: t
    for t in (
        Tool(
            "vllm",
            "vLLM",
            "LLM serving with PagedAttention (KV cache in blocks, little fragmentation) and continuous "
            "batching",
            "Kwon et al., Efficient Memory Management for LLM Serving with PagedAttention, SOSP 2023 "
            "(arXiv:2309.06180)",
        ),
        Tool(
            "tensorrt-llm",
            "TensorRT-LLM",
            "NVIDIA's compiled LLM inference engine: fused kernels, in-flight batching, FP8/INT4 weights and "
            "FP8 KV cache",
            "NVIDIA TensorRT-LLM documentation (github.com/NVIDIA/TensorRT-LLM)",
        ),
        Tool(
            "sglang",
            "SGLang",
            "LLM serving with RadixAttention prefix caching: shared prompt prefixes (RAG templates, system "
            "prompts) are computed once",
            "Zheng et al., SGLang: Efficient Execution of Structured Language Model Programs, NeurIPS 2024 "
            "(arXiv:2312.07104)",
        ),
        Tool(
            "llama.cpp",
            "llama.cpp",
            "GGUF-quantized inference on consumer GPUs and CPUs, with partial CPU offload of layers",
            "github.com/ggml-org/llama.cpp documentation",
        ),
        Tool(
            "awq",
            "AWQ / GPTQ (llm-compressor, AutoAWQ)",
            "4-bit weight-only quantization calibrated on activations, served by vLLM and TensorRT-LLM",
            "Lin et al., AWQ, MLSys 2024 (arXiv:2306.00978); Frantar et al., GPTQ, ICLR 2023 "
            "(arXiv:2210.17323)",
        ),
        Tool(
            "deepspeed",
            "DeepSpeed ZeRO",
            "shards optimizer states (stage 1), gradients (2) and parameters (3) across data-parallel ranks; "
            "CPU/NVMe offload",
            "Rajbhandari et al., ZeRO: Memory Optimizations Toward Training Trillion Parameter Models, SC "
            "2020 (arXiv:1910.02054)",
        ),
        Tool(
            "fsdp",
            "PyTorch FSDP2 (fully_shard)",
            "PyTorch-native parameter/gradient/optimizer sharding (the ZeRO-3 equivalent), composes with TP "
            "and torch.compile",
            "Zhao et al., PyTorch FSDP, VLDB 2023 (arXiv:2304.11277); pytorch.org/docs "
            "distributed.fsdp.fully_shard",
        ),
        Tool(
            "megatron",
            "Megatron-Core",
            "tensor, pipeline, sequence and context parallelism for models that do not fit one node",
            "Shoeybi et al., Megatron-LM (arXiv:1909.08053); Narayanan et al., SC 2021 (arXiv:2104.04473)",
        ),
        Tool(
            "torchtitan",
            "torchtitan",
            "PyTorch-native reference for large-scale pretraining: FSDP2 + TP + PP, float8, torch.compile, "
            "async checkpointing",
            "Liang et al., TorchTitan, ICLR 2025 (arXiv:2410.06511)",
        ),
        Tool(
            "peft",
            "Hugging Face PEFT",
            "LoRA adapters: trains low-rank updates, so gradients and optimizer states exist only for the "
            "adapters",
            "Hu et al., LoRA, ICLR 2022 (arXiv:2106.09685); github.com/huggingface/peft",
        ),
        Tool(
            "bitsandbytes",
            "bitsandbytes",
            "NF4/INT8 weight quantization for QLoRA, 8-bit and paged optimizers",
            "Dettmers et al., QLoRA, NeurIPS 2023 (arXiv:2305.14314); 8-bit Optimizers via Block-wise "
            "Quantization, ICLR 2022 (arXiv:2110.02861)",
        ),
        Tool(
            "torch.compile",
            "torch.compile",
            "fuses elementwise ops and, with mode='reduce-overhead', replays CUDA graphs: fewer kernel "
            "launches and memory round-trips",
            "Ansel et al., PyTorch 2, ASPLOS 2024; pytorch.org/docs torch.compile",
        ),
        Tool(
            "flash-attention",
            "FlashAttention",
            "exact attention without materializing the S×S score matrix: memory linear in sequence length, "
            "fewer HBM reads",
            "Dao et al., FlashAttention (arXiv:2205.14135), FlashAttention-2 (arXiv:2307.08691), "
            "FlashAttention-3 for Hopper (arXiv:2407.08608)",
        ),
        Tool(
            "transformer-engine",
            "NVIDIA Transformer Engine",
            "FP8 training and inference (delayed/current scaling recipes) on Hopper, Ada and Blackwell",
            "Micikevicius et al., FP8 Formats for Deep Learning (arXiv:2209.05433); "
            "docs.nvidia.com/deeplearning/transformer-engine",
        ),
        Tool(
            "torchao",
            "torchao",
            "PyTorch-native float8 training (Float8Linear) and int4/int8 weight quantization",
            "github.com/pytorch/ao documentation",
        ),
        Tool(
            "dali",
            "NVIDIA DALI",
            "decodes and augments images on the GPU, so the CPU stops limiting vision training",
            "docs.nvidia.com/deeplearning/dali",
        ),
        Tool(
            "torch-amp",
            "torch.autocast (AMP)",
            "runs matmuls and convolutions in bf16/fp16 on tensor cores while keeping fp32 master weights",
            "Micikevicius et al., Mixed Precision Training, ICLR 2018 (arXiv:1710.03740); pytorch.org/docs "
            "amp",
        ),
        Tool(
            "liger-kernel",
            "Liger Kernel",
            "fused RMSNorm, RoPE, SwiGLU and chunked cross-entropy: less activation and logits memory in LLM "
            "training",
            "Hsu et al., Liger Kernel (arXiv:2410.10989)",
        ),
        Tool(
            "nccl",
            "NCCL",
            "the collectives library behind DDP/FSDP/TP; NCCL_DEBUG=INFO shows which links (NVLink, PCIe, "
            "network) it uses",
            "docs.nvidia.com/deeplearning/nccl",
        ),
        Tool(
            "mig",
            "NVIDIA MIG",
            "splits an A100/H100-class GPU into up to 7 isolated instances with their own memory and compute",
            "NVIDIA Multi-Instance GPU User Guide (docs.nvidia.com/datacenter/tesla/mig-user-guide)",
        ),
        Tool(
            "gpuwise-profile",
            "gpuwise profile",
            "measures phases, input wait, syncs and telemetry of the real loop; feed its --json to `gpuwise "
            "plan --evidence`",
            "this project",
        ),
        Tool(
            "gpuwise-loadtest",
            "gpuwise loadtest",
            "drives an OpenAI-compatible endpoint at a Poisson rate and measures TTFT, TPOT and goodput "
            "against the SLO; feed its --json to `gpuwise plan --evidence`",
            "this project (docs/loadtest.md)",
        ),
    )
}

# Technique id -> tools that implement it (first = the usual choice for the task).
TECHNIQUE_TOOLS: dict[str, tuple[str, ...]] = {
    "mixed_precision": ("torch-amp",),
    "fp8_training": ("transformer-engine", "torchao", "torchtitan"),
    "bf16_weights": ("torchao",),
    "flash_attention": ("flash-attention",),
    "fused_optimizer": (),
    "optimizer_8bit": ("bitsandbytes",),
    "grad_checkpointing": (),
    "bigger_batch": (),
    "smaller_batch": (),
    "lora": ("peft",),
    "qlora": ("peft", "bitsandbytes"),
    "sharding": ("fsdp", "deepspeed"),
    "weight_fp8": ("tensorrt-llm", "vllm"),
    "weight_int8": ("vllm", "tensorrt-llm"),
    "weight_int4": ("awq", "vllm", "llama.cpp"),
    "kv_fp8": ("vllm", "tensorrt-llm"),
    "more_concurrency": ("vllm", "sglang", "tensorrt-llm"),
    "tensor_parallel": ("vllm", "tensorrt-llm", "megatron"),
    "parallel_layout": ("megatron", "torchtitan"),
    "offload": ("deepspeed", "fsdp"),
    "channels_last": ("torch.compile",),
}

# Technique id -> what applying it takes (a tie-breaker after the gain, shown beside it): a flag or one
# line (low); a library, a quantized checkpoint or a launcher/code path to change (medium); new
# numerics recipes and kernels to validate (high). Ids not listed are low.
EFFORT: dict[str, Effort] = {
    "fp8_training": "high",
    "bf16_weights": "medium",
    "optimizer_8bit": "medium",
    "lora": "medium",
    "qlora": "medium",
    "sharding": "medium",
    "weight_fp8": "medium",
    "weight_int8": "medium",
    "weight_int4": "medium",
    "fix_pipeline": "medium",
    "parallel_layout": "medium",
    "offload": "medium",
}

# Published caveats per technique: what it may cost besides what the models compute.
CAVEATS: dict[str, tuple[str, str]] = {
    "channels_last": (
        "model.to(memory_format=torch.channels_last) and the same for each input batch; ops without NHWC "
        "kernels convert back and forth, so measure it once.",
        "PyTorch tutorial (beta) Channels Last Memory Format; diffusers fast_diffusion tutorial",
    ),
    "mixed_precision": (
        "fp16 needs loss scaling (GradScaler); bf16 does not but needs Ampere or newer.",
        "Micikevicius et al. 2018 (arXiv:1710.03740)",
    ),
    "bf16_weights": (
        "Without fp32 master weights, updates smaller than bf16's resolution are lost: fine for short "
        "fine-tunes, "
        "risky for long runs unless the optimizer compensates (Kahan summation / stochastic rounding).",
        "Zamirai et al., Revisiting BFloat16 Training (arXiv:2010.06192)",
    ),
    "fp8_training": (
        "Validate the loss curve against bf16 for the first thousands of steps; gains concentrate in large "
        "matmuls.",
        "Micikevicius et al. 2022 (arXiv:2209.05433)",
    ),
    "flash_attention": (
        "Exact attention (no approximation); needs fp16/bf16 and a supported GPU (Ampere or newer for "
        "FlashAttention-2).",
        "Dao 2023 (arXiv:2307.08691)",
    ),
    "offload": (
        "Same math; every step copies gradients and parameters over PCIe and runs the optimizer on the CPU, "
        "so it trades speed for memory (needs host RAM for the offloaded state).",
        "Ren et al. 2021, ZeRO-Offload (arXiv:2101.06840); Rajbhandari et al. 2021, ZeRO-Infinity "
        "(arXiv:2104.07857)",
    ),
    "fused_optimizer": (
        "Same math as the unfused optimizer; fused=True needs all parameters on CUDA.",
        "pytorch.org/docs torch.optim.AdamW",
    ),
    "optimizer_8bit": (
        "Block-wise 8-bit Adam matched 32-bit Adam on the paper's benchmarks; keep embeddings' states in "
        "32-bit (StableEmbedding) if unstable.",
        "Dettmers et al. 2022 (arXiv:2110.02861)",
    ),
    "grad_checkpointing": (
        "Recomputes activations in the backward pass: about one extra forward per step for full "
        "checkpointing.",
        "Chen et al. 2016 (arXiv:1604.06174); Korthikanti et al. 2022 (arXiv:2205.05198)",
    ),
    "bigger_batch": (
        "Keeps the global batch through fewer accumulation steps, so the optimization is unchanged.",
        "",
    ),
    "bigger_batch_global": (
        "Changes the global batch: re-tune the learning rate (and warm-up) and watch the loss.",
        "Goyal et al. 2017, linear scaling rule (arXiv:1706.02677)",
    ),
    "smaller_batch": (
        "Keeps the global batch through more accumulation steps: same optimization, more, smaller kernels.",
        "",
    ),
    "lora": (
        "Trains a low-rank update only: close to full fine-tuning on many tasks but can learn less on "
        "distant domains.",
        "Hu et al. 2022 (arXiv:2106.09685); Biderman et al., LoRA Learns Less and Forgets Less, 2024 "
        "(arXiv:2405.09673)",
    ),
    "qlora": (
        "NF4 base weights: matched 16-bit LoRA in the QLoRA paper; steps are slower because weights are "
        "dequantized on the fly.",
        "Dettmers et al. 2023 (arXiv:2305.14314)",
    ),
    "sharding": (
        "ZeRO-3/FSDP moves about 1.5× the data of DDP per step (parameter all-gathers): fast links matter.",
        "Rajbhandari et al. 2020 (arXiv:1910.02054)",
    ),
    "weight_fp8": (
        "FP8 (E4M3) weights with per-tensor scales: small accuracy loss on published evaluations; needs "
        "Hopper, Ada or Blackwell tensor cores.",
        "NVIDIA TensorRT-LLM precision docs; Micikevicius et al. 2022 (arXiv:2209.05433)",
    ),
    "weight_int8": (
        "Weight-only INT8: small accuracy loss; speeds decode (bandwidth) more than prefill.",
        "Dettmers et al., LLM.int8(), 2022 (arXiv:2208.07339)",
    ),
    "weight_int4": (
        "4-bit weights lose more accuracy, most on small models; evaluate on your task (AWQ/GPTQ calibrate "
        "to limit it).",
        "Lin et al. 2024 (arXiv:2306.00978); Frantar et al. 2023 (arXiv:2210.17323)",
    ),
    "kv_fp8": (
        "FP8 KV cache halves cache memory with a small accuracy cost; check long-context quality.",
        "vLLM documentation: Quantized KV Cache",
    ),
    "more_concurrency": (
        "More requests in flight raise throughput and lower $/token but lengthen each request's per-token "
        "latency.",
        "Kwon et al. 2023 (arXiv:2309.06180)",
    ),
    "tensor_parallel": (
        "Tensor parallelism all-reduces activations twice per layer: keep it inside an NVLink domain.",
        "Shoeybi et al. 2019 (arXiv:1909.08053)",
    ),
}

# Hardware facts used as caveats on the hardware list.
GEFORCE_LICENSE = (
    "GeForce driver licence excludes datacenter deployment; no ECC; no NVLink on RTX 40/50; "
    "bf16 tensor rate with fp32 accumulate is half the fp16-accumulate rate",
    "NVIDIA GeForce driver licence (nvidia.com/en-us/drivers/geforce-license); catalog notes",
)
MIG_SLICE_FRACTION = (
    1 / 8,
    "the smallest MIG instance gets one of 8 memory slices (1g.10gb on 80 GB parts)",
    "NVIDIA MIG User Guide, supported profiles",
)

# Causes of low utilization: what would show each one, and how to measure it.
IDLE_CAUSES: tuple[tuple[FindingId, str, tuple[str, ...], str], ...] = (
    (
        "input_bound",
        "data loading (the loop waits for the next batch)",
        ("input_wait_pct", "phase_s"),
        "gpuwise profile train.py (measures data wait per step); or DataLoader(num_workers>0, "
        "pin_memory=True) and compare",
    ),
    (
        "small_batch",
        "small batch (kernels too small to fill the GPU)",
        ("memory_peak_bytes",),
        "raise the batch while memory allows; the memory model computes how far",
    ),
    (
        "sync_bound",
        "host synchronizations (.item(), .cpu(), prints of tensors)",
        ("sync_wait_pct", "sync_calls_per_step"),
        "gpuwise profile or a profiler trace (gpuwise trace) shows cudaStreamSynchronize/cudaMemcpy waits",
    ),
    (
        "launch_bound",
        "kernel-launch overhead (many tiny kernels)",
        ("tiny_kernel_pct", "kernels_per_step"),
        "gpuwise trace TRACE.json (kernel-size histogram); torch.compile / CUDA graphs if confirmed",
    ),
    (
        "comm_bound",
        "exposed communication (multi-GPU)",
        ("comm_exposed_pct",),
        "gpuwise trace on each rank's trace",
    ),
)
