"""Inference: prefill (compute-bound), decode (bandwidth-bound until the batch is large), batching,
KV-cache concurrency, TTFT and time per output token.

A forward step is a sequence of kernels, so its time is the sum of per-kernel rooflines:
  linear layers : max(2·P·tokens / (peak·eff),  weight bytes read / (bandwidth·fraction))
  attention     : decode reads every cached K/V (bandwidth); prefill is compute
  + tensor-parallel all-reduces (2 per layer) + a per-step host overhead.
One weight read serves the whole batch, so decode time per token falls with the batch until
the matmuls become compute-bound (``decode_compute_bound_batch``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from gpuwise.catalog import GPU, ModelArch
from gpuwise.memory.estimate import sequence_tokens
from gpuwise.perf import comm
from gpuwise.perf import efficiency as eff
from gpuwise.perf.flops import (
    attention_bytes_per_token,
    attention_flops_per_token,
    block_linear_params,
    elementwise_bytes_per_token,
    matmul_params,
)
from gpuwise.perf.footprint import kv_bytes_per_token_per_gpu, weight_bytes_per_gpu
from gpuwise.perf.numerics import Numerics
from gpuwise.perf.prediction import Bound, InferencePerf
from gpuwise.perf.roofline import matmul_efficiency, peak_flops
from gpuwise.workload import Workload

__all__ = [
    "StepModel",
    "StepTime",
    "conv_forward",
    "encoder_forward",
    "max_concurrency",
    "predict_inference",
    "tile_utilization",
]


def tile_utilization(tokens: float, gpu: GPU) -> float:
    """Share of a GEMM's row tiles doing useful work when ``tokens`` rows are padded to whole tiles.

    Tile quantization (NVIDIA Deep Learning Performance guide, "Matrix Multiplication Background"):
    a GEMM runs in whole output tiles, so a serving step's M = tokens in flight is rounded up to the
    tile height: 128 rows for cuBLAS/CUTLASS on Ampere/Hopper, 256 on datacenter Blackwell (sm_100),
    whose large GEMM kernels pair two SMs per 256-row MMA (CUTLASS sm100 "2SM" kernels). It matters at
    the few hundred tokens a large-batch decode step carries; prefill chunks of thousands barely notice.
    Below one tile, libraries pick smaller tiles or GEMV kernels (and such steps are bandwidth-bound).
    """
    tile = 256 if gpu.arch_target == "sm_100" else 128
    if tokens <= tile:
        return 1.0
    return tokens / (math.ceil(tokens / tile) * tile)


@dataclass(frozen=True)
class StepTime:
    """One forward step on one GPU (one pipeline stage), split by what limits each part."""

    time_s: float
    compute_s: float  # parts limited by FLOPs
    memory_s: float  # parts limited by bandwidth
    comm_s: float
    overhead_s: float
    weight_bytes: float
    kv_bytes: float

    @property
    def bound(self) -> Bound:
        """The resource that takes longest in this step: compute, memory bandwidth, communication or host
        overhead."""
        parts: dict[Bound, float] = {
            "compute": self.compute_s,
            "memory_bandwidth": self.memory_s,
            "communication": self.comm_s,
            "host": self.overhead_s,
        }
        return max(parts, key=parts.__getitem__)


class StepModel:
    """Per-GPU step times for one model/GPU/precision/parallelism."""

    def __init__(self, workload: Workload, gpu: GPU, arch: ModelArch, num: Numerics) -> None:
        self.w, self.gpu, self.arch, self.num = workload, gpu, arch, num
        self.tp, self.pp = workload.tp, workload.pp
        self.shards = self.tp * self.pp
        self.layers = arch.num_layers / self.pp
        self.e_lin = matmul_efficiency(gpu, num.compute_dtype, "inference")
        self.e_attn = eff.attention_efficiency(gpu, "inference", workload.attention)
        self.peak_lin = peak_flops(gpu, num.compute_dtype)
        self.peak_attn = peak_flops(gpu, num.attention_dtype)
        self.decode_bw = gpu.mem_bw_bytes_per_s * eff.bandwidth_fraction("decode")
        self.active_params = matmul_params(arch, active=True)
        self.kv_token = kv_bytes_per_token_per_gpu(arch, num, self.tp, self.pp)
        self.tp_link = comm.link_for(gpu, self.tp)
        eager = workload.framework.strip().lower() in eff.constants().host.eager_frameworks
        if eager:
            per_step = (
                self.layers
                * eff.constants().host.kernels_per_layer_forward
                * eff.constants().host.eager_op_us
                * 1e-6
            )
        else:
            per_step = eff.constants().host.engine_step_overhead_ms * 1e-3
        self.eager = eager
        self.overhead_s = per_step
        # Eager frameworks run norms, residual adds, activations and head copies as separate
        # memory-bound kernels (serving engines fuse them into GEMM epilogues).
        self.stream_bw = gpu.mem_bw_bytes_per_s * eff.bandwidth_fraction("stream")
        self.eager_bytes_per_token = (
            elementwise_bytes_per_token(arch, num.activation_bytes, training=False) / self.shards
            if eager
            else 0.0
        )
        self._is_decoder = arch.is_decoder
        self._weight_terms()

    def weight_bytes_read(self, tokens: float) -> float:
        """Weights streamed by one step on one GPU: MoE layers read only the experts tokens hit."""
        blocks: float = self._block_params
        if self._is_moe:
            experts_total = self._experts_total
            touched = 1 - self._expert_miss ** max(tokens, 1)
            blocks = blocks - experts_total + experts_total * touched
        return (
            blocks * self._block_weight_bytes + self._lm_head_params * self._other_weight_bytes
        ) / self.shards

    def _weight_terms(self) -> None:
        """The token-independent parts of ``weight_bytes_read`` (a serving simulation asks for it per
        step: parameter counts once, not per call)."""
        arch, num = self.arch, self.num
        self._block_params = block_linear_params(arch)
        self._lm_head_params = arch.vocab_size * arch.hidden_size if arch.is_decoder else 0
        self._block_weight_bytes, self._other_weight_bytes = num.block_weight_bytes, num.other_weight_bytes
        self._is_moe, self._experts_total, self._expert_miss = arch.is_moe, 0, 1.0
        if arch.is_moe:
            counts = arch.param_counts()
            self._experts_total = counts.num_layers * (
                counts.per_layer_mlp - arch.hidden_size * arch.num_experts
            )
            k, e = arch.experts_per_token or 1, arch.num_experts
            self._expert_miss = 1 - k / e

    def step(
        self,
        linear_tokens: float,
        decode_seqs: float = 0.0,
        decode_context: float = 0.0,
        prefill_tokens: float = 0.0,
        prefill_context: float = 0.0,
    ) -> StepTime:
        """Time of one step on one GPU processing ``linear_tokens`` tokens through the matmuls."""
        compute = memory = 0.0
        flops = 2.0 * self.active_params * linear_tokens / self.shards
        lin_c = flops / (self.peak_lin * self.e_lin) / tile_utilization(linear_tokens, self.gpu)
        weights = self.weight_bytes_read(linear_tokens)
        lin_m = weights / self.decode_bw
        kernel = self._fp4_kernel_s(flops, linear_tokens)
        if kernel > max(lin_c, lin_m):
            compute += kernel  # the measured NVFP4 kernel is slower than both rooflines
        elif lin_c >= lin_m:
            compute += lin_c
        else:
            memory += lin_m
        kv = decode_seqs * decode_context * self.kv_token
        if decode_seqs:
            attn_flops = (
                decode_seqs * attention_flops_per_token(self.arch, decode_context, causal=False) / self.shards
            )
            att_c = attn_flops / (self.peak_attn * self.e_attn)
            att_m = kv / self.decode_bw
            if att_c >= att_m:
                compute += att_c
            else:
                memory += att_m
        if prefill_tokens:
            causal = self._is_decoder
            pre_flops = (
                prefill_tokens * attention_flops_per_token(self.arch, prefill_context, causal) / self.shards
            )
            pre_c = pre_flops / (self.peak_attn * self.e_attn)
            if self.eager:
                # q/k/v/o traffic (and eager attention's materialized scores) vs the kernel's FLOPs
                impl = self.w.attention
                per_token = attention_bytes_per_token(
                    self.arch, prefill_context, self.num.activation_bytes, impl
                )
                pre_m = prefill_tokens * per_token / self.shards / self.stream_bw
                if impl == "eager":
                    compute += pre_c
                    memory += pre_m
                elif pre_m > pre_c:
                    memory += pre_m
                else:
                    compute += pre_c
            else:
                compute += pre_c
        if self.eager_bytes_per_token:
            memory += linear_tokens * self.eager_bytes_per_token / self.stream_bw
        comm_s = 0.0
        if self.tp > 1:
            act = linear_tokens * self.arch.hidden_size * self.num.activation_bytes
            comm_s = 2 * self.layers * comm.allreduce_s(act, self.tp, self.tp_link)
        total = compute + memory + comm_s + self.overhead_s
        return StepTime(total, compute, memory, comm_s, self.overhead_s, weights, kv)

    def _fp4_kernel_s(self, flops: float, tokens: float) -> float:
        """Time of the step's FP4 GEMMs at the measured sm_100 NVFP4 kernel rate (0: no curve applies)."""
        if self.num.compute_dtype != "fp4":
            return 0.0
        rate = eff.fp4_gemm_rate(self.gpu, tokens)
        return flops / rate if rate else 0.0

    def compute_bound_batch(self) -> float:
        """Decode batch at which the matmuls' FLOPs time equals their weight-read time."""
        flops_per_token = 2.0 * self.active_params / self.shards
        return self.weight_bytes_read(1) * self.peak_lin * self.e_lin / (flops_per_token * self.decode_bw)


