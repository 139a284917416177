"""Hardware rules: what the GPU itself reports, live (clock throttling in NVML telemetry) or over weeks
of recorded history (`gpuwise monitor report`: idle hours, chronically low busy %, an oversized GPU),
and memory held on an idle GPU (a `gpuwise monitor` sample or a history).

Shares are % of samples or of GPU-hours; costs are USD at the GPU's catalog price.
"""

from __future__ import annotations

from gpuwise.diagnose import thresholds as T
from gpuwise.diagnose.evidence import Evidence
from gpuwise.diagnose.finding import Finding, Gain, Severity
from gpuwise.units import GiB

__all__ = ["chronic_low_busy", "idle_gpu_hours", "idle_memory_held", "oversized_gpu", "throttling"]


def throttling(ev: Evidence) -> Finding | None:
    """NVML reports thermal or power clock throttling in at least ``THROTTLE_MODERATE_PCT`` of the samples."""
    relevant = {
        k: v for k, v in ev.telemetry.throttle_pct.items() if any(s in k for s in ("thermal", "power"))
    }
    if not relevant:
        return None
    reason, share = max(relevant.items(), key=lambda kv: kv[1])
    if share < T.THROTTLE_MODERATE_PCT:
        return None
    thermal = "thermal" in reason
    return Finding(
        id="throttling",
        title="The GPU slows its clocks (" + ("thermal" if thermal else "power") + " limit)",
        severity="high" if share >= T.THROTTLE_HIGH_PCT else "medium",
        confidence="high",
        category="hardware",
        summary=f"NVML reports {reason} clock throttling in {share:.0f} % of samples"
        + (
            f"; max temperature {ev.telemetry.temperature_c_max:.0f} °C"
            if ev.telemetry.temperature_c_max is not None
            else ""
        )
        + (
            f", mean SM clock {ev.telemetry.sm_clock_mhz_mean:.0f} MHz"
            if ev.telemetry.sm_clock_mhz_mean is not None
            else ""
        )
        + ".",
        metrics={
            "throttle_pct": dict(ev.telemetry.throttle_pct),
            "temperature_c_max": ev.telemetry.temperature_c_max,
            "power_w_mean": ev.telemetry.power_w_mean,
            "sm_clock_mhz_mean": ev.telemetry.sm_clock_mhz_mean,
        },
        fix=(
            "Check cooling and airflow (thermal) or the power limit (`nvidia-smi -q -d POWER`); on cloud "
            "instances report the node."
        ),
        fix_snippet="nvidia-smi -q -d PERFORMANCE,TEMPERATURE,POWER",
        gain=Gain(
            "throughput_x", 1.0, 1.0 + share / 100 * 0.3, "clock recovery; depends on how far clocks drop"
        ),
        source=ev.source,
        tools=("nvidia-smi", "DCGM"),
    )


# --- recorded history (gpuwise monitor report): what a GPU's weeks cost, not how one step runs ------------
def _history_hours(ev: Evidence, floor: float) -> float | None:
    """The recorded GPU-hours when there are at least ``floor`` of them, else None (too little to judge)."""
    hours = ev.history.observed_gpu_hours
    return hours if hours is not None and hours >= floor else None


def idle_gpu_hours(ev: Evidence) -> Finding | None:
    """The recorded GPU was idle (busy under ``MONITOR_IDLE_BUSY_PCT``) at least
    ``FINOPS_IDLE_MODERATE_PCT`` of its hours: the cost of hours paid for nothing."""
    hours = _history_hours(ev, T.FINOPS_MIN_GPU_HOURS)
    idle = ev.history.idle_time_pct
    if hours is None or idle is None or idle < T.FINOPS_IDLE_MODERATE_PCT:
        return None
    idle_h = hours * idle / 100
    cost = f" (${ev.history.idle_usd:,.2f})" if ev.history.idle_usd is not None else ""
    return Finding(
        id="idle_gpu_hours",
        title="GPUs held idle: the cost of waste",
        severity="high" if idle >= T.FINOPS_IDLE_HIGH_PCT else "medium",
        confidence="high",
        category="hardware",
        summary=f"Idle (busy < {T.MONITOR_IDLE_BUSY_PCT:.0f} %) {idle:.0f} % of {hours:,.1f} GPU-hours: "
        f"{idle_h:,.1f} GPU-hours paid for nothing{cost}.",
        metrics={
            "observed_gpu_hours": round(hours, 3),
            "idle_time_pct": round(idle, 2),
            "idle_gpu_hours": round(idle_h, 3),
            "idle_usd": None if ev.history.idle_usd is None else round(ev.history.idle_usd, 2),
        },
        fix=(
            "Release GPUs between jobs; run data preparation and evaluation as separate stages on CPUs or "
            "cheaper GPUs; share a lightly used GPU (MIG on A100/H100, MPS or time-slicing) or move to a "
            "smaller instance."
        ),
        fix_snippet="nvidia-smi mig -cgi 19,19,19 -C   # e.g. three 1g slices on an A100 (MIG-capable GPUs)",
        gain=Gain("cost_pct", idle / 2, idle, "the idle share of the GPU bill, if the hours are released"),
        source=ev.source,
        tools=("MIG", "MPS", "Kubernetes GPU time-slicing"),
    )


