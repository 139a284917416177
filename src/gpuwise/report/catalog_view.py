"""Terminal views of the GPU and model catalogs."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from gpuwise.catalog import GPU, ModelArch


def _n(value: float | None, fmt: str = "{:,.0f}") -> str:
    return "—" if value is None else fmt.format(value)


def render_gpu_table(console: Console, gpus: list[GPU]) -> None:
    table = Table(title="GPU catalog (dense peak TFLOPS; memory in decimal GB)", header_style="bold")
    for col in (
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
    ):
        table.add_column(col, justify="left" if col == "id" else "right", no_wrap=col == "id")
    for g in gpus:
        table.add_row(
            g.id,
            _n(g.memory_gb),
            _n(g.mem_bw_tbps, "{:.2f}"),
            _n(g.bf16_tflops),
            _n(g.fp8_tflops),
            _n(g.fp32_tflops, "{:.1f}"),
            _n(g.tdp_w),
            _n(g.nvlink_gbps or None),
            "yes" if g.ecc else "no",
            str(g.mig_max or "—"),
            _n(g.cloud_usd_per_hr, "{:.2f}"),
        )
    console.print(table)
    console.print(
        "[dim]`gpuwise gpus ID` shows sources and notes. Add your own GPUs in a gpus.yaml (see README).[/dim]"
    )


def render_gpu(console: Console, g: GPU) -> None:
    table = Table(title=f"{g.name} ({g.id})", show_header=False)
    table.add_column(style="bold")
    table.add_column()
    for key, value in g.to_dict().items():
        if value not in (None, "", 0, 0.0) or key in {"ecc", "consumer"}:
            table.add_row(key, str(value))
    console.print(table)


def render_model_table(console: Console, models: list[ModelArch]) -> None:
    table = Table(title="Model catalog", header_style="bold")
    for col in ("id", "params", "hidden", "layers", "heads", "kv heads", "vocab", "mlp"):
        table.add_column(col, justify="left" if col in {"id", "mlp"} else "right", no_wrap=col == "id")
    for m in models:
        table.add_row(
            m.id,
            f"{m.num_params / 1e9:,.2f} B",
            _n(m.hidden_size or None),
            _n(m.num_layers or None),
            _n(m.num_attention_heads or None),
            _n(m.num_kv_heads or None),
            _n(m.vocab_size or None),
            m.mlp_type,
        )
    console.print(table)


def render_model(console: Console, m: ModelArch) -> None:
    table = Table(title=m.id, show_header=False)
    table.add_column(style="bold")
    table.add_column()
    counts = m.param_counts()
    for key, value in m.to_dict().items():
        if value not in (None, ""):
            table.add_row(
                key, f"{value:,}" if isinstance(value, int) and not isinstance(value, bool) else str(value)
            )
    if m.is_transformer:
        table.add_row("params: embedding", f"{counts.embedding:,}")
        table.add_row("params: per layer", f"{counts.per_layer:,}")
        table.add_row("params: lm_head", f"{counts.lm_head:,}" if counts.lm_head else "tied to embedding")
    console.print(table)
