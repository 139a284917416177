"""`gpuwise monitor` as a Document: GPUs, health, KPI breaches with their finding ids, processes, cost.

A field NVML could not read shows "n/a" (unsupported on this GPU or driver); the JSON has null.
"""

from __future__ import annotations

import time

from gpuwise.finops.fleet_findings import group
from gpuwise.monitor.kpi import Cost, GpuVerdict
from gpuwise.monitor.reading import GpuReading, HostReading
from gpuwise.monitor.sampler import Snapshot
from gpuwise.report.document import Document, KeyFigures, Note, Style, Table
from gpuwise.report.findings import findings_blocks
from gpuwise.report.table_fit import fit_columns
from gpuwise.report.units import gib, usd

__all__ = [
    "DROP_ORDER",
    "NA",
    "document",
    "host_only",
    "metric_reference",
    "metrics_document",
]

NA = "n/a"
# Columns given up, first named first, when a table is wider than the screen (`document(width=...)`, the
# live view): GPU index, name (with LOST and MIG), busy %, memory, power and temperature are never dropped;
# nor the health table's GPU, clock reasons and memory errors, nor the processes' GPU, pid and memory.
DROP_ORDER: dict[str, tuple[str, ...]] = {
    "gpus": ("mem MHz", "headroom", "SM MHz"),
    "health": ("energy kWh", "PCIe tx/rx GB/s", "PCIe"),
    "processes": ("SM %", "user", "process"),
}


def _of(value: float | None, limit: float | None, unit: str = "") -> str:
    if value is None:
        return NA
    return f"{value:,.0f}" + (f" / {limit:,.0f}" if limit is not None else "") + unit


def _pct(value: float | None) -> str:
    return NA if value is None else f"{value:.0f} %"


def _memory(r: GpuReading) -> str:
    if r.memory_used_bytes is None:
        return NA
    return f"{gib(r.memory_used_bytes, 1)} / {gib(r.memory_total_bytes, 1)}"


def _pcie(r: GpuReading) -> str:
    if r.pcie_gen is None or r.pcie_width is None:
        return NA
    link = f"gen{r.pcie_gen} x{r.pcie_width}"
    if r.pcie_gen_max is not None and r.pcie_width_max is not None:
        link += f" of gen{r.pcie_gen_max} x{r.pcie_width_max}"
    return link


def _rate(r: GpuReading) -> str:
    if r.pcie_tx_bytes_per_s is None or r.pcie_rx_bytes_per_s is None:
        return NA
    return f"{r.pcie_tx_bytes_per_s / 1e9:.2f} / {r.pcie_rx_bytes_per_s / 1e9:.2f}"


def _errors(r: GpuReading) -> str:
    if r.ecc_volatile_uncorrected is None and r.remapped_rows_uncorrectable is None:
        return NA
    parts = []
    if r.ecc_volatile_uncorrected is not None:
        parts.append(f"ECC {r.ecc_volatile_corrected or 0}c/{r.ecc_volatile_uncorrected}u")
    if r.remapped_rows_uncorrectable is not None:
        parts.append(f"remap {r.remapped_rows_correctable or 0}c/{r.remapped_rows_uncorrectable}u")
    if r.retired_pages:
        parts.append(f"retired {r.retired_pages}")
    if r.xid_errors:
        parts.append("XID " + ",".join(str(x) for x in sorted(set(r.xid_errors))))
    return " ".join(parts)


def _reasons(r: GpuReading) -> str:
    if r.throttle_reasons is None:
        return NA
    return ", ".join(r.throttle_reasons) or "none"


def _gpu_row(r: GpuReading) -> list[str]:
    name = (
        r.name.removeprefix("NVIDIA ") + (" (LOST)" if r.lost else "") + (" [MIG]" if r.mig_enabled else "")
    )
    return [
        str(r.index),
        name,
        _pct(r.busy_pct),
        _memory(r),
        _pct(r.headroom_pct),
        _of(r.sm_clock_mhz, r.sm_clock_max_mhz),
        _of(r.memory_clock_mhz, r.memory_clock_max_mhz),
        _of(r.power_w, r.power_limit_w),
        _of(r.temperature_c, None),
    ]


