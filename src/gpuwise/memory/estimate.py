"""``estimate_memory``: per-GPU memory of a workload, phase by phase.

Training is modelled in its steady state (step ≥ 2): optimizer state exists from the first step
on, so it is live during forward and backward too. Each phase lists the components alive in it;
the peak is the largest phase, never a sum of phase peaks:

- forward: weights, state, (gradients when accumulating), activations, logits + loss;
- backward: the logits/loss gradients on top of every saved activation, then layer by layer
  activations are freed while gradients appear — the larger end of that sweep counts;
- optimizer_step: weights, gradients, state and the step's temporaries;
- inference: prefill (prompt KV, one layer's working set, logits) and decode (full KV);
- load (torchtune QLoRA): the model built on the GPU with each linear quantized to NF4 there — the
  finished weights next to one matrix's quantization working set. torch's peak counters run from the
  process start, and the caching allocator keeps those blocks reserved into training.

``peak_allocated_bytes`` is what ``torch.cuda.max_memory_allocated`` reports,
``peak_reserved_bytes`` adds the caching allocator's reserve, ``device_total_bytes`` (what
nvidia-smi shows) adds the CUDA context and NCCL buffers.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

from gpuwise.catalog import GPU, ModelArch, get_gpu, get_model
from gpuwise.errors import GpuwiseError
from gpuwise.memory import overheads
from gpuwise.memory.activations import (
    LayerActivations,
    expands_kv,
    head_activation_bytes,
    kbit_upcast,
    layer_activations,
    logits_bytes,
    output_vocab,
)
from gpuwise.memory.allocator import STEP_COMPONENTS, variable_length_reserved
from gpuwise.memory.frameworks import Profile, profile_for_workload, quantized_linear_keeps_input
from gpuwise.memory.kv_cache import kv_cache_bytes
from gpuwise.memory.optimizer_state import is_paged, state_bytes_per_param, step_temporary_bytes
from gpuwise.memory.regime import Regime, regime_for
from gpuwise.memory.shapes import lora_params
from gpuwise.memory.weights import (
    fp4_format_for,
    largest_quantized_matrix,
    nf4_quantize_transient_bytes,
    param_groups,
    weight_bytes,
)
from gpuwise.units import GiB
from gpuwise.vision.architectures import vision_arch
from gpuwise.workload import Workload
from gpuwise.workload.ml_framework import TPU_MODELLED

__all__ = [
    "COMPONENTS",
    "REDUCE_BUCKET_ELEMENTS",
    "MemoryEstimate",
    "Phase",
    "check_fp4",
    "estimate_memory",
    "gpu_capacity_bytes",
    "sequence_tokens",
]


REDUCE_BUCKET_ELEMENTS = 5e8  # DeepSpeed zero_optimization.reduce_bucket_size default (config docs)

COMPONENTS = (
    "weights",
    "gradients",
    "optimizer_states",
    "master_weights",
    "lora_adapters",
    "autocast_weight_copies",
    "activations",
    "logits_loss",
    "kv_cache",
    "temporaries",
    "cuda_context",
    "allocator_reserve",
)


@dataclass(frozen=True)
class Phase:
    """One phase of a step and the components alive at its peak (bytes per GPU)."""

    name: str
    components: dict[str, float]

    @property
    def allocated_bytes(self) -> float:
        """Bytes allocated at this phase's peak: the sum of its components."""
        return sum(self.components.values())

    def to_dict(self) -> dict[str, Any]:
        """JSON form: name, allocated bytes and the non-zero components (integers, bytes)."""
        return {
            "name": self.name,
            "allocated_bytes": int(self.allocated_bytes),
            "components_bytes": {k: int(v) for k, v in self.components.items() if v},
        }


