"""Workload: what the user runs, on what, and what they want from it.

Loaded from YAML (``load_workload``) or built from CLI flags (``workload_from_mapping``).
Validation happens here, once, with one clear line per problem.
"""

from __future__ import annotations

import difflib
import math
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, get_args

from gpuwise.errors import GpuwiseError
from gpuwise.workload.limits import FIELD_LIMITS, first_problem
from gpuwise.workload.serving import ServingSpec, fold_flat_keys, mean_lengths, parse_serving

if TYPE_CHECKING:
    from gpuwise.catalog.models import ModelArch

__all__ = [
    "ADAPTER_DTYPES",
    "ATTENTION",
    "CHECKPOINTING",
    "GOALS",
    "INFERENCE_TASKS",
    "KV_DTYPES",
    "OFFLOADS",
    "OFFLOAD_DEVICES",
    "OPTIMIZERS",
    "OVER_LENGTHS",
    "PRECISIONS",
    "QUANTIZED",
    "REQUIREMENTS",
    "SHARDING",
    "TASKS",
    "TRAINING_TASKS",
    "AdapterDtype",
    "Attention",
    "Checkpointing",
    "Goal",
    "KvCacheDtype",
    "Offload",
    "OffloadDevice",
    "Optimizer",
    "OverLength",
    "Precision",
    "Requirement",
    "Sharding",
    "Task",
    "Workload",
    "load_workload",
    "validate",
    "workload_from_mapping",
]


# Closed value sets: the Literal is the type mypy checks, the tuple is what validation and help list.
Task = Literal[
    "inference", "serving", "rag", "pretrain", "full-finetune", "lora", "qlora", "cv-train", "cv-inference"
]
Precision = Literal["fp32", "amp-bf16", "amp-fp16", "bf16", "fp16", "fp8", "int8", "int4", "nf4", "fp4"]
Optimizer = Literal["adamw", "adamw-fused", "adamw-8bit", "paged-adamw-8bit", "adafactor", "sgd", "none"]
Checkpointing = Literal["none", "selective", "full"]
Attention = Literal["sdpa", "flash", "eager"]
Sharding = Literal["none", "ddp", "zero1", "zero2", "zero3", "fsdp"]
KvCacheDtype = Literal["auto", "fp32", "bf16", "fp16", "fp8", "int8"]
AdapterDtype = Literal["fp32", "bf16", "fp16"]
Goal = Literal["cost", "latency", "throughput", "fit"]
Requirement = Literal["ecc", "nvlink", "mig", "datacenter"]
# What lives off the GPU: "optimizer" = ZeRO-Offload (optimizer state, fp32 master and gradient partitions on
# the host); "params" = ZeRO-Infinity / FSDP cpu_offload (parameters and gradients too).
Offload = Literal["none", "optimizer", "params"]
OffloadDevice = Literal["cpu", "nvme"]
OverLength = Literal["truncate", "drop"]  # what happens to samples over seq_len in a variable-length run

TASKS: tuple[Task, ...] = get_args(Task)
TRAINING_TASKS: frozenset[Task] = frozenset({"pretrain", "full-finetune", "lora", "qlora", "cv-train"})
INFERENCE_TASKS: frozenset[Task] = frozenset({"inference", "serving", "rag", "cv-inference"})
PRECISIONS: tuple[Precision, ...] = get_args(Precision)
QUANTIZED: frozenset[Precision] = frozenset({"int8", "int4", "nf4"})
OPTIMIZERS: tuple[Optimizer, ...] = get_args(Optimizer)
CHECKPOINTING: tuple[Checkpointing, ...] = get_args(Checkpointing)
ATTENTION: tuple[Attention, ...] = get_args(Attention)
SHARDING: tuple[Sharding, ...] = get_args(Sharding)
KV_DTYPES: tuple[KvCacheDtype, ...] = get_args(KvCacheDtype)
ADAPTER_DTYPES: tuple[AdapterDtype, ...] = get_args(AdapterDtype)
GOALS: tuple[Goal, ...] = get_args(Goal)
REQUIREMENTS: tuple[Requirement, ...] = get_args(Requirement)
OFFLOADS: tuple[Offload, ...] = get_args(Offload)
OFFLOAD_DEVICES: tuple[OffloadDevice, ...] = get_args(OffloadDevice)
OVER_LENGTHS: tuple[OverLength, ...] = get_args(OverLength)