def _health_row(r: GpuReading) -> list[str]:
    energy = NA if r.energy_j is None else f"{r.energy_j / 3.6e6:,.2f}"
    return [str(r.index), _reasons(r), _pcie(r), _rate(r), _errors(r), energy]


def _style(v: GpuVerdict, r: GpuReading) -> Style:
    if r.lost or any(b.kpi == "memory_errors" for b in v.breaches):
        return "bad"
    return "warn" if v.breaches else ""


def document(
    snapshot: Snapshot,
    found: list[GpuVerdict],
    cost: Cost,
    details: bool = True,
    width: int | None = None,
    boxed: bool = False,
) -> Document:
    """The snapshot view; ``details=False`` (the live view) leaves out the findings' full text; ``width``
    (characters) drops columns in DROP_ORDER's order until each table fits, laid out by the live view
    (tui/frame.py) or, ``boxed``, by the terminal renderer (`--once` on a terminal)."""
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(snapshot.time_unix_s))
    doc = Document(
        f"gpuwise monitor — {snapshot.hostname}",
        subtitle=f"{when} · driver {snapshot.driver_version or NA} · busy % = time a kernel ran (NVML)",
    )
    gpus = snapshot.gpus
    breaches = sum(len(v.breaches) for v in found)
    doc.add(_figures(len(gpus), breaches, cost))
    if gpus:
        doc.add(*_gpu_tables(gpus, found, width, boxed))
    rows = [[str(v.index), b.kpi, b.text, b.finding_id] for v in found for b in v.breaches]
    if rows:
        doc.add(Table(["GPU", "KPI", "outside the KPI", "finding"], rows, caption="KPI breaches", flexible=2))
    procs = _process_rows(gpus)
    if procs:
        table = Table(
            ["GPU", "pid", "user", "process", "GPU memory GiB", "SM %"],
            procs,
            caption="Processes",
            flexible=3,
        )
        doc.add(table if width is None else fit_columns(table, width, DROP_ORDER["processes"], boxed=boxed))
    if snapshot.host is not None:
        doc.add(_host(snapshot.host))
    if details:
        # one finding per id across the GPUs, naming each GPU it is about (issue 30)
        findings = group([(f"GPU {v.index}", f) for v in found for f in v.findings], len(found))
        doc.add(*findings_blocks(findings, measured=bool(gpus) and not breaches))
    if any(r.not_available for r in gpus):
        doc.add(
            Note("n/a: NVML cannot read this field on this GPU or driver (see the JSON's not_available).")
        )
    return doc


def _figures(gpus: int, breaches: int, cost: Cost) -> KeyFigures:
    """GPU count, KPI breaches and, when priced, $ per hour spent and spent idle."""
    figures = [("GPUs", str(gpus)), ("KPI breaches", str(breaches))]
    if cost.usd_per_hour is not None:
        figures += [
            ("spent", usd(cost.usd_per_hour) + "/h"),
            ("spent idle", usd(cost.idle_usd_per_hour) + "/h"),
        ]
    return KeyFigures(figures, caption=f"price: {cost.price_source}")


def _gpu_tables(
    gpus: list[GpuReading], found: list[GpuVerdict], width: int | None, boxed: bool = False
) -> list[Table]:
    """One row per GPU: readings (busy, memory, clocks, power, temperature), then health (clock
    reasons, PCIe link and traffic, memory errors, energy); fitted to ``width`` when given."""
    tables = [
        Table(
            ["GPU", "name", "busy %", "memory GiB", "headroom", "SM MHz", "mem MHz", "power W", "°C"],
            [_gpu_row(r) for r in gpus],
            align="llrrrrrrr",
            row_styles=[_style(v, r) for v, r in zip(found, gpus, strict=True)],
            flexible=1,
        ),
        Table(
            ["GPU", "clock reasons", "PCIe", "PCIe tx/rx GB/s", "memory errors", "energy kWh"],
            [_health_row(r) for r in gpus],
            caption="Health (clock reasons decoded from NVML; energy since the driver loaded)",
            flexible=1,
        ),
    ]
    if width is None:
        return tables
    gpu_table, health = tables
    return [
        fit_columns(gpu_table, width, DROP_ORDER["gpus"], unwrapped=True, boxed=boxed),
        fit_columns(health, width, DROP_ORDER["health"], boxed=boxed),
    ]