@dataclass(frozen=True)
class MemoryEstimate:
    """Per-GPU memory of one workload on one GPU."""

    workload: Workload
    gpu: GPU
    breakdown: dict[str, float]  # components at the peak + context + reserve; sums to device_total_bytes
    phases: list[Phase]
    peak_phase: str
    peak_allocated_bytes: float
    peak_reserved_bytes: float
    device_total_bytes: float
    gpu_memory_bytes: float
    notes: list[str] = field(default_factory=list)
    assumptions: list[str] = field(default_factory=list)

    @property
    def headroom_pct(self) -> float:
        """Device memory left after the device total, in % of the GPU's memory (negative: it does not fit)."""
        return 100.0 * (1.0 - self.device_total_bytes / self.gpu_memory_bytes)

    @property
    def fits(self) -> bool:
        """Whether the device total (allocated + allocator reserve + CUDA context + NCCL) fits in the GPU's
        memory."""
        return self.device_total_bytes <= self.gpu_memory_bytes

    def phase(self, name: str) -> Phase:
        """The phase called ``name`` (forward, backward, optimizer_step, prefill, decode…); StopIteration
        if absent."""
        return next(p for p in self.phases if p.name == name)

    def to_dict(self) -> dict[str, Any]:
        """The ``gpuwise memory --json`` document body (bytes as integers; see docs/json-schema.md)."""
        return {
            "workload": self.workload.to_dict(),
            "gpu": self.gpu.id,
            "peak_phase": self.peak_phase,
            "peak_allocated_bytes": int(self.peak_allocated_bytes),
            "peak_reserved_bytes": int(self.peak_reserved_bytes),
            "device_total_bytes": int(self.device_total_bytes),
            "gpu_memory_bytes": int(self.gpu_memory_bytes),
            "headroom_pct": round(self.headroom_pct, 2),
            "fits": self.fits,
            "breakdown_bytes": {k: int(v) for k, v in self.breakdown.items()},
            "phases": [p.to_dict() for p in self.phases],
            "notes": list(self.notes),
            "assumptions": list(self.assumptions),
        }


def gpu_capacity_bytes(gpu: GPU) -> float:
    """Usable device memory. Datasheet memory sizes are binary: an "80GB" A100 shows 81,920 MiB."""
    return gpu.memory_gb * GiB


