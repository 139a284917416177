"""Terminal views of analytic memory estimates and of the fit table (traced runs: `simulation_view`).

Sizes are binary GiB (what ``torch.cuda`` statistics divided by 2**30 give); a GPU's datasheet
size is also shown in decimal GB next to it, labelled.
"""

from __future__ import annotations

from typing import Any, Literal

from rich.console import Console
from rich.table import Table

from gpuwise.diagnose import thresholds as T
from gpuwise.memory import FitResult, MemoryEstimate
from gpuwise.units import GiB

BAR_WIDTH = 28
LABELS = {
    "weights": "weights",
    "gradients": "gradients",
    "optimizer_states": "optimizer state",
    "master_weights": "fp32 master weights",
    "lora_adapters": "LoRA adapters (+ grads, state)",
    "autocast_weight_copies": "autocast 16-bit weight copies",
    "activations": "activations",
    "logits_loss": "logits + loss",
    "kv_cache": "KV cache",
    "temporaries": "temporaries / workspaces",
    "cuda_context": "CUDA context (+ NCCL)",
    "allocator_reserve": "allocator reserve",
}
PHASE_TEXT = {
    "forward": "end of forward: every saved activation plus the logits and loss",
    "backward": "backward: loss gradients (or a recomputed block) on top of the saved activations",
    "optimizer_step": "optimizer step: weights, gradients, state and the step's temporaries",
    "prefill": "prefill: prompt KV cache, one layer's working set and the logits",
    "decode": "decode: the full KV cache",
    "load": "checkpoint load: a full state dict next to the shards",
    "denoise": "denoising: the pipeline's weights and the UNet/DiT working set (2× batch with guidance)",
    "vae_decode": "VAE decode: the decoder's working set at full image resolution",
}


SHORT_PHASE = {"forward": "fwd", "backward": "bwd", "optimizer_step": "step", "load": "load"}


def gib(n: float) -> str:
    return f"{n / GiB:,.2f}"


def bar(value: float, total: float, width: int = BAR_WIDTH) -> str:
    """A proportional bar drawn with eighth blocks."""
    if total <= 0 or value <= 0:
        return ""
    eighths = round(8 * width * min(value / total, 1.0))
    full, rest = divmod(eighths, 8)
    return "█" * full + ("" if rest == 0 else " ▏▎▍▌▋▊▉"[rest])


def _title(e: MemoryEstimate) -> str:
    w = e.workload
    shape = (
        f"batch {w.batch_size} × {w.image_size}×{w.image_width or w.image_size} px"
        if w.is_cv
        else f"batch {w.batch_size} × {w.seq_len}"
        if w.is_training or w.task != "serving"
        else f"{max(w.concurrency, w.batch_size)} requests × {w.seq_len}"
    )
    layout = f"{w.num_gpus} × {e.gpu.id}"
    extra = [
        f"{w.sharding}" if w.sharding != "none" else "",
        f"tp {w.tp}" if w.tp > 1 else "",
        f"pp {w.pp}" if w.pp > 1 else "",
    ]
    extras = ", ".join(x for x in extra if x)
    return (
        f"Memory per GPU — {w.model} · {w.task} · {w.precision} · {shape} on "
        f"{layout}{' (' + extras + ')' if extras else ''}"
    )


def _verdict(fits: bool, headroom_pct: float) -> str:
    if not fits:
        return f"[bold red]does not fit[/] ({-headroom_pct:.1f} % over)"
    style = "green" if headroom_pct >= T.OOM_HEADROOM_PCT else "yellow"
    return f"[bold {style}]fits[/] with {headroom_pct:.1f} % headroom"


