"""Findings (diagnose.Finding objects or their dicts) as document blocks, shared by every report."""

from __future__ import annotations

from typing import Any

from gpuwise.report.document import Block, Finding, Paragraph
from gpuwise.units import GiB

__all__ = ["findings_blocks", "gain_text"]


def gain_text(gain: dict[str, Any]) -> str:
    """An expected gain range in its own unit: 1.20–1.50× steps/s, 10–20 % shorter steps, …"""
    metric, low, high = gain["metric"], gain["low"], gain["high"]
    if metric == "throughput_x":
        return f"{low:.2f}–{high:.2f}× steps/s"
    if metric == "step_time_pct":
        return f"{low:.0f}–{high:.0f} % shorter steps"
    if metric == "memory_bytes":
        return f"{low / GiB:.2f}–{high / GiB:.2f} GiB less memory"
    if metric == "cost_pct":
        return f"{low:.0f}–{high:.0f} % lower cost"
    return f"{low}–{high} {metric}"


def findings_blocks(findings: list[Any], limit: int | None = None, measured: bool = True) -> list[Block]:
    """One Finding block each; ``measured=False`` (no step was measured) never claims a clean run."""
    blocks: list[Block] = []
    for item in findings[:limit] if limit else findings:
        f = item if isinstance(item, dict) else item.to_dict()
        detail = f"[{f['id']}, confidence {f['confidence']}]"
        gain = f.get("gain")
        summary = f["summary"]
        if gain:
            summary += (
                f" Expected: {gain_text(gain)}" + (f" ({gain['note']})" if gain.get("note") else "") + "."
            )
        blocks.append(
            Finding(f["severity"], f["title"], summary, f["fix"], detail, f.get("fix_snippet") or "")
        )
    if not blocks and measured:
        blocks.append(Paragraph("No findings: nothing in this run crossed a threshold.", "good"))
    return blocks