def chronic_low_busy(ev: Evidence) -> Finding | None:
    """While in use the GPU ran a kernel under ``FINOPS_CHRONIC_BUSY_PCT`` of the time: fix the
    pipeline before buying more GPUs."""
    hours = _history_hours(ev, T.FINOPS_CHRONIC_MIN_GPU_HOURS)
    busy = ev.history.busy_in_use_pct
    if hours is None or busy is None or busy >= T.FINOPS_CHRONIC_BUSY_PCT:
        return None
    return Finding(
        id="chronic_low_busy",
        title="Chronically low busy % while in use: fix the pipeline before buying more GPUs",
        severity="high" if busy < T.LOW_UTIL_MODERATE_PCT else "medium",
        confidence="medium",  # busy % is an upper bound on how hard the SMs work (NVML utilization.gpu)
        category="compute",
        summary=f"While in use over {hours:,.0f} GPU-hours the GPU ran a kernel only {busy:.0f} % of the "
        "time "
        f"(KPI {T.FINOPS_CHRONIC_BUSY_PCT:.0f} %): more GPUs would idle the same way.",
        metrics={"busy_in_use_pct": round(busy, 2), "observed_gpu_hours": round(hours, 3)},
        fix=(
            "Profile a typical job (`gpuwise profile -- python train.py`) and fix input, host syncs and "
            "launch overheads first; add hardware only once busy % passes the KPI."
        ),
        gain=Gain(
            "throughput_x", 1.0, min(3.0, T.FINOPS_CHRONIC_BUSY_PCT / max(busy, 1.0)), "up to the busy KPI"
        ),
        source=ev.source,
        tools=("gpuwise profile", "gpuwise doctor"),
    )


def oversized_gpu(ev: Evidence) -> Finding | None:
    """Memory headroom stayed above ``FINOPS_OVERSIZED_HEADROOM_PCT`` at the peak: a smaller catalog
    GPU (``smaller_gpu``, from monitor/right_size.py) would do, or the GPU has room for a second job."""
    hours = _history_hours(ev, T.FINOPS_MIN_GPU_HOURS)
    headroom, fit = ev.memory.memory_headroom_pct, ev.history.smaller_gpu
    if hours is None or headroom is None or fit is None or headroom <= T.FINOPS_OVERSIZED_HEADROOM_PCT:
        return None
    peak = (ev.memory.memory_peak_bytes or 0) / GiB
    busy, kpi = float(fit["busy_in_use_pct"]), float(fit["busy_kpi_pct"])
    current = float(fit["current_usd_per_gpu_hour"])
    seen = f"Peak memory {peak:.1f} GiB ({headroom:.0f} % free at the peak), busy {busy:.0f} % while in use"
    metrics = {"memory_peak_bytes": ev.memory.memory_peak_bytes, "memory_headroom_pct": round(headroom, 2)}
    title = (
        f"Memory headroom always above {T.FINOPS_OVERSIZED_HEADROOM_PCT:.0f} %: right-size or fill the GPU"
    )
    if fit["gpu"]:
        to, usd_h, saved = fit["gpu_name"], float(fit["usd_per_gpu_hour"]), float(fit["usd_saved"])
        return Finding(
            id="oversized_gpu",
            title=title,
            severity="medium",
            confidence="medium",  # from catalog peaks: `gpuwise plan --gpu ID` predicts the real speed
            category="hardware",
            summary=f"{seen}. The {to} ({fit['memory_bytes'] / GiB:.1f} GiB, ${usd_h:.2f}/h vs "
            f"${current:.2f}/h) holds it with {T.TARGET_HEADROOM_PCT:.0f} % to spare and would be "
            f"~{fit['projected_busy_pct']:.0f} % busy (by its {fit['limited_by']}; KPI {kpi:.0f} %): "
            f"${saved:,.2f} less over the {fit['in_use_gpu_hours']:,.1f} in-use GPU-hours.",
            metrics={**metrics, "smaller_gpu": dict(fit), "usd_saved": round(saved, 2)},
            fix=f"Move this work to the {to} (check its speed with `gpuwise plan --gpu {fit['gpu']}`).",
            gain=Gain(
                "cost_pct",
                0.0,
                100.0 * (1 - usd_h / current) if current > 0 else 0.0,
                "the price difference over the in-use hours",
            ),
            source=ev.source,
        )
    closest = fit.get("closest")
    why = (
        f"the closest, the {closest['gpu_name']}, would be ~{closest['projected_busy_pct']:.0f} % busy "
        f"(by its {closest['limited_by']}; KPI {kpi:.0f} %)"
        if closest
        else f"none holds {fit['memory_needed_bytes'] / GiB:.1f} GiB ({T.TARGET_HEADROOM_PCT:.0f} % to spare)"
    )
    free = ((ev.memory.memory_capacity_bytes or 0) - (ev.memory.memory_peak_bytes or 0)) / GiB
    return Finding(
        id="oversized_gpu",
        title=title,
        severity="low",
        confidence="medium",
        category="hardware",
        summary=f"{seen}; no cheaper, smaller catalog GPU keeps up: {why}.",
        metrics={
            **metrics,
            "smaller_gpu": dict(fit),
            "usd_saved": 0.0,
            "memory_free_at_peak_bytes": int(free * GiB),
        },
        fix=f"Keep it and fill it: {free:.1f} GiB free at the peak and {100 - busy:.0f} % of the in-use time "
        "without a kernel leave room for a second job or replica (MPS"
        + (", or MIG slices)." if fit.get("mig_slices") else ")."),
        source=ev.source,
    )


