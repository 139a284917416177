"""Training and fine-tuning step time: compute, memory-bound passes, communication, bubble, host.

One optimizer step per GPU =
    pipeline( micro-batch time × (microbatches + pp − 1) )      # pp = 1: microbatches × micro time
  + exposed data-parallel traffic         # gradients overlap the backward; ZeRO-1/2's gather does not
  + optimizer update (perf/optimizer_step.py: memory-bound passes, or its launches when they take longer)
where micro-batch time = max(kernels' time, host launch floor) and kernels' time = matmuls +
attention (a roofline of its FLOPs and its HBM bytes) + memory-bound elementwise passes
(norms, residual adds, activations, casts, dequantization, LoRA kernels) + tensor-parallel
all-reduces + exposed FSDP/ZeRO-3 gathers.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpuwise.catalog import GPU, ModelArch
from gpuwise.memory.estimate import sequence_tokens
from gpuwise.perf import comm
from gpuwise.perf import efficiency as eff
from gpuwise.perf import vision as vision_perf
from gpuwise.perf.comm import Link
from gpuwise.perf.flops import (
    TrainingFlops,
    attention_bytes_per_token,
    block_linear_params,
    elementwise_bytes_per_token,
    lora_elementwise_bytes_per_token,
    lora_params,
    matmul_params,
    training_flops,
)
from gpuwise.perf.numerics import Numerics, dtype_bytes, half_dtype, plain_pytorch
from gpuwise.perf.optimizer_step import (
    OptimizerStep,
    default_implementation,
    optimizer_step,
    trainable_tensors,
)
from gpuwise.perf.prediction import Bound, TrainingPerf
from gpuwise.perf.roofline import gemm_fraction, matmul_efficiency, peak_flops
from gpuwise.workload import Workload

__all__ = [
    "CPU_ADAM_BYTES_PER_PARAM",
    "HOST_DRAM_BYTES_PER_S_PER_GPU",
    "NVME_BYTES_PER_S",
    "predict_training",
    "training_bound",
]


def _flops(workload: Workload, arch: ModelArch) -> tuple[TrainingFlops, int]:
    """Micro-batch FLOPs for the whole model and the micro-batch 'tokens' (images for conv nets)."""
    if not arch.is_transformer:  # conv nets and diffusion models: FLOPs from their layers
        flops = vision_perf.training_flops(workload, vision_perf.described(arch.id))
        return flops, workload.batch_size
    seq = sequence_tokens(arch, workload)  # ViTs: (H/p)·(W/p) + 1 patch tokens
    # Context parallelism: this GPU holds seq/cp of each sequence; its queries still attend over the whole
    # context (ring attention), so attention FLOPs per token keep the full length.
    tokens = workload.batch_size * seq // workload.context_parallel
    flops = training_flops(
        arch,
        tokens,
        seq,
        lora_rank=workload.lora_rank if workload.is_lora else None,
        lora_target_names=workload.lora_targets,
        checkpointing=workload.grad_checkpointing,
        selective_linear_fraction=0.5
        if workload.framework.strip().lower() in eff.constants().host.half_recompute_selective_frameworks
        else 0.0,
    )
    return flops, tokens


def _linear_time(flops: float, gpu: GPU, num: Numerics) -> tuple[float, float]:
    """Matmul time of a training step and the resulting fraction of the compute dtype's peak.

    time = GEMMs at their sustained rate (MAMF on tensor cores, the SIMT fraction for fp32) +
    the framework's non-matmul share that the stack factor stands for (launch gaps, glue
    kernels, imperfect shapes). That share is what a 16-bit step would spend, whatever the
    matmul dtype: with fp8/fp4 matmuls only the GEMMs shrink (Transformer Engine / torchao
    float8 report 1.3-1.5x end-to-end, not 2x), and fp32 GEMMs 16x slower do not make the
    framework's glue 16x slower either.
    """
    dtype = num.compute_dtype
    gemm_s = flops / (peak_flops(gpu, dtype) * gemm_fraction(gpu, dtype))
    ref = dtype if dtype in {"tf32", "bf16", "fp16"} else half_dtype(gpu)
    overhead_s = flops / (peak_flops(gpu, ref) * gemm_fraction(gpu, ref))
    overhead_s *= 1 / eff.stack("training") - 1
    total = gemm_s + overhead_s
    return total, flops / (total * peak_flops(gpu, dtype)) if total else 0.0


def _attention_time(
    workload: Workload,
    gpu: GPU,
    arch: ModelArch,
    num: Numerics,
    flops: TrainingFlops,
    micro_tokens: int,
    seq: int,
    shards: int,
) -> tuple[float, float, Bound]:
    """Attention kernels of one micro-batch: (time, fraction of peak on its FLOPs, bound).

    Fused kernels are a roofline: FLOPs at the generation's FlashAttention rate, or their q/k/v/o
    traffic when that takes longer (short sequences). Eager attention runs two batched GEMMs
    over the full score matrix (causal masks save nothing) and moves the materialized scores
    through scale, mask, softmax and casts, one kernel after another: the times add.
    """
    peak = peak_flops(gpu, num.attention_dtype)
    bw = gpu.mem_bw_bytes_per_s * eff.bandwidth_fraction("stream")
    recompute = workload.grad_checkpointing in {"full", "selective"}
    passes = 1 + eff.constants().elementwise.backward_factor + (1 if recompute else 0)
    nbytes = (
        micro_tokens * attention_bytes_per_token(arch, seq, num.activation_bytes, workload.attention) * passes
    )
    nbytes /= shards
    executed = flops.attention_executed / shards
    if workload.attention == "eager":
        full = executed * (2 if arch.is_decoder else 1)  # the masked half is computed too
        e = matmul_efficiency(gpu, num.attention_dtype, "training")
        compute_s = full / (peak * e)
        return compute_s + nbytes / bw, e, "memory_bandwidth" if nbytes / bw > compute_s else "compute"
    e = eff.attention_efficiency(gpu, "training", workload.attention)
    compute_s = executed / (peak * e)
    memory_s = nbytes / bw
    return max(compute_s, memory_s), e, "compute" if compute_s >= memory_s else "memory_bandwidth"


def _host_floor_s(arch: ModelArch, pp: int, autocast: bool = False) -> float:
    """Eager dispatch time of one micro-batch's kernels (forward + backward) on one stage."""
    per_layer = eff.constants().host.kernels_per_layer_training
    if not arch.is_transformer:
        per_layer = 12  # conv, norm, activation forward + their backward
    elif autocast:
        per_layer += eff.constants().elementwise.autocast_kernels_per_layer
    layers = max(arch.num_layers, 1) / pp
    return layers * per_layer * eff.constants().host.eager_op_us * 1e-6


