"""Reports of analytic memory estimates and of the fit table (traced runs: `simulation_view`).

Sizes are binary GiB (what ``torch.cuda`` statistics divided by 2**30 give); a GPU's datasheet
size is also shown in decimal GB next to it, labelled.
"""

from __future__ import annotations

from rich.console import Console

from gpuwise.diagnose import thresholds as T
from gpuwise.memory import FitResult, MemoryEstimate
from gpuwise.memory.result import MaxBatch, MaxSeqLen, MemoryReport
from gpuwise.report import terminal
from gpuwise.report.chart_text import bar
from gpuwise.report.document import (
    Chart,
    Document,
    Headline,
    KeyFigures,
    Note,
    Paragraph,
    Series,
    Style,
    Table,
    plain,
)
from gpuwise.report.units import gib
from gpuwise.units import GiB

__all__ = [
    "answer_paragraphs",
    "bar",
    "estimate_document",
    "fit_document",
    "max_batch_text",
    "max_seq_len_text",
    "render_estimate",
    "render_fit",
]

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
    "load": "model load: the finished weights next to one matrix being quantized on the GPU",
    "denoise": "denoising: the pipeline's weights and the UNet/DiT working set (2× batch with guidance)",
    "vae_decode": "VAE decode: the decoder's working set at full image resolution",
}


SHORT_PHASE = {"forward": "fwd", "backward": "bwd", "optimizer_step": "step", "load": "load"}


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


def verdict(fits: bool, headroom_pct: float) -> tuple[str, Style]:
    """'fits with 12.0 % headroom' (good, or warn under the OOM margin) or 'does not fit (3.1 % over)'."""
    if not fits:
        return f"does not fit ({-headroom_pct:.1f} % over)", "bad"
    return (
        f"fits with {headroom_pct:.1f} % headroom",
        "good" if headroom_pct >= T.OOM_HEADROOM_PCT else "warn",
    )


def component_charts(parts: dict[str, float], total_label: str, what: str) -> list[Chart]:
    """Memory by component (bars, largest first) and the waterfall that adds them up to the peak."""
    shown = {k: v / GiB for k, v in parts.items() if v > 0}
    ordered = sorted(shown.items(), key=lambda kv: -kv[1])
    top = ", ".join(f"{k} {v:,.2f}" for k, v in ordered[:3])
    return [
        Chart(
            "bar",
            f"Memory by component ({what})",
            [k for k, _ in ordered],
            [Series("GiB", [v for _, v in ordered])],
            x_label="GiB",
            y_label="component",
            horizontal=True,
            description=f"Largest components in GiB: {top}.",
            in_text=False,
        ),
        Chart(
            "waterfall",
            f"How the peak adds up to the {total_label}",
            list(shown),
            [Series("GiB", list(shown.values()))],
            x_label="component",
            y_label="GiB",
            description=f"Each component stacked on the previous ones: {sum(shown.values()):,.2f} GiB "
            f"in all ({total_label}).",
        ),
    ]


def max_batch_text(answer: MaxBatch) -> str:
    """'largest batch on GPU with 10 % headroom: 6', or that not even batch 1 fits."""
    if not answer.value:
        return f"batch 1 does not fit {answer.gpu} with {answer.headroom_pct:g} % headroom"
    return f"largest batch on {answer.gpu} with {answer.headroom_pct:g} % headroom: {answer.value}"


def max_seq_len_text(answer: MaxSeqLen) -> str:
    """The longest sequence (or prompt) in tokens, saying when the model's context caps it, not memory."""
    what = "context (prompt)" if answer.inference else "sequence"
    if not answer.value:
        return f"no {what} length fits {answer.gpu} with {answer.headroom_pct:g} % headroom"
    capped = (
        f" (capped at the model's context of {answer.context_tokens:,} tokens, not by memory)"
        if answer.capped_by_context
        else ""
    )
    where = f"{answer.gpu} with {answer.headroom_pct:g} % headroom"
    return f"longest {what} on {where}: {answer.value:,} tokens{capped}"


def answer_paragraphs(report: MemoryReport) -> list[Paragraph]:
    """The answers asked for with the estimate: strong when something fits, bad when nothing does; the
    serving figures (KV capacity, the deployment at the demand) plain, one line each."""
    out = []
    if report.max_batch is not None:
        out.append(Paragraph(max_batch_text(report.max_batch), "strong" if report.max_batch.value else "bad"))
    if report.max_seq_len is not None:
        answer = report.max_seq_len
        out.append(Paragraph(max_seq_len_text(answer), "strong" if answer.value else "bad"))
    if report.serving is not None:
        from gpuwise.report.serving_view import figures_lines  # plan's serving model: only when needed

        out.append(Paragraph("\n".join(figures_lines(report.serving.kv, report.serving.at_demand))))
    return out


