"""Health rules: what a GPU reports about itself through NVML (`gpuwise monitor`: a sample, or a recorded
history's lost hours). Each names the counter, the value and what to do; thresholds and their sources
are in `diagnose.thresholds` (DCGM's limits where NVIDIA publishes one).

Counters: ``volatile`` since the driver loaded, ``aggregate`` over the GPU's life (NVML's terms).
"""

from __future__ import annotations

from typing import Any

from gpuwise.diagnose import thresholds as T
from gpuwise.diagnose.evidence import Evidence
from gpuwise.diagnose.finding import Finding, FindingId, Severity

__all__ = [
    "gpu_ecc_corrected_storm",
    "gpu_ecc_uncorrected",
    "gpu_lost",
    "gpu_memory_remapped",
    "gpu_pcie_replays",
    "gpu_xid_errors",
]

_TOOLS = ("nvidia-smi", "gpuwise monitor")
_QUERY_ECC = "nvidia-smi -q -d ECC,PAGE_RETIREMENT,ROW_REMAPPER"


def _finding(
    ev: Evidence,
    id_: FindingId,
    title: str,
    severity: Severity,
    summary: str,
    metrics: dict[str, Any],
    fix: str,
    fix_snippet: str,
) -> Finding:
    return Finding(
        id=id_,
        title=title,
        severity=severity,
        confidence="high",  # the GPU's own counters
        category="hardware",
        summary=summary,
        metrics=metrics,
        fix=fix,
        fix_snippet=fix_snippet,
        source=ev.source,
        tools=_TOOLS,
    )


def gpu_lost(ev: Evidence) -> Finding | None:
    """NVML says the GPU fell off the bus (NVML_ERROR_GPU_IS_LOST) now, or a history holds hours it could
    not be read: paid for, usable by nobody. Critical while lost now; high for past lost hours."""
    h = ev.health
    hours = h.lost_gpu_hours
    if not h.gpu_lost and not hours:
        return None
    money = f": ${h.lost_usd:,.2f} paid for a GPU nobody could use" if h.lost_usd is not None else ""
    if hours:
        summary = f"NVML could not read the GPU (lost: fell off the bus) for {hours:,.2f} GPU-hours{money}."
    else:
        summary = "NVML reports the GPU lost (fell off the bus): nothing can run on it until it is reset."
    return _finding(
        ev,
        "gpu_lost",
        "GPU lost (fell off the bus)",
        "critical" if h.gpu_lost else "high",
        summary,
        metrics={"gpu_lost": bool(h.gpu_lost), "lost_gpu_hours": hours, "lost_usd": h.lost_usd},
        fix="Look for XID 79 (fallen off the bus) in the kernel log; with no process on it, reset the GPU "
        "(`nvidia-smi -r -i N`) or reboot the node; if it recurs, drain the node and have the GPU or its "
        "riser/power checked (a cloud provider replaces the instance).",
        fix_snippet="sudo dmesg -T | grep -i xid",
    )


def gpu_ecc_uncorrected(ev: Evidence) -> Finding | None:
    """Uncorrected ECC errors: since the driver loaded (critical: data a process read may be corrupt) or
    over the GPU's life (high: its memory has failed before)."""
    h = ev.health
    volatile, aggregate = h.ecc_volatile_uncorrected, h.ecc_aggregate_uncorrected
    now = volatile is not None and volatile > T.ECC_VOLATILE_UNCORRECTED_MAX
    ever = aggregate is not None and aggregate > T.ECC_AGGREGATE_UNCORRECTED_MAX
    if not (now or ever):
        return None
    parts = [f"{volatile:,} since the driver loaded"] if now else []
    parts += [f"{aggregate:,} over the GPU's life"] if ever else []
    return _finding(
        ev,
        "gpu_ecc_uncorrected",
        "Uncorrected ECC memory errors",
        "critical" if now else "high",
        f"NVML counts uncorrected ECC errors: {', '.join(parts)}."
        + (" A job on this GPU may have computed on corrupted data." if now else ""),
        metrics={"ecc_volatile_uncorrected": volatile, "ecc_aggregate_uncorrected": aggregate},
        fix="Rerun or verify the jobs that ran since the errors (their results may be corrupt); reset the "
        "GPU so the driver retires or remaps the failed memory; if uncorrected errors recur, drain the "
        "node and replace the GPU.",
        fix_snippet=_QUERY_ECC,
    )


def gpu_ecc_corrected_storm(ev: Evidence) -> Finding | None:
    """At least ``ECC_CORRECTED_STORM`` corrected ECC errors since the driver loaded: a memory cell is
    degrading (each correction also costs time), usually before uncorrected errors follow."""
    count = ev.health.ecc_volatile_corrected
    if count is None or count < T.ECC_CORRECTED_STORM:
        return None
    return _finding(
        ev,
        "gpu_ecc_corrected_storm",
        "Storm of corrected ECC errors",
        "high",
        f"{count:,} corrected ECC errors since the driver loaded (bar {T.ECC_CORRECTED_STORM:,}): the "
        "memory is degrading; uncorrected errors usually follow.",
        metrics={
            "ecc_volatile_corrected": count,
            "ecc_aggregate_corrected": ev.health.ecc_aggregate_corrected,
            "threshold": T.ECC_CORRECTED_STORM,
        },
        fix="Schedule a GPU reset (lets the driver remap or retire the failing rows) and watch the counter; "
        "if it keeps climbing, drain the node and replace the GPU.",
        fix_snippet=_QUERY_ECC,
    )


