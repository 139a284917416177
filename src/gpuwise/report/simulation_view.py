"""Report of a traced (fake-tensor) memory simulation: `gpuwise memory --traced`.

Sizes are binary GiB (``torch.cuda`` statistics / 2**30). Takes the same
``gpuwise.simulation.TracedMemoryEstimate`` the JSON comes from.
"""

from __future__ import annotations

from typing import Any

from gpuwise.report.chart_text import bar
from gpuwise.report.document import (
    Chart,
    Document,
    Headline,
    Note,
    Paragraph,
    Series,
    Table,
    plain,
)
from gpuwise.report.memory_view import component_charts, verdict
from gpuwise.report.units import duration, gib
from gpuwise.units import GiB

__all__ = ["CATEGORY_LABELS", "traced_document"]

CATEGORY_LABELS = {
    "parameters": "parameters",
    "gradients": "gradients",
    "optimizer_state": "optimizer state",
    "kv_cache": "KV cache",
    "activations": "activations (saved for backward / kept)",
    "logits_loss": "logits + loss",
    "temporaries": "temporaries",
}
_SHORT = {
    "parameters": "params",
    "gradients": "grads",
    "optimizer_state": "optim",
    "kv_cache": "KV",
    "activations": "acts",
    "logits_loss": "logits",
    "temporaries": "temps",
}
_STEP_GPUS_SHOWN = 8


def traced_document(t: Any) -> Document:
    """Breakdown at the peak, phases by category, top activation modules, FLOPs and step time."""
    w = t.workload
    doc = Document(
        f"Traced memory per GPU — {t.model} · {w['task']} · {w['precision']} · "
        f"batch {w['batch_size']} × {w['seq_len']}",
        subtitle=f"simulated on fake tensors in {t.simulation_wall_s:.1f} s",
    )
    text, style = verdict(t.fits, t.headroom_pct)
    doc.add(Headline(f"{t.gpu}: {gib(t.device_memory_bytes)} GiB → {text}", style))
    _breakdown(doc, t)
    _phases(doc, t)
    _top_modules(doc, t)
    _compute(doc, t)
    doc.add(*(Note(f"· {line}") for line in list(t.notes) + list(t.assumptions)))
    return doc


def _breakdown(doc: Document, t: Any) -> None:
    total = t.device_total_bytes
    parts = {CATEGORY_LABELS.get(k, k): float(v) for k, v in t.breakdown.items()}
    parts["CUDA context (+ NCCL)"] = t.cuda_context_bytes
    parts["allocator reserve"] = t.allocator_reserve_bytes
    parts["paged optimizer state (unified memory)"] = t.paged_state_bytes
    parts = {k: v for k, v in parts.items() if v > 0}
    rows = [[label, gib(v), f"{bar(v, total, 24)} {100 * v / total:.0f} %"] for label, v in parts.items()]
    doc.add(
        Table(
            ["component", "GiB", "share of device total"],
            [
                *rows,
                ["peak allocated (max_memory_allocated)", gib(t.peak_allocated_bytes), ""],
                ["peak reserved (caching allocator)", gib(t.peak_reserved_bytes), ""],
                ["device total (nvidia-smi)", gib(total), ""],
            ],
            caption=f"at the peak ({t.peak_phase})",
            align="lrl",
            row_styles=plain(len(rows), "", "", "strong"),
        )
    )
    doc.add(*component_charts(parts, "device total (nvidia-smi)", f"at the {t.peak_phase} peak"))


def _phases(doc: Document, t: Any) -> None:
    categories = [c for c in _SHORT if any(p.by_category.get(c) for p in t.phases)]
    doc.add(
        Table(
            ["phase", "peak", *(_SHORT[c] for c in categories), "where the peak is reached"],
            [
                [
                    p.name + (" ◀" if p.name == t.peak_phase else ""),
                    gib(p.peak_allocated_bytes),
                    *(gib(p.by_category.get(c, 0)) for c in categories),
                    p.where_at_peak or "—",
                ]
                for p in t.phases
            ],
            caption="phases: peak allocated by category (GiB)",
            align="lr" + "r" * len(categories) + "l",
        ),
        Chart(
            "stacked",
            "Peak allocated memory by phase and category",
            [p.name for p in t.phases],
            [Series(_SHORT[c], [p.by_category.get(c, 0) / GiB for p in t.phases]) for c in categories],
            x_label="phase",
            y_label="GiB",
            description="Each phase's peak split by what holds the memory; "
            f"the overall peak is in {t.peak_phase}.",
        ),
    )


def _top_modules(doc: Document, t: Any) -> None:
    if not t.top_activation_modules:
        return
    title = (
        "activation memory by module (kept for backward)"
        if t.mode == "training"
        else "memory by module at the prefill peak"
    )
    top = t.top_activation_modules[0]["activation_bytes"] or 1
    doc.add(
        Table(
            ["module (layer index folded to *)", "×", "GiB", ""],
            [
                [
                    row["module"],
                    str(row["instances"]),
                    gib(row["activation_bytes"]),
                    bar(row["activation_bytes"], top, 16),
                ]
                for row in t.top_activation_modules
            ],
            caption=title,
            align="lrrl",
        )
    )


def _compute(doc: Document, t: Any) -> None:
    by_phase = ", ".join(f"{name} {flops / 1e12:,.2f}" for name, flops in t.flops_by_phase.items() if flops)
    doc.add(
        Paragraph(
            f"FLOPs per step: {t.flops_per_step / 1e12:,.2f} TFLOP (per pass: {by_phase} TFLOP; "
            "attention included, causal masking accounted, recompute included)"
        ),
    )
    if not t.step_times:
        return
    shown = t.step_times[:_STEP_GPUS_SHOWN]
    here = next((s for s in t.step_times if s.gpu == t.gpu), None)
    if here is not None and here not in shown:
        shown = [*shown, here]
    doc.add(
        Table(
            ["GPU", "step", "bound", "fits"],
            [[s.gpu, duration(s.step_time_s), s.bound, "yes" if s.fits else "no"] for s in shown],
            caption="predicted step time (perf roofline per op; eager PyTorch launch floor)",
            align="lrlr",
            row_styles=["strong" if s.gpu == t.gpu else "" if s.fits else "bad" for s in shown],
        ),
        Chart(
            "bar",
            "Predicted step time per GPU",
            [s.gpu for s in shown],
            [Series("ms", [s.step_time_s * 1000 for s in shown])],
            x_label="step time (ms)",
            y_label="GPU",
            horizontal=True,
            marked=[i for i, s in enumerate(shown) if s.gpu == t.gpu],
            mark_label="this GPU",
            description="Roofline step time of the traced step on each GPU.",
            in_text=False,
        ),
    )