def _holders_text(holders: list[dict]) -> str:
    """The processes holding memory, most first: 'pid name (user, 40.0 GiB, 3.2 h, $12.80)'."""
    parts = []
    for h in holders[: T.IDLE_MEMORY_NAMED]:
        bits = [h.get("user") or "user n/a"]
        if h.get("memory_bytes") is not None:
            bits.append(f"{h['memory_bytes'] / GiB:.1f} GiB")
        if h.get("idle_gpu_hours") is not None:
            bits.append(f"{h['idle_gpu_hours']:,.1f} h idle")
        if h.get("idle_usd") is not None:
            bits.append(f"${h['idle_usd']:,.2f}")
        parts.append(f"{h['process']} ({', '.join(bits)})")
    more = len(holders) - T.IDLE_MEMORY_NAMED
    return "; ".join(parts) + (f" and {more} more" if more > 0 else "")


def idle_memory_held(ev: Evidence) -> Finding | None:
    """The GPU is idle (busy under ``MONITOR_IDLE_BUSY_PCT``) while processes hold at least
    ``IDLE_MEMORY_HELD_MIN_PCT`` of its memory: the GPU cannot be released or given to anyone else, so its
    price is paid for nothing. Names who holds it, for how long (a history; a sample is one instant) and
    what it costs at the GPU's price.

    A FinOps finding for any workload kind (a monitor cannot tell and need not: holding an idle GPU costs
    the same); telemetry only, because only `monitor` sees the other processes on a GPU. It replaces the
    oom_risk such a GPU used to get (issue 30: "an idle GPU holding 75 GiB for other users")."""
    h = ev.history
    held, capacity = h.idle_memory_held_bytes, ev.memory.memory_capacity_bytes
    if held is None or not capacity or 100.0 * held / capacity < T.IDLE_MEMORY_HELD_MIN_PCT:
        return None
    hours = h.idle_memory_held_hours
    if h.observed_gpu_hours is not None and (hours is None or hours < T.IDLE_MEMORY_HELD_MIN_HOURS):
        return None
    holders = list(h.idle_memory_holders or [])
    price = h.usd_per_gpu_hour
    if hours is None:  # one sample: what it costs per hour it stays like this
        how_long = "now (one sample: `gpuwise monitor --record` then `monitor report` measures how long)"
        money = f"; ${price:,.2f} per hour it stays so" if price is not None else ""
        severity: Severity = "medium"
    else:
        observed = h.observed_gpu_hours or hours
        how_long = f"for {hours:,.1f} of {observed:,.1f} h"
        money = f": ${h.idle_memory_held_usd:,.2f}" if h.idle_memory_held_usd is not None else ""
        severity = "high" if 100.0 * hours / observed >= T.FINOPS_IDLE_HIGH_PCT else "medium"
    who = _holders_text(holders) if holders else "no process listed (NVML gave none: check `nvidia-smi`)"
    return Finding(
        id="idle_memory_held",
        title="Idle GPU with its memory held: paid for, unusable by anyone else",
        severity=severity,
        confidence="high",
        category="hardware",
        summary=f"Busy < {T.MONITOR_IDLE_BUSY_PCT:.0f} % while {held / GiB:.1f} of {capacity / GiB:.1f} GiB "
        f"is held, {how_long}{money}. Held by: {who}.",
        metrics={
            "idle_memory_held_bytes": held,
            "memory_capacity_bytes": capacity,
            "idle_memory_held_hours": None if hours is None else round(hours, 3),
            "idle_memory_held_usd": None
            if h.idle_memory_held_usd is None
            else round(h.idle_memory_held_usd, 2),
            "usd_per_gpu_hour": price,
            "holders": holders,
        },
        fix="Ask the holders to end or release idle processes (a notebook kernel or a finished job that "
        "never exited frees its memory only when it exits); schedule jobs so a GPU is released between "
        "them, or set an idle timeout.",
        fix_snippet="nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv",
        gain=Gain(
            "cost_pct",
            0.0,
            round(100.0 * hours / h.observed_gpu_hours, 2),
            "the held idle hours' share of this GPU's bill, once released",
        )
        if hours is not None and h.observed_gpu_hours
        else None,
        source=ev.source,
        tools=("nvidia-smi", "gpuwise monitor report"),
    )
