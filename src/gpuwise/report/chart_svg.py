"""Charts as inline SVG, drawn by matplotlib (the `report` extra): static, offline, no script.

matplotlib is imported on first use (about 0.3 s), never by the terminal or Markdown paths. Text stays
text in the SVG (svg.fonttype none: smaller, searchable, selectable), math parsing is off (a `$` in a
kernel name is a `$`), and the hash salt is fixed so one report renders to the same bytes every time.
"""

from __future__ import annotations

import io
import re
import textwrap
from html import escape
from typing import Any

from gpuwise.errors import GpuwiseError
from gpuwise.report.document import Chart, visible_controls

__all__ = ["INSTALL_HINT", "MARK", "PALETTE", "available", "render"]

INSTALL_HINT = "charts need matplotlib: pip install 'gpuwise[report]'"
PALETTE = ["#3b6fd8", "#e0892b", "#2f9e6e", "#c9413a", "#8a5cc2", "#7d6b5d", "#d16ba5", "#6f7c8f"]
MARK = "#c9413a"
_MAX_LABEL = 48
_MAX_TICKS = 32
_FEW_BARS = 40
_SVG_START = re.compile(r"<svg\b[^>]*>")


def _pyplot() -> Any:
    try:
        import matplotlib
    except ImportError:
        raise GpuwiseError(INSTALL_HINT) from None
    matplotlib.use("Agg", force=False)
    matplotlib.rcParams.update(
        {
            "svg.fonttype": "none",
            "svg.hashsalt": "gpuwise",
            "text.parse_math": False,
            "font.size": 9,
            "axes.spines.top": False,
            "axes.spines.right": False,
            "axes.titleweight": "bold",
        }
    )
    import matplotlib.pyplot as plt

    return plt


def available() -> bool:
    """Can charts be drawn as SVG here (matplotlib importable)? Without it HTML reports show the
    text charts."""
    try:
        _pyplot()
    except GpuwiseError:
        return False
    return True


def _label(text: str, limit: int = _MAX_LABEL) -> str:
    text = visible_controls(text)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _legend(ax: Any) -> None:
    """Beside the plot, not over the bars."""
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)