def sequence_tokens(arch: ModelArch, w: Workload) -> int:
    """Tokens per sample: the sequence, or image patches + [CLS] for ViTs."""
    if arch.spec.kind == "vit":
        match = re.search(r"-(\d+)$", arch.id)
        patch = int(match.group(1)) if match else 16
        return (w.image_size // patch) * ((w.image_width or w.image_size) // patch) + 1
    return w.seq_len


def _model_share(arch: ModelArch, w: Workload, untie: bool = False) -> float:
    """Fraction of the model's parameters one GPU holds before data-parallel sharding (tp × pp split)."""
    g = param_groups(arch, untie)
    if w.pp == 1:
        return 1.0 / w.tp
    blocks = g.block_matrices + g.block_other
    stage = blocks / w.pp + max(g.embedding, g.lm_head + g.final_norm)
    return stage / g.total / w.tp


def _check_supported(arch: ModelArch, w: Workload) -> None:
    if not arch.is_transformer:
        raise GpuwiseError(
            f"the analytic estimator models transformers and the vision/diffusion architectures of "
            f"gpuwise/vision/data/architectures.toml; {arch.id} is a {arch.mlp_type} model it has no layer "
            "list for — simulate it: gpuwise memory --traced --model-factory pkg.module:function"
        )


def check_fp4(w: Workload, gpu: GPU) -> None:
    """fp4 (NVFP4/MXFP4) needs FP4 tensor cores; elsewhere there is no fp4 to run, so refuse."""
    if w.precision == "fp4" and not gpu.fp4_tflops:
        raise GpuwiseError(
            f"precision fp4 (NVFP4/MXFP4 block-scaled 4-bit) needs FP4 tensor cores (Blackwell, MI355X); "
            f"{gpu.id} has none — use int4 (weight-only 4-bit, 16-bit matmuls) or fp8/bf16 on this GPU"
        )


def _as_run(w: Workload, profile: Profile) -> tuple[Workload, list[str]]:
    """What the workload's library versions really ran: eager attention before transformers made SDPA
    its default, the Trainer's per-parameter AdamW before it switched to torch's foreach AdamW."""
    notes: list[str] = []
    if not profile.sdpa_default and w.attention == "sdpa":
        w = w.with_changes(attention="eager")
        notes.append("transformers before 4.36: its models ran eager attention (SDPA became the default)")
    if not profile.optimizer_foreach and w.optimizer == "adamw":
        w = w.with_changes(optimizer="adamw-fused")
        notes.append(
            "transformers before 4.37: the Trainer's own AdamW steps parameter by parameter "
            "(no group-wide foreach temporary; sized like fused)"
        )
    return w, notes


def estimate_memory(workload: Workload, gpu: GPU | None = None) -> MemoryEstimate:
    """Estimate per-GPU memory of ``workload`` on ``gpu`` (default: the workload's GPU)."""
    w = workload
    gpu = gpu or get_gpu(w.gpu)
    if not w.model:
        raise GpuwiseError(
            f"the analytic estimate needs a catalog model or a config.json (model: ...); the model "
            f"factory {w.model_factory} can only be simulated: gpuwise memory --traced"
        )
    arch = get_model(w.model)
    vision = None if arch.is_transformer else vision_arch(arch.id)
    if vision is not None:  # conv nets and diffusion models: per-layer formulas (gpuwise.vision)
        from gpuwise.memory.vision import estimate_vision_memory  # it builds on this module's types

        return estimate_vision_memory(w, gpu, vision)
    _check_supported(arch, w)
    check_fp4(w, gpu)
    profile = profile_for_workload(w)
    user = w
    w, era = _as_run(w, profile)
    regime = regime_for(w)
    ctx = _Context(arch, w, regime, profile, gpu.vendor)
    ctx.assumptions.extend(era)
    if gpu.is_tpu:
        ctx.assumptions.append(TPU_MODELLED)  # what a TPU estimate models and what it does not
    phases = ctx.training_phases() if w.is_training else ctx.inference_phases()
    paged_state = ctx.paged_state_bytes
    transient = max(
        p.components.get("logits_loss", 0.0) + p.components.get("temporaries", 0.0) for p in phases
    )
    sharded = w.sharding in ("fsdp", "zero3") and w.data_parallel > 1
    reserved = max(phases, key=lambda p: p.allocated_bytes).allocated_bytes
    reserved += overheads.allocator_reserve_bytes(transient, sharded)
    if w.is_training and w.sample_tokens_mean:  # each step at its own length (memory/allocator.py)
        top = max(phases, key=lambda p: p.allocated_bytes)
        step = sum(top.components.get(k, 0.0) for k in STEP_COMPONENTS) + reserved - top.allocated_bytes
        limit = gpu_capacity_bytes(gpu) - overheads.cuda_context_bytes(gpu) - overheads.nccl_bytes(w.num_gpus)
        reserved, note = variable_length_reserved(arch, w, reserved, step, limit)
        ctx.notes.append(note)
    load = ctx.load_phase()
    if load is not None:
        load_transient = load.components["temporaries"]
        reserved = max(
            reserved, load.allocated_bytes + overheads.allocator_reserve_bytes(load_transient, sharded)
        )
        phases = [load, *phases]
    peak = max(phases, key=lambda p: p.allocated_bytes)
    allocated = peak.allocated_bytes
    reserve = reserved - allocated
    context = overheads.cuda_context_bytes(gpu) + overheads.nccl_bytes(w.num_gpus)
    breakdown = {k: peak.components.get(k, 0.0) for k in COMPONENTS}
    breakdown["optimizer_states"] += paged_state
    breakdown["cuda_context"] = context
    breakdown["allocator_reserve"] = reserve
    total = reserved + context + paged_state
    pool = profile.kv_pool_fraction * gpu_capacity_bytes(gpu) if w.is_inference else 0.0
    if total < pool:
        # vLLM/SGLang allocate the whole KV pool up front: memory use is the configured fraction.
        breakdown["kv_cache"] += pool - total
        allocated, reserved, total = allocated + pool - total, reserved + pool - total, pool
        ctx.notes.append(
            f"{profile.name} preallocates its KV cache up to {profile.kv_pool_fraction:.0%} of GPU memory; "
            "the workload itself needs less (see the prefill/decode phases)"
        )
    return MemoryEstimate(
        workload=user,
        gpu=gpu,
        breakdown=breakdown,
        phases=phases,
        peak_phase=peak.name,
        peak_allocated_bytes=allocated,
        peak_reserved_bytes=reserved,
        device_total_bytes=total,
        gpu_memory_bytes=gpu_capacity_bytes(gpu),
        notes=ctx.notes,
        assumptions=ctx.assumptions,
    )


@dataclass(frozen=True)
class _Live:
    """What a training step holds through forward and the start of backward, bytes per GPU: gradients
    and adapter gradients kept between micro-batches, autocast weight copies, activations, and the
    dequantized/gathered weights of the layer at work."""

    grads: float
    adapter_grads: float
    casts: float
    acts: float
    temporaries: float


class _Context:
    """Per-GPU sizes of every term for one workload; builds the phases."""

    def __init__(
        self, arch: ModelArch, w: Workload, regime: Regime, profile: Profile, gpu_vendor: str = "NVIDIA"
    ) -> None:
        self.arch, self.w, self.regime, self.profile = arch, w, regime, profile
        self.gpu_vendor = gpu_vendor
        self.notes: list[str] = []
        self.assumptions: list[str] = [f"framework profile: {profile.name}"]
        if w.library_versions:
            self.assumptions.append("library versions: " + ", ".join(w.library_versions))
        if arch.origin == "size":  # '-m 13b': the generic shape assumed (catalog/model_size.py)
            self.assumptions.append(arch.notes)
        dp = w.data_parallel
        sharding = w.sharding
        if w.is_training and dp > 1 and sharding == "none":
            sharding = "ddp"
            self.assumptions.append(f"{dp} data-parallel replicas without sharding: plain DDP assumed")
        self.sharding = sharding
        self.shard_weights = dp if sharding in ("zero3", "fsdp") else 1
        self.shard_grads = dp if sharding in ("zero2", "zero3", "fsdp") else 1
        self.shard_state = dp if sharding in ("zero1", "zero2", "zero3", "fsdp") else 1
        self.share = _model_share(arch, w, profile.unties_embeddings)
        self.groups = param_groups(arch, profile.unties_embeddings)
        self.layers = math.ceil(arch.num_layers / w.pp)
        self.tokens = math.ceil(sequence_tokens(arch, w) / w.context_parallel)
        if w.context_parallel > 1:
            self.assumptions.append(
                f"context parallel {w.context_parallel}: each GPU holds {self.tokens} of every sequence's "
                "tokens (activations, logits and KV split; ring attention's K/V chunks in flight not counted)"
            )
        if arch.spec.kind == "vit" and w.seq_len != self.tokens and w.seq_len != 2048:
            self.notes.append(
                f"ViT tokens come from image_size {w.image_size}: {self.tokens} (seq_len ignored)"
            )
        full_weights = weight_bytes(arch, w, regime, profile, fp4_format_for(self.gpu_vendor))
        self.unsharded_weights = full_weights * self.share
        self.weights = full_weights * self.share / self.shard_weights
        if profile.fsdp_full_state_load and self.shard_weights > 1:
            # LitGPT's published FSDP peaks (resource tables: 3 models × 3 batch sizes on 2 and 4 GPUs) equal
            # a full unsharded copy of the weights next to the shards: Fabric's load_raw fills the whole
            # state dict on every rank, and that copy stays resident.
            self.weights += self.unsharded_weights
            self.notes.append(
                f"{profile.name} FSDP: a full copy of the weights stays on every rank next to its shard"
            )
        self.layer_weight_bytes = (
            full_weights * self.share / max(self.layers, 1)
        )  # one block on this GPU, unsharded
        self.paged_state_bytes = 0.0
        self._size_trainables()
        self._split_experts()
        self._zero_gradient_buckets()
        self.host_bytes = self._offload()

    # ---- persistent terms -------------------------------------------------------------------
    def _size_trainables(self) -> None:
        arch, w, regime = self.arch, self.w, self.regime
        self.grads = self.states = self.master = self.adapters = self.adapter_grads = self.ddp_buckets = 0.0
        self.autocast = self.autocast_head = 0.0
        self.trainable = 0.0
        self.largest_param = 0.0
        if not w.is_training:
            return
        state_dtype = regime.state_dtype_bytes
        if w.is_lora:
            n = lora_params(arch, w.lora_targets, w.lora_rank) * self.share
            adapter_bytes = {"fp32": 4.0, "bf16": 2.0, "fp16": 2.0}[w.lora_dtype]
            if self.profile.adapter_dtype_from_model:
                adapter_bytes = regime.compute_bytes if not regime.is_amp else 4.0
            shard = self.shard_weights
            state = state_bytes_per_param(
                w.optimizer,
                adapter_bytes if w.optimizer in ("adamw", "adamw-fused", "sgd") else 4.0,
                arch.hidden_size,
            )
            self.trainable = n
            self.adapters = n * adapter_bytes / shard
            # Gradients exist from the backward until the optimizer step (zero_grad(set_to_none=True)).
            self.adapter_grads = n * adapter_bytes / shard
            state_total = n * state / shard
            self.step_state_dtype = adapter_bytes
            self.largest_param = arch.hidden_size * w.lora_rank
            self.assumptions.append(
                f"LoRA adapters: {int(n):,} trainable parameters in {int(adapter_bytes * 8)}-bit"
            )
            self._size_frozen_weight_casts()
        else:
            n = self.groups.total * self.share
            self.trainable = n
            self.grads = n * regime.grad_bytes / self.shard_grads
            state_total = (
                n * state_bytes_per_param(w.optimizer, state_dtype, arch.hidden_size) / self.shard_state
            )
            self.master = n * regime.master_bytes / self.shard_state
            if regime.master_bytes:
                # ZeRO/Megatron reduce 16-bit gradients into fp32 partitions for the fp32 optimizer.
                self.grads += n * 4.0 / max(self.shard_grads, self.shard_state)
                self.assumptions.append(
                    "fp32 master weights and fp32 gradient partitions (ZeRO/Megatron mixed precision)"
                )
            self.step_state_dtype = state_dtype
            self.largest_param = max(
                arch.vocab_size * arch.hidden_size, arch.hidden_size * arch.intermediate_size
            )
            if self.sharding == "ddp" and self.profile.ddp_grad_buckets:
                self.ddp_buckets = n * regime.grad_bytes
                self.assumptions.append(
                    "DDP gradient buckets (gradient_as_bucket_view=False) hold a copy of the gradients"
                )
            if regime.is_amp and self.shard_weights == 1:
                self.autocast = self.groups.block_matrices * self.share * regime.autocast_copy_bytes
                self.autocast_head = self._head_matrix() * regime.autocast_copy_bytes
                self.assumptions.append(
                    "autocast keeps a 16-bit copy of every linear weight from forward until its backward"
                )
        if is_paged(w.optimizer):
            self.paged_state_bytes = state_total
            self.notes.append(
                "paged optimizer state lives in CUDA unified memory: counted in device total, not in torch "
                "allocated/reserved"
            )
        elif w.is_lora:
            self.adapters += state_total  # adapters carry their own gradients and optimizer state
        else:
            self.states = state_total

    def _zero_gradient_buckets(self) -> None:
        """DeepSpeed ZeRO-1/2 gradient buckets: ``DeepSpeedZeroOptimizer.backward`` (``stage_1_and_2.py``)
        allocates ``reduce_bucket_size`` elements of the 16-bit dtype (``contiguous_gradients``, default on),
        twice with ``overlap_comm`` (off below stage 3: ``zero/config.py``): the config's size, not the
        model's, kept until the next backward. Under optimizer offload ``_offload`` counts them."""
        w = self.w
        if not (w.is_training and self.sharding in ("zero1", "zero2") and w.offload == "none"):
            return
        buffers = 2 if w.overlap_comm else 1
        nbytes = buffers * w.reduce_bucket_elements * self.regime.grad_bytes
        self.ddp_buckets += nbytes
        self.assumptions.append(
            f"DeepSpeed ZeRO gradient buckets: {buffers} x reduce_bucket_size {w.reduce_bucket_elements:.3g} "
            f"elements ({nbytes / GiB:.2f} GiB, contiguous_gradients)"
        )

    def _split_experts(self) -> None:
        """Expert parallelism: each GPU keeps 1/ep of the experts. Sharded terms are unchanged (the
        experts' shards spread over dp/ep ranks instead of dp), unsharded ones shrink."""
        ep, arch = self.w.expert_parallel, self.arch
        if ep <= 1 or not arch.is_moe:
            return
        counts = arch.param_counts()
        experts = counts.num_layers * (counts.per_layer_mlp - arch.hidden_size * arch.num_experts)
        keep = 1 - experts / max(self.groups.total, 1) * (1 - 1 / ep)
        if self.shard_weights == 1:
            self.weights *= keep
        self.layer_weight_bytes *= keep
        if self.shard_grads == 1:
            self.grads *= keep
            self.ddp_buckets *= keep
        if self.shard_state == 1:
            self.states *= keep
            self.master *= keep
        self.assumptions.append(
            f"expert parallel {ep}: each GPU holds {arch.num_experts // ep} of {arch.num_experts} experts"
        )

    def _offload(self) -> float:
        """Move what ZeRO-Offload / ZeRO-Infinity / FSDP cpu_offload keep on the host off the GPU.

        Optimizer offload (DeepSpeed ``offload_optimizer``): optimizer state, fp32 master weights and fp32
        gradient partitions live on the host and the step runs there (DeepSpeedCPUAdam); 16-bit gradients
        pass through reduce buckets (``reduce_bucket_size``, default 5e8 elements, two in flight with
        ``overlap_comm``). Parameter offload (``offload_param`` / FSDP ``CPUOffload(offload_params=True)``):
        the parameter shards too; the GPU holds only the layers being gathered. Returns host bytes per GPU.
        """
        w = self.w
        if w.offload == "none" or not w.is_training:
            return 0.0
        host = self.states + self.master + self.paged_state_bytes
        self.states = self.master = self.paged_state_bytes = 0.0
        bucket = 2 * REDUCE_BUCKET_ELEMENTS * self.regime.grad_bytes
        host += max(self.grads - bucket, 0.0)
        self.grads = min(self.grads, bucket)
        if w.offload == "params":
            host += self.weights
            self.weights = 0.0  # gathered layers are counted as temporaries (_gather_bytes)
        where = "NVMe" if w.offload_device == "nvme" else "CPU memory"
        self.notes.append(
            f"offload ({w.offload}): {host / GiB:.1f} GiB per GPU lives in {where}; the optimizer step runs "
            "on the host"
        )
        return host

    def _head_matrix(self) -> float:
        """Elements of the output layer's weight on this GPU (the tied embedding when tied)."""
        if not self.arch.is_decoder:
            return 0.0
        return output_vocab(self.arch) * self.arch.hidden_size / self.w.tp

    def _size_frozen_weight_casts(self) -> None:
        """16-bit copies of frozen fp32 weights that a LoRA step keeps under autocast.

        Autocast caches casts of trainable leaves only, so a frozen fp32 linear gets a fresh 16-bit
        copy of its weight every forward, and the matmul keeps it for the input gradient until that
        layer's backward. After ``prepare_model_for_kbit_training`` (QLoRA) the only such linear is
        the fp32 lm_head (vocab × hidden × 2 bytes); with an fp32 base under amp-bf16/amp-fp16 it is
        every frozen matrix (a recomputed block holds its own only while it runs).
        """
        w, regime = self.w, self.regime
        if kbit_upcast(w, regime, self.profile):
            self.autocast_head = 2.0 * self._head_matrix()
            self.assumptions.append(
                "autocast casts the frozen fp32 lm_head to 16-bit each forward; the copy stays "
                "until its backward"
            )
        elif regime.is_amp and self.shard_weights == 1:  # FSDP/ZeRO-3 gather 16-bit copies themselves
            self.autocast_head = regime.autocast_copy_bytes * self._head_matrix()
            if w.grad_checkpointing != "full":
                self.autocast = regime.autocast_copy_bytes * self.groups.block_matrices * self.share
            self.assumptions.append(
                "autocast makes a 16-bit copy of each frozen fp32 weight every forward (it caches "
                "only trainable ones); the matmul keeps it until that layer's backward"
            )

    # ---- transient terms ----------------------------------------------------------------------
    def load_phase(self) -> Phase | None:
        """torchtune's QLoRA model is built on the GPU and each linear is quantized to NF4 there (torchao
        ``to_nf4``): the finished weights and adapters next to the largest matrix's quantization working set.
        Other stacks quantize while copying from the host one weight at a time (no phase of its own)."""
        if not (self.regime.quantized and self.profile.quant_backend == "torchao"):
            return None
        numel = largest_quantized_matrix(self.arch, self.w, self.profile) // self.w.tp
        chunked = self.profile.nf4_quantize_chunked
        working = nf4_quantize_transient_bytes(numel, self.regime.compute_bytes, chunked)
        if not chunked:
            self.assumptions.append(
                "torchao 0.1 quantizes a whole matrix at once to NF4 on the GPU while the model loads "
                f"({working / GiB:.2f} GiB for the largest): a load-time peak the allocator keeps reserved"
            )
        adapters = self.adapter_grads  # the adapters' own size (no optimizer state before the first step)
        return Phase("load", {"weights": self.weights, "lora_adapters": adapters, "temporaries": working})

    def _dequant_bytes(self) -> float:
        """bitsandbytes dequantizes one weight to 16-bit per matmul (twice when staged through fp16)."""
        if not self.regime.quantized:
            return 0.0
        copies = 2 if self.profile.quant_fp16_staging else 1
        return copies * 2.0 * largest_quantized_matrix(self.arch, self.w, self.profile) / self.w.tp

    def _gather_bytes(self) -> float:
        """FSDP / ZeRO-3 all-gather the current and the prefetched layer.

        FSDP also keeps its root unit (embeddings, final norm, lm_head: what no block wraps)
        unsharded from forward to backward instead of gathering it twice.
        """
        if self.shard_weights == 1:
            return 0.0
        gathered = 2 * self.layer_weight_bytes
        if self.sharding == "fsdp":
            g = self.groups
            root_share = (g.embedding + g.lm_head + g.final_norm) / max(g.total, 1)
            gathered += self.unsharded_weights * root_share * (1 - 1 / self.shard_weights)
        return gathered

    def _base(self) -> dict[str, float]:
        return {
            "weights": self.weights,
            "master_weights": self.master,
            "optimizer_states": self.states,
            "lora_adapters": self.adapters,
            "gradients": self.ddp_buckets,
        }

    # ---- training -----------------------------------------------------------------------------
    def training_phases(self) -> list[Phase]:
        """Forward, the fullest moment of backward and the optimizer step of one training step, in bytes
        per GPU: what is alive at each, by component."""
        arch, w, regime, profile = self.arch, self.w, self.regime, self.profile
        b, s = w.batch_size, self.tokens
        la = layer_activations(arch, w, regime, profile, b, s)
        in_flight = min(w.pp, w.grad_accum) if w.pp > 1 else 1
        if profile.frozen_linear_saves_input and w.is_lora:
            self.assumptions.append(
                f"{profile.name}: inputs of frozen linears stay alive for backward "
                "(reproduces its published LoRA peaks; torch's own frozen nn.Linear keeps none)"
            )
        kept, recompute = self._checkpointed(la)
        head = head_activation_bytes(arch, w, regime, profile, b, s) / w.tp
        acts = self.layers * kept * in_flight + head + self._held_quantized_inputs(la, in_flight)
        self._note_gqa(la)
        logit_fwd, logit_bwd = logits_bytes(arch, w, regime, profile, b, s)
        # Gradients live through forward when accumulating, or when zero_grad keeps them (torch < 2.0).
        accumulating = w.grad_accum > 1 or not profile.grads_set_to_none
        if not profile.grads_set_to_none:
            self.assumptions.append(
                "zero_grad keeps gradients allocated between steps (set_to_none=False, torch < 2.0)"
            )
        dequant, gather = self._dequant_bytes(), self._gather_bytes()
        live = _Live(
            grads=self.grads if accumulating else 0.0,
            adapter_grads=self.adapter_grads if accumulating else 0.0,
            casts=self.autocast + self.autocast_head,
            acts=acts,
            temporaries=dequant + gather,
        )
        forward = self._phase(
            "forward",
            gradients=live.grads,
            lora_adapters=live.adapter_grads,
            autocast_weight_copies=live.casts,
            activations=acts,
            logits_loss=logit_fwd,
            temporaries=live.temporaries,
        )
        backward = self._backward(
            live,
            logit_bwd,
            la.backward_workspace_bytes + dequant + gather,
            head,
            recompute,
            kept * in_flight,
            accumulating,
        )
        step = self._phase(
            "optimizer_step",
            gradients=self.grads,
            lora_adapters=self.adapter_grads,
            temporaries=self._step_temporary_bytes(),
        )
        return [forward, backward, step]

    def _phase(self, name: str, **extra: float) -> Phase:
        """A phase: the always-present components (``_base``) plus ``extra`` bytes per component."""
        comps = self._base()
        for key, value in extra.items():
            comps[key] = comps.get(key, 0.0) + value
        return Phase(name, comps)

    def _checkpointed(self, la: LayerActivations) -> tuple[float, float]:
        """(bytes one layer keeps through forward, bytes its backward recomputes) under the workload's
        activation checkpointing, per micro-batch."""
        if self.w.grad_checkpointing == "full":
            self.assumptions.append(
                "full recompute keeps each block's input and re-runs one block during its backward"
            )
            return la.input_bytes, la.saved_bytes
        if self.w.grad_checkpointing == "selective":
            self.assumptions.append("selective recompute drops the attention core (scores, softmax, dropout)")
            return la.selective_bytes, la.saved_bytes - la.selective_bytes
        return la.saved_bytes, 0.0

    def _held_quantized_inputs(self, la: LayerActivations, in_flight: int) -> float:
        """Bytes of the previous step's bitsandbytes matmul inputs that a surviving ``loss`` keeps alive."""
        w, regime, profile = self.w, self.regime, self.profile
        if not (
            regime.quantized
            and profile.loss_outlives_step
            and quantized_linear_keeps_input(profile, w.precision)
        ):
            return 0.0
        # bitsandbytes' MatMul4Bit keeps its input as a ctx attribute, freed only with the whole graph;
        # a loop whose `loss` survives into the next step keeps the previous step's inputs alive.
        head_held = (
            regime.compute_bytes * w.batch_size * self.tokens * self.arch.hidden_size / w.tp
            if profile.quantize_lm_head
            else 0.0
        )
        self.assumptions.append(
            f"{profile.name}: the previous step's bitsandbytes matmul inputs stay alive into the next forward"
        )
        return self.layers * la.ctx_held_bytes * in_flight + head_held

    def _step_temporary_bytes(self) -> float:
        """The optimizer step's scratch on the GPU (0 when the step runs on the host)."""
        if self.w.offload != "none":
            return 0.0
        return step_temporary_bytes(
            self.w.optimizer, self.trainable / self.shard_state, self.largest_param, self.step_state_dtype
        )

    def _backward(
        self,
        live: _Live,
        logit_bwd: float,
        workspace: float,
        head: float,
        recompute: float,
        kept_in_flight: float,
        accumulating: bool,
    ) -> Phase:
        """The fullest of three backward moments: (a) the loss gradients on top of every activation;
        (b) the first block's backward with one block recomputed; (c) the last block's backward with
        almost all gradients present. Bytes per GPU; ``workspace`` is one block's backward scratch plus
        the dequantized and gathered weights."""
        layers = max(self.layers, 1)
        g_per_layer = (self.grads - (self.grads * self.groups.lm_head / self.groups.total)) / layers
        g_head = self.grads * self.groups.lm_head / max(self.groups.total, 1)
        ws = workspace
        start = self._phase(
            "backward",
            gradients=live.grads,
            lora_adapters=live.adapter_grads,
            autocast_weight_copies=live.casts,
            activations=live.acts,
            logits_loss=logit_bwd,
            temporaries=live.temporaries,
        )
        top = self._phase(
            "backward",
            gradients=self.grads if accumulating else g_head,
            lora_adapters=live.adapter_grads,
            autocast_weight_copies=self.autocast,
            activations=live.acts - head + recompute,
            temporaries=ws,
        )
        done = (self.layers - 1) / layers  # share of the adapters whose gradients exist at the last block
        bottom = self._phase(
            "backward",
            gradients=self.grads if accumulating else g_head + g_per_layer * (self.layers - 1),
            lora_adapters=self.adapter_grads if accumulating else self.adapter_grads * done,
            autocast_weight_copies=self.autocast / layers,
            activations=kept_in_flight + recompute,
            temporaries=ws,
        )
        return max((start, top, bottom), key=lambda p: p.allocated_bytes)

    def _note_gqa(self, la: LayerActivations) -> None:
        """Say how K/V reach SDPA for a GQA model, and what a padded batch would add."""
        arch, w, profile = self.arch, self.w, self.profile
        if w.attention != "sdpa" or arch.kv_dim >= arch.q_dim or profile.name != "hf":
            return
        if expands_kv(arch, w, profile):
            self.assumptions.append(
                "SDPA gets K/V expanded to every query head (repeat_kv: transformers < 4.54, "
                f"or head_dim {arch.head_dim} > 256)"
            )
            return
        extra = la.kv_expand_bytes * (1 if w.grad_checkpointing == "full" else self.layers)
        self.assumptions.append(
            "SDPA runs GQA natively (transformers >= 4.54, batches without padding); a padded batch expands "
            f"K/V to every query head: +{extra / GiB:.2f} GiB of activations"
        )

    # ---- inference ----------------------------------------------------------------------------
    def inference_phases(self) -> list[Phase]:
        arch, w, regime, profile = self.arch, self.w, self.regime, self.profile
        seqs = max(w.batch_size, w.concurrency) if w.task == "serving" else w.batch_size
        prompt = self.tokens
        if not arch.is_decoder:
            la = layer_activations(arch, w, regime, profile, seqs, prompt)
            return [
                Phase(
                    "forward",
                    {**self._base(), "temporaries": la.prefill_workspace_bytes + self._dequant_bytes()},
                )
            ]
        total_len = prompt + w.output_len
        vocab = output_vocab(arch)
        cb = regime.compute_bytes
        la_prefill = layer_activations(arch, w, regime, profile, seqs, prompt)
        la_decode = layer_activations(arch, w, regime, profile, seqs, 1)
        last_logits = seqs * vocab * (cb + 4.0) / w.tp
        prompt_logits = (
            seqs * prompt * vocab * cb / w.tp if profile.inference_logits == "prompt" else 0.0
        ) + last_logits
        kv_prefill = kv_cache_bytes(arch, w, prompt, seqs)
        kv_full = kv_cache_bytes(arch, w, total_len, seqs)
        self.assumptions.append(
            f"KV cache for {seqs} sequence(s) × {total_len} tokens ({prompt} prompt + {w.output_len} "
            "generated)"
        )
        prefill = Phase(
            "prefill",
            {
                **self._base(),
                "kv_cache": kv_prefill,
                "logits_loss": prompt_logits,
                "temporaries": la_prefill.prefill_workspace_bytes + self._dequant_bytes(),
            },
        )
        decode = Phase(
            "decode",
            {
                **self._base(),
                "kv_cache": kv_full,
                "logits_loss": last_logits,
                "temporaries": la_decode.prefill_workspace_bytes,
            },
        )
        return [prefill, decode]
