"""KPI checks on one snapshot: each breach names the finding that explains it, and what the GPUs cost.

Findings come from the one rule engine (`gpuwise.diagnose`) where a rule reads the same numbers
(low_utilization, oom_risk, small_batch, throttling); the checks no rule covers (an idle GPU, a
downgraded PCIe link, memory errors, a lost GPU, unused headroom) carry the monitor's own ids below,
explained in docs/monitoring.md.
"""

from __future__ import annotations

from collections.abc import Set as AbstractSet
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from gpuwise.diagnose import thresholds as T
from gpuwise.diagnose.engine import diagnose
from gpuwise.diagnose.evidence import DeviceActivity, Evidence, GpuHealth, MemoryUse, Telemetry
from gpuwise.diagnose.finding import Finding
from gpuwise.monitor.reading import GpuReading
from gpuwise.monitor.sampler import Snapshot

# The KPI a breach is about.
Kpi = Literal["busy", "idle", "headroom", "throttling", "pcie", "memory_errors", "xid", "lost"]
# Ids of the monitor's own checks (no Evidence rule reads these readings).
MonitorCheck = Literal[
    "gpu_idle", "busy_below_kpi", "memory_headroom_unused", "clocks_slowed", "pcie_downgraded",
    "gpu_memory_errors", "gpu_xid_errors", "gpu_lost",
]  # fmt: skip
# Clock-event reasons that cost speed (gpu_idle, application clocks, sync boost and display are not faults).
SLOWING_REASONS = (
    "sw_power_cap",
    "hw_slowdown",
    "sw_thermal_slowdown",
    "hw_thermal_slowdown",
    "hw_power_brake_slowdown",
)


@dataclass
class Breach:
    """One KPI outside its band on one GPU, with the numbers, and the finding id that explains it."""

    kpi: Kpi
    text: str  # what is outside the KPI, with its numbers
    finding_id: str  # a rule's FindingId or a MonitorCheck


@dataclass
class GpuVerdict:
    """One GPU's result for one snapshot: its KPI breaches, the rule engine's findings, its catalog id and
    price in USD/hour (None: unknown).
    """

    index: int
    breaches: list[Breach] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    catalog_id: str | None = None
    usd_per_hour: float | None = None

    def to_dict(self) -> dict[str, Any]:
        """The verdict as JSON (one entry of ``monitor --json``'s verdicts)."""
        return {
            "index": self.index,
            "breaches": [asdict(b) for b in self.breaches],
            "findings": [f.to_dict() for f in self.findings],
            "catalog_id": self.catalog_id,
            "usd_per_hour": self.usd_per_hour,
        }


@dataclass
class Cost:
    """What the sampled GPUs cost per hour (USD), in all and for the idle
    ones; None when no GPU has a price.
    """

    usd_per_hour: float | None  # all GPUs with a price
    idle_usd_per_hour: float | None  # the idle ones among them
    price_source: str  # "--usd-per-gpu-hour", "catalog on-demand", or why there is none


def catalog_id(nvml_name: str) -> str | None:
    """Catalog id for an NVML name (the catalog's one matcher: an RTX 3090 is never an RTX 4090)."""
    from gpuwise.catalog.device_names import match_device_name

    return match_device_name(nvml_name)


def is_idle(r: GpuReading) -> bool:
    """True when the GPU's busy % is known and below ``MONITOR_IDLE_BUSY_PCT``."""
    return r.busy_pct is not None and r.busy_pct < T.MONITOR_IDLE_BUSY_PCT


def evidence_for(r: GpuReading, gpu_id: str | None, usd_per_hour: float | None = None) -> Evidence:
    """One sample as telemetry Evidence: an active throttle reason counts as 100 % of this sample. An idle
    GPU's busy % and used memory are left out of the work's figures: nothing runs on it, so no rule about
    how work runs applies (gpu_idle says it, and oom_risk stays quiet); its used memory goes to the idle
    fields instead, with the processes holding it and the GPU's price (``usd_per_hour``), for
    idle_memory_held. A monitor sample never knows the workload kind ("unknown")."""
    idle = is_idle(r)
    ev = Evidence(
        source="telemetry",
        label=f"GPU {r.index}",
        device="cuda",
        gpu=gpu_id or r.name,
        activity=DeviceActivity(gpu_util_pct=None if idle else r.busy_pct),
        memory=MemoryUse(
            memory_capacity_bytes=r.memory_total_bytes,
            memory_peak_bytes=None if idle else r.memory_used_bytes,
        ),
        telemetry=Telemetry(
            throttle_pct={k: 100.0 for k in r.throttle_reasons or [] if k in SLOWING_REASONS},
            temperature_c_max=r.temperature_c,
            power_w_mean=r.power_w,
            sm_clock_mhz_mean=r.sm_clock_mhz,
        ),
    )
    ev.health = health_of(r)
    if idle and r.memory_used_bytes is not None:
        ev.history.idle_memory_held_bytes = r.memory_used_bytes
        ev.history.usd_per_gpu_hour = usd_per_hour
        ev.history.idle_memory_holders = [
            {
                "process": f"{p.pid} {p.name or 'n/a'}",
                "user": p.user,
                "memory_bytes": p.gpu_memory_bytes,
                "idle_gpu_hours": None,
                "idle_usd": None,
            }
            for p in sorted(r.processes or [], key=lambda p: -(p.gpu_memory_bytes or 0))
        ]
    return ev


