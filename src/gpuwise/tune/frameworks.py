"""The winning settings in the script's own terms: ``TrainingArguments(...)`` for a Hugging Face
``Trainer``, ``Trainer(...)`` + ``DataLoader(...)`` for Lightning, plain PyTorch calls otherwise.

The framework is the one the profiler saw on the training thread's stack (``recorder.py``). The
argument names are the frameworks' documented ones (transformers ``TrainingArguments``:
``dataloader_num_workers``, ``dataloader_persistent_workers``, ``dataloader_prefetch_factor``,
``dataloader_pin_memory``, ``tf32``, ``bf16``/``fp16``, ``per_device_train_batch_size``,
``gradient_accumulation_steps``; Lightning ``Trainer``: ``precision="bf16-mixed"``,
``accumulate_grad_batches``, ``benchmark``).
"""

from __future__ import annotations

from typing import Any

from gpuwise.tune.knobs import Knobs

LOADER_ARGS = ("num_workers", "persistent_workers", "prefetch_factor", "pin_memory")


def _args(pairs: list[tuple[str, Any]]) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in pairs)


def _loader(knobs: Knobs) -> list[tuple[str, Any]]:
    return [(k, knobs[k]) for k in LOADER_ARGS if k in knobs]


def render(
    framework: str | None,
    knobs: Knobs,
    batch: int | None,
    accum: int | None,
    *,
    batch_flag: str | None = None,
    uses_loader: bool = True,
) -> str:
    """The code snippet that applies ``knobs``, ``batch`` and ``accum`` (None: unchanged) in the script's
    framework.

    ``framework`` is ``"hf-trainer"``, ``"lightning"`` or anything else (plain PyTorch calls). A plain
    script's batch is set where the script sets it: ``batch_flag`` (its own flag, e.g. nanoGPT's
    ``--batch_size=24`` config variable) rather than a ``DataLoader`` it may not have (``uses_loader``).
    """
    if framework == "hf-trainer":
        return _hf(knobs, batch, accum)
    if framework == "lightning":
        return _lightning(knobs, batch, accum)
    if batch is not None and (batch_flag or not uses_loader):
        name = (batch_flag or "batch_size").lstrip("-").replace("-", "_")
        line = (
            f"{name} = {batch}  # the script's own {batch_flag or 'batch setting'} (flag or config variable)"
        )
        rest = _plain(knobs, None, accum)
        return "\n".join([line, *([rest] if rest else [])])
    return _plain(knobs, batch, accum)


def _hf(knobs: Knobs, batch: int | None, accum: int | None) -> str:
    pairs = [(f"dataloader_{k}", v) for k, v in _loader(knobs)]
    if knobs.get("tf32"):
        pairs.append(("tf32", True))
    if knobs.get("autocast"):
        pairs.append(("bf16" if knobs["autocast"] == "bf16" else "fp16", True))
    if batch is not None:
        pairs.append(("per_device_train_batch_size", batch))
    if accum is not None:
        pairs.append(("gradient_accumulation_steps", accum))
    lines = [f"TrainingArguments(..., {_args(pairs)})"] if pairs else []
    return "\n".join(lines + _extras(knobs, skip=("tf32",)))


def _lightning(knobs: Knobs, batch: int | None, accum: int | None) -> str:
    pairs: list[tuple[str, Any]] = []
    if knobs.get("autocast"):
        pairs.append(("precision", "bf16-mixed" if knobs["autocast"] == "bf16" else "16-mixed"))
    if accum is not None:
        pairs.append(("accumulate_grad_batches", accum))
    if knobs.get("cudnn_benchmark"):
        pairs.append(("benchmark", True))
    lines = [f"Trainer(..., {_args(pairs)})"] if pairs else []
    loader = _loader(knobs) + ([("batch_size", batch)] if batch is not None else [])
    if loader:
        lines.append(f"DataLoader(..., {_args(loader)})")
    return "\n".join(lines + _extras(knobs, skip=("cudnn_benchmark",)))


def _plain(knobs: Knobs, batch: int | None, accum: int | None) -> str:
    loader = _loader(knobs) + ([("batch_size", batch)] if batch is not None else [])
    lines = [f"DataLoader(..., {_args(loader)})"] if loader else []
    return "\n".join(lines + _plain_rest(knobs, accum))


def _plain_rest(knobs: Knobs, accum: int | None) -> list[str]:
    """Accumulation, autocast and the torch calls of a plain script's snippet."""
    lines = []
    if accum == 1:
        lines.append("# no gradient accumulation: one optimizer step per micro-batch")
    elif accum is not None:
        lines.append(f"# accumulate gradients over {accum} micro-batches per optimizer step")
    if knobs.get("autocast"):
        dtype = "bfloat16" if knobs["autocast"] == "bf16" else "float16"
        lines.append(f"with torch.autocast(device_type, dtype=torch.{dtype}):  # around the forward")
    return lines + _extras(knobs, skip=())


def _extras(knobs: Knobs, skip: tuple[str, ...]) -> list[str]:
    """Settings no framework argument covers: the torch call that sets them."""
    lines = []
    if "threads" in knobs:
        lines.append(f"torch.set_num_threads({knobs['threads']})")
    if knobs.get("tf32") and "tf32" not in skip:
        lines.append("torch.backends.cuda.matmul.allow_tf32 = True; torch.backends.cudnn.allow_tf32 = True")
    if knobs.get("cudnn_benchmark") and "cudnn_benchmark" not in skip:
        lines.append("torch.backends.cudnn.benchmark = True")
    if knobs.get("channels_last"):
        lines.append(
            "model = model.to(memory_format=torch.channels_last)  # and inputs: x.to(memory_format=...)"
        )
    return lines


__all__ = ["render"]
