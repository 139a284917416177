"""``traced_estimate``: build the workload's model without weights, run one step on fake tensors, report.

The order matters: build on ``meta`` (default dtype set around construction), apply
checkpointing, LoRA and quantized stand-ins there (peft calls ``.to()``, which fails on fake
parameters), then materialise as
fake *CPU* tensors inside ``FakeTensorMode`` (fake CUDA tensors that require grad abort a CPU-only
torch), keeping tied weights tied. Sizes do not depend on the device, so the peaks are GPU peaks
minus what the CUDA context, the caching allocator and library workspaces add; those come from
the analytic estimator's own overhead model so the two totals compare.
"""

from __future__ import annotations

import sys
import time
import warnings
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass

import torch

from gpuwise.catalog import get_gpu, list_gpus
from gpuwise.errors import GpuwiseError
from gpuwise.memory.activations import kbit_upcast
from gpuwise.memory.frameworks import profile_for
from gpuwise.memory.regime import regime_for
from gpuwise.perf.prediction import Bound, Mode
from gpuwise.simulation import adapt, build
from gpuwise.simulation.optim import build_optimizer
from gpuwise.simulation.parity import cuda_code_paths
from gpuwise.simulation.run import RunSettings, explain_failure, inference, materialize, training_step
from gpuwise.simulation.tracker import CUDA_BLOCK_BYTES, MemoryTracker, PhaseRecord
from gpuwise.simulation.types import GpuStepTime, TracedMemoryEstimate, TracedPhase
from gpuwise.workload import Workload
from gpuwise.workload.spec import Precision

__all__ = ["PrecisionPlan", "Simulation", "precision_plan", "simulate", "traced_estimate"]


_DTYPE = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


@dataclass(frozen=True)
class PrecisionPlan:
    """How the workload's precision is simulated: the parameters' dtype, autocast's, and which base weights
    are quantized."""

    param_dtype: torch.dtype
    autocast_dtype: torch.dtype | None
    quantized: Precision | None  # nf4 | int4 | int8 | fp8 base weights


def precision_plan(w: Workload) -> PrecisionPlan:
    """The precision plan of ``w``; an error for what the simulator cannot run (fp8 training)."""
    p = w.precision
    if p in _DTYPE:
        return PrecisionPlan(_DTYPE[p], None, None)
    if p in ("amp-bf16", "amp-fp16"):
        return PrecisionPlan(torch.float32, _DTYPE[p[4:]], None)
    if p == "fp8" and w.is_training:
        raise GpuwiseError(
            "fp8 training (Transformer Engine) cannot be simulated on CPU fake tensors; "
            f"simulate bf16 (--precision bf16), or {build.ANALYTIC_HINT}"
        )
    return PrecisionPlan(torch.bfloat16, None, p)  # quantized weights, 16-bit compute


@dataclass
class Simulation:
    """The raw outcome of one simulated step, before overheads and step times are added."""

    built: build.BuiltModel
    tracker: MemoryTracker
    optimizer: str  # what the simulated optimizer was, in words
    num_params: int
    trainable_params: int
    notes: list[str]
    paged_state_bytes: int = 0


def traced_estimate(
    workload: Workload,
    model_factory: str | None = None,
    input_factory: str | None = None,
    progress: bool | None = None,
) -> TracedMemoryEstimate:
    """Simulate one step of ``workload`` on fake tensors and return its exact tensor-memory peaks.

    ``model_factory`` / ``input_factory`` are ``pkg.module:function`` (or ``file.py:function``);
    without a model factory the workload's catalog model or config.json is built.
    """
    started = time.perf_counter()
    sim = simulate(workload, model_factory, input_factory, progress=progress)
    return _assemble(workload, sim, time.perf_counter() - started)


