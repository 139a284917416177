"""Per-GPU memory of vision and diffusion workloads, built from the network's layer list.

Same terms and phases as ``gpuwise.memory.estimate`` (weights, gradients, optimizer state,
autocast copies, activations, temporaries; forward / backward / optimizer_step), so the plan,
``fit`` and the renderers treat them like any workload:

- activations are what each layer keeps (``layers.py``) × the micro-batch, in the compute dtype
  (fp32 for the norms autocast runs in fp32; eager attention adds its softmax matrix);
- the backward walks the layers in reverse: activations of the layers not yet reached plus the
  gradients already produced — CNNs keep their largest (early, high-resolution) activations
  until the end, when almost every gradient exists;
- full checkpointing keeps each block's input and recomputes one block at a time
  (diffusers ``enable_gradient_checkpointing`` wraps every ResNet and transformer block);
- diffusion: text encoders and the VAE are frozen in 16-bit next to the denoiser (diffusers'
  training scripts cast them to ``weight_dtype``); LoRA adapts the attention projections
  (to_q/to_k/to_v/to_out, diffusers' LoRA scripts) with fp32 adapters; inference runs the
  denoiser on 2× the batch with classifier-free guidance, then the VAE decoder on the images.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpuwise.catalog import GPU
from gpuwise.catalog.families import family_spec
from gpuwise.errors import GpuwiseError
from gpuwise.memory import overheads
from gpuwise.memory.estimate import COMPONENTS, MemoryEstimate, Phase, gpu_capacity_bytes
from gpuwise.memory.frameworks import profile_for
from gpuwise.memory.optimizer_state import is_paged, state_bytes_per_param, step_temporary_bytes
from gpuwise.memory.regime import Regime, regime_for
from gpuwise.units import GiB
from gpuwise.vision.architectures import Network, VisionArch, network, vae_network
from gpuwise.vision.layers import Layer
from gpuwise.workload import Workload

__all__ = [
    "estimate_vision_memory",
    "image_dims",
    "layer_activation_bytes",
    "lora_params",
    "working_set_bytes",
]


def image_dims(w: Workload) -> tuple[int, int]:
    """Height × width in pixels: ``image_size`` is the height (and width unless ``image_width`` says)."""
    return w.image_size, w.image_width or w.image_size


def lora_params(net: Network, rank: int) -> int:
    """LoRA A and B matrices on every attention projection: rank × (in + out) each."""
    return sum(rank * (i + o) for layer in net.layers for i, o in layer.adapts)


def layer_activation_bytes(layer: Layer, regime: Regime, eager: bool) -> float:
    """Bytes one sample's ``layer`` keeps for backward."""
    half, norm = regime.compute_bytes, (4.0 if regime.is_amp else regime.compute_bytes)
    kept = (layer.saved - layer.saved_fp32) * half + layer.saved_fp32 * norm + layer.index_bytes
    if eager:  # softmax output (fp32 under autocast) and the 16-bit probabilities the AV matmul keeps
        kept += layer.scores * (half + (4.0 if regime.is_amp else 0.0))
    return kept


def working_set_bytes(net: Network, bytes_per_element: float, eager: bool) -> float:
    """Largest inference working set of one sample: a layer's input, output and its block's input."""
    best, previous = 0.0, net.input_elements
    for layer in net.layers:
        live = previous + layer.output + net.block_inputs.get(layer.block, 0.0)
        if eager:
            live += 2 * layer.scores
        best = max(best, live)
        previous = layer.output
    return best * bytes_per_element


@dataclass(frozen=True)
class _Trainables:
    weights: float
    grads: float
    states: float
    master: float
    adapters: float  # LoRA: adapters + their gradients + their optimizer state
    autocast: float
    buckets: float
    step_tmp: float
    paged: float
    per_layer_grads: tuple[float, ...]


