"""Training and fine-tuning step time: compute, memory-bound passes, communication, bubble, host.

One optimizer step per GPU =
    pipeline( micro-batch time × (microbatches + pp − 1) )      # pp = 1: microbatches × micro time
  + exposed data-parallel gradient traffic                       # DDP / ZeRO-1/2, overlapped with backward
  + optimizer update (memory-bound)
where micro-batch time = max(kernels' time, host launch floor) and kernels' time = matmuls +
attention + dequantization + tensor-parallel all-reduces + exposed FSDP/ZeRO-3 gathers.
"""

from __future__ import annotations

from gpuwise.catalog import GPU, ModelArch
from gpuwise.perf import comm
from gpuwise.perf import efficiency as eff
from gpuwise.perf.flops import (
    TrainingFlops,
    block_linear_params,
    elementwise_bytes_per_token,
    lora_elementwise_bytes_per_token,
    lora_params,
    training_flops,
    vit_tokens,
)
from gpuwise.perf.numerics import Numerics, dtype_bytes
from gpuwise.perf.prediction import TrainingPerf
from gpuwise.perf.roofline import matmul_efficiency, peak_flops
from gpuwise.workload import Workload

# Optimizer update traffic per trainable parameter, excluding the gradient read:
# parameter read+write plus state read+write, with the state's dtype.
#   adamw: m and v (fp32 with fp32 params; the param dtype in pure 16-bit training)
#   8-bit adam: m and v in 1 byte each (bitsandbytes block-wise)
#   adafactor: factored second moment, no first moment (HF default beta1=None) -> ~param only
#   sgd: one momentum buffer
_STATE_COPIES = {"adamw": 2, "adamw-fused": 2, "adamw-8bit": 2, "paged-adamw-8bit": 2, "adafactor": 0, "sgd": 1}


def optimizer_bytes_per_param(optimizer: str, param_bytes: float, grad_bytes: float) -> float:
    state_bytes = 1.0 if "8bit" in optimizer else param_bytes
    copies = _STATE_COPIES.get(optimizer, 2)
    return 2 * param_bytes + grad_bytes + 2 * copies * state_bytes


def _flops(workload: Workload, arch: ModelArch) -> tuple[TrainingFlops, int]:
    """Micro-batch FLOPs for the whole model and the micro-batch 'tokens' (images for conv nets)."""
    if not arch.is_transformer:
        gflops = eff.cnn_gflops_224(arch.id)
        if gflops is None:
            from gpuwise.errors import GpuwiseError

            raise GpuwiseError(
                f"no FLOP count for {arch.id} ({arch.mlp_type}): gpuwise perf models transformers and the conv nets "
                "in perf/data/efficiency.toml [cnn.gflops_224]"
            )
        per_image = gflops * 1e9 * (workload.image_size / 224) ** 2
        images = workload.batch_size
        return TrainingFlops(images, 3 * per_image * images, 0.0, 0.0, 0.0), images
    seq = vit_tokens(arch, workload.image_size) if arch.family == "vit" else workload.seq_len
    tokens = workload.batch_size * seq
    flops = training_flops(
        arch, tokens, seq,
        lora_rank=workload.lora_rank if workload.is_lora else None,
        lora_target_names=workload.lora_targets,
        checkpointing=workload.grad_checkpointing,
    )
    return flops, tokens


def _linear_time(flops: float, gpu: GPU, num: Numerics) -> tuple[float, float]:
    """Matmul time of a training step and the resulting fraction of the compute dtype's peak.

    The stack factor stands for the non-matmul kernels (norms, activations, casts, loss,
    optimizer glue). Those run at 16-bit speed whatever the matmul dtype, so with fp8/fp4
    matmuls only the GEMM part shrinks: time = GEMMs at the low-precision rate + the 16-bit
    overhead. (Transformer Engine / torchao float8 report 1.3-1.5x end-to-end, not 2x.)
    """
    dtype = num.compute_dtype
    gemm_s = flops / (peak_flops(gpu, dtype) * matmul_efficiency(gpu, dtype, "training") / eff.stack("training"))
    ref = dtype if dtype in {"fp32", "tf32", "bf16", "fp16"} else num.attention_dtype
    overhead_s = flops / (peak_flops(gpu, ref) * matmul_efficiency(gpu, ref, "training") / eff.stack("training"))
    overhead_s *= 1 / eff.stack("training") - 1
    total = gemm_s + overhead_s
    return total, flops / (total * peak_flops(gpu, dtype)) if total else 0.0


