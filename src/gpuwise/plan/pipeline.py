"""Fix before you buy: an idle GPU caps every compute gain, and more GPUs would idle too.

The models predict a GPU that is kept busy. When it is not (a measurement says so, or the user states
`utilization_pct`), the plan puts fixing the pipeline first, caps the other gains (Amdahl), and holds
back "buy or rent more" until the utilization projected after the known fixes passes the KPI
(`thresholds.PLAN_KPI_BUSY_PCT` busy, `PLAN_KPI_IDLE_PCT` idle).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from gpuwise.diagnose import Evidence
from gpuwise.diagnose import thresholds as T
from gpuwise.diagnose.finding import Confidence
from gpuwise.plan.goal import comfortable
from gpuwise.plan.types import Impact, Outcome, ScalingDecision, Technique
from gpuwise.workload import Workload

TECHNIQUE_ID = "fix_pipeline"


@dataclass(frozen=True)
class Idle:
    """How much of each step the GPU idles, and how we know."""

    pct: float  # share of the step with no GPU work
    removable_pct: float  # the part a known fix removes (measured input wait); 0 when only stated
    basis: str  # "Measured" or "Stated (utilization_pct 40 %, not measured)"
    confidence: Confidence

    @property
    def source(self) -> str:
        """Where the idle figure comes from, in words: measured, or as the user stated it."""
        return (
            "measured" if self.confidence == "high" else "as you stated it in utilization_pct, not measured"
        )

    @property
    def busy_pct(self) -> float:
        """Share of time the GPU is busy, % (100 - idle)."""
        return 100.0 - self.pct

    @property
    def projected_busy_pct(self) -> float:
        """Busy share once the known causes are fixed (unknown causes stay)."""
        return min(100.0, self.busy_pct + self.removable_pct)

    @property
    def fix_first(self) -> bool:
        """Is the GPU so idle that fixing the pipeline comes before any compute technique?"""
        return self.busy_pct < T.PLAN_FIX_FIRST_UTIL_PCT

    @property
    def passes_kpi(self) -> bool:
        """Would the projected utilization meet the busy and idle KPIs (PLAN_KPI_*) once fixed?"""
        projected_idle = 100.0 - self.projected_busy_pct
        return self.projected_busy_pct > T.PLAN_KPI_BUSY_PCT and projected_idle < T.PLAN_KPI_IDLE_PCT


def idle_share(w: Workload, measured: list[Evidence]) -> Idle | None:
    """The GPU's idle share: measured on a GPU if any evidence says, else the user's utilization_pct."""
    on_gpu = [e for e in measured if e.device != "cpu"]  # a CPU run's wait is no measure of a GPU idling
    waits = [e.loader.input_wait_pct for e in on_gpu if e.loader.input_wait_pct is not None]
    idles = [
        v
        for e in on_gpu
        for v in (
            e.activity.gpu_idle_pct,
            e.loader.input_wait_pct,
            None if e.activity.gpu_util_pct is None else 100.0 - e.activity.gpu_util_pct,
        )
        if v is not None
    ]
    if idles and max(idles) > 0:
        idle = max(idles)
        return Idle(idle, min(idle, max(waits, default=0.0)), "Measured", "high")
    if w.utilization_pct is not None and 100.0 - w.utilization_pct > 0:
        return Idle(
            100.0 - w.utilization_pct,
            0.0,
            f"Stated (utilization_pct {w.utilization_pct:g} %, not measured)",
            T.STATED_UTILIZATION_CONFIDENCE,  # type: ignore[arg-type]  # a Confidence value, kept in thresholds
        )
    return None


def fix_first(
    techniques: list[Technique], w: Workload, current: Outcome, idle: Idle | None
) -> list[Technique]:
    """With the GPU busy less than PLAN_FIX_FIRST_UTIL_PCT, fixing the pipeline heads the techniques."""
    if idle is None or not idle.fix_first or not comfortable(current) or not current.throughput:
        return techniques
    gain = T.PLAN_KPI_BUSY_PCT / max(idle.busy_pct, 1.0)
    found = "the input wait measured" if idle.removable_pct else "the idle causes in section 1"
    row = Technique(
        id=TECHNIQUE_ID,
        title="Fix the pipeline first: keep the GPU fed (data loading, host syncs, launches)",
        changes={"utilization_pct": (round(idle.busy_pct, 1), T.PLAN_KPI_BUSY_PCT)},
        before=current,
        after=current,
        impact=Impact(
            step_time_pct=round(100.0 * (1 / gain - 1), 2),
            throughput_x=round(gain, 4),
            latency_pct=None,
            memory_saved_bytes=0,
            cost_pct=round(100.0 * (1 / gain - 1), 2),
            makes_it_fit=False,
        ),
        quality_risk="none",
        verdict="recommended",
        reason=(
            f"{idle.basis}: the GPU is busy {idle.busy_pct:.0f} % of the time. Raising that to the KPI "
            f"(> {T.PLAN_KPI_BUSY_PCT:.0f} % busy) gives about {gain:.2f}× on the same hardware; fix "
            f"{found} first, and every gain below is capped until then."
        ),
        effort="medium",
        tools=("gpuwise profile",),
    )
    return [row, *techniques]


def config_note(idle: Idle | None) -> str:
    """What the config table's speeds assume, when the GPU is known to idle."""
    if idle is None or not idle.fix_first:
        return ""
    return (
        f"Speeds below assume a busy GPU; at {idle.busy_pct:.0f} % busy ({idle.source}) expect about "
        f"{idle.busy_pct:.0f} % of them until the pipeline is fixed."
    )


def hold_back_reason(idle: Idle | None) -> str:
    """Why "buy or rent more" waits, or '' when the GPU is (or will be, after the known fixes) busy enough."""
    if idle is None or not idle.fix_first or idle.passes_kpi:
        return ""
    return (
        f"Hold off buying or renting more GPUs: the GPU is busy {idle.busy_pct:.0f} % of the time "
        f"({idle.source}), and more GPUs would idle the same way. "
        + (
            f"Projected after the fixes measured so far: {idle.projected_busy_pct:.0f} % busy"
            if idle.removable_pct
            else "No cause of the idle time is measured yet, so no fix can be projected"
        )
        + f", short of the KPI (> {T.PLAN_KPI_BUSY_PCT:.0f} % busy, < {T.PLAN_KPI_IDLE_PCT:.0f} % idle). "
        "Fix the pipeline (section 2), re-measure with `gpuwise profile`, and add hardware once it passes."
    )


def hold_back(decision: ScalingDecision, idle: Idle | None) -> ScalingDecision:
    """The scaling decision with the hold-back said first, when the GPU is too idle to buy more of."""
    why = hold_back_reason(idle)
    if not why:
        return decision
    keep = decision.reason.split(";")[0].rstrip(".") + "."
    return replace(decision, reason=f"{why} {keep}", hold_back=why)


__all__ = ["TECHNIQUE_ID", "Idle", "config_note", "fix_first", "hold_back", "hold_back_reason", "idle_share"]
