"""One finding per id across a fleet: the rules judge each GPU, this step names the GPUs and sums the bill.

The rule engine stays per GPU (one `Evidence` per GPU's history); 500 GPUs with the same habit make one
finding naming the worst few by dollars ("and K more"), with fleet totals in the summary and every GPU's
own numbers under ``metrics["gpus"]``. Throttling names each GPU's own reasons (one thermal, another power:
the title says both); ids without fleet totals name the GPUs and quote the worst GPU's own summary.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from gpuwise.diagnose import thresholds as T
from gpuwise.diagnose.engine import rank_findings
from gpuwise.diagnose.finding import Finding, Gain

NAMED = 5  # GPUs named in a summary; the rest are counted


def _money(value: float | None) -> str:
    return "n/a" if value is None else f"${value:,.2f}"


def _sum(found: list[Finding], key: str) -> float | None:
    values = [f.metrics.get(key) for f in found]
    return sum(v for v in values if v is not None) if any(v is not None for v in values) else None


@dataclass(frozen=True)
class _Fleet:
    worst: Callable[[Finding], tuple[float, ...]]  # larger is worse: the order GPUs are named in
    item: Callable[[Finding], str]  # the GPU's own figure, after its label
    totals: Callable[[list[Finding]], tuple[str, dict[str, Any]]]  # fleet sentence, fleet metrics
    fix: Callable[[list[tuple[str, Finding]]], str] | None = None  # when the GPUs' own fixes differ
    title: Callable[[list[Finding]], str] | None = None  # when the GPUs' own titles differ


def _idle(found: list[Finding]) -> tuple[str, dict[str, Any]]:
    idle, hours, cost = (_sum(found, k) or 0.0 for k in ("idle_gpu_hours", "observed_gpu_hours", "idle_usd"))
    money = f": {_money(cost)}" if _sum(found, "idle_usd") is not None else ""
    share = 100 * idle / hours if hours else 0.0
    sentence = (
        f"idle (busy < {T.MONITOR_IDLE_BUSY_PCT:.0f} %) {idle:,.1f} of their {hours:,.1f} GPU-hours "
        f"({share:.0f} %), paid for nothing{money}."
    )
    return sentence, {
        "idle_gpu_hours": idle,
        "observed_gpu_hours": hours,
        "idle_usd": _sum(found, "idle_usd"),
    }


def _chronic(found: list[Finding]) -> tuple[str, dict[str, Any]]:
    busy = [float(f.metrics["busy_in_use_pct"]) for f in found]
    hours = _sum(found, "observed_gpu_hours") or 0.0
    sentence = (
        f"while in use they ran a kernel only {min(busy):.0f}–{max(busy):.0f} % of the time (KPI "
        f"{T.FINOPS_CHRONIC_BUSY_PCT:.0f} %) over {hours:,.0f} GPU-hours: more GPUs would idle the same way."
    )
    return sentence, {"observed_gpu_hours": hours, "busy_in_use_pct_min": min(busy)}


def _oversized(found: list[Finding]) -> tuple[str, dict[str, Any]]:
    movable = [f for f in found if f.metrics["smaller_gpu"]["gpu"]]
    saved = _sum(found, "usd_saved") or 0.0
    parts = []
    if movable:
        hours = sum(float(f.metrics["smaller_gpu"]["in_use_gpu_hours"]) for f in movable)
        parts.append(
            f"{len(movable)} could move to a cheaper, smaller GPU that holds their peak and keeps up: "
            f"{_money(saved)} less over their {hours:,.1f} in-use GPU-hours"
        )
    if len(movable) < len(found):
        misses = [c for f in found if (c := f.metrics["smaller_gpu"].get("closest"))]
        nearest = min(misses, key=lambda c: c["projected_busy_pct"]) if misses else None
        parts.append(
            f"{len(found) - len(movable)} have no cheaper GPU that keeps up with their busy %"
            + (
                f" (nearest: the {nearest['gpu_name']}, ~{nearest['projected_busy_pct']:.0f} % busy by its "
                f"{nearest['limited_by']}; KPI {T.MONITOR_BUSY_KPI_PCT:.0f} %)"
                if nearest
                else ""
            )
            + ": fill them with more work instead"
        )
    return "; ".join(parts) + ".", {"usd_saved": saved, "gpus_movable": len(movable)}


def _oversized_fix(pairs: list[tuple[str, Finding]]) -> str:
    """Per target GPU, who moves there; then who stays and is filled."""
    targets: dict[tuple[str, str] | None, list[str]] = {}
    for label, f in pairs:
        fit = f.metrics["smaller_gpu"]
        targets.setdefault((fit["gpu"], fit["gpu_name"]) if fit["gpu"] else None, []).append(label)
    steps = [
        f"move {named(labels)} to the {name} (`gpuwise plan --gpu {gpu_id}` predicts its speed)"
        for (gpu_id, name), labels in ((t, ls) for t, ls in targets.items() if t)
    ]
    if None in targets:
        steps.append(
            f"keep and fill {named(targets[None])}: a second job or replica in the memory and kernel-free "
            "time they leave (MPS, or MIG slices on MIG-capable GPUs)"
        )
    text = "; ".join(steps)
    return text[0].upper() + text[1:] + "."


def _oversized_item(f: Finding) -> str:
    fit = f.metrics["smaller_gpu"]
    if fit["gpu"]:
        return f"→ {fit['gpu_name'].removeprefix('NVIDIA ')}, {_money(fit['usd_saved'])}"
    return f"{fit['busy_in_use_pct']:.0f} % busy, {f.metrics['memory_headroom_pct']:.0f} % free"


def _slowing(f: Finding) -> dict[str, float]:
    """A throttling finding's thermal and power reasons (% of samples), most first."""
    shares = {k: float(v) for k, v in (f.metrics.get("throttle_pct") or {}).items() if v}
    relevant = {k: v for k, v in shares.items() if "thermal" in k or "power" in k}
    return dict(sorted(relevant.items(), key=lambda kv: -kv[1]))


