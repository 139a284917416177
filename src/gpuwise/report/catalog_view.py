"""Reports of the GPU and model catalogs."""

from __future__ import annotations

from gpuwise.catalog import GPU, ModelArch
from gpuwise.catalog.prices import prices_for
from gpuwise.report.document import Chart, Document, Note, Series, Table
from gpuwise.report.units import num

__all__ = ["gpu_document", "gpu_table_document", "model_document", "model_table_document"]

_KIND_SHORT = {
    "on_demand": "OD",
    "spot": "spot",
    "reserved_1y": "1y",
    "reserved_3y": "3y",
    "purchase_gpu": "buy",
    "purchase_server": "server",
}


def _price_kinds(g: GPU) -> str:
    kinds = dict.fromkeys(_KIND_SHORT[p.kind] for p in prices_for(g.id))
    return ",".join(kinds) or "—"


def _as_of(g: GPU) -> str:
    listed = [p for p in prices_for(g.id) if p.kind == "on_demand"]
    return listed[0].as_of if listed else "—"


def gpu_table_document(gpus: list[GPU]) -> Document:
    """`gpuwise gpus`: one row per catalog GPU (memory GB, bandwidth TB/s, dense TFLOPS per dtype,
    price)."""
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
        "as of",
        "prices",
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
                    _as_of(g),
                    _price_kinds(g),
                ]
                for g in gpus
            ],
            align="l" + "r" * (len(columns) - 2) + "l",
            flexible=len(columns) - 1,  # the price kinds shrink on a narrow terminal, never the ids
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
    doc.add(
        Note(
            "$/h: default on-demand $/GPU-hour; prices: OD on-demand, spot, 1y/3y reserved, buy (per GPU), "
            "server (purchase). `gpuwise gpus ID` shows every price with its source and date, and notes. "
            "Add your own GPUs in a gpus.yaml (see README)."
        )
    )
    return doc


def gpu_document(g: GPU) -> Document:
    """`gpuwise gpus ID`: every non-empty field of one GPU, with its sources."""
    rows = [
        [key, str(value)]
        for key, value in g.to_dict().items()
        if value not in (None, "", 0, 0.0) or key in {"ecc", "consumer"}
    ]
    doc = Document(f"{g.name} ({g.id})").add(Table(["", ""], rows, header=False))
    listed = prices_for(g.id)
    if listed:
        doc.add(
            Table(
                ["kind", "USD", "unit", "provider", "as of", "source"],
                [
                    [
                        p.kind,
                        f"{p.usd:,.4g}",
                        p.unit if p.unit != "server" else f"server of {p.gpus}",
                        p.provider,
                        p.as_of,
                        p.source,
                    ]
                    for p in listed
                ],
                caption="Prices (USD; the first of each kind is the default)",
                align="lrllll",
            )
        )
    return doc


def model_table_document(models: list[ModelArch]) -> Document:
    """`gpuwise models`: one row per catalog architecture (parameters, shape, vocabulary, MLP type)."""
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


def model_document(m: ModelArch) -> Document:
    """`gpuwise models ID`: every field of one architecture and its parameter counts."""
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