def _process_rows(gpus: list[GpuReading]) -> list[list[str]]:
    """GPU, pid, user, process name, GPU memory (GiB), SM % of every process on every GPU."""
    return [
        [str(r.index), str(p.pid), p.user or NA, p.name or NA, gib(p.gpu_memory_bytes, 2), _pct(p.sm_pct)]
        for r in gpus
        for p in r.processes or []
    ]


def host_only(snapshot: Snapshot, why: str) -> Document:
    """No NVIDIA GPU: the host's CPU and memory, and the one line saying why there is no GPU."""
    doc = Document(f"gpuwise monitor — {snapshot.hostname}")
    doc.add(Note(why, "warn"))
    if snapshot.host is not None:
        doc.add(_host(snapshot.host))
    return doc


def _host(h: HostReading) -> KeyFigures:
    memory = f"{gib(h.memory_used_bytes, 1)} / {gib(h.memory_total_bytes, 1)}"
    return KeyFigures([("CPU", _pct(h.cpu_pct)), ("memory GiB", memory)], caption="Host")


def metric_reference(naming: str = "gpuwise") -> list[dict[str, str]]:
    """Every metric `gpuwise exporter` serves: name, type, help, NVML source, extra labels; ``naming="dcgm"``
    (``--names dcgm``): the DCGM fields first (source: the native metric they equal), then the native
    metrics no DCGM field replaces, all with dcgm-exporter's labels."""
    from gpuwise.exporter.dcgm_names import DCGM_FIELDS, DCGM_LABELS
    from gpuwise.exporter.scrape import DCGM_COVERED, LABELLED, LABELS, METRICS

    def name(base: str, kind: str) -> str:
        return f"gpuwise_{base}" + ("_total" if kind == "counter" else "")

    rows = [
        {"name": name(m.name, m.type), "type": m.type, "help": m.help, "source": m.source, "labels": ""}
        for m in METRICS
    ]
    rows += [
        {"name": name(n, k), "type": k, "help": h, "source": src, "labels": ", ".join(extra)}
        for n, k, h, src, extra in LABELLED
    ]
    base = ", ".join(LABELS)
    if naming == "dcgm":
        covered = {n.removesuffix("_total") for n in DCGM_COVERED}
        rows = [r for r in rows if r["name"].removesuffix("_total") not in covered]
        rows = [
            {"name": f.name, "type": f.type, "help": f.help, "source": f"= {f.native}", "labels": ""}
            for f in DCGM_FIELDS
        ] + rows
        base = ", ".join(DCGM_LABELS)
    for row in rows:
        row["labels"] = ", ".join(filter(None, [base, row["labels"]]))
    return rows


def metrics_document(naming: str = "gpuwise") -> Document:
    """`gpuwise exporter --json` (or --markdown, --html): every metric's Prometheus name, type,
    meaning, NVML source and labels (``naming="dcgm"``: as `--names dcgm` serves them)."""
    units = "dcgm-exporter names and units" if naming == "dcgm" else "Prometheus names, base units"
    doc = Document("gpuwise exporter metrics", subtitle=f"{units}; n/a fields are left out")
    rows = [[m["name"], m["type"], m["help"], m["source"], m["labels"]] for m in metric_reference(naming)]
    doc.add(Table(["metric", "type", "meaning", "NVML source", "labels"], rows, flexible=2))
    return doc