def _weight_traffic_bytes(
    workload: Workload,
    arch: ModelArch,
    num: Numerics,
    trainable: float,
    grad_bytes: float,
    gather_bytes: float,
    shards: int,
) -> float:
    """Memory-bound passes over weights and gradients outside the layers' kernels, per optimizer step.

    - torch.autocast casts each matmul weight to 16-bit on use (again in a full recompute) and each
      trainable weight's 16-bit gradient back to fp32, every micro-batch;
    - eager autograd adds each later micro-batch's gradient into .grad (AccumulateGrad; read 2x,
      write 1x); Megatron-style frameworks fuse that into the weight-gradient GEMM;
    - PyTorch DDP copies gradients into its all-reduce buckets and back after the reduction
      (gradient_as_bucket_view=False, the default: read + write twice per step);
    - FSDP2 (``fully_shard``: plain PyTorch, torchtitan) copies each all-gather's output into the
      parameters (copy-out, twice per micro-batch) and the gradients into the reduce-scatter
      input (copy-in); Megatron, DeepSpeed and FSDP1-based stacks use flat buffers instead.
    """
    m, dp = workload.grad_accum, workload.data_parallel
    plain = plain_pytorch(workload)
    sharded_params = workload.sharding in {"zero3", "fsdp"} and dp > 1
    total = 0.0
    if num.autocast:
        half_cast = eff.constants().elementwise.autocast_weight_bytes / 2
        uses = 1 + (1 if workload.grad_checkpointing == "full" else 0)
        trainable_matmul = trainable if workload.is_lora else matmul_params(arch) / shards
        total += m * (matmul_params(arch) / shards * uses + trainable_matmul) * half_cast
    if plain:
        total += (m - 1) * trainable / (dp if sharded_params else 1) * 3 * grad_bytes
    if dp > 1 and plain and not sharded_params:
        total += 4 * trainable * grad_bytes
    fsdp2 = plain or workload.framework.strip().lower() in eff.constants().host.fsdp2_frameworks
    if sharded_params and fsdp2:
        total += m * (2 * 2 * gather_bytes + 2 * trainable * grad_bytes)
    return total


