"""Fit a `Table` to a terminal width by dropping columns in a stated order (the live monitor at 80 columns).

Why: a table wider than the screen makes the terminal renderer squeeze its widest free-text column to
nothing (the GPU name and its LOST marker vanished at 80-90 columns, issue 30). Dropping the least
needed columns first keeps what identifies a row readable. Widths are counted as the plain-text live
renderer lays tables out (tui/frame.py): every column as wide as its widest cell or header, two spaces
between columns; the ``flexible`` column counts at its floor (it wraps).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from gpuwise.report.document import Table

__all__ = ["GAP", "column_widths", "fit_columns", "flexible_floor", "natural_width"]

GAP = 2  # spaces between columns


def flexible_floor(t: Table, i: int) -> int:
    """The narrowest the flexible column ``i`` wraps to: its header, or 12 characters if a cell is longer."""
    widest = max((len(row[i]) for row in t.rows if i < len(row)), default=0)
    return max(len(t.columns[i]), min(widest, 12))


def column_widths(t: Table, flexible_at_floor: bool = False) -> list[int]:
    """Each column's width: its widest cell or header (the flexible one at its floor when asked)."""
    widths = []
    for i, col in enumerate(t.columns):
        if flexible_at_floor and i == t.flexible:
            widths.append(flexible_floor(t, i))
        else:
            widths.append(max([len(col), *(len(row[i]) for row in t.rows if i < len(row))]))
    return widths


def natural_width(t: Table, flexible_at_floor: bool = True, boxed: bool = False) -> int:
    """Characters the table needs on one line: columns and the gaps between them, or (``boxed``) the
    terminal renderer's box lines and one space of padding each side of every cell."""
    widths = column_widths(t, flexible_at_floor)
    if boxed:
        return sum(widths) + 3 * len(widths) + 1
    return sum(widths) + GAP * max(len(widths) - 1, 0)


def fit_columns(
    t: Table, width: int, drop_order: Sequence[str], unwrapped: bool = False, boxed: bool = False
) -> Table:
    """``t`` without the columns of ``drop_order`` (first named, first dropped) it must lose to fit ``width``;
    columns not named are never dropped. The flexible column keeps its index meaning (it is re-pointed);
    ``unwrapped``: it counts at full width (columns are dropped rather than wrap it, e.g. GPU names);
    ``boxed``: widths as report/terminal.py draws tables (box lines), not as tui/frame.py does."""
    for name in drop_order:
        if natural_width(t, flexible_at_floor=not unwrapped, boxed=boxed) <= width:
            break
        if name not in t.columns:
            continue
        i = t.columns.index(name)
        flexible = t.flexible
        if flexible is not None:
            flexible = None if flexible == i else flexible - (flexible > i)
        align = t.align.ljust(len(t.columns), "l")
        t = replace(
            t,
            columns=t.columns[:i] + t.columns[i + 1 :],
            rows=[row[:i] + row[i + 1 :] for row in t.rows],
            align=align[:i] + align[i + 1 :],
            flexible=flexible,
        )
    return t