def simulate(
    workload: Workload,
    model_factory: str | None = None,
    input_factory: str | None = None,
    *,
    block_bytes: int = CUDA_BLOCK_BYTES,
    fake: bool = True,
    progress: bool | None = False,
) -> Simulation:
    """Build and run the step. ``fake=False`` runs the same step on real CPU tensors (for tests on tiny
    models: it allocates everything); ``block_bytes=1`` counts exact sizes as the CPU allocator does."""
    w = workload
    model_factory = model_factory or w.model_factory or None  # a workload file may name its factory
    if input_factory and not model_factory:
        raise GpuwiseError(
            "--input-factory needs --model-factory (catalog models get token or image inputs automatically)"
        )
    if w.tp > 1 or w.pp > 1 or w.sharding not in ("none", "ddp"):
        raise GpuwiseError(
            f"traced simulation runs one unsharded replica (tp=1, pp=1, sharding none/ddp), got "
            f"tp={w.tp}, pp={w.pp}, sharding={w.sharding}; {build.ANALYTIC_HINT}"
        )
    plan = precision_plan(w)
    profile = profile_for(w.framework)
    # stacks whose model is transformers + peft as traced here (LLaMA-Factory only prepares QLoRA itself)
    peft_stack = profile.name in ("hf", "llama-factory")
    notes: list[str] = []
    if not peft_stack:
        notes.append(
            f"simulated with the transformers + peft implementation; {w.framework}'s own code (loss, "
            "adapters) is modelled by the analytic estimate only"
        )
    with _status(progress) as status, _quiet_libraries():
        status("building the model on the meta device")
        built = _build(w, plan, model_factory, input_factory)
        if w.is_training:
            note = adapt.apply_checkpointing(built, w.grad_checkpointing)
            if note:
                notes.append(note)
        if w.is_lora:
            notes.append(adapt.apply_lora(built, w, profile.lora_dropout if peft_stack else 0.0))
        if plan.quantized:
            notes.append(adapt.apply_quantization(built, plan.quantized, w.double_quant, plan.param_dtype))
            if kbit_upcast(w, regime_for(w), profile) and built.is_hf:
                notes.append(adapt.apply_kbit_upcast(built))
                plan = PrecisionPlan(plan.param_dtype, torch.bfloat16, plan.quantized)
        if plan.autocast_dtype is not None:
            notes.append(
                f"autocast to {str(plan.autocast_dtype).removeprefix('torch.')} simulated with CPU autocast, "
                "whose op lists differ slightly from CUDA's"
            )
        # A serving replica holds `concurrency` sequences at once (as the analytic estimate assumes).
        batch = max(w.batch_size, w.concurrency) if w.task == "serving" else w.batch_size
        ddp = w.is_training and w.data_parallel > 1
        if ddp:
            notes.append(
                f"{w.data_parallel} data-parallel replicas: DDP gradient buckets (one flat copy of the "
                "gradients, gradient_as_bucket_view=False) are included; NCCL buffers are in the context line"
            )
        settings = RunSettings(
            batch,
            w.seq_len,
            w.output_len,
            w.image_size,
            plan.param_dtype,
            plan.autocast_dtype,
            w.grad_accum,
            ddp_buckets=ddp,
        )
        sim = _run(built, w, settings, input_factory, status, block_bytes, fake)
    sim.notes[:0] = notes
    sim.notes.extend(_limits_notes(w, built))
    return sim


def _build(
    w: Workload, plan: PrecisionPlan, model_factory: str | None, input_factory: str | None
) -> build.BuiltModel:
    if model_factory:
        return build.build_from_factory(model_factory, plan.param_dtype, input_factory)
    arch, config_path = build.resolve_model(w.model)
    if config_path is not None:
        return build.build_from_config_file(config_path, plan.param_dtype, w.attention, w.is_cv)
    return build.build_from_catalog(arch, plan.param_dtype, w.attention, w.is_cv, w.image_size)


def _run(
    built: build.BuiltModel,
    w: Workload,
    s: RunSettings,
    input_spec: str | None,
    status,
    block_bytes: int,
    fake: bool,
) -> Simulation:
    from torch._subclasses.fake_tensor import FakeTensorMode

    model = built.model
    names = {id(m): (n or type(m).__name__) for n, m in model.named_modules()}
    tracker = MemoryTracker(names, block_bytes=block_bytes, head_modules=_head_modules(model, names))
    optimizer_text = "none (inference)"
    fake_mode = FakeTensorMode(allow_non_fake_inputs=True) if fake else nullcontext()
    with fake_mode, tracker, cuda_code_paths():
        status("materialising fake parameters")
        tensors, num_params = materialize(model, real=not fake)
        tracker.tag(tensors, "parameters")
        trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
        try:
            with tracker.watching_modules():
                if w.is_training:
                    choice = build_optimizer(w.optimizer, model)
                    optimizer_text = choice.description
                    status("simulating forward, backward and optimizer step")
                    training_step(model, built, s, tracker, choice, input_spec)
                else:
                    status(
                        "simulating prefill and decode"
                        if built.kind == "causal-lm"
                        else "simulating the forward"
                    )
                    inference(model, built, s, tracker, input_spec)
        except GpuwiseError:
            raise
        except Exception as err:
            raise explain_failure(err, tracker, built.description, model) from err
    return Simulation(built, tracker, optimizer_text, num_params, trainable, [], tracker.untracked_bytes)


def _head_modules(model: torch.nn.Module, names: dict[int, str]) -> set[str]:
    """Modules whose forward makes the logits and the loss: the output head and the model that owns it."""
    heads = {names[id(model)]}
    for name, module in model.named_modules():
        get_head = getattr(module, "get_output_embeddings", None)
        head = get_head() if callable(get_head) else None
        if isinstance(head, torch.nn.Module):
            heads.add(names[id(module)])
            heads.update(names[id(m)] for m in head.modules() if id(m) in names)
        if name.rsplit(".", 1)[-1] in ("classifier", "score", "lm_head"):
            heads.update(names[id(m)] for m in module.modules() if id(m) in names)
    return heads