def _host_floor_s(arch: ModelArch, pp: int) -> float:
    """Eager dispatch time of one micro-batch's kernels (forward + backward) on one stage."""
    per_layer = int(eff.host("kernels_per_layer_training"))
    if not arch.is_transformer:
        per_layer = 12  # conv, norm, activation forward + their backward
    layers = max(arch.num_layers, 1) / pp
    return layers * per_layer * float(eff.host("eager_op_us")) * 1e-6


def predict_training(workload: Workload, gpu: GPU, arch: ModelArch, num: Numerics) -> tuple[TrainingPerf, list[str]]:
    """Step time of ``workload`` on ``gpu``; returns the breakdown and the assumptions it made."""
    assumptions: list[str] = []
    tp, pp, n = workload.tp, workload.pp, workload.num_gpus
    dp = workload.data_parallel
    shards = tp * pp
    flops, micro_tokens = _flops(workload, arch)

    # --- compute per micro-batch on one GPU -------------------------------------------------------
    if arch.is_transformer:
        linear_s, e_lin = _linear_time(flops.linear_executed / shards, gpu, num)
        e_attn = eff.attention_efficiency(gpu, "training", workload.attention)
        attention_s = flops.attention_executed / shards / (peak_flops(gpu, num.attention_dtype) * e_attn)
    else:
        e_lin = e_attn = eff.cnn_fraction("training")
        linear_s = flops.executed / shards / (peak_flops(gpu, num.compute_dtype) * e_lin)
        attention_s = 0.0
        assumptions.append(f"conv net: {e_lin:.0%} of peak (cuDNN training is limited by memory-bound BatchNorm/ReLU)")

    stream_bw = gpu.mem_bw_bytes_per_s * eff.bandwidth_fraction("stream")
    dequant_s = adapter_s = elementwise_s = 0.0
    if arch.is_transformer:
        per_token = elementwise_bytes_per_token(arch, num.activation_bytes,
                                                recompute=workload.grad_checkpointing == "full",
                                                fp8=num.compute_dtype in {"fp8", "fp4"})
        elementwise_s = micro_tokens * per_token / shards / stream_bw
    if num.weight_only_quant:
        # Each use of a quantized weight reads it and writes/reads a 16-bit copy (bitsandbytes
        # dequantize-then-matmul): forward, backward input-gradient, and the recompute forward.
        passes = 2 + (1 if workload.grad_checkpointing == "full" else 0)
        per_pass = block_linear_params(arch) / shards * (num.block_weight_bytes + 2 * num.activation_bytes)
        dequant_s = passes * per_pass / stream_bw
        assumptions.append("quantized base weights are dequantized to 16-bit for every matmul (bitsandbytes-style)")

    fused_lora = workload.framework.strip().lower() in set(eff.host("fused_lora_frameworks"))
    if workload.is_lora and arch.is_transformer and not fused_lora:
        adapter_bytes = dtype_bytes(workload.lora_dtype)
        per_token = lora_elementwise_bytes_per_token(arch, workload.lora_targets, num.activation_bytes, adapter_bytes)
        adapter_s = micro_tokens * per_token / shards / stream_bw
        assumptions.append("LoRA adapters run unfused (peft): input cast, dropout, scale and add are memory-bound kernels")

    # --- tensor parallel: 2 all-reduces per layer forward, 2 backward (Megatron); +2 with full recompute
    tp_link = comm.link_for(gpu, tp)
    tp_comm_micro = 0.0
    if tp > 1 and arch.is_transformer:
        per_layer = 4 + (2 if workload.grad_checkpointing == "full" else 0)
        act = micro_tokens * arch.hidden_size * num.activation_bytes
        tp_comm_micro = per_layer * (arch.num_layers / pp) * comm.allreduce_s(act, tp, tp_link)
        if tp > comm.gpus_per_node():
            assumptions.append(f"tp={tp} spans nodes: tensor-parallel all-reduces go over the network")

    # --- sharded data parallel (FSDP / ZeRO-3): gathers every micro-batch, overlapped with compute --
    dp_link = comm.link_for(gpu, dp, crosses_nodes=n > comm.gpus_per_node())
    trainable = (lora_params(arch, workload.lora_rank, workload.lora_targets) if workload.is_lora
                 else arch.param_counts().total) / shards
    grad_bytes = dtype_bytes(workload.lora_dtype) if workload.is_lora else num.grad_bytes
    gather_bytes = arch.param_counts().total / shards * min(num.other_weight_bytes, 2.0)
    if num.weight_only_quant:
        gather_bytes = arch.param_counts().total / shards * num.block_weight_bytes
    sharded_params = workload.sharding in {"zero3", "fsdp"} and dp > 1
    fsdp_comm_micro = 0.0
    if sharded_params:
        fsdp_comm_micro = (2 * comm.allgather_s(gather_bytes, dp, dp_link)
                           + comm.reduce_scatter_s(trainable * grad_bytes, dp, dp_link))
    kernels_s = linear_s + attention_s + dequant_s + adapter_s + elementwise_s
    fsdp_exposed_micro = comm.exposed_s(fsdp_comm_micro, kernels_s)
    host_floor = _host_floor_s(arch, pp)
    micro_s = max(kernels_s + tp_comm_micro + fsdp_exposed_micro, host_floor)

    # --- pipeline -----------------------------------------------------------------------------------
    m = workload.grad_accum
    bubble_fraction = comm.pipeline_bubble_fraction(pp, m)
    pipe_s = micro_s * (m + pp - 1)
    bubble_s = micro_s * (pp - 1)

    # --- DDP / ZeRO-1/2: one gradient reduction per step, overlapped with the last backward ----------
    dp_comm = 0.0
    if dp > 1 and not sharded_params:
        dp_comm = comm.allreduce_s(trainable * grad_bytes, dp, dp_link)
        if workload.sharding in {"zero1", "zero2"}:
            assumptions.append("ZeRO-1/2: reduce-scatter + all-gather move the same bytes as one all-reduce")
    backward_share = (2 / 3) * kernels_s
    dp_exposed = comm.exposed_s(dp_comm, backward_share)
    dp_comm_total = dp_comm + fsdp_comm_micro * m
    dp_exposed_total = dp_exposed + fsdp_exposed_micro * m

    # --- optimizer update (memory-bound) -------------------------------------------------------------
    sharded_state = workload.sharding in {"zero1", "zero2", "zero3", "fsdp"} and dp > 1
    local_trainable = trainable / (dp if sharded_state else 1)
    param_bytes = dtype_bytes(workload.lora_dtype) if workload.is_lora else (4.0 if num.grad_bytes == 4 else num.other_weight_bytes)
    optimizer_s = local_trainable * optimizer_bytes_per_param(workload.optimizer, param_bytes, grad_bytes) / stream_bw

    step_s = pipe_s + dp_exposed + optimizer_s
    links = {"tp": tp_link.kind, "dp": dp_link.kind}
    if sharded_params or dp > 1:
        assumptions.append(
            f"data-parallel traffic over {dp_link.kind} ({dp_link.bytes_per_s / 1e9:,.0f} GB/s bus bandwidth); "
            f"{eff.comm('overlap_fraction'):.0%} of what fits under compute is hidden"
        )
    if pp > 1:
        assumptions.append(f"pipeline of {pp} stages with {m} micro-batches (grad_accum): bubble {bubble_fraction:.0%}")
    if host_floor >= kernels_s + tp_comm_micro:
        assumptions.append("kernels are too small to hide launch overhead: step time is the host dispatch floor")

    model_flops_token = flops.model / max(flops.tokens, 1)
    perf = TrainingPerf(
        global_tokens_per_step=micro_tokens * m * dp,
        micro_batch_tokens=micro_tokens,
        grad_accum=m, data_parallel=dp, tp=tp, pp=pp,
        model_flops_per_token=model_flops_token,
        executed_flops_per_step_per_gpu=flops.executed / shards * m,
        compute_s=(linear_s + attention_s) * m,
        linear_s=linear_s * m,
        attention_s=attention_s * m,
        memory_s=(dequant_s + adapter_s + elementwise_s) * m + optimizer_s,
        optimizer_s=optimizer_s,
        dequant_s=dequant_s * m,
        adapter_s=adapter_s * m,
        elementwise_s=elementwise_s * m,
        tp_comm_s=tp_comm_micro * m,
        dp_comm_s=dp_comm_total,
        dp_exposed_s=dp_exposed_total,
        bubble_s=bubble_s,
        bubble_fraction=bubble_fraction,
        host_floor_s=host_floor * m,
        step_time_s=step_s,
        linear_efficiency=e_lin,
        attention_efficiency=e_attn,
        links=links,
    )
    return perf, assumptions


def training_bound(perf: TrainingPerf) -> str:
    """The resource that dominates the step."""
    kernels = perf.compute_s + perf.memory_s - perf.optimizer_s + perf.tp_comm_s
    if perf.host_floor_s > kernels:
        return "host"
    parts = {"compute": perf.compute_s, "memory_bandwidth": perf.memory_s,
             "communication": perf.tp_comm_s + perf.dp_exposed_s}
    return max(parts, key=parts.get)