def render_estimate(console: Console, e: MemoryEstimate, extras: dict[str, Any] | None = None) -> None:
    table = Table(title=_title(e), header_style="bold", title_justify="left")
    table.add_column("component")
    table.add_column("GiB", justify="right")
    table.add_column("share of device total", no_wrap=True)
    total = e.device_total_bytes
    for key, value in e.breakdown.items():
        if value <= 0:
            continue
        table.add_row(
            LABELS.get(key, key), gib(value), f"[cyan]{bar(value, total)}[/] {100 * value / total:.0f} %"
        )
    table.add_section()
    table.add_row("[bold]device total (nvidia-smi)[/]", f"[bold]{gib(total)}[/]", "")
    console.print(table)
    capacity = e.gpu_memory_bytes
    console.print(f"peak phase: [bold]{e.peak_phase}[/] — {PHASE_TEXT.get(e.peak_phase, '')}")
    console.print(
        f"peak allocated (torch max_memory_allocated): {gib(e.peak_allocated_bytes)} GiB · "
        f"peak reserved (caching allocator): {gib(e.peak_reserved_bytes)} GiB"
    )
    console.print(
        f"{e.gpu.id}: {gib(capacity)} GiB ({e.gpu.memory_gb:g} GB on the datasheet) → "
        f"{_verdict(e.fits, e.headroom_pct)}"
    )
    phases = Table(title="phases (allocated, GiB)", header_style="bold", title_justify="left", box=None)
    phases.add_column("phase")
    phases.add_column("GiB", justify="right")
    phases.add_column("")
    top = max(p.allocated_bytes for p in e.phases)
    for p in e.phases:
        mark = " ◀ peak" if p.name == e.peak_phase else ""
        phases.add_row(p.name, gib(p.allocated_bytes), f"[magenta]{bar(p.allocated_bytes, top, 20)}[/]{mark}")
    console.print(phases)
    for answer in (extras or {}).values():
        console.print(answer["text"])
    for line in e.notes + e.assumptions:
        console.print(f"[dim]· {line}[/dim]")


def render_fit(console: Console, result: FitResult) -> None:
    w = result.workload
    table = Table(
        title=f"Where {w.model} · {w.task} · {w.precision} · batch {w.batch_size} × {w.seq_len} fits "
        f"({len(result.rows)} of {result.checked} GPU × count pairs)",
        header_style="bold",
        title_justify="left",
    )
    columns: tuple[tuple[str, Literal["left", "right"]], ...] = (
        ("GPU", "left"),
        ("n", "right"),
        ("layout", "left"),
        ("needs GiB", "right"),
        ("has GiB (GB)", "right"),
        ("free", "right"),
        ("peak", "left"),
    )
    for col, justify in columns:
        table.add_column(col, justify=justify, no_wrap=True)
    for r in result.rows:
        layout = (
            ", ".join(
                x
                for x in (
                    r.sharding if r.sharding != "none" else "",
                    f"tp {r.tp}" if r.tp > 1 else "",
                    f"pp {r.pp}" if r.pp > 1 else "",
                )
                if x
            )
            or "—"
        )
        style = "green" if r.headroom_pct >= T.OOM_HEADROOM_PCT else "yellow"
        table.add_row(
            r.gpu,
            str(r.num_gpus),
            layout,
            gib(r.device_total_bytes),
            f"{r.gpu_memory_bytes / GiB:.0f} ({r.gpu_memory_bytes / GiB:g} GB)",
            f"[{style}]{r.headroom_pct:.0f} %[/]",
            SHORT_PHASE.get(r.peak_phase, r.peak_phase),
        )
    if result.rows:
        console.print(table)
    else:
        console.print(
            f"[bold red]{w.model} fits on no catalog GPU at {', '.join(map(str, result.counts))} GPUs as "
            "given.[/]"
        )
    for line in sorted({r.assumed for r in result.rows if r.assumed}) + result.skipped:
        console.print(f"[dim]· {line}[/dim]")
    console.print(
        "[dim]· needs = device total per GPU (what nvidia-smi would show); has = GPU memory in GiB "
        "(the datasheet's GB figure is binary); sorted by count, GPU size, headroom[/dim]"
    )