@dataclass(frozen=True)
class _Kernels:
    """One micro-batch's kernels on one GPU (seconds), and the matmul/attention efficiencies."""

    linear_s: float
    attention_s: float
    dequant_s: float
    adapter_s: float
    elementwise_s: float
    linear_efficiency: float
    attention_efficiency: float
    attention_bound: Bound

    @property
    def total_s(self) -> float:
        return self.linear_s + self.attention_s + self.dequant_s + self.adapter_s + self.elementwise_s


@dataclass(frozen=True)
class _DataParallel:
    """What data parallelism moves per GPU: trainable elements, element sizes, link, sharded gathers."""

    trainable: float  # trainable elements per model shard (tp × pp)
    grad_bytes: float
    gather_elem: float  # bytes per parameter element FSDP / ZeRO gather
    gather_bytes: float
    sharded_params: bool  # FSDP / ZeRO-3 across more than one replica
    link: Link
    fsdp_comm_micro_s: float  # per micro-batch, before overlap


def predict_training(
    workload: Workload, gpu: GPU, arch: ModelArch, num: Numerics
) -> tuple[TrainingPerf, list[str]]:
    """Step time of ``workload`` on ``gpu``; returns the breakdown and the assumptions it made."""
    assumptions: list[str] = []
    tp, pp, m = workload.tp, workload.pp, workload.grad_accum
    dp = workload.data_parallel
    shards = tp * pp
    flops, micro_tokens = _flops(workload, arch)
    stream_bw = gpu.mem_bw_bytes_per_s * eff.bandwidth_fraction("stream")
    k = _kernels(workload, gpu, arch, num, flops, micro_tokens, stream_bw, assumptions)
    tp_link, tp_comm_micro = _tensor_parallel(workload, gpu, arch, num, micro_tokens, assumptions)
    data = _data_parallel(workload, gpu, arch, num)
    weight_traffic_s = (
        _weight_traffic_bytes(workload, arch, num, data.trainable, data.grad_bytes, data.gather_bytes, shards)
        / stream_bw
    )
    kernels_s = k.total_s
    fsdp_exposed_micro = comm.exposed_s(data.fsdp_comm_micro_s, kernels_s)
    host_floor = _host_floor_s(arch, pp, num.autocast)
    cp_exposed_micro = comm.exposed_s(
        _context_parallel_s(workload, gpu, arch, num, micro_tokens), k.attention_s
    )
    micro_s = max(kernels_s + tp_comm_micro + fsdp_exposed_micro + cp_exposed_micro, host_floor)

    # --- pipeline -----------------------------------------------------------------------------------
    bubble_fraction = comm.pipeline_bubble_fraction(pp, m)
    pipe_s = micro_s * (m + pp - 1)
    bubble_s = micro_s * (pp - 1)

    dp_comm, zero_gather = _gradient_sync(workload, data, assumptions)
    backward_share = (2 / 3) * kernels_s
    dp_exposed = comm.exposed_s(dp_comm, backward_share) + zero_gather
    update = _optimizer_update(workload, gpu, arch, num, data)
    optimizer_s = update.time_s
    if update.bound == "host":
        assumptions.append(
            f"optimizer step ({update.implementation}) waits on its {update.launches:,} kernel launches"
        )
    offload_s = _offload_s(workload, gpu, data, shards, assumptions)
    step_s = pipe_s + dp_exposed + weight_traffic_s + optimizer_s + offload_s
    _note_schedule(workload, data, bubble_fraction, host_floor >= kernels_s + tp_comm_micro, assumptions)

    attention_compute = k.attention_s if k.attention_bound == "compute" else 0.0
    attention_memory = 0.0 if k.attention_bound == "compute" else k.attention_s
    perf = TrainingPerf(
        global_tokens_per_step=micro_tokens * m * dp * workload.context_parallel,
        micro_batch_tokens=micro_tokens,
        grad_accum=m,
        data_parallel=dp,
        tp=tp,
        pp=pp,
        model_flops_per_token=flops.model / max(flops.tokens, 1),
        executed_flops_per_step_per_gpu=flops.executed / shards * m,
        compute_s=(k.linear_s + attention_compute) * m,
        linear_s=k.linear_s * m,
        attention_s=k.attention_s * m,
        memory_s=(k.dequant_s + k.adapter_s + k.elementwise_s + attention_memory) * m
        + weight_traffic_s
        + optimizer_s,
        optimizer_s=optimizer_s,
        dequant_s=k.dequant_s * m,
        adapter_s=k.adapter_s * m,
        elementwise_s=k.elementwise_s * m,
        weight_traffic_s=weight_traffic_s,
        tp_comm_s=tp_comm_micro * m,
        dp_comm_s=dp_comm + zero_gather + data.fsdp_comm_micro_s * m,
        dp_exposed_s=dp_exposed + fsdp_exposed_micro * m,
        bubble_s=bubble_s,
        bubble_fraction=bubble_fraction,
        host_floor_s=host_floor * m,
        step_time_s=step_s,
        linear_efficiency=k.linear_efficiency,
        attention_efficiency=k.attention_efficiency,
        attention_bound=k.attention_bound,
        links={"tp": tp_link.kind, "dp": data.link.kind},
        optimizer=update,
        offload_s=offload_s,
    )
    return perf, assumptions