def max_concurrency(workload: Workload, gpu: GPU, arch: ModelArch, num: Numerics) -> tuple[int, float, str]:
    """Sequences of prompt + output tokens whose KV cache fits per replica (full length reserved).

    One truth with ``memory`` and ``plan``: gpuwise.perf.kv_capacity.kv_capacity (paged blocks)."""
    from gpuwise.perf.kv_capacity import kv_capacity

    cap = kv_capacity(workload, gpu, arch, num)
    return cap.max_sequences, cap.budget_bytes_per_gpu, cap.method


def predict_inference(
    workload: Workload, gpu: GPU, arch: ModelArch, num: Numerics
) -> tuple[InferencePerf, list[str], bool]:
    """Serving / generation speed. Returns the breakdown, assumptions, and whether it fits."""
    assumptions: list[str] = []
    model = StepModel(workload, gpu, arch, num)
    tp, pp = workload.tp, workload.pp
    replicas = workload.data_parallel
    p, o = workload.seq_len, workload.output_len
    continuous = workload.task in {"serving", "rag"}
    requested = workload.batch_size
    if continuous:
        requested = max(workload.batch_size, math.ceil(workload.concurrency / replicas))
    cap, budget, method = max_concurrency(workload, gpu, arch, num)
    fits = cap >= 1
    batch = max(min(requested, cap), 1)
    assumptions.append(f"KV budget per GPU ({method}); each sequence reserves prompt + output tokens")
    if batch < requested:
        assumptions.append(f"batch capped at {batch} by KV-cache memory ({requested} requested)")

    # Prefill of `batch_size` prompts (latency through all pipeline stages).
    ttft_batch = min(workload.batch_size, batch)
    pre = model.step(ttft_batch * p, prefill_tokens=ttft_batch * p, prefill_context=p)
    ttft = pp * pre.time_s

    # Decode at `batch`, pipeline stages each holding batch/pp sequences.
    per_stage = batch / pp
    ctx = p + o / 2
    decode = model.step(per_stage, decode_seqs=per_stage, decode_context=ctx)
    tpot, per_replica_out, throughput_bound = _steady_state(model, workload, batch, decode, assumptions)
    _note_overhead(model, workload, assumptions)

    out_total = per_replica_out * replicas
    requests = out_total / o
    perf = InferencePerf(
        prompt_tokens=p,
        output_tokens=o,
        replicas=replicas,
        tp=tp,
        pp=pp,
        weights_bytes_per_gpu=weight_bytes_per_gpu(arch, num, tp, pp),
        kv_bytes_per_token_per_gpu=model.kv_token,
        kv_budget_bytes_per_gpu=budget,
        max_concurrency=cap,
        requested_batch=requested,
        batch=batch,
        ttft_s=ttft,
        prefill_tokens_per_s=ttft_batch * p / ttft if ttft else 0.0,
        tpot_s=tpot,
        decode_bound=decode.bound,
        throughput_bound=throughput_bound,
        decode_compute_bound_batch=model.compute_bound_batch(),
        decode_weight_bytes=decode.weight_bytes,
        decode_kv_bytes=decode.kv_bytes,
        tp_comm_per_step_s=decode.comm_s,
        step_overhead_s=model.overhead_s,
        output_tokens_per_s=out_total,
        output_tokens_per_s_per_gpu=out_total / workload.num_gpus,
        total_tokens_per_s=requests * (p + o),
        requests_per_s=requests,
        request_latency_s=ttft + o * tpot,
        batching="continuous" if continuous else "static",
    )
    return perf, assumptions, fits