# Accepted spellings -> canonical value.
_ALIASES = {
    "task": {
        "finetune": "full-finetune",
        "full": "full-finetune",
        "fine-tune": "full-finetune",
        "train": "pretrain",
        "training": "pretrain",
        "serve": "serving",
        "cv": "cv-train",
    },
    "precision": {
        "nf4-dq": "nf4",
        "int4-dq": "int4",
        "amp": "amp-bf16",
        "float32": "fp32",
        "bfloat16": "bf16",
        "float16": "fp16",
        "mixed-bf16": "amp-bf16",
        "mixed-fp16": "amp-fp16",
        "bf16-mixed": "amp-bf16",
        "16-mixed": "amp-fp16",
        "bf16-true": "bf16",
        "nvfp4": "fp4",
        "mxfp4": "fp4",
        "bnb-fp4": "int4",
        "4bit": "nf4",
        "8bit": "int8",
    },
    "optimizer": {
        "adam": "adamw",
        "adamw_torch": "adamw",
        "adamw_torch_fused": "adamw-fused",
        "adamw8bit": "adamw-8bit",
        "adamw_8bit": "adamw-8bit",
        "adamw_bnb_8bit": "adamw-8bit",
        "paged_adamw_8bit": "paged-adamw-8bit",
    },
    "grad_checkpointing": {
        "no": "none",
        "false": "none",
        "off": "none",
        "yes": "full",
        "true": "full",
        "on": "full",
    },
    "attention": {"flash-attention": "flash", "flash_attention_2": "flash", "fa2": "flash"},
    "sharding": {"zero-1": "zero1", "zero-2": "zero2", "zero-3": "zero3", "fsdp-full": "fsdp", "no": "none"},
}


