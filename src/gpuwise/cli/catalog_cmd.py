"""`gpuwise gpus` and `gpuwise models`: list or show catalog entries."""

from __future__ import annotations

from typing import Annotated

import typer

from gpuwise.catalog import get_gpu, get_model, list_gpus, list_models
from gpuwise.catalog.prices import prices_for
from gpuwise.cli.output import HtmlFlag, JsonFlag, MarkdownFlag, emit
from gpuwise.report import catalog_view

__all__ = ["gpus", "models"]


def gpus(
    gpu_id: Annotated[str | None, typer.Argument(help="Show one GPU in full (e.g. h100-sxm).")] = None,
    as_json: JsonFlag = False,
    as_markdown: MarkdownFlag = False,
    html: HtmlFlag = None,
) -> None:
    """List the GPU catalog, or show one GPU with its sources."""
    if gpu_id:
        gpu = get_gpu(gpu_id)
        emit(
            {"gpu": gpu.to_dict(), "prices": [p.to_dict() for p in prices_for(gpu.id)]},
            "gpu",
            as_json,
            as_markdown=as_markdown,
            html=html,
            document=lambda: catalog_view.gpu_document(gpu),
        )
    else:
        items = list_gpus()
        emit(
            {"gpus": [g.to_dict() for g in items]},
            "gpus",
            as_json,
            as_markdown=as_markdown,
            html=html,
            document=lambda: catalog_view.gpu_table_document(items),
        )


def models(
    model_id: Annotated[
        str | None, typer.Argument(help="Show one model (catalog id or path to a config.json).")
    ] = None,
    as_json: JsonFlag = False,
    as_markdown: MarkdownFlag = False,
    html: HtmlFlag = None,
) -> None:
    """List the model catalog, or show one architecture with its parameter count and source."""
    if model_id:
        model = get_model(model_id)
        emit(
            {"model": model.to_dict()},
            "model",
            as_json,
            as_markdown=as_markdown,
            html=html,
            document=lambda: catalog_view.model_document(model),
        )
    else:
        items = list_models()
        emit(
            {"models": [m.to_dict() for m in items]},
            "models",
            as_json,
            as_markdown=as_markdown,
            html=html,
            document=lambda: catalog_view.model_table_document(items),
        )