def _steady_state(
    model: StepModel, workload: Workload, batch: int, decode: StepTime, assumptions: list[str]
) -> tuple[float, float, Bound]:
    """(time per output token in s, output tokens/s of one replica, what bounds the throughput).

    Continuous batching (serving, RAG) mixes the prompts of arriving requests into decode steps;
    static batching prefills the whole batch, then decodes it to the end."""
    pp, p, o = workload.pp, workload.seq_len, workload.output_len
    per_stage = batch / pp
    if workload.task in {"serving", "rag"}:
        # Continuous batching with chunked prefill: every step also prefills the prompts of the
        # requests that replace finished ones (batch·p/o prompt tokens per step on average).
        new_tokens = per_stage * p / o
        mixed = model.step(
            per_stage + new_tokens,
            decode_seqs=per_stage,
            decode_context=p + o / 2,
            prefill_tokens=new_tokens,
            prefill_context=p,
        )
        assumptions.append(
            "continuous batching with chunked prefill: prompts of new requests share decode steps"
        )
        tpot = pp * mixed.time_s
        return tpot, batch / tpot, mixed.bound
    tpot = pp * decode.time_s
    prefill_all = model.step(batch * p, prefill_tokens=batch * p, prefill_context=p)
    per_replica_out = batch * o / (pp * prefill_all.time_s + o * tpot)
    bound = prefill_all.bound if pp * prefill_all.time_s > o * tpot else decode.bound
    assumptions.append("static batching: the batch is prefilled, then decoded to the end")
    return tpot, per_replica_out, bound


