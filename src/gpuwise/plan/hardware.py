"""Hardware options: every catalog GPU evaluated on the recommended configuration.

A configuration moves to another GPU with the smallest honest edits (fp8 falls back where
the GPU has no fp8 tensor cores, bf16 to fp16 on pre-Ampere parts, FlashAttention to SDPA);
if it does not fit, the same fit search as on the user's GPU runs there, then more GPUs of
that type (up to one node). Requirements (ECC, NVLink, MIG, datacenter) filter; caveats say
what the numbers cannot (licences, missing prices, uncertain specs).
"""

from __future__ import annotations

from dataclasses import dataclass

from gpuwise.catalog import GPU, list_gpus
from gpuwise.errors import GpuwiseError
from gpuwise.plan import knowledge as K
from gpuwise.plan.candidates import Evaluate
from gpuwise.plan.goal import comfortable, goal_value
from gpuwise.plan.scaling import NODE_GPUS, layouts
from gpuwise.plan.techniques import Step, _fit_steps
from gpuwise.plan.types import HardwareOption, Outcome
from gpuwise.units import GB
from gpuwise.workload import Workload
from gpuwise.workload.spec import Goal, Precision

__all__ = ["Placement", "as_given", "best_fitting", "caveats", "meets", "options", "place", "port"]


@dataclass(frozen=True)
class Placement:
    """The workload moved to one GPU type: as given, and as made to fit there (if it could be)."""

    gpu: GPU
    as_given: Outcome | None  # the workload moved with only compatibility edits
    workload: Workload | None  # what runs there (None: nothing tried fits up to one node)
    outcome: Outcome | None
    steps: tuple[Step, ...] = ()  # the fit edits made there


def port(workload: Workload, gpu: GPU) -> Workload | None:
    """`workload` on `gpu`, with the compatibility edits that GPU needs."""
    changes: dict[str, object] = {"gpu": gpu.id}
    if gpu.id != workload.gpu and workload.usd_per_gpu_hour is not None:
        changes["usd_per_gpu_hour"] = None  # your price is for your GPU; others use the catalog's
    p: Precision = workload.precision
    if p == "fp4" and not gpu.fp4_tflops:
        p = "fp8"  # memgaps: no FP4 tensor cores; FP8 is the next block-scaled step (or what follows below)
    if p == "fp8" and not gpu.fp8_tflops:
        p = "int8" if workload.is_inference else "amp-bf16"
    if p == "fp32" and not gpu.fp32_tflops and gpu.platform == "gaudi":
        p = "amp-bf16"  # no fp32 figure on its datasheet: its matrix engines are bf16/FP8
    if p == "bf16" and not gpu.bf16_tflops:
        p = "fp16"
    elif p == "amp-bf16" and not gpu.bf16_tflops:
        p = "amp-fp16"
    if p != workload.precision:
        changes["precision"] = p
    if workload.attention == "flash" and not (gpu.bf16_tflops and gpu.vendor.upper() == "NVIDIA"):
        changes["attention"] = "sdpa"
    try:
        return workload.with_changes(**changes)
    except GpuwiseError:
        return None


def place(workload: Workload, gpu: GPU, goal: Goal, evaluate: Evaluate) -> Placement:
    """`workload` on `gpu`: as given if it fits comfortably, else with the fit edits, else on more
    GPUs of that type (2, 4, then one node)."""
    moved = port(workload, gpu)
    if moved is None:
        return Placement(gpu, None, None, None)
    as_given = evaluate(moved)
    if comfortable(as_given):
        return Placement(gpu, as_given, moved, as_given)
    steps = tuple(_fit_steps(moved, goal, evaluate))
    fitted = steps[-1].after_workload if steps else moved
    if comfortable(evaluate(fitted)):
        return Placement(gpu, as_given, fitted, evaluate(fitted), steps)
    for n in (2, 4, NODE_GPUS):
        if n <= fitted.num_gpus:
            continue
        for layout in layouts(fitted, n):
            outcome = evaluate(layout)
            if comfortable(outcome):
                return Placement(gpu, as_given, layout, outcome, steps)
    return Placement(gpu, as_given, None, None, steps)


def meets(gpu: GPU, requirements: tuple[str, ...]) -> bool:
    """Does `gpu` have every required feature ("ecc", "nvlink", "mig", "datacenter")?"""
    checks = {
        "ecc": gpu.ecc,
        "nvlink": gpu.nvlink_gbps > 0,
        "mig": gpu.mig_max > 0,
        "datacenter": not gpu.consumer,
    }
    return all(checks[r] for r in requirements)


def caveats(gpu: GPU, w: Workload, outcome: Outcome) -> list[str]:
    """What the option's numbers cannot say: licence, ECC, price, interconnect, software stack, spec."""
    return [
        *_usage_caveats(gpu, outcome),
        *_link_caveats(gpu, w, outcome),
        *_stack_caveats(gpu, w, outcome),
        *_spec_caveats(gpu),
    ]


def _usage_caveats(gpu: GPU, outcome: Outcome) -> list[str]:
    """Licence (GeForce in a datacenter), ECC, and whether $ figures exist."""
    out = []
    if gpu.consumer:
        out.append(K.GEFORCE_LICENSE[0] + f" [{K.GEFORCE_LICENSE[1]}]")
    elif not gpu.ecc:
        out.append("no ECC memory: prefer an ECC part for regulated or 24/7 work")
    if outcome.usd_per_hour is None:
        out.append("no verified cloud price in the catalog: set usd_per_gpu_hour for $ figures")
    return out