def health_of(r: GpuReading) -> GpuHealth:
    """The reading's health counters as Evidence (the health rules read them)."""
    return GpuHealth(
        gpu_lost=r.lost,
        ecc_volatile_corrected=r.ecc_volatile_corrected,
        ecc_volatile_uncorrected=r.ecc_volatile_uncorrected,
        ecc_aggregate_corrected=r.ecc_aggregate_corrected,
        ecc_aggregate_uncorrected=r.ecc_aggregate_uncorrected,
        retired_pages=r.retired_pages,
        remapped_rows_correctable=r.remapped_rows_correctable,
        remapped_rows_uncorrectable=r.remapped_rows_uncorrectable,
        remap_pending=r.remap_pending,
        remap_failed=r.remap_failed,
        pcie_replays=r.pcie_replays,
        pcie_replays_per_min=r.pcie_replays_per_min,
        xid_errors=list(r.xid_errors) if r.xid_errors else None,
    )


def gpu_price(gpu_id: str | None, usd_per_gpu_hour: float | None) -> float | None:
    """$/GPU-hour: the flag's, else the catalog's on-demand price of ``gpu_id``; None when unknown."""
    if usd_per_gpu_hour is not None:
        return usd_per_gpu_hour
    if gpu_id is None:
        return None
    from gpuwise.catalog.prices import price

    listed = price(gpu_id, "on_demand")
    return listed.usd_per_gpu if listed is not None else None


def check(r: GpuReading, gpu_id: str | None = None, usd_per_gpu_hour: float | None = None) -> GpuVerdict:
    """One GPU's verdict: the rule engine's findings on this reading, and each KPI outside its band as a
    Breach naming the finding that explains it (a rule's id where one fired, else the monitor's own).
    ``usd_per_gpu_hour`` (None: the catalog's on-demand price) prices memory held on an idle GPU."""
    verdict = GpuVerdict(r.index, catalog_id=gpu_id)
    if r.lost:  # nothing else can be read: the lost finding (priced by the live view's $/h) alone
        lost = Evidence(source="telemetry", label=f"GPU {r.index}", device="cuda", gpu=gpu_id or r.name)
        lost.health = health_of(r)
        verdict.findings = diagnose(lost)
        verdict.breaches.append(Breach("lost", "GPU lost (NVML: fell off the bus)", "gpu_lost"))
        return verdict
    verdict.findings = diagnose(evidence_for(r, gpu_id, gpu_price(gpu_id, usd_per_gpu_hour)))
    fired = {f.id for f in verdict.findings}
    for breach in (_busy_breach(r, fired), _headroom_breach(r, fired)):
        if breach is not None:
            verdict.breaches.append(breach)
    verdict.breaches.extend(_health_breaches(r, fired))
    return verdict


def _busy_breach(r: GpuReading, fired: AbstractSet[str]) -> Breach | None:
    """Idle (below the idle bar), or busy below the KPI."""
    if is_idle(r):
        return Breach("idle", f"idle: busy {r.busy_pct:.0f} %", "gpu_idle")
    if r.busy_pct is not None and r.busy_pct < T.MONITOR_BUSY_KPI_PCT:
        rule = "low_utilization" if "low_utilization" in fired else "busy_below_kpi"
        return Breach("busy", f"busy {r.busy_pct:.0f} % < {T.MONITOR_BUSY_KPI_PCT:.0f} %", rule)
    return None


def _headroom_breach(r: GpuReading, fired: AbstractSet[str]) -> Breach | None:
    """Memory headroom too low (OOM risk; memory held if the GPU idles), or too high on a GPU that is
    working (memory bought unused)."""
    headroom = r.headroom_pct
    if headroom is None:
        return None
    if headroom < T.MONITOR_HEADROOM_LOW_PCT:
        # on an idle GPU the memory is held, not at risk: idle_memory_held explains it
        rule = "idle_memory_held" if "idle_memory_held" in fired else "oom_risk"
        return Breach("headroom", f"headroom {headroom:.0f} % < {T.MONITOR_HEADROOM_LOW_PCT:.0f} %", rule)
    if headroom > T.MONITOR_HEADROOM_HIGH_PCT and not is_idle(r):
        rule = "small_batch" if "small_batch" in fired else "memory_headroom_unused"
        return Breach("headroom", f"headroom {headroom:.0f} % > {T.MONITOR_HEADROOM_HIGH_PCT:.0f} %", rule)
    return None


