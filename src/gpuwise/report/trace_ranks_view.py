"""The ranks of a large run (more than `RANKS_LISTED`): distributions, extremes and outliers, not a row each.

The text report of 512 ranks used to print 629 lines; this view prints the step-time histogram (drawn in
text), the slowest and fastest ranks, and the outlier ranks with why, whatever the rank count.
``--json`` keeps every rank's summary.
"""

from __future__ import annotations

from collections.abc import Callable

from gpuwise.report.document import Bars, Block, Bullets, Heading, Paragraph, Table
from gpuwise.report.units import num as _n
from gpuwise.trace.analyze import TraceReport
from gpuwise.trace.rank import RankAnalysis
from gpuwise.trace.rank_distribution import RankDistribution, rank_distribution

__all__ = ["RankRow", "distribution_blocks"]

RankRow = Callable[[RankAnalysis], list[str]]  # one table row of a rank (trace_view._rank_row)


def distribution_blocks(report: TraceReport, row: RankRow) -> list[Block]:
    """Heading, a one-line summary, the step-time histogram, the slowest and fastest ranks (one row
    each, as `row` draws it), and the outliers with why."""
    dist = rank_distribution(report.ranks)
    blocks: list[Block] = [Heading("Ranks", 2)]
    if dist.median_ms is None:
        blocks.append(Paragraph(f"{len(report.ranks):,} ranks; fewer than two have steps to compare."))
        return blocks
    blocks.append(
        Paragraph(
            f"{len(report.ranks):,} ranks, {dist.ranks:,} with steps: mean step time per rank median "
            f"{dist.median_ms:,.2f} ms, 10th percentile {_ms(dist.p10_ms)}, 90th {_ms(dist.p90_ms)}; "
            f"{dist.outlier_count:,} outlier rank{'s' if dist.outlier_count != 1 else ''}."
        )
    )
    blocks.append(_histogram(dist))
    by_rank = {r.rank.rank: r for r in report.ranks if r.rank.rank is not None}
    extremes = [by_rank[k] for k, _ in dist.slowest] + [by_rank[k] for k, _ in dist.fastest]
    styles = ["bad"] * len(dist.slowest) + ["good"] * len(dist.fastest)
    blocks.append(
        Table(
            ["rank", "file", "step", "idle", "compute", "non-compute", "data wait", "comm exposed"],
            [row(r) for r in extremes],
            caption=f"The {len(dist.slowest)} slowest ranks, then the {len(dist.fastest)} fastest",
            align="llrrrrrr",
            row_styles=styles,  # type: ignore[arg-type]  # built from "bad" and "good"
        )
    )
    blocks += _outliers(dist)
    return blocks


def _ms(value: float | None) -> str:
    return _n(value, "{:,.2f}", " ms")


def _histogram(dist: RankDistribution) -> Bars:
    """Ranks per step-time bin, as bars (text, Markdown and HTML alike)."""
    most = max(n for _, _, n in dist.histogram)
    return Bars(
        [
            (f"{a:,.2f}–{b:,.2f} ms", float(n), f"{n:,} rank{'' if n == 1 else 's'}")
            for a, b, n in dist.histogram
        ],
        float(most),
        caption="Mean step time per rank: ranks per bin",
    )


def _outliers(dist: RankDistribution) -> list[Block]:
    if not dist.outliers:
        return [
            Paragraph("No outlier rank: every rank's mean step time is within 3.5 robust z of the median.")
        ]
    lines = []
    for o in dist.outliers:
        side = "slower" if o.step_ms > (dist.median_ms or 0) else "faster"
        why = (
            "; ".join(o.why)
            if o.why
            else "no per-rank figure stands out: look at its host (CPU, network, GPU clocks)"
        )
        lines.append(
            f"rank {o.rank}: {o.step_ms:,.2f} ms per step ({side} than the median; z {o.z:+.1f}): {why}"
        )
    if dist.outlier_count > len(dist.outliers):
        lines.append(f"… and {dist.outlier_count - len(dist.outliers):,} more (all in --json)")
    return [Paragraph("Outlier ranks (modified z-score above 3.5):"), Bullets(lines)]
