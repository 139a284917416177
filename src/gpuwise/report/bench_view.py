"""`gpuwise bench` as a Document: each measured figure next to its peak (% of peak)."""

from __future__ import annotations

from gpuwise.bench.types import BandwidthFigure, BenchResult, MatmulFigure, percent_of
from gpuwise.report.document import Bullets, Document, Heading, Paragraph, Style, Table

__all__ = ["bench_document"]


def _n(value: float | None, fmt: str = "{:,.1f}") -> str:
    return "-" if value is None else fmt.format(value)


def _flops(tflops: float) -> str:
    """GFLOPS below 1 TFLOPS (CPUs), TFLOPS above."""
    return f"{tflops * 1000:,.1f} GFLOPS" if tflops < 1 else f"{tflops:,.1f} TFLOPS"


def _style(percent: float | None) -> Style:
    return "" if percent is None else ("bad" if percent > 105 else "")


def _matmul_table(figures: list[MatmulFigure], caption: str, by_median: bool = False) -> Table:
    """GPU: the best call (MAMF) as the headline; CPU (``by_median``): the median call of the best shape,
    with the quartiles of its calls, since one lucky call on a shared CPU swings the best-of 6x."""
    rows, styles = [], []
    for f in figures:
        headline = f.median_tflops_at_best_shape if by_median else f.best_tflops
        pct = percent_of(headline, f.peak_tflops)
        spread = "-" if f.spread_tflops is None else "-".join(_flops(x) for x in f.spread_tflops)
        other = f.best_tflops if by_median else f.median_tflops_at_best_shape
        rows.append(
            [
                f.dtype,
                _flops(headline),
                spread.replace(" GFLOPS-", "-").replace(" TFLOPS-", "-") + f" ({f.calls} calls)",
                "x".join(map(str, f.best_shape_mnk)),
                _flops(other),
                "-" if f.peak_tflops is None else _flops(f.peak_tflops),
                _n(pct, "{:.0f} %"),
            ]
        )
        styles.append(_style(pct))
    first, other_name = ("median", "best call") if by_median else ("best", "median there")
    columns = ["dtype", first, "middle half of calls", "at m x n x k", other_name, "peak", "% of peak"]
    return Table(columns, rows, caption=caption, align="lrrrrrr", row_styles=styles)


def _bandwidth_table(figures: list[BandwidthFigure], caption: str) -> Table:
    rows = [
        [
            f.name,
            _n(f.best_gb_per_s, "{:,.1f} GB/s"),
            _n(f.bytes_per_iteration / 1e6, "{:,.0f} MB"),
            _n(f.peak_gb_per_s, "{:,.0f} GB/s"),
            _n(percent_of(f.best_gb_per_s, f.peak_gb_per_s), "{:.0f} %"),
        ]
        for f in figures
    ]
    return Table(
        ["measure", "best", "bytes counted", "peak", "% of peak"], rows, caption=caption, align="lrrrr"
    )


def bench_document(result: BenchResult, run_id: int | None = None) -> Document:
    """`gpuwise bench`'s report: what this machine delivers (matmul TFLOPS per dtype, memory and
    link bandwidth) against the catalog's peaks, with the run's conditions."""
    device = result.device
    where = device.get("catalog_id") or device.get("name", "?")
    subtitle = f"{result.mode} mode, {result.wall_time_s:.1f} s"
    if result.load_average_1min is not None:
        subtitle += f", load average {result.load_average_1min:.1f} on {device['cpu']['logical_cpus']} CPUs"
    if run_id is not None:
        subtitle += f", saved as run {run_id}"
    doc = Document(f"gpuwise bench: {where}", subtitle=subtitle)
    if result.matmul:
        on_cpu = device.get("kind") == "cpu"
        title = "Matmul, median calls of the best shape" if on_cpu else "Matmul, best over the shape sweep"
        doc.add(Heading(title))
        peak_note = result.matmul[0].peak_source
        doc.add(_matmul_table(result.matmul, f"peak: {peak_note}", by_median=on_cpu))
    if result.cpu_matmul:
        doc.add(_matmul_table(result.cpu_matmul, "the CPU, for comparison", by_median=True))
    if result.memory:
        doc.add(Heading("Memory bandwidth (STREAM)"))
        doc.add(_bandwidth_table(result.memory, result.memory[0].counting))
        if result.memory[0].peak_gb_per_s is None:
            doc.add(
                Paragraph("No datasheet peak for host DRAM (channels and speed are not visible).", "muted")
            )
    if result.transfers:
        doc.add(Heading("Transfers"))
        doc.add(_bandwidth_table(result.transfers, "host<->device peak: PCIe x16, one direction"))
    if result.storage:
        doc.add(Heading("Storage reads"))
        rows = [
            [
                s.pattern,
                f"{s.block_bytes // 1024:,} KiB",
                _n(s.mb_per_s, "{:,.0f} MB/s"),
                _n(s.reads_per_s, "{:,.0f}"),
                s.note,
            ]
            for s in result.storage
        ]
        doc.add(
            Table(
                ["pattern", "block", "throughput", "reads/s", "page cache"],
                rows,
                caption=result.storage[0].path,
            )
        )
    if result.dataloader:
        loader = result.dataloader
        doc.add(Heading("Dataloader"))
        rate = _n(loader["samples_per_s"], "{:,.0f} samples/s")
        doc.add(
            Paragraph(
                f"{loader['dataset']}: {rate} (batch {loader['batch_size']}, "
                f"num_workers {loader['num_workers']}, "
                f"{loader['batches_timed']} batches after a first batch of {loader['first_batch_s']:.2f} s) "
                + loader["note"]
            )
        )
    if result.notes:
        doc.add(Bullets(result.notes, "muted"))
    return doc