def _kernels(
    workload: Workload,
    gpu: GPU,
    arch: ModelArch,
    num: Numerics,
    flops: TrainingFlops,
    micro_tokens: int,
    stream_bw: float,
    assumptions: list[str],
) -> _Kernels:
    """Compute (matmuls, attention) and memory-bound passes of one micro-batch on one GPU."""
    shards = workload.tp * workload.pp
    attention_bound: Bound = "compute"
    if arch.is_transformer:
        linear_s, e_lin = _linear_time(flops.linear_executed / shards, gpu, num)
        seq = micro_tokens * workload.context_parallel // max(workload.batch_size, 1)
        attention_s, e_attn, attention_bound = _attention_time(
            workload, gpu, arch, num, flops, micro_tokens, seq, shards
        )
        if num.compute_dtype == "fp32":
            assumptions.append(
                f"fp32 matmuls without TF32 run on the CUDA cores at {e_lin:.0%} of the fp32 peak"
            )
    else:
        share = vision_perf.fraction(workload, vision_perf.described(arch.id), "training", gpu)
        e_lin = e_attn = share.value
        linear_s = flops.executed / shards / (peak_flops(gpu, num.compute_dtype) * e_lin)
        attention_s = 0.0
        assumptions.append(share.reason)
    elementwise_s = _elementwise_s(workload, arch, num, micro_tokens, stream_bw, assumptions)
    dequant_s = _dequant_s(workload, arch, num, stream_bw, assumptions)
    adapter_s = _adapter_s(workload, arch, num, micro_tokens, stream_bw, assumptions)
    return _Kernels(
        linear_s, attention_s, dequant_s, adapter_s, elementwise_s, e_lin, e_attn, attention_bound
    )


