"""What the device spent its time on: kernel categories, top kernels, matmul precision.

Categories come from kernel names through the sourced taxonomy (`trace.taxonomy`, one CSV row per
library family: cuBLAS/cuBLASLt, Tensile, CUTLASS, Triton, FlashAttention, NCCL/RCCL, ...), so they
work for any Kineto trace without the model's source. Names that match nothing are ``other``, and
those above UNCLASSIFIED_KERNEL_PCT of device time are listed by name as unclassified.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gpuwise.trace.hta_selection import unique_rows
from gpuwise.trace.table import EventTable, distinct
from gpuwise.trace.taxonomy import (
    NAME_READ_CHARS,
    UNCLASSIFIED_KERNEL_PCT,
    kernel_category,
    matmul_precision,
    without_parameters,
)

__all__ = [
    "CATEGORIES",
    "KERNEL_CATS",
    "MEMCPY_CATS",
    "MEMSET_CATS",
    "NAME_READ_CHARS",
    "KernelSummary",
    "TopKernel",
    "category_by_code",
    "device_op_rows",
    "kernel_category",
    "matmul_precision",
    "short_name",
    "summarize_kernels",
    "without_parameters",
]

KERNEL_CATS = ("kernel", "Kernel", "mtia_ccp_events")
MEMCPY_CATS = ("gpu_memcpy", "Memcpy")
MEMSET_CATS = ("gpu_memset", "Memset")
CATEGORIES = (
    "gemm",
    "convolution",
    "attention",
    "elementwise",
    "reduction",
    "communication",
    "memcpy",
    "memset",
    "other",
)


def category_by_code(t: EventTable, codes: np.ndarray) -> np.ndarray:
    """Category index per name code, for the given codes (others stay 'other')."""
    out = np.full(len(t.names), CATEGORIES.index("other"), dtype=np.int8)
    for code in distinct(codes).tolist():
        out[code] = CATEGORIES.index(kernel_category(t.name_of(code)))
    return out


def short_name(name: str, width: int = 70) -> str:
    """Drop template arguments and parameter lists: `void foo<float, 4>(float*, int)` -> `foo`."""
    if name.startswith(("Memcpy", "Memset")):
        return name[:width]
    name = name[:NAME_READ_CHARS]
    out, depth = [], 0
    for ch in name.replace("->", ""):
        if ch in "<(":
            depth += 1
        elif ch in ">)" and depth:
            depth -= 1
        elif depth == 0:
            out.append(ch)
    text = "".join(out).strip()
    text = text.split(" ")[-1] if text.startswith("void ") or " " in text else text
    text = text or name
    return text if len(text) <= width else text[: width - 1] + "…"


@dataclass
class TopKernel:
    """One kernel name among the most time-consuming: category, calls, total and mean time (µs),
    and share of all device-op time (%)."""

    name: str
    category: str
    count: int
    time_us: float
    mean_us: float
    pct: float  # of all device-op time

    def to_dict(self) -> dict[str, Any]:
        """The JSON form, with a short display name beside the full one."""
        return {
            "name": self.name,
            "short_name": short_name(self.name),
            "category": self.category,
            "count": self.count,
            "time_us": round(self.time_us, 3),
            "mean_us": round(self.mean_us, 3),
            "pct": round(self.pct, 3),
        }


@dataclass
class KernelSummary:
    """The device ops of one rank: counts and time by category, the top kernels, matmul time by
    precision (µs) and the fp32 share, the share of tiny kernels (under 10 µs), and whether
    autocast was on."""

    count: int  # kernels (compute and communication; copies and memsets are counted apart)
    time_us: float  # summed device-op time (kernels + copies + memsets), overlaps counted twice
    categories: dict[str, dict[str, float]]  # category -> {count, time_us, pct}
    top: list[TopKernel]
    precision_us: dict[str, float]  # matmul/convolution time by precision
    fp32_matmul_pct: float | None  # share of precision-known matmul/conv time in plain fp32
    tiny_kernel_pct: float | None
    amp_ops_seen: bool  # autocast casts in the CPU ops: mixed precision is on
    notes: list[str] = field(default_factory=list)
    by_name_us: dict[str, float] = field(default_factory=dict)  # every device op's name -> time (µs)
    # kernels no taxonomy row names, each above UNCLASSIFIED_KERNEL_PCT of device-op time: name, pct
    unclassified: list[tuple[str, float]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (per-name times are left out; the top kernels carry the detail)."""
        return {
            "count": self.count,
            "time_us": round(self.time_us, 3),
            "categories": {
                k: {"count": int(v["count"]), "time_us": round(v["time_us"], 3), "pct": round(v["pct"], 3)}
                for k, v in self.categories.items()
            },
            "top": [k.to_dict() for k in self.top],
            "precision_us": {k: round(v, 3) for k, v in self.precision_us.items()},
            "fp32_matmul_pct": None if self.fp32_matmul_pct is None else round(self.fp32_matmul_pct, 3),
            "tiny_kernel_pct": None if self.tiny_kernel_pct is None else round(self.tiny_kernel_pct, 3),
            "amp_ops_seen": self.amp_ops_seen,
            "notes": self.notes,
            "unclassified": [{"name": n, "pct": round(p, 3)} for n, p in self.unclassified],
        }