@contextmanager
def _quiet_libraries() -> Iterator[None]:
    """transformers/peft deprecation and info messages are noise in a CLI run."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            from transformers.utils import logging as hf_logging
        except ImportError:
            yield
            return
        level = hf_logging.get_verbosity()
        hf_logging.set_verbosity_error()
        try:
            yield
        finally:
            hf_logging.set_verbosity(level)


@contextmanager
def _status(progress: bool | None) -> Iterator:
    """A spinner on stderr while the simulation runs (only on a terminal unless asked)."""
    show = sys.stderr.isatty() if progress is None else progress
    if not show:
        yield lambda _msg: None
        return
    from rich.console import Console

    with Console(stderr=True).status("traced simulation") as live:
        yield lambda msg: live.update(f"traced simulation: {msg}")


def _limits_notes(w: Workload, built: build.BuiltModel) -> list[str]:
    notes = []
    if w.is_inference and w.kv_cache_dtype not in ("auto", "bf16", "fp16") and built.kind == "causal-lm":
        notes.append(
            f"KV cache simulated in the model dtype: a {w.kv_cache_dtype} cache (serving engines) is not "
            "modelled"
        )
    if w.attention == "flash":
        notes.append(
            "flash attention simulated with SDPA, which dispatches to a flash kernel on the GPU (same memory)"
        )
    notes.append(
        "not visible to a fake-tensor run: cuBLAS/flash-attention workspaces, NCCL buffers, fragmentation "
        "beyond the allocator reserve"
    )
    return notes


def _assemble(w: Workload, sim: Simulation, wall_s: float) -> TracedMemoryEstimate:
    """The traced estimate from a finished simulation: phases, the analytic overhead model on the traced
    transient working set, device totals in bytes, FLOPs and predicted step times."""
    from gpuwise.memory import gpu_capacity_bytes, overheads

    tracker = sim.tracker
    records = [r for name, r in tracker.phases.items() if not name.startswith("_")]
    phases = [
        TracedPhase(
            r.name,
            r.peak_bytes,
            r.start_bytes,
            r.end_bytes,
            tracker.breakdown(r.live_at_peak),
            r.flops,
            r.kernels,
            r.where_at_peak,
        )
        for r in records
    ]
    peak = max(phases, key=lambda p: p.peak_allocated_bytes)
    gpu = get_gpu(w.gpu)
    # The analytic estimator's overhead model, fed with the traced transient working set (logits/loss +
    # temporaries at each phase peak), so the two totals differ only by what was measured.
    transient = max(p.by_category["logits_loss"] + p.by_category["temporaries"] for p in phases)
    reserve = int(overheads.allocator_reserve_bytes(transient, sharded=False))
    context = int(overheads.cuda_context_bytes(gpu) + overheads.nccl_bytes(w.num_gpus))
    reserved = peak.peak_allocated_bytes + reserve
    total = reserved + context + sim.paged_state_bytes
    capacity = int(gpu_capacity_bytes(gpu))
    flops_by_phase = {r.name: r.flops for r in records}
    times = _step_times(w, {r.name: r for r in records}, total)
    here = next((t for t in times if t.gpu == gpu.id), None)
    notes, assumptions = _notes(sim, bool(times)), _assumptions(w, sim)
    return TracedMemoryEstimate(
        workload=w.to_dict(),
        gpu=gpu.id,
        model=sim.built.description,
        mode="training" if w.is_training else "inference",
        phases=phases,
        peak_phase=peak.name,
        peak_allocated_bytes=peak.peak_allocated_bytes,
        breakdown=peak.by_category,
        cuda_context_bytes=context,
        allocator_reserve_bytes=reserve,
        paged_state_bytes=sim.paged_state_bytes,
        peak_reserved_bytes=reserved,
        device_total_bytes=total,
        device_memory_bytes=capacity,
        fits=total <= capacity,
        num_params=sim.num_params,
        trainable_params=sim.trainable_params,
        flops_per_step=int(_per_step(w, flops_by_phase)),
        flops_by_phase=flops_by_phase,
        step_time_s=here.step_time_s if here else None,
        step_times=times,
        top_activation_modules=tracker.top_activation_modules(
            "forward" if "forward" in tracker.phases else "prefill"
        ),
        optimizer=sim.optimizer,
        notes=notes,
        assumptions=assumptions,
        simulation_wall_s=round(wall_s, 3),
    )


def _notes(sim: Simulation, has_step_times: bool) -> list[str]:
    """The simulation's notes, plus where paged optimizer state is counted and whether step times exist."""
    notes = list(sim.notes)
    if sim.paged_state_bytes:
        notes.append(
            "paged optimizer state lives in CUDA unified memory: counted in the device total, not in "
            "allocated/reserved"
        )
    if not has_step_times:
        notes.append("predicted step time unavailable: the performance model (gpuwise.perf) is not installed")
    return notes


