"""The settings ``gpuwise tune`` can change without editing the script (applied by ``boot.py``).

Two kinds: ``safe`` knobs change how the work is scheduled (loader processes, threads, backend
algorithm choice), never what the model computes beyond fp32 rounding; ``numerics`` knobs change the
arithmetic (16-bit autocast, memory layout → other kernels) and are accepted only when the trial's
first losses stay within the stated tolerance of the baseline's (``verify.py``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from gpuwise.errors import GpuwiseError, did_you_mean

KnobKind = Literal["safe", "numerics"]
Autocast = Literal["bf16", "fp16"]
AUTOCAST_DTYPES: tuple[Autocast, ...] = ("bf16", "fp16")


@dataclass(frozen=True)
class Knob:
    """One setting the boot hook can apply: its value type, whether it changes numerics, and whether it only
    matters on a GPU (those are never proposed on a CPU-only run).
    """

    name: str
    kind: KnobKind
    type: type
    what: str
    gpu_only: bool = False


KNOBS: dict[str, Knob] = {
    k.name: k
    for k in (
        Knob("num_workers", "safe", int, "DataLoader worker processes"),
        Knob("persistent_workers", "safe", bool, "DataLoader keeps its workers between epochs"),
        Knob("prefetch_factor", "safe", int, "batches each worker keeps ready"),
        Knob("pin_memory", "safe", bool, "page-locked batches (fast, asynchronous copies)", gpu_only=True),
        Knob("threads", "safe", int, "torch intra-op threads (torch.set_num_threads)"),
        Knob("tf32", "safe", bool, "TF32 tensor cores for fp32 matmuls and convolutions", gpu_only=True),
        Knob("cudnn_benchmark", "safe", bool, "cuDNN picks the fastest convolution algorithm", gpu_only=True),
        Knob("autocast", "numerics", str, "16-bit autocast around the model's forward (bf16 | fp16)"),
        Knob("channels_last", "numerics", bool, "channels_last layout of the model and 4-D inputs"),
        Knob(
            "compile", "numerics", str, "torch.compile of the model's forward (backend: inductor, eager, …)"
        ),
    )
}

Knobs = dict[str, Any]  # knob name -> value; empty = the script as written


def parse_value(name: str, text: str) -> Any:
    """Parse the text of ``--knob NAME=TEXT`` into the knob's typed value.

    Booleans accept true/false, 1/0, yes/no, on/off; integers must be whole numbers ≥ 0; ``autocast`` must
    be bf16 or fp16; ``compile`` takes a backend name (``true`` = ``"inductor"``). Raises ``GpuwiseError``
    (with the closest known name for a typo) otherwise.
    """
    knob = KNOBS.get(name)
    if knob is None:
        raise did_you_mean("knob", name, KNOBS, f"known: {', '.join(KNOBS)}")
    text = text.strip()
    if knob.type is bool:
        lowered = text.lower()
        if lowered in {"true", "1", "yes", "on"}:
            return True
        if lowered in {"false", "0", "no", "off"}:
            return False
        raise GpuwiseError(f"--knob {name}: {text!r} is not true or false")
    if knob.type is int:
        if not text.isdigit():
            raise GpuwiseError(f"--knob {name}: {text!r} is not a whole number ≥ 0")
        return int(text)
    if name == "autocast" and text not in AUTOCAST_DTYPES:
        raise GpuwiseError(f"--knob autocast: {text!r} is not one of {', '.join(AUTOCAST_DTYPES)}")
    if name == "compile":  # a torch.compile backend; true = the default one
        if text.lower() in {"false", "0", "no", "off"}:
            raise GpuwiseError("--knob compile: give a backend (inductor, eager, …) or true")
        return "inductor" if text.lower() in {"true", "1", "yes", "on"} else text
    return text


def parse_knob_option(option: str) -> tuple[str, list[Any]]:
    """``NAME=V1,V2`` → (name, values): each value is one trial."""
    name, sep, values = option.partition("=")
    name = name.strip().replace("-", "_")
    if not sep or not values.strip():
        raise GpuwiseError(f"--knob {option!r}: write NAME=VALUE[,VALUE...], e.g. --knob num_workers=2,4")
    return name, [parse_value(name, v) for v in values.split(",") if v.strip()]


def changes_numerics(knobs: Knobs) -> bool:
    """Whether any of the knobs is a ``numerics`` one, so the trial's losses must be verified."""
    return any(KNOBS[name].kind == "numerics" for name in knobs)


def label(knobs: Knobs) -> str:
    """``"k=v, k=v"`` for display; ``"as written"`` for no knobs (the script unchanged)."""
    return ", ".join(f"{k}={v}" for k, v in knobs.items()) or "as written"


__all__ = [
    "KNOBS",
    "Knob",
    "KnobKind",
    "Knobs",
    "changes_numerics",
    "label",
    "parse_knob_option",
    "parse_value",
]
