"""Finding: what is wrong, how sure we are, the numbers behind it, the fix and the expected gain."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal, get_args

from gpuwise.diagnose.evidence import EvidenceSource

__all__ = [
    "CATEGORIES",
    "CONFIDENCES",
    "FINDING_IDS",
    "SEVERITIES",
    "Category",
    "Confidence",
    "Finding",
    "FindingId",
    "Gain",
    "GainMetric",
    "Severity",
]

Severity = Literal["critical", "high", "medium", "low", "info"]
Confidence = Literal["high", "medium", "low"]
SEVERITIES: tuple[Severity, ...] = get_args(Severity)
CONFIDENCES: tuple[Confidence, ...] = get_args(Confidence)
# One id per rule in the `rules` package (the rule function's name, listed in `rules.RULES`); stable
# across releases, JSON consumers key on it.
FindingId = Literal[
    "input_bound",
    "loader_cpu_saturated",
    "sync_bound",
    "launch_bound",
    "no_mixed_precision",
    "pageable_copies",
    "small_batch",
    "oom_risk",
    "throttling",
    "step_outliers",
    "memory_growth",
    "comm_bound",
    "low_utilization",
    "straggler",
    "no_flash_attention",
    "no_fused_optimizer",
    "kv_cache_dominant",
    "decode_memory_bound",
    "unexplained_host_time",
    "idle_gpu_hours",
    "chronic_low_busy",
    "oversized_gpu",
    "serving_queueing",
    "serving_prefill_bound",
    "serving_decode_bound",
    "serving_errors",
    "serving_speed_gap",
    "idle_memory_held",
    "gpu_lost",
    "gpu_ecc_uncorrected",
    "gpu_ecc_corrected_storm",
    "gpu_memory_remapped",
    "gpu_pcie_replays",
    "gpu_xid_errors",
]
FINDING_IDS: tuple[FindingId, ...] = get_args(FindingId)
# What a finding is about; the planner orders findings of equal severity by category for each goal.
Category = Literal[
    "input", "host", "compute", "memory", "communication", "hardware", "distributed", "serving"
]
CATEGORIES: tuple[Category, ...] = get_args(Category)
# step_time_pct: step time saved (% of current); throughput_x: speed-up factor;
# memory_bytes: memory saved; cost_pct: cost saved (%).
GainMetric = Literal["step_time_pct", "throughput_x", "memory_bytes", "cost_pct"]


@dataclass(frozen=True)
class Gain:
    """Expected effect of applying the fix, as a range (low..high) of one metric (see `GainMetric`)."""

    metric: GainMetric
    low: float
    high: float
    note: str = ""


@dataclass(frozen=True)
class Finding:
    """One diagnosis: what is wrong (``id``, ``title``, ``summary`` with the numbers), how bad and how sure,
    the numbers behind it (``metrics``, units in the keys), the fix and what it should buy (``gain``).

    Its JSON form (``to_dict``) is part of every ``--json`` document; consumers key on ``id``."""

    id: FindingId
    title: str
    severity: Severity
    confidence: Confidence  # high (measured directly) | medium (derived) | low (predicted / heuristic)
    category: Category
    summary: str  # one or two sentences with the numbers
    metrics: dict[str, Any]  # the numbers behind it, units in the keys
    fix: str  # what to do, one line
    fix_snippet: str = ""  # code or config to paste
    gain: Gain | None = None
    source: EvidenceSource = field(kw_only=True)  # what the rule read
    tools: tuple[str, ...] = field(default=())

    def __post_init__(self) -> None:
        if self.severity not in SEVERITIES:
            raise ValueError(f"unknown severity {self.severity!r}")
        if self.confidence not in CONFIDENCES:
            raise ValueError(f"unknown confidence {self.confidence!r}")

    @property
    def severity_rank(self) -> int:
        """0 for critical ... 4 for info: sorts the most severe first."""
        return SEVERITIES.index(self.severity)

    def to_dict(self) -> dict[str, Any]:
        """The JSON object: every field, ``gain`` nested (or null), ``tools`` as a list."""
        data = asdict(self)
        data["tools"] = list(self.tools)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Finding:
        """Read back what ``to_dict`` wrote (run store rows, saved reports)."""
        gain = data.get("gain")
        return cls(**{**data, "gain": Gain(**gain) if gain else None, "tools": tuple(data.get("tools", ()))})