def _elementwise_s(
    workload: Workload,
    arch: ModelArch,
    num: Numerics,
    micro_tokens: int,
    stream_bw: float,
    assumptions: list[str],
) -> float:
    """Norms, residual adds, activations, casts and the loss: memory-bound kernels."""
    if not arch.is_transformer:  # conv nets / diffusion: norms, activations, adds over every feature map
        vision = vision_perf.described(arch.id)
        per_image = vision_perf.memory_bytes_per_image(workload, vision, "training", num.activation_bytes)
        return workload.batch_size * per_image / (workload.tp * workload.pp) / stream_bw
    per_token = elementwise_bytes_per_token(
        arch,
        num.activation_bytes,
        stream_bytes=num.stream_bytes,
        autocast=num.autocast,
        recompute=workload.grad_checkpointing == "full",
        fp8=num.compute_dtype in {"fp8", "fp4"},
    )
    if num.autocast:
        assumptions.append(
            "torch.autocast over fp32 weights: fp32 residual stream and LayerNorm, "
            "16-bit casts of every weight and norm output on use"
        )
    return micro_tokens * per_token / (workload.tp * workload.pp) / stream_bw


def _dequant_s(
    workload: Workload, arch: ModelArch, num: Numerics, stream_bw: float, assumptions: list[str]
) -> float:
    """Each use of a quantized weight reads it and writes/reads a 16-bit copy (bitsandbytes
    dequantize-then-matmul): forward, backward input-gradient, and the recompute forward."""
    if not num.weight_only_quant:
        return 0.0
    passes = 2 + (1 if workload.grad_checkpointing == "full" else 0)
    shards = workload.tp * workload.pp
    per_pass = block_linear_params(arch) / shards * (num.block_weight_bytes + 2 * num.activation_bytes)
    assumptions.append(
        "quantized base weights are dequantized to 16-bit for every matmul (bitsandbytes-style)"
    )
    return passes * per_pass / stream_bw


def _adapter_s(
    workload: Workload,
    arch: ModelArch,
    num: Numerics,
    micro_tokens: int,
    stream_bw: float,
    assumptions: list[str],
) -> float:
    """peft's unfused LoRA kernels (cast, dropout, scale, add); fused-LoRA frameworks have none."""
    fused_lora = workload.framework.strip().lower() in eff.constants().host.fused_lora_frameworks
    if not (workload.is_lora and arch.is_transformer) or fused_lora:
        return 0.0
    adapter_bytes = dtype_bytes(workload.lora_dtype)
    per_token = lora_elementwise_bytes_per_token(
        arch, workload.lora_targets, num.activation_bytes, adapter_bytes
    )
    assumptions.append(
        "LoRA adapters run unfused (peft): input cast, dropout, scale and add are memory-bound kernels"
    )
    return micro_tokens * per_token / (workload.tp * workload.pp) / stream_bw


def _context_parallel_s(
    workload: Workload, gpu: GPU, arch: ModelArch, num: Numerics, micro_tokens: int
) -> float:
    """Ring attention passes every other rank's K/V chunk once per layer forward and K/V plus their
    gradients backward (3 passes): (cp-1) chunks of this rank's tokens × kv_dim × 2 per pass, per micro-batch.
    Overlapped with the attention kernels by the caller."""
    cp = workload.context_parallel
    if cp <= 1 or not arch.is_transformer:
        return 0.0
    link = comm.link_for(gpu, workload.tp * cp)
    chunk = micro_tokens * arch.kv_dim * 2 * num.activation_bytes / workload.tp
    return 3 * (arch.num_layers / workload.pp) * (cp - 1) * (chunk / link.bytes_per_s + link.latency_s)