def _health_breaches(r: GpuReading, fired: AbstractSet[str]) -> list[Breach]:
    """Faults, in this order: clocks slowed, PCIe link downgraded, memory errors, XID errors."""
    found = []
    slowing = [k for k in r.throttle_reasons or [] if k in SLOWING_REASONS]
    if slowing:
        rule = "throttling" if "throttling" in fired else "clocks_slowed"
        found.append(Breach("throttling", "clocks slowed: " + ", ".join(slowing), rule))
    pcie = pcie_downgrade(r)
    if pcie:
        found.append(Breach("pcie", pcie, "pcie_downgraded"))
    errors = memory_errors(r)
    if errors:
        rule = next((i for i in _MEMORY_RULES if i in fired), "gpu_memory_errors")
        found.append(Breach("memory_errors", errors, rule))
    if r.xid_errors:
        codes = ", ".join(str(x) for x in sorted(set(r.xid_errors)))
        found.append(
            Breach("xid", f"{len(r.xid_errors)} XID errors since start (XID {codes})", "gpu_xid_errors")
        )
    return found


_MEMORY_RULES = ("gpu_ecc_uncorrected", "gpu_memory_remapped", "gpu_ecc_corrected_storm")


def pcie_downgrade(r: GpuReading) -> str | None:
    """A link narrower than the card's maximum is a fault; a lower generation only while busy (idle GPUs
    drop their link speed to save power)."""
    if None in (r.pcie_gen, r.pcie_gen_max, r.pcie_width, r.pcie_width_max):
        return None
    narrow = r.pcie_width < r.pcie_width_max  # type: ignore[operator]  # None excluded above
    slow = r.pcie_gen < r.pcie_gen_max and not is_idle(r)  # type: ignore[operator]  # None excluded above
    if not (narrow or slow):
        return None
    return f"PCIe gen{r.pcie_gen} x{r.pcie_width} of gen{r.pcie_gen_max} x{r.pcie_width_max}"


def memory_errors(r: GpuReading) -> str | None:
    """The GPU memory faults of this reading in one line (uncorrected volatile ECC errors, a pending or failed
    row remap); None when there are none.
    """
    parts = []
    if r.ecc_volatile_uncorrected:
        parts.append(f"{r.ecc_volatile_uncorrected} uncorrected ECC errors since boot")
    elif r.ecc_aggregate_uncorrected:
        parts.append(f"{r.ecc_aggregate_uncorrected} uncorrected ECC errors over the GPU's life")
    if r.ecc_volatile_corrected is not None and r.ecc_volatile_corrected >= T.ECC_CORRECTED_STORM:
        parts.append(f"{r.ecc_volatile_corrected:,} corrected ECC errors since boot")
    if r.remap_pending:
        parts.append("row remap pending (reset the GPU)")
    if r.remap_failed:
        parts.append("row remapping failed (replace the GPU)")
    return "; ".join(parts) or None


def verdicts(snapshot: Snapshot, usd_per_gpu_hour: float | None = None) -> list[GpuVerdict]:
    """One ``check`` per GPU of the snapshot, in the snapshot's order (``usd_per_gpu_hour``: the price
    flag, None for the catalog's)."""
    ids = {r.name: catalog_id(r.name) for r in snapshot.gpus}
    return [check(r, ids[r.name], usd_per_gpu_hour) for r in snapshot.gpus]


def cost(snapshot: Snapshot, found: list[GpuVerdict], usd_per_gpu_hour: float | None = None) -> Cost:
    """$/h of the GPUs being held and of the idle ones, from the flag or the catalog's on-demand price."""
    source = "--usd-per-gpu-hour" if usd_per_gpu_hour is not None else "catalog on-demand"
    for verdict in found:
        verdict.usd_per_hour = gpu_price(verdict.catalog_id, usd_per_gpu_hour)
    priced = [(r, v) for r, v in zip(snapshot.gpus, found, strict=True) if v.usd_per_hour is not None]
    if not priced:
        return Cost(None, None, "no catalog price for these GPUs (pass --usd-per-gpu-hour)")
    total = sum(v.usd_per_hour or 0.0 for _, v in priced)
    idle = sum(v.usd_per_hour or 0.0 for r, v in priced if is_idle(r) or r.lost)
    return Cost(total, idle, source)


__all__ = [
    "SLOWING_REASONS",
    "Breach",
    "Cost",
    "GpuVerdict",
    "Kpi",
    "MonitorCheck",
    "catalog_id",
    "check",
    "cost",
    "evidence_for",
    "gpu_price",
    "health_of",
    "is_idle",
    "memory_errors",
    "pcie_downgrade",
    "verdicts",
]