@dataclass(frozen=True)
class Workload:
    """A training, fine-tuning or serving job. Sizes are per GPU unless named ``global``."""

    model: str = ""  # catalog id or config.json path; may be empty when model_factory builds the model
    model_factory: str = (
        ""  # pkg.module:function (or file.py:function) building the model; `memory --traced` only
    )
    task: Task = "inference"
    batch_size: int = 1  # micro-batch per GPU (training) or requests in flight per replica (inference)
    seq_len: int = 2048  # training sequence length; prompt/context length for inference
    output_len: int = 256  # generated tokens per request (inference)
    image_size: int = 224  # cv tasks
    precision: Precision = "bf16"
    double_quant: bool = False  # nf4/int4 double quantization of the quantization constants
    optimizer: Optimizer = "adamw"
    grad_checkpointing: Checkpointing = "none"
    grad_accum: int = 1
    lora_rank: int = 16
    lora_alpha: int = 32
    lora_targets: tuple[str, ...] = ("all-linear",)
    lora_dtype: AdapterDtype = "fp32"  # peft keeps adapters in fp32 by default
    attention: Attention = "sdpa"
    gpu: str = "h100-sxm"
    num_gpus: int = 1
    sharding: Sharding = "none"
    tp: int = 1
    pp: int = 1
    kv_cache_dtype: KvCacheDtype = "auto"
    concurrency: int = 1  # simultaneous requests (serving)
    goal: Goal = "throughput"
    utilization_pct: float | None = None  # observed GPU busy share, if known (not the hours paid)
    # hours a month the GPUs are held (rented, reserved, powered): None = every hour of the month;
    # "run" = rented only while the run lasts (training with train_tokens)
    held_hours_per_month: float | Literal["run"] | None = None
    framework: str = ""  # e.g. hf-trainer, lightning, deepspeed, vllm (informs tool advice)
    library_versions: tuple[
        str, ...
    ] = ()  # e.g. transformers==4.44, bitsandbytes==0.42 (default: current releases)
    train_tokens: float | None = None  # dataset size in tokens (training cost)
    epochs: float = 1.0
    requirements: tuple[str, ...] = ()  # ecc, nvlink, mig, datacenter
    usd_per_gpu_hour: float | None = None  # overrides the catalog price
    name: str = ""
    source: str = field(default="", compare=False)  # file it came from
    # --- costs: buy vs rent vs API (gpuwise.perf.tco); None = catalog / cost.toml default ---
    monthly_budget_usd: float | None = None
    purchase_usd_per_gpu: float | None = None  # overrides the catalog's purchase price
    amortization_months: float | None = None
    ops_usd_per_month: float | None = None  # colocation / ops for all the GPUs
    pue: float | None = None  # facility power / IT power of the room owned GPUs sit in
    usd_per_kwh: float | None = None
    # ---- memgaps: offload, compiler/loss features, expert and context parallelism ----
    offload: Offload = "none"
    offload_device: OffloadDevice = "cpu"  # where offloaded tensors live (ZeRO-Infinity can use NVMe)
    torch_compile: bool | None = None  # None: the framework's default (frameworks.py)
    chunked_loss: bool | None = None  # chunked cross-entropy; None: the framework's default
    expert_parallel: int = 1  # MoE experts split over this many GPUs (inside the data-parallel group)
    context_parallel: int = 1  # sequence split over this many GPUs (ring attention / Ulysses)
    # -- vision (helper "vision"): non-square images, diffusion sampling, NHWC convolutions
    image_width: int = 0  # pixels; 0: square (image_size × image_size)
    denoising_steps: int = 0  # diffusion inference steps per image; 0: the model's default
    channels_last: bool = False  # NHWC memory format (torch.channels_last) for convolutions
    # -- variable-length runs (memory/allocator.py): batches neither packed nor padded to seq_len, each step
    # at its own longest sample; the caching allocator keeps the segments of every earlier record length
    sample_tokens_mean: float | None = None  # dataset tokens per sample; None: every step at seq_len
    sample_tokens_std: float = 0.0  # their standard deviation
    run_samples: float | None = None  # samples the run trains on; None: train_tokens / mean x epochs
    over_length: OverLength = "truncate"  # samples over seq_len: cut to it, or dropped (swift's 'delete')
    # -- DeepSpeed ZeRO-1/2 gradient buckets (memory/estimate.py): the optimizer allocates reduce_bucket_size
    # elements of the 16-bit dtype at each backward (two with overlap_comm), whatever the model size
    reduce_bucket_elements: float = 5e8  # zero_optimization.reduce_bucket_size (DeepSpeed default 5e8)
    overlap_comm: bool | None = (
        None  # zero_optimization.overlap_comm; None: DeepSpeed's default (stage 3 only)
    )
    # --- serving helper: demand, SLO and engine (workload/serving.py); None outside serving plans
    serving: ServingSpec | None = None

    @property
    def is_training(self) -> bool:
        """A training task (pretrain, full fine-tune, LoRA, QLoRA, cv-train): there is a backward and an
        optimizer step."""
        return self.task in TRAINING_TASKS

    @property
    def is_inference(self) -> bool:
        """An inference task (inference, serving, RAG, cv-inference)."""
        return self.task in INFERENCE_TASKS

    @property
    def is_lora(self) -> bool:
        """LoRA or QLoRA: frozen base weights with trainable adapters."""
        return self.task in {"lora", "qlora"}

    @property
    def is_cv(self) -> bool:
        """Images in, images/s out: cv tasks, and any task on a vision or diffusion catalog model."""
        from gpuwise.catalog.models import is_vision_model

        return self.task.startswith("cv-") or is_vision_model(self.model)

    @property
    def data_parallel(self) -> int:
        """Data-parallel replicas: GPUs / (tp × pp × context parallel)."""
        return self.num_gpus // (self.tp * self.pp * self.context_parallel)

    @property
    def global_batch(self) -> int:
        """Samples per optimizer step over all replicas: batch × grad_accum × data parallel."""
        return self.batch_size * self.grad_accum * self.data_parallel

    def with_changes(self, **changes: Any) -> Workload:
        """A validated copy with ``changes`` applied.

        Copies the field values instead of calling ``dataclasses.replace``, which re-runs the frozen
        ``__init__`` over every field: the planner derives hundreds of workloads per plan, and this is
        several times faster. Every field is already set on ``self``, so the copy is complete.
        """
        unknown = changes.keys() - self.__dataclass_fields__.keys()
        if unknown:
            raise TypeError(f"Workload has no field {sorted(unknown)[0]!r}")
        copy = object.__new__(type(self))
        copy.__dict__.update(self.__dict__, **changes)
        return validate(copy)

    def to_dict(self) -> dict[str, Any]:
        """The workload as a plain mapping (the ``workload`` object of every JSON document)."""
        # Fields are scalars or tuples of str, so a shallow copy equals asdict's deep copy at a
        # fraction of its cost (the planner converts a workload per prediction it reports).
        data = {name: getattr(self, name) for name in _FIELDS}
        data["lora_targets"] = list(self.lora_targets)
        data["library_versions"] = list(self.library_versions)
        data["requirements"] = list(self.requirements)
        data["serving"] = self.serving.to_dict() if self.serving else None
        return data