def _tensor_parallel(
    workload: Workload, gpu: GPU, arch: ModelArch, num: Numerics, micro_tokens: int, assumptions: list[str]
) -> tuple[Link, float]:
    """2 all-reduces per layer forward, 2 backward (Megatron); +2 with full recompute. Per micro-batch."""
    tp, pp = workload.tp, workload.pp
    tp_link = comm.link_for(gpu, tp)
    if tp <= 1 or not arch.is_transformer:
        return tp_link, 0.0
    per_layer = 4 + (2 if workload.grad_checkpointing == "full" else 0)
    act = micro_tokens * arch.hidden_size * num.activation_bytes
    if tp > comm.gpus_per_node():
        assumptions.append(f"tp={tp} spans nodes: tensor-parallel all-reduces go over the network")
    return tp_link, per_layer * (arch.num_layers / pp) * comm.allreduce_s(act, tp, tp_link)


def _data_parallel(workload: Workload, gpu: GPU, arch: ModelArch, num: Numerics) -> _DataParallel:
    """Sharded data parallel (FSDP / ZeRO-3) gathers every micro-batch, overlapped with compute."""
    dp, shards = workload.data_parallel, workload.tp * workload.pp
    per_node = comm.gpus_per_node()
    # data-parallel ranks in each node (the rest of a node holds this rank's tensor/pipeline peers)
    link = comm.link_for(
        gpu, dp, crosses_nodes=workload.num_gpus > per_node, ranks_per_node=max(1, per_node // shards)
    )
    trainable = (
        lora_params(arch, workload.lora_rank, workload.lora_targets)
        if workload.is_lora
        else arch.param_counts().total
    ) / shards
    grad_bytes = dtype_bytes(workload.lora_dtype) if workload.is_lora else num.grad_bytes
    # FSDP gathers 16-bit copies under a mixed-precision policy; plain PyTorch autocast gathers the
    # fp32 weights.
    gather_elem = 4.0 if num.autocast else min(num.other_weight_bytes, 2.0)
    if num.weight_only_quant:
        gather_elem = num.block_weight_bytes
    gather_bytes = arch.param_counts().total / shards * gather_elem
    sharded_params = workload.sharding in {"zero3", "fsdp"} and dp > 1
    fsdp_comm_micro = 0.0
    if sharded_params:
        fsdp_comm_micro = 2 * comm.allgather_s(gather_bytes, dp, link) + comm.reduce_scatter_s(
            trainable * grad_bytes, dp, link
        )
    return _DataParallel(
        trainable, grad_bytes, gather_elem, gather_bytes, sharded_params, link, fsdp_comm_micro
    )


def _gradient_sync(workload: Workload, data: _DataParallel, assumptions: list[str]) -> tuple[float, float]:
    """(gradient traffic that can overlap the last backward, parameter gather that cannot), per step.

    DDP: one gradient all-reduce per step, overlapped with the last backward. ZeRO-1/2 reduce-
    scatter the gradients instead (overlapped the same way), update their shard, then all-gather
    the updated 16-bit parameters: that gather follows the optimizer step, so nothing hides it.
    """
    dp = workload.data_parallel
    if dp <= 1 or data.sharded_params:
        return 0.0, 0.0
    grads = data.trainable * data.grad_bytes
    if workload.sharding in {"zero1", "zero2"}:
        assumptions.append(
            "ZeRO-1/2: gradients reduce-scattered during the backward; the updated parameters "
            "all-gathered after the optimizer step (exposed)"
        )
        return (
            comm.reduce_scatter_s(grads, dp, data.link),
            comm.allgather_s(data.trainable * data.gather_elem, dp, data.link),
        )
    return comm.allreduce_s(grads, dp, data.link), 0.0


# Host side of offloaded training (assumptions, stated with each prediction that uses them): CPU Adam is a
# streaming pass over fp32 param, grad, m and v (read 16 B, write 12 B per parameter) at a GPU's share of host
# DRAM bandwidth (a 2-socket DDR5 server: ~400 GB/s for 8 GPUs); NVMe (ZeRO-Infinity) at one PCIe Gen4 drive.
HOST_DRAM_BYTES_PER_S_PER_GPU = 50e9
NVME_BYTES_PER_S = 6e9
CPU_ADAM_BYTES_PER_PARAM = 28.0


def _offload_s(
    workload: Workload, gpu: GPU, data: _DataParallel, shards: int, assumptions: list[str]
) -> float:
    """Exposed time of ZeRO-Offload / ZeRO-Infinity / FSDP cpu_offload per optimizer step: gradients down
    and updated 16-bit parameters up over PCIe, the CPU Adam step, and (offloaded parameters) the shards
    copied up for every gather of each micro-batch (forward and backward)."""
    if workload.offload == "none":
        return 0.0
    dp = workload.data_parallel
    local = data.trainable / max(dp, 1)  # this GPU's partition of the trainable elements
    pcie = gpu.pcie_gbps * 1e9 * eff.constants().comm.pcie_fraction
    moved = local * (data.grad_bytes + 2.0)
    if workload.offload == "params":
        moved += 2 * workload.grad_accum * local * data.gather_elem
    host_bw = NVME_BYTES_PER_S if workload.offload_device == "nvme" else HOST_DRAM_BYTES_PER_S_PER_GPU
    step = local * CPU_ADAM_BYTES_PER_PARAM / host_bw
    assumptions.append(
        f"offload ({workload.offload}, {workload.offload_device}): {moved / 1e9:.1f} GB over PCIe per step "
        f"and the Adam step on the host at {host_bw / 1e9:.0f} GB/s (assumed; no overlap with the GPU)"
    )
    return moved / pcie + step


def _optimizer_update(
    workload: Workload, gpu: GPU, arch: ModelArch, num: Numerics, data: _DataParallel
) -> OptimizerStep:
    """The optimizer step over this GPU's share of the trainable elements (sharded state divides it)."""
    dp = workload.data_parallel
    sharded_state = workload.sharding in {"zero1", "zero2", "zero3", "fsdp"} and dp > 1
    param_bytes = (
        dtype_bytes(workload.lora_dtype)
        if workload.is_lora
        else (4.0 if num.grad_bytes == 4 else num.other_weight_bytes)
    )
    tensors = trainable_tensors(arch, workload.lora_rank if workload.is_lora else None, workload.lora_targets)
    return optimizer_step(
        workload.optimizer,
        data.trainable / (dp if sharded_state else 1),
        max(round(tensors / workload.pp), 1),
        gpu,
        param_bytes=param_bytes,
        grad_bytes=data.grad_bytes,
        fp16_scaler=workload.precision == "amp-fp16",
        implementation=default_implementation(workload.optimizer, workload.framework),
    )


def _note_schedule(
    workload: Workload, data: _DataParallel, bubble_fraction: float, host_bound: bool, assumptions: list[str]
) -> None:
    """Assumptions about the step's schedule: data-parallel overlap, pipeline bubble, host floor."""
    if data.sharded_params or workload.data_parallel > 1:
        assumptions.append(
            f"data-parallel traffic over {data.link.kind} ({data.link.bytes_per_s / 1e9:,.0f} GB/s bus "
            f"bandwidth); {eff.constants().comm.overlap_fraction:.0%} of what fits under compute is hidden"
        )
    if workload.pp > 1:
        assumptions.append(
            f"pipeline of {workload.pp} stages with {workload.grad_accum} micro-batches (grad_accum): "
            f"bubble {bubble_fraction:.0%}"
        )
    if host_bound:
        assumptions.append(
            "kernels are too small to hide launch overhead: step time is the host dispatch floor"
        )


def training_bound(perf: TrainingPerf) -> Bound:
    """The resource that dominates the step."""
    kernels = perf.compute_s + perf.memory_s - perf.optimizer_s - perf.weight_traffic_s + perf.tp_comm_s
    if perf.host_floor_s > kernels:
        return "host"
    parts: dict[Bound, float] = {
        "compute": perf.compute_s,
        "memory_bandwidth": perf.memory_s,
        "communication": perf.tp_comm_s + perf.dp_exposed_s + perf.offload_s,  # offload: PCIe + host step
    }
    return max(parts, key=parts.__getitem__)
