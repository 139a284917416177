"""Terminal views of the GPU and model catalogs."""

from __future__ import annotations

from rich import box
from rich.console import Console
from rich.table import Table

from gpuwise.catalog import GPU, ModelArch
from gpuwise.catalog.prices import prices_for

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


def _n(value: float | None, fmt: str = "{:,.0f}") -> str:
    return "—" if value is None else fmt.format(value)


def render_gpu_table(console: Console, gpus: list[GPU]) -> None:
    table = Table(
        title="GPU catalog (dense peak TFLOPS; memory in decimal GB)",
        header_style="bold",
        box=box.SIMPLE_HEAD,
        pad_edge=False,
        collapse_padding=True,
    )
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
        "as of",
        "prices",
    ):
        table.add_column(
            col,
            justify="left" if col in {"id", "prices"} else "right",
            no_wrap=col == "id",
            min_width={"as of": 10, "prices": 17}.get(col),
        )
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
            _as_of(g),
            _price_kinds(g),
        )
    console.print(table)
    console.print(
        "[dim]$/h: default on-demand $/GPU-hour; prices: OD on-demand, spot, 1y/3y reserved, buy (per GPU), "
        "server (purchase). `gpuwise gpus ID` shows every price with its source and date, and notes. "
        "Add your own GPUs in a gpus.yaml (see README).[/dim]"
    )


def render_gpu(console: Console, g: GPU) -> None:
    table = Table(title=f"{g.name} ({g.id})", show_header=False)
    table.add_column(style="bold")
    table.add_column()
    for key, value in g.to_dict().items():
        if value not in (None, "", 0, 0.0) or key in {"ecc", "consumer"}:
            table.add_row(key, str(value))
    console.print(table)
    listed = prices_for(g.id)
    if listed:
        prices = Table(title="Prices (USD; the first of each kind is the default)", header_style="bold")
        for col in ("kind", "USD", "unit", "provider", "as of", "source"):
            prices.add_column(col, justify="right" if col == "USD" else "left")
        for p in listed:
            unit = p.unit if p.unit != "server" else f"server of {p.gpus}"
            prices.add_row(p.kind, f"{p.usd:,.4g}", unit, p.provider, p.as_of, p.source)
        console.print(prices)


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
