"""Terminal view of a traced (fake-tensor) memory simulation: `gpuwise memory --traced`.

Sizes are binary GiB (``torch.cuda`` statistics / 2**30). Takes the same
``gpuwise.simulation.TracedMemoryEstimate`` the JSON comes from.
"""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

from gpuwise.diagnose import thresholds as T
from gpuwise.units import GiB, fmt_duration

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


def _gib(n: float) -> str:
    return f"{n / GiB:,.2f}"


def _bar(value: float, total: float, width: int = 24) -> str:
    if total <= 0 or value <= 0:
        return ""
    eighths = round(8 * width * min(value / total, 1.0))
    full, rest = divmod(eighths, 8)
    return "█" * full + ("" if rest == 0 else " ▏▎▍▌▋▊▉"[rest])


def render_traced(console: Console, t: Any) -> None:
    """Breakdown at the peak, phases by category, top activation modules, FLOPs and step time."""
    w = t.workload
    console.print(
        f"[bold]Traced memory per GPU[/] — {t.model} · {w['task']} · {w['precision']} · "
        f"batch {w['batch_size']} × {w['seq_len']} · simulated on fake tensors in {t.simulation_wall_s:.1f} s"
    )
    _breakdown(console, t)
    _phases(console, t)
    _top_modules(console, t)
    _compute(console, t)
    for line in list(t.notes) + list(t.assumptions):
        console.print(f"[dim]· {line}[/dim]")


def _breakdown(console: Console, t: Any) -> None:
    table = Table(title=f"at the peak ({t.peak_phase})", header_style="bold", title_justify="left")
    table.add_column("component")
    table.add_column("GiB", justify="right")
    table.add_column("share of device total", no_wrap=True)
    total = t.device_total_bytes
    rows = {CATEGORY_LABELS.get(k, k): v for k, v in t.breakdown.items()}
    rows["CUDA context (+ NCCL)"] = t.cuda_context_bytes
    rows["allocator reserve"] = t.allocator_reserve_bytes
    rows["paged optimizer state (unified memory)"] = t.paged_state_bytes
    for label, value in rows.items():
        if value > 0:
            table.add_row(label, _gib(value), f"[cyan]{_bar(value, total)}[/] {100 * value / total:.0f} %")
    table.add_section()
    table.add_row("peak allocated (max_memory_allocated)", _gib(t.peak_allocated_bytes), "")
    table.add_row("peak reserved (caching allocator)", _gib(t.peak_reserved_bytes), "")
    table.add_row("[bold]device total (nvidia-smi)[/]", f"[bold]{_gib(total)}[/]", "")
    console.print(table)
    headroom = t.headroom_pct
    if not t.fits:
        verdict = f"[bold red]does not fit[/] ({-headroom:.1f} % over)"
    else:
        style = "green" if headroom >= T.OOM_HEADROOM_PCT else "yellow"
        verdict = f"[bold {style}]fits[/] with {headroom:.1f} % headroom"
    console.print(f"{t.gpu}: {_gib(t.device_memory_bytes)} GiB → {verdict}")


def _phases(console: Console, t: Any) -> None:
    categories = [c for c in _SHORT if any(p.by_category.get(c) for p in t.phases)]
    table = Table(
        title="phases: peak allocated by category (GiB)", header_style="bold", title_justify="left", box=None
    )
    table.add_column("phase")
    table.add_column("peak", justify="right")
    table.add_column("")
    for c in categories:
        table.add_column(_SHORT[c], justify="right")
    table.add_column("where the peak is reached")
    top = max((p.peak_allocated_bytes for p in t.phases), default=1)
    for p in t.phases:
        mark = " ◀" if p.name == t.peak_phase else ""
        table.add_row(
            p.name,
            _gib(p.peak_allocated_bytes),
            f"[magenta]{_bar(p.peak_allocated_bytes, top, 16)}[/]{mark}",
            *(_gib(p.by_category.get(c, 0)) for c in categories),
            p.where_at_peak or "—",
        )
    console.print(table)


def _top_modules(console: Console, t: Any) -> None:
    if not t.top_activation_modules:
        return
    title = (
        "activation memory by module (kept for backward)"
        if t.mode == "training"
        else "memory by module at the prefill peak"
    )
    table = Table(title=title, header_style="bold", title_justify="left", box=None)
    table.add_column("module (layer index folded to *)")
    table.add_column("×", justify="right")
    table.add_column("GiB", justify="right")
    table.add_column("")
    top = t.top_activation_modules[0]["activation_bytes"] or 1
    for row in t.top_activation_modules:
        table.add_row(
            row["module"],
            str(row["instances"]),
            _gib(row["activation_bytes"]),
            f"[green]{_bar(row['activation_bytes'], top, 16)}[/]",
        )
    console.print(table)


def _compute(console: Console, t: Any) -> None:
    by_phase = ", ".join(f"{name} {flops / 1e12:,.2f}" for name, flops in t.flops_by_phase.items() if flops)
    console.print(
        f"FLOPs per step: [bold]{t.flops_per_step / 1e12:,.2f} TFLOP[/] (per pass: {by_phase} TFLOP; "
        "attention included, causal masking accounted, recompute included)"
    )
    if not t.step_times:
        return
    console.print("[bold]predicted step time[/] (perf roofline per op; eager PyTorch launch floor)")
    table = Table(header_style="bold", box=None)
    for col in ("GPU", "step", "bound", "fits"):
        table.add_column(col, justify="left" if col in ("GPU", "bound") else "right")
    shown = t.step_times[:_STEP_GPUS_SHOWN]
    here = next((s for s in t.step_times if s.gpu == t.gpu), None)
    if here is not None and here not in shown:
        shown = [*shown, here]
    for s in shown:
        name = f"[bold]{s.gpu}[/]" if s.gpu == t.gpu else s.gpu
        table.add_row(name, fmt_duration(s.step_time_s), s.bound, "yes" if s.fits else "[red]no[/]")
    console.print(table)