def _assumptions(w: Workload, sim: Simulation) -> list[str]:
    """What the traced figures rest on: optimizer, model, library versions and the step measured."""
    assumptions = [f"optimizer: {sim.optimizer}"] if w.is_training else []
    assumptions.append(f"model: {sim.built.description}")
    assumptions.append(f"libraries simulated: {_library_versions()}")
    if w.is_training:
        assumptions.append(
            "steady-state step (optimizer state exists, as from step 2 on)"
            + ("; gradients held across micro-batches" if w.grad_accum > 1 else "")
        )
    elif sim.built.kind == "causal-lm":
        assumptions.append(
            f"generate(): prefill of {w.seq_len} tokens keeping the last logits, then decode to "
            f"{w.seq_len + w.output_len - 1} cached tokens (the last decode step is measured)"
        )
    return assumptions


def _library_versions() -> str:
    from importlib.metadata import PackageNotFoundError, version

    found = []
    for name in ("torch", "transformers", "peft"):
        try:
            found.append(f"{name} {version(name)}")
        except PackageNotFoundError:
            continue
    return ", ".join(found)


def _per_step(w: Workload, per_phase: Mapping[str, float]) -> float:
    """Training: grad_accum micro-batches + one optimizer step; inference: prefill + output_len - 1
    decodes."""
    if w.is_training:
        return w.grad_accum * (per_phase.get("forward", 0) + per_phase.get("backward", 0)) + per_phase.get(
            "optimizer_step", 0
        )
    decode_steps = max(w.output_len - 1, 0) if "decode" in per_phase else 0
    return (
        per_phase.get("prefill", 0) + per_phase.get("forward", 0) + decode_steps * per_phase.get("decode", 0)
    )


def _repeats(w: Workload, phase: str) -> int:
    if phase in ("forward", "backward") and w.is_training:
        return w.grad_accum
    if phase == "decode":
        return max(w.output_len - 1, 0)
    return 1


def _step_times(w: Workload, records: dict[str, PhaseRecord], device_total_bytes: int) -> list[GpuStepTime]:
    """Per-op roofline on every catalog GPU, through the performance model's ``step_time_from_flops``.

    Each distinct matmul/attention op is timed as the slower of its FLOPs and its bytes; ops without
    FLOPs (elementwise, norms, copies) move their bytes at streaming bandwidth; eager PyTorch cannot
    go faster than one launch per op (host floor), so a phase takes the larger of the two.
    """
    from gpuwise.memory import gpu_capacity_bytes
    from gpuwise.perf import efficiency as eff
    from gpuwise.perf.roofline import matmul_efficiency, step_time_from_flops

    kind: Mode = "training" if w.is_training else "inference"
    results = []
    for gpu in list_gpus():
        if gpu.is_tpu:
            continue  # a traced PyTorch model: TPUs run XLA programs (workload/ml_framework.py)
        try:
            attention_eff = matmul_efficiency(gpu, "bf16", kind) * eff.attention_ratio(w.attention)
            per_phase: dict[str, float] = {}
            totals: dict[Bound, float] = {"compute": 0.0, "memory_bandwidth": 0.0, "host": 0.0}
            for name, r in records.items():
                by_bound: dict[Bound, float] = {"compute": 0.0, "memory_bandwidth": 0.0}
                for (op_kind, flops, nbytes), count in r.compute_ops.items():
                    efficiency = attention_eff if op_kind == "attention" else None
                    t = step_time_from_flops(
                        flops, nbytes, gpu, w.precision, kind=kind, efficiency=efficiency
                    )
                    by_bound["compute" if t.bound == "compute" else "memory_bandwidth"] += count * t.time_s
                by_bound["memory_bandwidth"] += step_time_from_flops(
                    0, r.memory_bytes, gpu, w.precision, kind=kind
                ).memory_s
                device = sum(by_bound.values())
                host = r.kernels * eff.constants().host.eager_op_us * 1e-6  # eager PyTorch: one launch per op
                per_phase[name] = max(device, host)
                repeat = _repeats(w, name)
                if host > device:
                    totals["host"] += repeat * host
                else:
                    for key, value in by_bound.items():
                        totals[key] += repeat * value
        except GpuwiseError:
            continue
        step = _per_step(w, per_phase)
        bound = max(totals, key=totals.__getitem__)
        fits = device_total_bytes <= gpu_capacity_bytes(gpu)
        results.append(GpuStepTime(gpu.id, step, {k: round(v, 6) for k, v in per_phase.items()}, bound, fits))
    return sorted(results, key=lambda t: t.step_time_s)
