"""Reports of the GPU and model catalogs."""

from __future__ import annotations

from rich.console import Console

from gpuwise.catalog import GPU, ModelArch
from gpuwise.report import terminal
from gpuwise.report.document import Chart, Document, Note, Series, Table
from gpuwise.report.units import num


def gpu_table_document(gpus: list[GPU]) -> Document:
    columns = [
        "id",
        "memory GB",
        "TB/s",
        "bf16 TF",
        "fp8 TF",
        "fp32 TF",
        "TDP W",
        "NVLink GB/s",
        "ECC",
        "MIG",
        "$/h",
    ]
    doc = Document("GPU catalog (dense peak TFLOPS; memory in decimal GB)")
    doc.add(
        Table(
            columns,
            [
                [
                    g.id,
                    num(g.memory_gb),
                    num(g.mem_bw_tbps, "{:.2f}"),
                    num(g.bf16_tflops),
                    num(g.fp8_tflops),
                    num(g.fp32_tflops, "{:.1f}"),
                    num(g.tdp_w),
                    num(g.nvlink_gbps or None),
                    "yes" if g.ecc else "no",
                    str(g.mig_max or "—"),
                    num(g.cloud_usd_per_hr, "{:.2f}"),
                ]
                for g in gpus
            ],
            align="l" + "r" * (len(columns) - 1),
            flexible=0,
        )
    )
    with_both = [g for g in gpus if g.bf16_tflops and g.mem_bw_tbps]
    if len(with_both) > 1:
        doc.add(
            Chart(
                "scatter",
                "GPUs: memory bandwidth against bf16 compute",
                [g.id for g in with_both],
                [Series("bf16 TFLOPS", [float(g.bf16_tflops or 0) for g in with_both])],
                x_label="memory bandwidth (TB/s)",
                y_label="bf16 dense TFLOPS",
                x=[float(g.mem_bw_tbps or 0) for g in with_both],
                description="Each catalog GPU by its memory bandwidth and dense bf16 peak.",
                in_text=False,
            )
        )
    doc.add(Note("`gpuwise gpus ID` shows sources and notes. Add your own GPUs in a gpus.yaml (see README)."))
    return doc


def render_gpu_table(console: Console, gpus: list[GPU]) -> None:
    terminal.render(console, gpu_table_document(gpus))


def gpu_document(g: GPU) -> Document:
    rows = [
        [key, str(value)]
        for key, value in g.to_dict().items()
        if value not in (None, "", 0, 0.0) or key in {"ecc", "consumer"}
    ]
    return Document(f"{g.name} ({g.id})").add(Table(["", ""], rows, header=False))


def render_gpu(console: Console, g: GPU) -> None:
    terminal.render(console, gpu_document(g))


def model_table_document(models: list[ModelArch]) -> Document:
    doc = Document("Model catalog")
    doc.add(
        Table(
            ["id", "params", "hidden", "layers", "heads", "kv heads", "vocab", "mlp"],
            [
                [
                    m.id,
                    f"{m.num_params / 1e9:,.2f} B",
                    num(m.hidden_size or None),
                    num(m.num_layers or None),
                    num(m.num_attention_heads or None),
                    num(m.num_kv_heads or None),
                    num(m.vocab_size or None),
                    m.mlp_type,
                ]
                for m in models
            ],
            align="lrrrrrrl",
            flexible=0,
        )
    )
    return doc


def render_model_table(console: Console, models: list[ModelArch]) -> None:
    terminal.render(console, model_table_document(models))


def model_document(m: ModelArch) -> Document:
    counts = m.param_counts()
    rows = [
        [key, f"{value:,}" if isinstance(value, int) and not isinstance(value, bool) else str(value)]
        for key, value in m.to_dict().items()
        if value not in (None, "")
    ]
    if m.is_transformer:
        rows += [
            ["params: embedding", f"{counts.embedding:,}"],
            ["params: per layer", f"{counts.per_layer:,}"],
            ["params: lm_head", f"{counts.lm_head:,}" if counts.lm_head else "tied to embedding"],
        ]
    return Document(m.id).add(Table(["", ""], rows, header=False))


def render_model(console: Console, m: ModelArch) -> None:
    terminal.render(console, model_document(m))