def _link_caveats(gpu: GPU, w: Workload, outcome: Outcome) -> list[str]:
    """Multi-GPU traffic without NVLink: gradients and tensor-parallel all-reduces cross PCIe."""
    out = []
    if outcome.num_gpus > 1 and w.is_training and gpu.nvlink_gbps <= 0:
        out.append(f"no NVLink: {outcome.num_gpus}-GPU traffic crosses PCIe Gen{gpu.pcie_gen or 4}")
    if outcome.num_gpus > 1 and w.tp > 1 and gpu.nvlink_gbps <= 0:
        out.append("tensor parallelism over PCIe: every layer waits for all-reduces")
    return out


def _stack_caveats(gpu: GPU, w: Workload, outcome: Outcome) -> list[str]:
    """Kernels and features the GPU's generation or vendor has or lacks (bf16, MIG, ROCm)."""
    out = []
    is_nvidia = gpu.vendor.upper() == "NVIDIA"
    if not gpu.bf16_tflops and is_nvidia:
        out.append(
            "pre-Ampere: no bf16; FlashAttention-2 and Marlin 4-bit kernels need Ampere or newer: check your "
            "engine's support"
        )
    if w.is_inference and gpu.mig_max and outcome.num_gpus == 1 and is_nvidia:
        fraction, _, source = K.MIG_SLICE_FRACTION
        slice_bytes = gpu.memory_gb * GB * fraction
        if outcome.peak_bytes <= slice_bytes:
            out.append(
                f"fits one MIG slice ({gpu.memory_gb * fraction:.0f} GB): up to {gpu.mig_max} isolated "
                f"tenants per GPU [{source}]"
            )
    if gpu.vendor.upper() == "AMD":
        out.append("ROCm stack: check your serving/training framework's ROCm support and kernels")
    return out


def _spec_caveats(gpu: GPU) -> list[str]:
    """Where the catalog row itself is unsure or comes from the user."""
    out = []
    if gpu.confidence in ("uncertain", "derived"):  # derived: peaks computed from other figures (notes)
        out.append(f"catalog spec marked {gpu.confidence}: verify with a matmul benchmark")
    if gpu.origin != "catalog":
        out.append(f"user entry from {gpu.origin}")
    return out


def _sort_key(h: HardwareOption, goal: Goal, w: Workload) -> tuple:
    """Fitting, requirement-meeting options on the asked GPU count first; then the goal decides."""
    first = (
        not (h.outcome.fits and comfortable(h.outcome)),
        not h.meets_requirements,
        h.num_gpus > w.num_gpus,
    )
    value = goal_value(h.outcome, goal, w)
    if goal == "fit":  # it fits: the cheapest way to run it, then the most room
        price = h.outcome.usd_per_hour if h.outcome.usd_per_hour is not None else float("inf")
        return (*first, price, -h.outcome.headroom_pct)
    if goal == "cost":
        return (*first, h.outcome.usd_per_1m is None, -value)
    return (*first, -value)


def as_given(workload: Workload, evaluate: Evaluate, gpus: list[GPU] | None = None) -> dict[str, Outcome]:
    """The workload moved unchanged (bar compatibility edits) to every GPU type."""
    out = {}
    for gpu in gpus if gpus is not None else list_gpus():
        moved = port(workload, gpu)
        if moved is not None:
            out[gpu.id] = evaluate(moved)
    return out


def options(
    workload: Workload, goal: Goal, evaluate: Evaluate, gpus: list[GPU] | None = None
) -> list[HardwareOption]:
    """Ranked hardware options: fitting ones first, each with the edits it needed."""
    out: list[HardwareOption] = []
    for gpu in gpus if gpus is not None else list_gpus():
        placed = place(workload, gpu, goal, evaluate)
        if placed.workload is None or placed.outcome is None:
            if placed.as_given is not None:
                out.append(
                    HardwareOption(
                        gpu.id,
                        gpu.name,
                        placed.as_given.num_gpus,
                        placed.as_given,
                        meets(gpu, workload.requirements),
                        ("does not fit, even sharded over one node",),
                        {},
                    )
                )
            continue
        w = placed.workload
        changed = {
            k: v
            for k, v in w.to_dict().items()
            if k not in {"gpu", "usd_per_gpu_hour"} and v != getattr(workload, k) and not isinstance(v, list)
        }
        out.append(
            HardwareOption(
                gpu.id,
                gpu.name,
                w.num_gpus,
                placed.outcome,
                meets(gpu, workload.requirements),
                tuple(caveats(gpu, w, placed.outcome)),
                changed,
            )
        )
    out.sort(key=lambda h: _sort_key(h, goal, workload))
    return [
        HardwareOption(
            h.gpu, h.name, h.num_gpus, h.outcome, h.meets_requirements, h.caveats, h.config, rank=i + 1
        )
        for i, h in enumerate(out)
    ]


def best_fitting(hardware: list[HardwareOption], single_gpu: bool) -> HardwareOption | None:
    """Top-ranked option that fits and meets the requirements (one GPU if asked)."""
    for h in hardware:
        if comfortable(h.outcome) and h.meets_requirements and (h.num_gpus == 1 or not single_gpu):
            return h
    return None
