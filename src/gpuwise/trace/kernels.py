"""What the device spent its time on: kernel categories, top kernels, matmul precision.

Categories come from kernel names (cuBLAS/cuDNN/CUTLASS/Triton/NCCL naming conventions), so they
work for any Kineto trace without the model's source. Names that match nothing stay ``other``.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gpuwise.trace.hta_selection import unique_rows
from gpuwise.trace.table import EventTable, distinct

__all__ = [
    "CATEGORIES",
    "COMM_BEYOND_HTA",
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

# Communication kernels outside NCCL's naming: DeepEP's expert-parallel dispatch/combine/notify
# (deepseek-ai/DeepEP: `deep_ep::internode::...`, `ep::intranode::...`), NVSHMEM, MSCCL, all-to-all.
COMM_BEYOND_HTA = re.compile(r"deep_?ep::|\bep::(internode|intranode)::|nvshmem|msccl|all_?to_?all", re.I)

_RULES: list[tuple[str, re.Pattern[str]]] = [
    (
        "communication",
        re.compile(
            r"nccl|rccl|c10d::|AllReduce|AllGather|ReduceScatter|SendRecv|AllToAll|deep_?ep::"
            r"|\bep::(internode|intranode)::|nvshmem|msccl|all_?to_?all",
            re.I,
        ),
    ),
    ("attention", re.compile(r"flash|fmha|attention|attn|sdpa|mem_eff|xformers", re.I)),
    (
        "convolution",
        re.compile(
            r"conv|scudnn|cudnn::.*(wgrad|dgrad|fprop)|winograd|implicit_(convolve|gemm)|dgrad|wgrad|fft2d|fft_",
            re.I,
        ),
    ),
    (
        "gemm",
        re.compile(
            r"gemm|gemv|matmul|cublas|cutlass|xmma|wgmma|\bmma|_mm_|triton_tem_fused.*mm|splitk", re.I
        ),
    ),
    (
        "reduction",
        re.compile(
            r"reduce|reduction|softmax|norm|\bbn_|_bn_|welford|sum_|argmax|argmin|nll_loss|cross_entropy|triton_(red|per)_|cub::",
            re.I,
        ),
    ),
    (
        "elementwise",
        re.compile(
            r"elementwise|pointwise|triton_poi_|copy|fill|cat_?array|index|gather|scatter|relu|gelu|silu|sigmoid|tanh|add|mul|div|dropout|activation|where|clamp|pow|exp|transpose|permute",
            re.I,
        ),
    ),
]

# Precision of matmul/convolution kernels from cuBLAS/cuDNN/CUTLASS names.
_PRECISION_RULES: list[tuple[str, re.Pattern[str]]] = [
    ("fp8", re.compile(r"fp8|e4m3|e5m2", re.I)),
    ("int8", re.compile(r"int8|i8816|imma|s8s8|\bi8", re.I)),
    ("bf16", re.compile(r"bf16|bfloat16", re.I)),
    ("tf32", re.compile(r"tf32|tensorop_s1688|tensorop_s16816", re.I)),
    (
        "fp16",
        re.compile(
            r"fp16|f16|half|h884|h1688|h16816|hgemm|s884gemm|s1688gemm|s16816gemm|884cudnn|1688cudnn", re.I
        ),
    ),
    ("fp32", re.compile(r"sgemm|scudnn|gemmSN|<float|float>|f32f32|sgemv|\bfloat\b", re.I)),
]


# Names are read up to this many characters: the longest in the public traces tested is 5,123 (a
# templated kernel with its parameter list); a multi-megabyte name would cost seconds of regex work.
NAME_READ_CHARS = 16384


def without_parameters(name: str) -> str:
    """The name and template arguments, not the parameter list: FBGEMM's embedding kernels take a
    `fbgemm_gpu::FixedDivisor`, which must not make them GEMMs."""
    text, depth = name[:NAME_READ_CHARS].replace("(anonymous namespace)", ""), 0
    for i, ch in enumerate(text):
        if ch == "<":
            depth += 1
        elif ch == ">" and depth:
            depth -= 1
        elif ch == "(" and depth == 0 and i:
            return text[:i]
    return text


@functools.lru_cache(maxsize=8192)  # a many-rank run repeats its kernel names in every rank
def kernel_category(name: str) -> str:
    """The category a kernel's name puts it in (communication, attention, convolution, gemm,
    ... by the first matching rule), else "other"; template parameters are ignored."""
    head = without_parameters(name)
    for category, pattern in _RULES:
        if pattern.search(head):
            return category
    return "other"


def matmul_precision(name: str) -> str | None:
    """The precision a matmul/convolution kernel's name shows (fp8, int8, bf16, tf32, fp16,
    fp32), None when the name says nothing; only the first NAME_READ_CHARS characters are read."""
    for precision, pattern in _PRECISION_RULES:
        if pattern.search(name, 0, NAME_READ_CHARS):
            return precision
    return None


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
        }


def device_op_rows(t: EventTable, rows: np.ndarray) -> np.ndarray:
    """The rows (unique) that are kernels, copies or memsets."""
    rows = unique_rows(rows)
    mask = t.cat_mask(*KERNEL_CATS, *MEMCPY_CATS, *MEMSET_CATS)
    return rows[mask[rows]]


def category_by_code(t: EventTable, codes: np.ndarray) -> np.ndarray:
    """Category index per name code, for the given codes (others stay 'other')."""
    out = np.full(len(t.names), CATEGORIES.index("other"), dtype=np.int8)
    for code in distinct(codes).tolist():
        out[code] = CATEGORIES.index(kernel_category(t.name_of(code)))
    return out


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
    )


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