_FIELDS = {f.name: f for f in fields(Workload) if f.name != "source"}
_KEY_ALIASES = {
    "batch": "batch_size",
    "micro_batch_size": "batch_size",
    "seq": "seq_len",
    "context": "seq_len",
    "context_len": "seq_len",
    "sequence_length": "seq_len",
    "gpus": "num_gpus",
    "gpu_count": "num_gpus",
    "checkpointing": "grad_checkpointing",
    "gradient_checkpointing": "grad_checkpointing",
    "gradient_accumulation": "grad_accum",
    "gradient_accumulation_steps": "grad_accum",
    "kv_dtype": "kv_cache_dtype",
    "utilization": "utilization_pct",
    "max_new_tokens": "output_len",
    "tensor_parallel": "tp",
    "pipeline_parallel": "pp",
}
_CHOICES = {
    "task": TASKS,
    "precision": PRECISIONS,
    "optimizer": OPTIMIZERS,
    "grad_checkpointing": CHECKPOINTING,
    "attention": ATTENTION,
    "sharding": SHARDING,
    "kv_cache_dtype": KV_DTYPES,
    "lora_dtype": ADAPTER_DTYPES,
    "goal": GOALS,
    "offload": OFFLOADS,
    "offload_device": OFFLOAD_DEVICES,
    "over_length": OVER_LENGTHS,
}


def _held_hours(value: Any, where: str) -> float | str:
    """``held_hours_per_month``: a number of hours, or ``run`` (rented only while the run lasts)."""
    if isinstance(value, str) and value.strip().lower() == "run":
        return "run"
    try:
        if isinstance(value, bool):
            raise ValueError
        return float(value)
    except (TypeError, ValueError):
        raise GpuwiseError(
            f"{where}held_hours_per_month must be a number of hours (0-730] or run, got {value!r}"
        ) from None