def gpu_memory_remapped(ev: Evidence) -> Finding | None:
    """Memory taken out of service: a failed row remap (critical), a pending one (high: takes effect at
    the next reset), uncorrectable-error remaps, or retired pages past DCGM's soft limit (hard limit:
    replace)."""
    h = ev.health
    pages, failed, pending = h.retired_pages or 0, bool(h.remap_failed), bool(h.remap_pending)
    rows = h.remapped_rows_uncorrectable or 0
    if not (failed or pending or rows or pages >= T.RETIRED_PAGES_SOFT):
        return None
    parts = ["row remapping failed"] if failed else []
    parts += ["a row remap waits for a GPU reset"] if pending else []
    parts += [f"{rows} rows remapped after uncorrectable errors"] if rows else []
    if pages >= T.RETIRED_PAGES_SOFT:
        parts.append(
            f"{pages} retired pages (DCGM soft limit {T.RETIRED_PAGES_SOFT}, hard {T.RETIRED_PAGES_MAX})"
        )
    replace = failed or pages >= T.RETIRED_PAGES_MAX
    severity: Severity = "critical" if replace else "high" if pending else "medium"
    return _finding(
        ev,
        "gpu_memory_remapped",
        "GPU memory taken out of service",
        severity,
        "NVML reports " + "; ".join(parts) + ".",
        metrics={
            "retired_pages": h.retired_pages,
            "remapped_rows_uncorrectable": h.remapped_rows_uncorrectable,
            "remapped_rows_correctable": h.remapped_rows_correctable,
            "remap_pending": h.remap_pending,
            "remap_failed": h.remap_failed,
        },
        fix="Replace the GPU (its spare rows or pages are used up)."
        if replace
        else "Reset the GPU when it is free (`nvidia-smi -r -i N`) so the pending remap takes effect; "
        "watch the counts."
        if pending
        else "Watch the counts: a GPU that keeps remapping rows is failing.",
        fix_snippet=_QUERY_ECC,
    )


def gpu_pcie_replays(ev: Evidence) -> Finding | None:
    """PCIe replays (link-level retransmissions) above DCGM's 8 a minute while watched, or, with no rate
    yet, an hour's worth at that rate since the driver loaded: a bad riser, slot or cable slowing every
    host-device copy."""
    h = ev.health
    rate, count = h.pcie_replays_per_min, h.pcie_replays
    fast = rate is not None and rate > T.PCIE_REPLAYS_PER_MIN_MAX
    many = count is not None and count >= T.PCIE_REPLAYS_SINCE_BOOT_MAX
    if not (fast or many):
        return None
    what = f"{rate:,.1f} replays a minute (DCGM's limit {T.PCIE_REPLAYS_PER_MIN_MAX:g})" if fast else ""
    since = f"{count:,} since the driver loaded" if count is not None else ""
    return _finding(
        ev,
        "gpu_pcie_replays",
        "PCIe link errors (replays)",
        "high" if fast else "medium",
        "NVML's PCIe replay counter: " + "; ".join(p for p in (what, since) if p) + ". Each replay "
        "resends a packet: host-device copies slow down and a failing link can drop the GPU.",
        metrics={"pcie_replays": count, "pcie_replays_per_min": rate},
        fix="Reseat the GPU or its riser/cable, check the slot's link (`nvidia-smi -q -d PCIE`); in a cloud, "
        "move off the instance and report it.",
        fix_snippet="nvidia-smi -q -d PCIE",
    )


def gpu_xid_errors(ev: Evidence) -> Finding | None:
    """XID errors NVML delivered while the sampler watched: hardware codes (``XID_HARDWARE``) high, the
    rest (an application's fault: illegal address, MMU fault) medium."""
    codes = ev.health.xid_errors
    if not codes:
        return None
    distinct = sorted(set(codes))
    hardware = [c for c in distinct if c in T.XID_HARDWARE]
    named = ", ".join(f"{c} ({T.XID_HARDWARE[c]})" if c in T.XID_HARDWARE else str(c) for c in distinct)
    return _finding(
        ev,
        "gpu_xid_errors",
        "XID errors reported by the driver",
        "high" if hardware else "medium",
        f"{len(codes)} XID errors since the sampler started: XID {named}.",
        metrics={"xid_errors": list(codes), "xid_hardware": hardware},
        fix="Hardware XIDs: drain the node and follow NVIDIA's XID catalog for each code (reset, then "
        "replace if it recurs). Application XIDs (13, 31, 43): a kernel fault in the job, fix the job."
        if hardware
        else "A job's kernel faulted (illegal address or MMU fault): rerun it with CUDA_LAUNCH_BLOCKING=1 or "
        "compute-sanitizer to find the kernel.",
        fix_snippet="sudo dmesg -T | grep -i xid",
    )