def _note_overhead(model: StepModel, workload: Workload, assumptions: list[str]) -> None:
    """Say which per-step host overhead the prediction assumes (eager launches or CUDA graphs)."""
    if model.eager:
        assumptions.append(
            f"eager framework {workload.framework!r}: per-kernel launch overhead on every decode step"
        )
    else:
        assumptions.append("serving engine with CUDA graphs: ~0.5 ms host overhead per step")


def encoder_forward(
    workload: Workload, gpu: GPU, arch: ModelArch, num: Numerics
) -> tuple[float, float, Bound]:
    """Encoder-only models (BERT, ViT): one forward of the batch. Returns (seconds, tokens, bound)."""
    seq = sequence_tokens(arch, workload)  # ViTs: (H/p)·(W/p) + 1 patch tokens
    tokens = workload.batch_size * seq
    step = StepModel(workload, gpu, arch, num).step(tokens, prefill_tokens=tokens, prefill_context=seq)
    return workload.pp * step.time_s, tokens, step.bound


def conv_forward(workload: Workload, gpu: GPU, arch: ModelArch, num: Numerics) -> tuple[float, float]:
    """Conv nets and diffusion pipelines: FLOPs from their layers (gpuwise.vision) at a sourced share of
    the tensor-core peak, plus their feature maps' memory-bound passes at the stream bandwidth; an eager
    diffusion loop cannot run faster than the host issues its kernels. Diffusion counts the whole sampling
    loop of every image. Returns (seconds, FLOPs) per batch."""
    from gpuwise.perf import vision as vision_perf
    from gpuwise.perf.roofline import peak_flops as _peak

    vision = vision_perf.described(arch.id)
    flops = vision_perf.inference_flops_per_image(workload, vision) * workload.batch_size
    share = vision_perf.fraction(workload, vision, "inference", gpu)
    stream_bw = gpu.mem_bw_bytes_per_s * eff.bandwidth_fraction("stream")
    memory_bytes = vision_perf.memory_bytes_per_image(workload, vision, "inference", num.activation_bytes)
    slower = vision_perf.attention_slowdown_flops(workload, vision, gpu) * workload.batch_size
    gpu_s = (flops + slower) / (_peak(gpu, num.compute_dtype) * share.value)
    gpu_s += workload.batch_size * memory_bytes / stream_bw
    host_s = workload.batch_size * vision_perf.host_s_per_image(
        workload, vision, eff.constants().host.eager_op_us * 1e-6
    )
    seconds = max(gpu_s, host_s)
    return seconds + eff.constants().host.engine_step_overhead_ms * 1e-3, flops