def _coerce(name: str, value: Any, where: str) -> Any:
    kind = _FIELDS[name].type
    try:
        if isinstance(value, bool) and kind in ("int", "float", "float | None"):
            raise ValueError  # YAML `true` is a bool, and bool is an int subclass: not a count
        if kind in ("int",):
            if isinstance(value, float) and not value.is_integer():
                raise ValueError
            return int(value)
        if kind in ("float", "float | None"):
            return None if value is None else float(value)
        if kind == "bool | None" and (value is None or str(value).strip().lower() in {"", "default", "none"}):
            return None
        if kind in ("bool", "bool | None"):
            if isinstance(value, str):
                return value.strip().lower() in {"1", "true", "yes", "on"}
            return bool(value)
        if kind == "tuple[str, ...]":
            items = value.split(",") if isinstance(value, str) else list(value)
            return tuple(str(v).strip().lower() for v in items if str(v).strip())
        return str(value).strip()
    except (TypeError, ValueError):
        raise GpuwiseError(f"{where}{name} must be {kind.replace(' | None', '')}, got {value!r}") from None


def workload_from_mapping(data: dict[str, Any], source: str = "") -> Workload:
    """Build and validate a Workload from YAML content or CLI flags (None values are ignored)."""
    where = f"{source}: " if source else ""
    values: dict[str, Any] = {}
    for raw_key, value in fold_flat_keys(data).items():
        if value is not None:
            _read_key(raw_key, value, values, where, source)
    if values.get("serving") is not None:  # serving helper: one prompt/output mean for every command
        values.update(mean_lengths(values["serving"], values, where))
    if not values.get("model") and not values.get("model_factory"):
        raise GpuwiseError(
            f"{where}the workload needs a model (e.g. model: llama-3-8b, or a path to a config.json; "
            "with `memory --traced`, model_factory: pkg.module:function)"
        )
    _task_defaults(values)
    return validate(Workload(**values, source=source), where)


def _read_key(raw_key: Any, value: Any, values: dict[str, Any], where: str, source: str) -> None:
    """Parse one ``key: value`` of a workload into ``values`` (aliases, the ``serving:`` section,
    coercion, lower-cased choices); an unknown key is one error with the closest known key."""
    key = str(raw_key).strip().lower().replace("-", "_")
    key = _KEY_ALIASES.get(key, key)
    if key == "serving":
        values[key] = parse_serving(value, where, Path(source).parent if source else None)
        return
    if key not in _FIELDS:
        close = difflib.get_close_matches(key, list(_FIELDS) + list(_KEY_ALIASES), n=1)
        hint = f": did you mean {close[0]!r}?" if close else f" (known keys: {', '.join(_FIELDS)})"
        raise GpuwiseError(f"{where}unknown workload key {raw_key!r}{hint}")
    value = _held_hours(value, where) if key == "held_hours_per_month" else _coerce(key, value, where)
    if key in _CHOICES and isinstance(value, str):
        value = value.lower()
        if key == "precision" and value.endswith("-dq"):
            values["double_quant"] = True
        value = _ALIASES.get(key, {}).get(value, value)
    values[key] = value


def _task_defaults(values: dict[str, Any]) -> None:
    """Defaults that follow from the task and model: LoRA trains with AdamW, QLoRA in nf4, inference
    has no optimizer, and a vision model's images default to its native resolution (pixels)."""
    if values.get("task") in ("lora", "qlora") and "optimizer" not in values:
        values.setdefault("optimizer", "adamw")
    if values.get("task") == "qlora":
        values.setdefault("precision", "nf4")
    if values.get("task", "inference") in INFERENCE_TASKS:  # inference is the default task
        values.setdefault("optimizer", "none")
    if "image_size" not in values and values.get("model"):
        from gpuwise.catalog.models import native_image_size

        native = native_image_size(str(values["model"]))
        if native:
            values["image_size"] = native  # e.g. SDXL's 1024, not the classifier default 224


