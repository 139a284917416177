"""Workload options shared by every command that takes a workload (memory, fit, plan, cost, ...).

``@workload_command`` adds a WORKLOAD argument (a YAML file, or a model id) and the
workload flags to a command's signature once, so each command declares only its own
options and receives a validated ``workload: Workload``.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

from gpuwise.errors import GpuwiseError
from gpuwise.workload import Workload, load_workload, workload_from_mapping

__all__ = ["CALIBRATED_COMMANDS", "NOT_ACTING", "build_workload", "is_model_config", "workload_command"]

_PANEL = "Workload (override the file)"


def _opt(*names: str, help: str) -> Any:
    return typer.Option(*names, help=help, rich_help_panel=_PANEL)


# name -> (type, typer option); the name is the Workload field it sets.
_FLAGS: dict[str, tuple[Any, Any]] = {
    "model": (str, _opt("--model", "-m", help="Catalog model id or path to a config.json.")),
    "task": (
        str,
        _opt(
            "--task",
            "-t",
            help="inference, serving, rag, pretrain, full-finetune, lora, qlora, cv-train, cv-inference.",
        ),
    ),
    "gpu": (str, _opt("--gpu", "-g", help="Catalog GPU id (see `gpuwise gpus`).")),
    "num_gpus": (int, _opt("--gpus", "-n", help="Number of GPUs.")),
    "batch_size": (
        int,
        _opt("--batch", "-b", help="Micro-batch per GPU (training) or batch per replica (inference)."),
    ),
    "seq_len": (
        int,
        _opt("--seq", "-s", help="Sequence length (training) or prompt/context length (inference)."),
    ),
    "output_len": (int, _opt("--output-len", help="Generated tokens per request (inference).")),
    "precision": (
        str,
        _opt("--precision", "-p", help="fp32, amp-bf16, amp-fp16, bf16, fp16, fp8, int8, int4, nf4, nf4-dq."),
    ),
    "optimizer": (
        str,
        _opt("--optimizer", help="adamw, adamw-fused, adamw-8bit, paged-adamw-8bit, adafactor, sgd."),
    ),
    "grad_checkpointing": (str, _opt("--checkpointing", help="none, selective, full.")),
    "grad_accum": (int, _opt("--accum", help="Gradient accumulation steps.")),
    "lora_rank": (int, _opt("--lora-rank", help="LoRA rank.")),
    "attention": (str, _opt("--attention", help="sdpa, flash, eager.")),
    "sharding": (str, _opt("--sharding", help="none, ddp, zero1, zero2, zero3, fsdp.")),
    "tp": (int, _opt("--tp", help="Tensor-parallel size.")),
    "pp": (int, _opt("--pp", help="Pipeline-parallel size.")),
    "kv_cache_dtype": (str, _opt("--kv-dtype", help="KV-cache dtype: auto, bf16, fp16, fp8, int8.")),
    "concurrency": (int, _opt("--concurrency", help="Simultaneous requests (serving).")),
    "goal": (str, _opt("--goal", help="cost, latency, throughput, fit.")),
    "framework": (
        str,
        _opt(
            "--framework",
            help="pytorch (default), jax, tensorflow; or the stack: hf-trainer, lightning, deepspeed, vllm.",
        ),
    ),
    "utilization_pct": (float, _opt("--utilization", help="Observed GPU utilization in percent.")),
    # memgaps: offload, compiler/loss switches, expert and context parallelism
    "offload": (
        str,
        _opt("--offload", help="none, optimizer (ZeRO-Offload), params (ZeRO-Infinity / FSDP cpu_offload)."),
    ),
    "torch_compile": (bool, _opt("--compile/--no-compile", help="torch.compile (default: the framework's).")),
    "chunked_loss": (
        bool,
        _opt("--chunked-loss/--no-chunked-loss", help="Chunked cross-entropy (default: the framework's)."),
    ),
    "expert_parallel": (int, _opt("--ep", help="Expert-parallel size (MoE).")),
    "context_parallel": (int, _opt("--cp", help="Context (sequence) parallel size.")),
    # --- serving helper: demand and SLO (the `serving:` section; more keys with --set serving.KEY=V)
    "serving_rate": (float, _opt("--rate", help="Serving demand in requests/s (the whole service).")),
    "serving_slo": (str, _opt("--slo", help="Latency SLO, e.g. ttft_p99=500ms,tpot_p90=50ms.")),
    "serving_engine": (
        str,
        _opt("--engine", help="Serving engine: vllm, sglang, tensorrt-llm, tgi, llama.cpp."),
    ),
    "serving_prefix_hit_rate": (
        float,
        _opt("--prefix-hit-rate", help="Share of prompt tokens found in the prefix cache (0-1)."),
    ),
    "set_values": (
        list[str],
        typer.Option(
            "--set", help="Any workload key: --set lora_dtype=bf16 (repeatable).", rich_help_panel=_PANEL
        ),
    ),
}

# -- vision (helper "vision"): image shape, diffusion sampling, memory format
_FLAGS.update(
    {
        "image_size": (
            int,
            _opt("--image-size", help="Image height in pixels (and width unless --image-width)."),
        ),
        "image_width": (int, _opt("--image-width", help="Image width in pixels, for non-square images.")),
        "denoising_steps": (int, _opt("--denoising-steps", help="Diffusion sampling steps per image.")),
        "channels_last": (bool, _opt("--channels-last", help="NHWC convolutions (torch.channels_last).")),
    }
)


def is_model_config(path: Path) -> bool:
    """A Hugging Face ``config.json`` (it names an architecture or model type), not a workload file."""
    if path.suffix.lower() != ".json" or not path.is_file():
        return False
    import json

    try:
        data = json.loads(path.read_bytes())
    except (OSError, ValueError):  # unreadable or not JSON: the workload loader reports it
        return False
    return isinstance(data, dict) and ("architectures" in data or "model_type" in data)


def _flag_setting(key: str, flags: dict[str, Any]) -> str | None:
    """The flag (e.g. ``--goal``) that already sets the workload key ``key`` of a ``--set``, if given."""
    name = key.lower().replace("-", "_").replace(".", "_")
    entry = _FLAGS.get(name)
    if entry is None or flags.get(name) is None or name == "set_values":
        return None
    option = entry[1]
    return str(
        option.param_decls[0] if option.param_decls else option.default
    )  # typer: first name is "default"


def build_workload(spec: str | None, flags: dict[str, Any]) -> Workload:
    """WORKLOAD file, model config.json or model id, + flags -> validated Workload. Flags win."""
    overrides = {k: v for k, v in flags.items() if k != "set_values" and v is not None}
    for item in flags.get("set_values") or []:
        if "=" not in item:
            raise GpuwiseError(f"--set expects key=value, got {item!r}")
        key, value = item.split("=", 1)
        key = key.strip()
        flag = _flag_setting(key, flags)
        if flag is not None:
            raise GpuwiseError(f"{flag} and --set {key}=… both set {key}: give it once")
        overrides[key] = value.strip()
    if spec is None:
        if "model" not in overrides and "model_factory" not in overrides:
            raise GpuwiseError("give a workload file (e.g. examples/llama-3-8b-lora.yaml) or --model")
        return workload_from_mapping(overrides)
    path = Path(spec)
    if is_model_config(path):
        if "model" in overrides:
            raise GpuwiseError(f"{spec} is a model config.json; give the model either there or with --model")
        return workload_from_mapping({"model": spec, **overrides})
    if path.suffix.lower() in {".yaml", ".yml", ".toml"} or path.is_file():
        base = load_workload(path)
        if not overrides:
            return base
        merged = {**base.to_dict(), **overrides}
        return workload_from_mapping(merged, source=str(path))
    return workload_from_mapping({"model": spec, **overrides})  # a bare model id


# Flags a command does not read, left out of its options (issue #25: help lists only what acts there;
# `--set KEY=V` still takes any key). memory and fit never read the goal or the observed utilization;
# fit shows no serving figures either.
_SERVING_FLAGS = {"serving_rate", "serving_slo", "serving_engine", "serving_prefix_hit_rate"}
NOT_ACTING: dict[str, set[str]] = {
    "memory": {"goal", "utilization_pct"},
    "fit": {"goal", "utilization_pct", *_SERVING_FLAGS},
}

# Commands whose predictions use matmul efficiencies, which `--calibrate RUN` (gpuwise bench) replaces.
CALIBRATED_COMMANDS = ("plan", "cost", "fit")


def workload_command(func: Callable[..., Any]) -> Callable[..., Any]:
    """Give ``func(workload: Workload, ...)`` the WORKLOAD argument and the workload flags."""
    own = [p for p in inspect.signature(func).parameters.values() if p.name != "workload"]
    spec_param = inspect.Parameter(
        "spec",
        inspect.Parameter.POSITIONAL_OR_KEYWORD,
        default=None,
        annotation=Annotated[
            str | None,
            typer.Argument(
                metavar="WORKLOAD", help="Workload YAML file, a model's config.json, or a catalog model id."
            ),
        ],
    )
    flag_params = [
        inspect.Parameter(
            name, inspect.Parameter.KEYWORD_ONLY, default=None, annotation=Annotated[kind | None, option]
        )
        for name, (kind, option) in _FLAGS.items()
        if name not in NOT_ACTING.get(func.__name__, ())
    ]

    @functools.wraps(func)
    def wrapper(**kwargs: Any) -> Any:
        calibrate = kwargs.pop("calibrate", None)
        if calibrate is not None:  # bench: measured efficiencies replace the table's (issue #16)
            from gpuwise.bench.calibration import apply_calibration

            typer.echo(f"gpuwise: {apply_calibration(calibrate)}", err=True)
        spec = kwargs.pop("spec", None)
        flags = {name: kwargs.pop(name, None) for name in _FLAGS}
        return func(workload=build_workload(spec, flags), **kwargs)

    positional = [p for p in own if p.kind is not inspect.Parameter.KEYWORD_ONLY]
    keyword = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in own if p not in positional]
    calibrate = inspect.Parameter(
        "calibrate",
        inspect.Parameter.KEYWORD_ONLY,
        default=None,
        annotation=Annotated[
            str | None,
            typer.Option(
                "--calibrate",
                metavar="RUN",
                help="Use the matmul efficiency measured by `gpuwise bench` run RUN.",
            ),
        ],
    )
    if func.__name__ in CALIBRATED_COMMANDS:
        flag_params.append(calibrate)
    wrapper.__signature__ = inspect.Signature([spec_param, *positional, *keyword, *flag_params])  # type: ignore[attr-defined]
    return wrapper
