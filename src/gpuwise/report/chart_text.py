"""Charts drawn with characters (terminal, Markdown): bars, stacked bars, sparklines, a point list.

Compact on purpose: the HTML report has the full chart; here a glance at the shape is the point.
"""

from __future__ import annotations

from gpuwise.report.document import Chart

__all__ = ["WIDTH", "bar", "lines", "sparkline", "title"]

WIDTH = 32
_SPARK = "▁▂▃▄▅▆▇█"
_FILLS = "█▓▒░▚▞◆●"  # one fill per series of a stacked bar
_EIGHTHS = " ▏▎▍▌▋▊▉"


def bar(value: float, total: float, width: int = WIDTH) -> str:
    """A proportional bar drawn with eighth blocks."""
    if total <= 0 or value <= 0:
        return ""
    eighths = round(8 * width * min(value / total, 1.0))
    full, rest = divmod(eighths, 8)
    return "█" * full + ("" if rest == 0 else _EIGHTHS[rest])


def sparkline(values: list[float]) -> str:
    """`values` as one character each (▁ to █), scaled from their minimum to their maximum."""
    if not values:
        return ""
    low, high = min(values), max(values)
    span = high - low or 1.0
    return "".join(_SPARK[min(7, int((v - low) / span * 8))] for v in values)


def _label_width(chart: Chart) -> int:
    return min(40, max((len(c) for c in chart.categories), default=0))


def _fit(label: str, width: int) -> str:
    return (label if len(label) <= width else label[: width - 1] + "…").ljust(width)


def _value(chart: Chart, v: float) -> str:
    return f"{v:,.3g}" if abs(v) < 100 else f"{v:,.0f}"


def _bars(chart: Chart) -> list[str]:
    values = chart.series[0].values if chart.series else []
    top = max(values, default=0.0)
    width = _label_width(chart)
    marked = set(chart.marked)
    return [
        f"{_fit(c, width)}  {bar(v, top).ljust(WIDTH)}  {_value(chart, v)}"
        + (f"  ◀ {chart.mark_label}" if i in marked and chart.mark_label else "")
        for i, (c, v) in enumerate(zip(chart.categories, values, strict=False))
    ]


def _grouped(chart: Chart) -> list[str]:
    """Each category on its own line, then one bar per series under it."""
    top = max((v for s in chart.series for v in s.values), default=0.0)
    width = min(40, max((len(s.name) + 2 for s in chart.series), default=0))
    out = []
    for i, category in enumerate(chart.categories):
        out.append(category)
        for s in chart.series:
            value = s.values[i]
            out.append(
                f"{_fit('  ' + s.name, width)}  {bar(value, top).ljust(WIDTH)}  {_value(chart, value)}"
            )
    return out


def _stacked(chart: Chart) -> list[str]:
    totals = [sum(s.values[i] for s in chart.series) for i in range(len(chart.categories))]
    top = max(totals, default=0.0)
    width = _label_width(chart)
    lines = []
    for i, category in enumerate(chart.categories):
        cells = ""
        for k, s in enumerate(chart.series):
            cells += _FILLS[k % len(_FILLS)] * (round(WIDTH * s.values[i] / top) if top > 0 else 0)
        lines.append(
            f"{_fit(category, width)}  {cells[: WIDTH + 2].ljust(WIDTH)}  {_value(chart, totals[i])}"
        )
    legend = "   ".join(f"{_FILLS[k % len(_FILLS)]} {s.name}" for k, s in enumerate(chart.series))
    return [*lines, " " * width + "  " + legend]


def _line(chart: Chart) -> list[str]:
    out = []
    for s in chart.series:
        if not s.values:
            continue
        out.append(
            f"{s.name}: {sparkline(s.values)}  min {_value(chart, min(s.values))} · "
            f"max {_value(chart, max(s.values))}"
        )
    if chart.marked and chart.mark_label:
        where = ", ".join(chart.categories[i] for i in chart.marked[:8] if i < len(chart.categories))
        out.append(f"{chart.mark_label}: {where}" + (" …" if len(chart.marked) > 8 else ""))
    return out


def _scatter(chart: Chart) -> list[str]:
    width = _label_width(chart)
    ys = chart.series[0].values if chart.series else []
    marked = set(chart.marked)
    return [
        f"{_fit(c, width)}  {chart.x_label}: {_value(chart, x)}  {chart.y_label}: {_value(chart, y)}"
        + (f"  ◀ {chart.mark_label}" if i in marked and chart.mark_label else "")
        for i, (c, x, y) in enumerate(zip(chart.categories, chart.x, ys, strict=False))
    ]


def _waterfall(chart: Chart) -> list[str]:
    values = chart.series[0].values if chart.series else []
    total = sum(v for v in values if v > 0)
    width = _label_width(chart)
    lines, running = [], 0.0
    for c, v in zip(chart.categories, values, strict=False):
        start = round(WIDTH * running / total) if total > 0 else 0
        running += v
        size = round(WIDTH * abs(v) / total) if total > 0 else 0
        lines.append(f"{_fit(c, width)}  {(' ' * start + '█' * size).ljust(WIDTH)}  +{_value(chart, v)}")
    lines.append(f"{_fit('total', width)}  {'█' * WIDTH}  {_value(chart, running)}")
    return lines


def lines(chart: Chart) -> list[str]:
    """The chart as plain text lines (title excluded: the caller shows it)."""
    draw = {
        "bar": _bars,
        "grouped": _grouped,
        "stacked": _stacked,
        "line": _line,
        "scatter": _scatter,
        "waterfall": _waterfall,
    }[chart.kind]
    return draw(chart)


def title(chart: Chart) -> str:
    """The chart's title with the value axis's unit in parentheses (bar-like charts only)."""
    axis = chart.x_label if chart.horizontal else chart.y_label
    unit = (
        f" ({axis})"
        if axis and "(" not in axis and chart.kind in {"bar", "grouped", "stacked", "waterfall"}
        else ""
    )
    return chart.title + unit