def load_workload(path: str | Path) -> Workload:
    """Load a workload YAML (or TOML) file; syntax errors name the file and line."""
    from gpuwise.catalog.user_files import load_structured

    path = Path(path)
    if not path.is_file():
        raise GpuwiseError(f"workload file {path} does not exist")
    data = load_structured(path)
    if not isinstance(data, dict):
        raise GpuwiseError(
            f"{path}: a workload file must be a mapping of keys to values (model: ..., task: ...)"
        )
    if isinstance(data.get("workload"), dict):
        data = data["workload"]
    return workload_from_mapping(data, source=str(path))


def validate(w: Workload, where: str = "") -> Workload:
    """Reject impossible or contradictory settings, one clear line each (the first problem found)."""
    problem = (
        _unknown_choice(w)
        or _bad_count(w)
        or _unknown_requirement(w)
        or _bad_number(w)
        or _contradiction(w)
        or first_problem(w, FIELD_LIMITS)  # the rest: finite, in range, with its unit (workload/limits.py)
        or _model_mismatch(w)
    )
    if problem:
        raise GpuwiseError(where + problem)
    from gpuwise.catalog import get_gpu
    from gpuwise.workload.ml_framework import placement_issue

    issue = placement_issue(w.framework, get_gpu(w.gpu))  # unknown GPU -> did you mean
    if issue:  # a PyTorch workload on a TPU, JAX on a Gaudi: one line, what to pass instead
        raise GpuwiseError(where + issue)
    return w


_COUNTS = (
    "batch_size",
    "seq_len",
    "grad_accum",
    "num_gpus",
    "tp",
    "pp",
    "concurrency",
    "output_len",
    "image_size",
    "expert_parallel",
    "context_parallel",
)


def _unknown_choice(w: Workload) -> str | None:
    for name, choices in _CHOICES.items():
        value = getattr(w, name)
        if value not in choices:
            close = difflib.get_close_matches(value, choices, n=1)
            hint = f"did you mean {close[0]!r}?" if close else "choose one of " + ", ".join(choices)
            return f"unknown {name} {value!r}: {hint}"
    return None


def _bad_count(w: Workload) -> str | None:
    for name in _COUNTS:
        if getattr(w, name) < 1:
            return f"{name} must be at least 1, got {getattr(w, name)}"
    return None


def _unknown_requirement(w: Workload) -> str | None:
    for req in w.requirements:
        if req not in REQUIREMENTS:
            return f"unknown requirement {req!r}: choose from {', '.join(REQUIREMENTS)}"
    return None


def _bad_number(w: Workload) -> str | None:
    if w.utilization_pct is not None and not 0 <= w.utilization_pct <= 100:
        return f"utilization_pct must be between 0 and 100, got {w.utilization_pct}"
    if w.epochs <= 0:
        return f"epochs must be positive, got {w.epochs}"
    held = w.held_hours_per_month
    if held is not None and held != "run" and not (0 < held <= 730 and math.isfinite(held)):
        return (
            f"held_hours_per_month must be above 0 and at most 730 (the hours of a month), or run, got {held}"
        )
    if w.image_width < 0 or w.denoising_steps < 0:
        return "image_width and denoising_steps must be 0 (the default) or positive"
    if w.num_gpus % (w.tp * w.pp):
        return f"num_gpus ({w.num_gpus}) must be a multiple of tp × pp ({w.tp} × {w.pp})"
    return _bad_split(w)


def _bad_split(w: Workload) -> str | None:
    """Context/expert parallel degrees and offload that the GPU count or sharding cannot take."""
    cp, ep = w.context_parallel, w.expert_parallel
    if w.num_gpus % (w.tp * w.pp * cp):
        return (
            f"num_gpus ({w.num_gpus}) must be a multiple of tp × pp × context_parallel "
            f"({w.tp} × {w.pp} × {cp})"
        )
    if w.data_parallel * cp % ep:
        return (
            f"expert_parallel ({ep}) must divide the data-parallel × context-parallel GPUs "
            f"({w.data_parallel} × {cp}): expert ranks are carved out of them"
        )
    if w.offload != "none" and not w.is_training:
        return (
            "offload applies to training (optimizer/parameter offload); for inference use a smaller precision"
        )
    if w.offload == "params" and w.sharding not in ("fsdp", "zero3"):
        return "offload: params needs sharding fsdp (cpu_offload) or zero3 (ZeRO-Infinity)"
    if w.offload == "optimizer" and w.sharding not in ("zero1", "zero2", "zero3", "fsdp"):
        return "offload: optimizer is ZeRO-Offload: it needs sharding zero1, zero2, zero3 (or fsdp)"
    return None