def estimate_document(report: MemoryReport | MemoryEstimate) -> Document:
    """The memory report: verdict, breakdown table and charts, the peak phase, the answers, the notes."""
    if isinstance(report, MemoryEstimate):
        report = MemoryReport(report)
    e = report.estimate
    doc = Document(_title(e))
    total = e.device_total_bytes
    capacity = e.gpu_memory_bytes
    text, style = verdict(e.fits, e.headroom_pct)
    doc.add(
        Headline(f"{e.gpu.id}: {gib(capacity)} GiB ({e.gpu.memory_gb:g} GB on the datasheet) → {text}", style)
    )
    parts = {LABELS.get(k, k): float(v) for k, v in e.breakdown.items() if v > 0}
    rows = [[label, gib(v), f"{bar(v, total, 28)} {100 * v / total:.0f} %"] for label, v in parts.items()]
    doc.add(
        Table(
            ["component", "GiB", "share of device total"],
            [*rows, ["device total (nvidia-smi)", gib(total), ""]],
            align="lrl",
            row_styles=plain(len(rows), "strong"),
        ),
        KeyFigures(
            [
                ("peak phase", e.peak_phase),
                ("peak allocated (torch max_memory_allocated)", f"{gib(e.peak_allocated_bytes)} GiB"),
                ("peak reserved (caching allocator)", f"{gib(e.peak_reserved_bytes)} GiB"),
            ]
        ),
        Paragraph(f"peak phase: {e.peak_phase} — {PHASE_TEXT.get(e.peak_phase, '')}"),
    )
    doc.add(*component_charts(parts, "device total (nvidia-smi)", "device total"))
    doc.add(
        Chart(
            "bar",
            "Allocated memory by phase",
            [p.name for p in e.phases],
            [Series("GiB", [p.allocated_bytes / GiB for p in e.phases])],
            x_label="phase",
            y_label="GiB",
            marked=[i for i, p in enumerate(e.phases) if p.name == e.peak_phase],
            mark_label="peak",
            description=f"Allocated GiB at the end of each phase; the peak is in {e.peak_phase}.",
        )
    )
    doc.add(*answer_paragraphs(report))
    doc.add(*(Note(f"· {line}") for line in e.notes + e.assumptions))
    return doc


def render_estimate(console: Console, report: MemoryReport | MemoryEstimate) -> None:
    """Draw `estimate_document` on a Rich console."""
    terminal.render(console, estimate_document(report))


def _layout(sharding: str, tp: int, pp: int) -> str:
    parts = (
        sharding if sharding != "none" else "",
        f"tp {tp}" if tp > 1 else "",
        f"pp {pp}" if pp > 1 else "",
    )
    return ", ".join(x for x in parts if x) or "—"


def fit_document(result: FitResult) -> Document:
    w = result.workload
    doc = Document(
        f"Where {w.model} · {w.task} · {w.precision} · batch {w.batch_size} × {w.seq_len} fits "
        f"({len(result.rows)} of {result.checked} GPU × count pairs)"
    )
    if not result.rows:
        doc.add(
            Headline(
                f"{w.model} fits on no catalog GPU at {', '.join(map(str, result.counts))} GPUs as given.",
                "bad",
            )
        )
    else:
        doc.add(
            Table(
                ["GPU", "n", "layout", "needs GiB", "has GiB (GB)", "free", "peak"],
                [
                    [
                        r.gpu,
                        str(r.num_gpus),
                        _layout(r.sharding, r.tp, r.pp),
                        gib(r.device_total_bytes),
                        f"{r.gpu_memory_bytes / GiB:.0f} ({r.gpu_memory_bytes / GiB:g} GB)",
                        f"{r.headroom_pct:.0f} %",
                        SHORT_PHASE.get(r.peak_phase, r.peak_phase),
                    ]
                    for r in result.rows
                ],
                align="lrlrrrl",
                row_styles=["good" if r.headroom_pct >= T.OOM_HEADROOM_PCT else "warn" for r in result.rows],
            )
        )
        single = [r for r in result.rows if r.num_gpus == min(x.num_gpus for x in result.rows)]
        doc.add(
            Chart(
                "bar",
                f"Headroom per GPU at {single[0].num_gpus} GPU{'s' if single[0].num_gpus > 1 else ''}",
                [r.gpu for r in single],
                [Series("free %", [r.headroom_pct for r in single])],
                x_label="free memory (%)",
                y_label="GPU",
                horizontal=True,
                description="Share of each GPU's memory left free by the workload.",
            )
        )
    for line in sorted({r.assumed for r in result.rows if r.assumed}) + result.skipped:
        doc.add(Note(f"· {line}"))
    doc.add(
        Note(
            "· needs = device total per GPU (what nvidia-smi would show); has = GPU memory in GiB "
            "(the datasheet's GB figure is binary); sorted by count, GPU size, headroom"
        )
    )
    return doc


def render_fit(console: Console, result: FitResult) -> None:
    terminal.render(console, fit_document(result))