def device_op_rows(t: EventTable, rows: np.ndarray) -> np.ndarray:
    """The rows (unique) that are kernels, copies or memsets."""
    rows = unique_rows(rows)
    mask = t.cat_mask(*KERNEL_CATS, *MEMCPY_CATS, *MEMSET_CATS)
    return rows[mask[rows]]


def summarize_kernels(
    t: EventTable, rows: np.ndarray, durations: np.ndarray, tiny_us: float, top_n: int = 15
) -> KernelSummary:
    """Kernel statistics over ``rows`` (device-op event indices); ``durations`` per event, µs."""
    ops = device_op_rows(t, rows)
    dur = durations[ops]
    category = category_by_code(t, t.name[ops])[t.name[ops]]
    category[t.cat_mask(*MEMCPY_CATS)[ops]] = CATEGORIES.index("memcpy")
    category[t.cat_mask(*MEMSET_CATS)[ops]] = CATEGORIES.index("memset")
    total = float(dur.sum())
    categories = {}
    for i, name in enumerate(CATEGORIES):
        sel = category == i
        if sel.any():
            time_us = float(dur[sel].sum())
            categories[name] = {
                "count": int(sel.sum()),
                "time_us": time_us,
                "pct": 100 * time_us / total if total else 0.0,
            }

    top: list[TopKernel] = []
    by_name_us: dict[str, float] = {}
    if ops.size:
        codes, inverse = np.unique(t.name[ops], return_inverse=True)
        per_name = np.bincount(inverse, weights=dur)
        counts = np.bincount(inverse)
        cat_of = np.zeros(codes.size, dtype=np.int8)
        cat_of[inverse] = category
        by_name_us = {t.name_of(int(c)): float(v) for c, v in zip(codes, per_name, strict=True)}
        for j in np.argsort(-per_name, kind="stable")[:top_n]:
            top.append(
                TopKernel(
                    t.name_of(int(codes[j])),
                    CATEGORIES[cat_of[j]],
                    int(counts[j]),
                    float(per_name[j]),
                    float(per_name[j] / counts[j]),
                    100 * float(per_name[j]) / total if total else 0.0,
                )
            )

    precision_us, fp32_pct, notes = _precision(t, ops, dur, category)
    unclassified = _unclassified(by_name_us, total)
    if unclassified:
        listed = "; ".join(f"{short_name(n, 60)} ({p:.1f} %)" for n, p in unclassified)
        notes.append(
            "kernels the taxonomy does not classify, "
            f"over {UNCLASSIFIED_KERNEL_PCT:g} % of device time: {listed}"
        )
    is_kernel = t.cat_mask(*KERNEL_CATS)[ops]
    kernel_dur = dur[is_kernel]
    tiny = 100.0 * float((kernel_dur < tiny_us).mean()) if kernel_dur.size else None
    amp_codes = t.name_codes(lambda s: "autocast" in s)
    return KernelSummary(
        int(is_kernel.sum()),
        total,
        categories,
        top,
        precision_us,
        fp32_pct,
        tiny,
        bool(t.name_mask(amp_codes).any()),
        notes,
        by_name_us,
        unclassified,
    )


def _unclassified(by_name_us: dict[str, float], total_us: float) -> list[tuple[str, float]]:
    """Kernels in no category (copies and memsets have theirs) above UNCLASSIFIED_KERNEL_PCT of the
    device-op time, largest first, as (name, % of device-op time)."""
    if total_us <= 0:
        return []
    out = [
        (name, 100.0 * us / total_us)
        for name, us in by_name_us.items()
        if 100.0 * us / total_us > UNCLASSIFIED_KERNEL_PCT
        and not name.startswith(("Memcpy", "Memset"))
        and kernel_category(name) == "other"
    ]
    return sorted(out, key=lambda item: -item[1])


def _precision(
    t: EventTable, ops: np.ndarray, dur: np.ndarray, category: np.ndarray
) -> tuple[dict[str, float], float | None, list[str]]:
    matmul = (category == CATEGORIES.index("gemm")) | (category == CATEGORIES.index("convolution"))
    if not matmul.any():
        return {}, None, []
    precision_of = {}
    for code in distinct(t.name[ops][matmul]):
        precision_of[int(code)] = matmul_precision(t.name_of(int(code))) or "unknown"
    out: dict[str, float] = {}
    for code, d in zip(t.name[ops][matmul].tolist(), dur[matmul].tolist(), strict=True):
        key = precision_of[code]
        out[key] = out.get(key, 0.0) + d
    known = sum(v for k, v in out.items() if k != "unknown")
    total = sum(out.values())
    if total <= 0 or known < 0.5 * total:
        return (
            out,
            None,
            ["matmul precision unknown for most matmul/convolution time (kernel names do not say)"],
        )
    return out, 100.0 * out.get("fp32", 0.0) / known, []