def _ticks(ax: Any, labels: list[str], horizontal: bool) -> None:
    """Category labels; past _MAX_TICKS categories only every k-th is named (128 ranks stay readable)."""
    step = max(1, -(-len(labels) // _MAX_TICKS))
    positions = list(range(0, len(labels), step))
    shown = [labels[i] for i in positions]
    if horizontal:
        ax.set_yticks(positions, shown)
        ax.invert_yaxis()
    else:
        tilt = len(shown) > 6
        ax.set_xticks(positions, shown, rotation=30 if tilt else 0, ha="right" if tilt else "center")


def _rects(
    ax: Any, values: list[float], base: list[float], horizontal: bool, color: str | list[str], label: str = ""
) -> None:
    """Bars at 0..n-1; past _FEW_BARS as one collection (one artist instead of one per bar: 3× faster)."""
    if len(values) <= _FEW_BARS:
        draw = ax.barh if horizontal else ax.bar
        extra = {"left": base} if horizontal else {"bottom": base}
        draw(range(len(values)), values, color=color, label=label or None, **extra)
        return
    from matplotlib.collections import PolyCollection

    boxes = []
    for i, (v, b) in enumerate(zip(values, base, strict=True)):
        low, high = i - 0.4, i + 0.4
        boxes.append(
            [(b, low), (b + v, low), (b + v, high), (b, high)]
            if horizontal
            else [(low, b), (high, b), (high, b + v), (low, b + v)]
        )
    ax.add_collection(PolyCollection(boxes, facecolors=color, linewidths=0, label=label or None))
    ax.autoscale_view()


def _bar(ax: Any, chart: Chart) -> None:
    labels = [_label(c) for c in chart.categories]
    values = chart.series[0].values if chart.series else []
    colors = [MARK if i in chart.marked else PALETTE[0] for i in range(len(values))]
    _rects(ax, values, [0.0] * len(values), chart.horizontal, colors)
    _ticks(ax, labels, chart.horizontal)


def _grouped(ax: Any, chart: Chart) -> None:
    labels = [_label(c) for c in chart.categories]
    count = max(1, len(chart.series))
    width = 0.8 / count
    for k, s in enumerate(chart.series):
        positions = [i - 0.4 + width * (k + 0.5) for i in range(len(labels))]
        if chart.horizontal:
            ax.barh(positions, s.values, height=width, color=PALETTE[k % len(PALETTE)], label=_label(s.name))
        else:
            ax.bar(positions, s.values, width=width, color=PALETTE[k % len(PALETTE)], label=_label(s.name))
    _ticks(ax, labels, chart.horizontal)
    _legend(ax)


def _stacked(ax: Any, chart: Chart) -> None:
    labels = [_label(c) for c in chart.categories]
    base = [0.0] * len(labels)
    for k, s in enumerate(chart.series):
        _rects(ax, s.values, base, chart.horizontal, PALETTE[k % len(PALETTE)], _label(s.name))
        base = [b + v for b, v in zip(base, s.values, strict=True)]
    _ticks(ax, labels, chart.horizontal)
    _legend(ax)


def _line(ax: Any, chart: Chart) -> None:
    xs = list(range(len(chart.categories)))
    for k, s in enumerate(chart.series):
        ax.plot(xs[: len(s.values)], s.values, color=PALETTE[k % len(PALETTE)], label=_label(s.name), lw=1.2)
    if chart.marked and chart.series:
        values = chart.series[0].values
        points = [i for i in chart.marked if i < len(values)]
        ax.scatter(points, [values[i] for i in points], color=MARK, zorder=3, label=chart.mark_label or None)
    if "" in chart.categories:  # the caller labelled only the points worth a tick (e.g. each midnight)
        ticks = [i for i in xs if chart.categories[i]]
    else:
        ticks = xs[:: max(1, len(xs) // 10)]
    ax.set_xticks(ticks, [_label(chart.categories[i]) for i in ticks])
    if len(chart.series) > 1 or chart.mark_label:
        _legend(ax)


def _scatter(ax: Any, chart: Chart) -> None:
    ys = chart.series[0].values if chart.series else []
    colors = [MARK if i in chart.marked else PALETTE[0] for i in range(len(ys))]
    ax.scatter(chart.x, ys, c=colors, zorder=3)
    for i, (label, x, y) in enumerate(zip(chart.categories, chart.x, ys, strict=False)):
        text = _label(label) + (f" ({chart.mark_label})" if i in chart.marked and chart.mark_label else "")
        ax.annotate(text, (x, y), textcoords="offset points", xytext=(4, 3), fontsize=7)


def _waterfall(ax: Any, chart: Chart) -> None:
    values = chart.series[0].values if chart.series else []
    labels = [_label(c) for c in chart.categories] + ["total"]
    starts, running = [], 0.0
    for v in values:
        starts.append(running)
        running += v
    positions = list(range(len(labels)))
    ax.bar(positions[:-1], values, bottom=starts, color=PALETTE[0])
    ax.bar([positions[-1]], [running], color=MARK)
    ax.set_xticks(positions, labels, rotation=30 if len(labels) > 5 else 0, ha="right")


_DRAW = {
    "bar": _bar,
    "grouped": _grouped,
    "stacked": _stacked,
    "line": _line,
    "scatter": _scatter,
    "waterfall": _waterfall,
}


def _size(chart: Chart) -> tuple[float, float]:
    rows = len(chart.categories) * (len(chart.series) if chart.kind == "grouped" else 1)
    if chart.horizontal:
        return 7.5, min(14.0, 1.2 + 0.26 * max(rows, 3))
    return 7.5, 3.6


def render(chart: Chart) -> str:
    """The chart as one `<svg>` element with a <title>, a <desc> and an aria-label."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=_size(chart))
    try:
        _DRAW[chart.kind](ax, chart)
        ax.set_title(textwrap.fill(_label(chart.title, 160), 80), loc="left")
        ax.set_xlabel(_label(chart.x_label))
        ax.set_ylabel(_label(chart.y_label))
        ax.grid(axis="x" if chart.horizontal else "y", alpha=0.3)
        out = io.StringIO()
        fig.savefig(out, format="svg", bbox_inches="tight", metadata={"Date": None, "Creator": None})
    finally:
        plt.close(fig)
    svg = out.getvalue()
    svg = svg[svg.index("<svg") :]
    title = escape(visible_controls(chart.title))
    desc = escape(visible_controls(chart.description or chart.title))
    return _SVG_START.sub(
        lambda m: (
            m.group(0)[:-1] + f' role="img" aria-label="{title}"><title>{title}</title><desc>{desc}</desc>'
        ),
        svg,
        count=1,
    )