def estimate_vision_memory(w: Workload, gpu: GPU, arch: VisionArch) -> MemoryEstimate:
    """``estimate_memory`` for a model ``gpuwise.vision`` describes."""
    if w.tp > 1 or w.pp > 1:
        raise GpuwiseError(
            f"tensor/pipeline parallelism is not modelled for {arch.id}: split the batch instead "
            "(num_gpus with sharding ddp or fsdp)"
        )
    height, width = image_dims(w)
    net = network(arch, height, width)
    regime = regime_for(w)
    notes: list[str] = []
    assumptions = [
        f"analytic vision model: {arch.kind} at {height}×{width} px ({len(net.layers)} layer groups, "
        f"{net.params / 1e6:,.1f} M parameters, {net.macs / 1e9:,.2f} GMACs per image; {arch.source})"
    ]
    if arch.is_diffusion:
        assumptions.append(f"latent {height // 8}×{width // 8} (SD-family VAE: image / 8)")
    frozen = _frozen_bytes(w, arch, assumptions)
    if w.is_training:
        trainables = _trainables(w, net, regime, assumptions)
        phases, transient = _training_phases(w, net, regime, trainables, frozen, assumptions)
        paged = trainables.paged
    else:
        phases, transient = _inference_phases(w, arch, net, regime, frozen, assumptions)
        paged = 0.0
    peak = max(phases, key=lambda p: p.allocated_bytes)
    dp = w.data_parallel
    reserve = overheads.allocator_reserve_bytes(transient, w.sharding in ("fsdp", "zero3") and dp > 1)
    context = overheads.cuda_context_bytes(gpu) + overheads.nccl_bytes(w.num_gpus)
    breakdown = {k: peak.components.get(k, 0.0) for k in COMPONENTS}
    breakdown["optimizer_states"] += paged
    breakdown["cuda_context"], breakdown["allocator_reserve"] = context, reserve
    allocated = peak.allocated_bytes
    if w.is_training and net.has_attention and w.attention == "eager":
        notes.append("eager attention keeps every softmax matrix: SDPA (the default) would not")
    return MemoryEstimate(
        workload=w,
        gpu=gpu,
        breakdown=breakdown,
        phases=phases,
        peak_phase=peak.name,
        peak_allocated_bytes=allocated,
        peak_reserved_bytes=allocated + reserve,
        device_total_bytes=allocated + reserve + context + paged,
        gpu_memory_bytes=gpu_capacity_bytes(gpu),
        notes=notes,
        assumptions=assumptions,
    )


def _frozen_bytes(w: Workload, arch: VisionArch, assumptions: list[str]) -> float:
    """Text encoders and VAE of a diffusion pipeline, frozen in 16-bit (fp32 when the job is fp32)."""
    pipe = arch.pipeline
    if pipe is None:
        return 0.0
    size = 4.0 if w.precision == "fp32" else 2.0
    params = pipe.text_encoder_params + pipe.vae_params
    assumptions.append(
        f"frozen pipeline parts: text encoders {pipe.text_encoder_params / 1e6:,.0f} M + VAE "
        f"{pipe.vae_params / 1e6:,.0f} M parameters in {int(size * 8)}-bit"
    )
    return params * size


def _trainables(w: Workload, net: Network, regime: Regime, assumptions: list[str]) -> _Trainables:
    dp = w.data_parallel
    sharding = w.sharding if w.sharding != "none" or dp == 1 else "ddp"
    shard_w = dp if sharding in ("zero3", "fsdp") else 1
    shard_g = dp if sharding in ("zero2", "zero3", "fsdp") else 1
    shard_s = dp if sharding in ("zero1", "zero2", "zero3", "fsdp") else 1
    params = float(net.params)
    if w.is_lora:
        n = float(lora_params(net, w.lora_rank))
        base = {"fp32": 4.0, "int8": 1.0, "int4": 0.5, "nf4": 0.5}.get(w.precision, 2.0)
        state = state_bytes_per_param(w.optimizer, 4.0)
        assumptions.append(
            f"LoRA rank {w.lora_rank} on the attention projections: {n / 1e6:,.1f} M fp32 trainable "
            f"parameters; the {params / 1e6:,.0f} M base weights frozen in {int(base * 8)}-bit"
        )
        temporary = step_temporary_bytes(w.optimizer, n, 0.0, 4.0)
        adapters = n * (4.0 + 4.0 + state)
        per_layer = tuple(0.0 for _ in net.layers)
        return _Trainables(params * base / shard_w, 0, 0, 0, adapters, 0, 0, temporary, 0, per_layer)
    grads = params * regime.grad_bytes / shard_g
    state_total = params * state_bytes_per_param(w.optimizer, regime.state_dtype_bytes) / shard_s
    master = params * regime.master_bytes / shard_s
    autocast = params * regime.autocast_copy_bytes if shard_w == 1 else 0.0
    if autocast:
        assumptions.append("autocast keeps a 16-bit copy of every conv/linear weight until its backward")
    profile = profile_for(w.framework, w.library_versions)
    buckets = grads if sharding == "ddp" and dp > 1 and profile.ddp_grad_buckets else 0.0
    temporary = step_temporary_bytes(w.optimizer, params / shard_s, 0.0, regime.state_dtype_bytes)
    paged = state_total if is_paged(w.optimizer) else 0.0
    per_layer = tuple(layer.params * regime.grad_bytes / shard_g for layer in net.layers)
    return _Trainables(
        params * regime.param_bytes / shard_w,
        grads,
        0.0 if paged else state_total,
        master,
        0.0,
        autocast,
        buckets,
        temporary,
        paged,
        per_layer,
    )