def _throttle_item(f: Finding) -> str:
    """The GPU's own reasons: 'hw_thermal 45 %, sw_power_cap 5 %'."""
    return ", ".join(f"{k} {v:.0f} %" for k, v in _slowing(f).items())


def _throttle_totals(found: list[Finding]) -> tuple[str, dict[str, Any]]:
    limits = sorted({"thermal" if "thermal" in k else "power" for f in found for k in _slowing(f)})
    sentence = f"NVML reports {' and '.join(limits)} clock throttling, each GPU's own reasons in brackets."
    return sentence, {"limits": limits}


def _throttle_title(found: list[Finding]) -> str:
    limits = sorted({"thermal" if "thermal" in k else "power" for f in found for k in _slowing(f)})
    return f"GPUs slow their clocks ({' / '.join(limits)} limit)"


def _held(found: list[Finding]) -> tuple[str, dict[str, Any]]:
    hours = _sum(found, "idle_memory_held_hours")
    cost = _sum(found, "idle_memory_held_usd")
    sentence = "idle while processes hold their memory" + (
        f" for {hours:,.1f} GPU-hours" if hours is not None else ""
    )
    sentence += f": {_money(cost)}." if cost is not None else "."
    return sentence, {"idle_memory_held_hours": hours, "idle_memory_held_usd": cost}


def _held_item(f: Finding) -> str:
    holders = f.metrics.get("holders") or []
    who = sorted({h.get("user") or "n/a" for h in holders})
    money = f.metrics.get("idle_memory_held_usd")
    parts = [f"{f.metrics['idle_memory_held_bytes'] / 2**30:.0f} GiB"] + (
        ["by " + ", ".join(who)] if who else []
    )
    return ", ".join(parts + ([_money(money)] if money is not None else []))


def _lost(found: list[Finding]) -> tuple[str, dict[str, Any]]:
    hours, cost = _sum(found, "lost_gpu_hours"), _sum(found, "lost_usd")
    sentence = "lost (fell off the bus)" + (f" for {hours:,.2f} GPU-hours" if hours else "")
    sentence += f", paid for nothing: {_money(cost)}." if cost is not None else "."
    return sentence, {"lost_gpu_hours": hours, "lost_usd": cost}


def _lost_item(f: Finding) -> str:
    hours, cost = f.metrics.get("lost_gpu_hours"), f.metrics.get("lost_usd")
    parts = ([f"{hours:,.2f} h"] if hours else ["lost now"]) + ([_money(cost)] if cost is not None else [])
    return ", ".join(parts)