def _contradiction(w: Workload) -> str | None:
    """Settings that each make sense alone but not together."""
    if w.precision in QUANTIZED and w.task in {"pretrain", "full-finetune"}:
        return (
            f"{w.precision} weights cannot be fully fine-tuned: "
            f"use task qlora (LoRA on {w.precision} weights) or precision bf16"
        )
    if w.task == "qlora" and w.precision not in QUANTIZED:
        return (
            f"qlora means LoRA on quantized weights: precision must be nf4, int4 or int8, got {w.precision}"
        )
    if w.double_quant and w.precision not in {"nf4", "int4"}:
        return "double quantization applies to nf4/int4 weights only"
    if w.is_training and w.optimizer == "none":
        return (
            f"task {w.task} trains, so it needs an optimizer "
            "(adamw, adamw-fused, adamw-8bit, paged-adamw-8bit, adafactor, sgd)"
        )
    if w.is_inference and w.sharding != "none":
        return f"sharding {w.sharding} is a training setting; for inference split the model with tp/pp"
    if w.is_inference and w.grad_checkpointing != "none":
        return "gradient checkpointing is a training setting; remove it for inference"
    return None


def _model_mismatch(w: Workload) -> str | None:
    """Parallelism and LoRA settings the model's shape cannot take."""
    from gpuwise.catalog import get_model

    arch = get_model(w.model) if w.model else None  # None: model_factory builds it (traced simulation only)
    if arch is not None:
        problem = _transformer_mismatch(w, arch) if arch.is_transformer else _layer_list_mismatch(w, arch)
        if problem:
            return problem
    if w.is_lora and w.lora_rank < 1:
        return f"lora_rank must be at least 1, got {w.lora_rank}"
    return None


def _transformer_mismatch(w: Workload, arch: ModelArch) -> str | None:
    """Tensor/pipeline/expert parallelism the heads, layers and experts do not divide; a LoRA rank
    as wide as the model."""
    if w.tp > 1 and arch.num_attention_heads % w.tp:
        return f"tp={w.tp} does not divide {arch.id}'s {arch.num_attention_heads} attention heads"
    if w.tp > 1 and arch.num_kv_heads % w.tp and w.tp % arch.num_kv_heads:
        return f"tp={w.tp} does not divide {arch.id}'s {arch.num_kv_heads} KV heads (nor is a multiple of it)"
    if w.pp > arch.num_layers:
        return f"pp={w.pp} is more pipeline stages than {arch.id}'s {arch.num_layers} layers"
    if w.expert_parallel > 1 and (not arch.is_moe or arch.num_experts % w.expert_parallel):
        return (
            f"expert_parallel={w.expert_parallel} needs an MoE model whose expert count it divides "
            f"({arch.id})"
        )
    if w.is_lora and w.lora_rank >= arch.hidden_size:
        return f"lora_rank {w.lora_rank} must be smaller than {arch.id}'s hidden size {arch.hidden_size}"
    return None


def _layer_list_mismatch(w: Workload, arch: ModelArch) -> str | None:
    """Tasks a conv net or diffusion model cannot run: LoRA without attention, text generation."""
    if w.is_lora and arch.spec.kind == "cnn":
        return f"{arch.id} has no attention projections for LoRA adapters: train it with task cv-train"
    if w.task in {"inference", "serving", "rag"}:
        return f"{arch.id} is not a transformer language model: use task cv-train or cv-inference"
    return None