def _training_phases(
    w: Workload, net: Network, regime: Regime, t: _Trainables, frozen: float, assumptions: list[str]
) -> tuple[list[Phase], float]:
    b, eager = w.batch_size, w.attention == "eager"
    acts = [b * layer_activation_bytes(layer, regime, eager) for layer in net.layers]
    acts[0] += b * net.input_elements * regime.compute_bytes  # the first layer keeps its input (cast)
    recompute = 0.0
    if w.grad_checkpointing != "none":
        by_block: dict[str, float] = {}
        for layer, size in zip(net.layers, acts, strict=True):
            by_block[layer.block] = by_block.get(layer.block, 0.0) + size
        recompute = max(by_block.values())
        first: set[str] = set()
        kept = []
        # Token transformers carry an fp32 residual stream under autocast; conv nets pass 16-bit maps.
        token_stream = family_spec(net.arch.family).token_transformer
        stream = regime.residual_bytes if token_stream else regime.compute_bytes
        for layer in net.layers:
            size = 0.0
            if layer.block not in first:
                first.add(layer.block)
                size = b * net.block_inputs.get(layer.block, 0.0) * stream
            kept.append(size)
        acts = kept
        assumptions.append("checkpointing keeps each block's input and recomputes one block in its backward")
    accumulating = w.grad_accum > 1
    base = {
        "weights": t.weights + frozen,
        "master_weights": t.master,
        "optimizer_states": t.states,
        "lora_adapters": t.adapters,
        "gradients": t.buckets + (t.grads if accumulating else 0.0),
    }
    total_acts = sum(acts)
    forward = Phase("forward", {**base, "autocast_weight_copies": t.autocast, "activations": total_acts})
    # Backward, layer by layer from the last: activations still held + gradients already made.
    # Scalars in the loop (SDXL has ~1,000 layer groups and the planner asks hundreds of what-ifs).
    fixed = sum(base.values())
    best_total, best = -1.0, (0.0, total_acts, 0.0)
    held, made = total_acts, 0.0
    for i in reversed(range(len(net.layers))):
        made += 0.0 if accumulating else t.per_layer_grads[i]
        grad_io = 2.0 * b * net.layers[i].output * regime.compute_bytes
        casts = t.autocast * held / max(total_acts, 1.0)
        total = fixed + made + casts + held + recompute + grad_io
        if total > best_total:
            best_total, best = total, (made, held, grad_io)
        held -= acts[i]
    made, held, grad_io = best
    backward = Phase(
        "backward",
        {
            **base,
            "gradients": base["gradients"] + made,
            "autocast_weight_copies": t.autocast * held / max(total_acts, 1.0),
            "activations": held + recompute,
            "temporaries": grad_io,
        },
    )
    step = Phase("optimizer_step", {**base, "gradients": t.buckets + t.grads, "temporaries": t.step_tmp})
    return [forward, backward, step], max(t.step_tmp, backward.components.get("temporaries", 0.0))


def _inference_phases(
    w: Workload, arch: VisionArch, net: Network, regime: Regime, frozen: float, assumptions: list[str]
) -> tuple[list[Phase], float]:
    eager = w.attention == "eager"
    weights = net.params * regime.param_bytes + frozen
    act_bytes = regime.compute_bytes
    pipe = arch.pipeline
    passes = 2 if pipe is not None and pipe.cfg else 1
    work = w.batch_size * passes * working_set_bytes(net, act_bytes, eager)
    if pipe is None:
        return [Phase("forward", {"weights": weights, "temporaries": work})], work
    if passes == 2:
        assumptions.append("classifier-free guidance: the denoiser runs on 2× the batch (cond + uncond)")
    height, width = image_dims(w)
    vae = vae_network(arch, height, width)
    upcast = arch.id == "sdxl" and w.precision == "fp16"
    decode = w.batch_size * working_set_bytes(vae, 4.0 if upcast else act_bytes, eager)
    if upcast:
        assumptions.append(
            "SDXL's VAE decodes in fp32 (diffusers force_upcast: its fp16 decode overflows; "
            "bf16 does not upcast)"
        )
    latents = w.batch_size * passes * vae.layers[0].output * 4.0
    phases = [
        Phase("denoise", {"weights": weights, "activations": latents, "temporaries": work}),
        Phase("vae_decode", {"weights": weights, "activations": latents, "temporaries": decode}),
    ]
    if max(work, decode) > 20 * GiB:
        assumptions.append("VAE tiling/slicing (enable_vae_tiling) cuts the decode working set")
    return phases, max(work, decode)