FLEET: dict[str, _Fleet] = {
    "gpu_lost": _Fleet(
        lambda f: (f.metrics.get("lost_usd") or 0.0, f.metrics.get("lost_gpu_hours") or 0.0),
        _lost_item,
        _lost,
    ),
    "throttling": _Fleet(
        lambda f: (max(_slowing(f).values(), default=0.0),),
        _throttle_item,
        _throttle_totals,
        title=_throttle_title,
    ),
    "idle_memory_held": _Fleet(
        lambda f: (f.metrics.get("idle_memory_held_usd") or 0.0, f.metrics["idle_memory_held_bytes"]),
        _held_item,
        _held,
    ),
    "idle_gpu_hours": _Fleet(
        lambda f: (f.metrics.get("idle_usd") or 0.0, f.metrics["idle_gpu_hours"]),
        lambda f: _money(f.metrics["idle_usd"]) if f.metrics.get("idle_usd") is not None else "",
        _idle,
    ),
    "chronic_low_busy": _Fleet(
        lambda f: (-float(f.metrics["busy_in_use_pct"]),),
        lambda f: f"{f.metrics['busy_in_use_pct']:.0f} %",
        _chronic,
    ),
    "oversized_gpu": _Fleet(
        lambda f: (f.metrics["usd_saved"], f.metrics["memory_headroom_pct"]),
        _oversized_item,
        _oversized,
        _oversized_fix,
    ),
}


def named(labels: list[str]) -> str:
    """The first NAMED labels, then how many more: a line that stays a line on 500 GPUs."""
    more = len(labels) - NAMED
    return ", ".join(labels[:NAMED]) + (f" and {more} more" if more > 0 else "")


def _names(ordered: list[tuple[str, Finding]], item: Callable[[Finding], str] | None) -> str:
    return named([f"{label} ({text})" if item and (text := item(f)) else label for label, f in ordered])


def _gain(found: list[Finding]) -> Gain | None:
    gains = [f.gain for f in found if f.gain is not None]
    if not gains or len({g.metric for g in gains}) > 1:
        return None
    if len(gains) == 1:
        return gains[0]
    note = f"{gains[0].note}; range over these GPUs" if gains[0].note else "range over these GPUs"
    return Gain(gains[0].metric, min(g.low for g in gains), max(g.high for g in gains), note)


def group(per_gpu: list[tuple[str, Finding]], fleet_size: int) -> list[Finding]:
    """``(GPU label, finding)`` pairs → one finding per id, most important first."""
    by_id: dict[str, list[tuple[str, Finding]]] = {}
    for label, finding in per_gpu:
        by_id.setdefault(finding.id, []).append((label, finding))
    return rank_findings(_one(pairs, fleet_size) for pairs in by_id.values())


def _fix(pairs: list[tuple[str, Finding]], fleet: _Fleet | None) -> str:
    if fleet and fleet.fix:
        return fleet.fix(pairs)
    label, worst = pairs[0]
    return f"{label}: {worst.fix}"


def _one(pairs: list[tuple[str, Finding]], fleet_size: int) -> Finding:
    fleet = FLEET.get(pairs[0][1].id)
    if fleet:
        pairs = sorted(pairs, key=lambda lf: fleet.worst(lf[1]), reverse=True)
    else:
        pairs = sorted(pairs, key=lambda lf: lf[1].severity_rank)
    found = [f for _, f in pairs]
    worst_label, worst = pairs[0]
    most_severe = min(found, key=lambda f: f.severity_rank)
    per_gpu = [{"gpu": label, "severity": f.severity, **f.metrics} for label, f in pairs]
    totals: dict[str, Any] = {}
    if len(pairs) == 1:
        summary = f"{worst_label}: {worst.summary}"
    elif fleet:
        sentence, totals = fleet.totals(found)
        summary = f"{len(pairs)} of {fleet_size} GPUs — {_names(pairs, fleet.item)}: {sentence}"
    else:
        summary = f"{len(pairs)} of {fleet_size} GPUs — {_names(pairs, None)}; worst, {worst_label}: "
        summary += worst.summary
    fixes = {f.fix for f in found}
    titles = {f.title for f in found}
    return replace(
        worst,
        title=fleet.title(found) if len(titles) > 1 and fleet and fleet.title else worst.title,
        severity=most_severe.severity,
        summary=summary,
        metrics={"gpu_count": len(pairs), **totals, "gpus": per_gpu},
        fix=worst.fix
        if len(fixes) == 1
        else fleet.fix(pairs)
        if fleet and fleet.fix
        else f"{worst_label}: {worst.fix}",
        gain=_gain(found),
    )


__all__ = ["NAMED", "group", "named"]
