"""`gpuwise bench`: micro-benchmarks of this machine against its datasheet. The work is in
`gpuwise.bench`; this module parses flags, shows progress on stderr and prints the result."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated

import typer

from gpuwise.cli.output import HtmlFlag, JsonFlag, MarkdownFlag, emit, one_format

__all__ = ["bench"]

DEFAULT_DTYPES = "every dtype the device supports (CPU: fp32, bf16, fp16; GPU: also tf32)"


@contextmanager
def _progress(enabled: bool) -> Iterator[Callable[[str, int], Callable[[], None]]]:
    """A transient Rich progress display on stderr (stdout stays clean for --json)."""
    if not enabled:
        yield lambda label, total: lambda: None
        return
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TimeElapsedColumn(),
        console=Console(stderr=True),
        transient=True,
    ) as bars:

        def task(label: str, total: int) -> Callable[[], None]:
            task_id = bars.add_task(label, total=total)
            return lambda: bars.advance(task_id)

        yield task


def bench(
    quick: Annotated[bool, typer.Option("--quick", help="Small shapes and short budgets (<= 30 s).")] = False,
    dtype: Annotated[
        list[str] | None,
        typer.Option("--dtype", help=f"Matmul dtype (repeatable). Default: {DEFAULT_DTYPES}."),
    ] = None,
    data: Annotated[
        Path | None, typer.Option("--data", help="Data directory (or file) whose read throughput to measure.")
    ] = None,
    dataset: Annotated[
        str | None,
        typer.Option(
            "--dataset", help="Dataloader samples/s of FILE.py:NAME (a Dataset, or a function returning one)."
        ),
    ] = None,
    batch_size: Annotated[int, typer.Option("--batch-size", min=1, help="Batch size for --dataset.")] = 32,
    workers: Annotated[
        int, typer.Option("--workers", min=0, help="DataLoader num_workers for --dataset.")
    ] = 0,
    no_storage: Annotated[bool, typer.Option("--no-storage", help="Skip the storage reads.")] = False,
    save: Annotated[bool, typer.Option("--save/--no-save", help="Save the result in the run store.")] = True,
    store: Annotated[
        Path | None, typer.Option("--store", help="Run store file (default: GPUWISE_STORE).")
    ] = None,
    as_json: JsonFlag = False,
    as_markdown: MarkdownFlag = False,
    html: HtmlFlag = None,
) -> None:
    """What this machine really delivers: [bold]gpuwise bench --quick[/bold]

    Matmul per dtype, memory bandwidth, copies, storage reads; each figure
    against the datasheet peak of the detected GPU (or the CPU's estimated peak)."""
    from gpuwise.bench.runner import BenchOptions, check_dtypes, run_bench
    from gpuwise.errors import GpuwiseError

    one_format(as_json, as_markdown)  # before the work, not after it
    check_dtypes(tuple(dtype or ()))
    if data is not None and not data.exists():
        raise GpuwiseError(f"no such data directory: {data}")
    options = BenchOptions(
        "quick" if quick else "full",
        tuple(dtype) if dtype else None,
        data,
        not no_storage,
        dataset,
        batch_size,
        workers,
    )
    with _progress(True) as task:
        result = run_bench(options, task)
    run_id = None
    if save:
        from gpuwise.store.runs import RunStore

        with RunStore.open(store) as runs:
            device = result.device
            run_id = runs.save_document(
                "bench",
                f"bench {options.mode}",
                result.to_dict(),
                device=device["kind"],
                gpu=device.get("catalog_id") or "",
            )
    from gpuwise.report.bench_view import bench_document

    emit(
        {"run_id": run_id, **result.to_dict()},
        "bench",
        as_json,
        as_markdown=as_markdown,
        html=html,
        document=lambda: bench_document(result, run_id),
    )
