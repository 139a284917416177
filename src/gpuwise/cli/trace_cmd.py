"""`gpuwise trace`: analyze PyTorch profiler (Kineto) traces, one per rank, or compare two."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Annotated

import typer

from gpuwise.cli.output import HtmlFlag, MarkdownFlag, emit
from gpuwise.errors import GpuwiseError

if TYPE_CHECKING:
    from gpuwise.trace.analyze import FileProgress, TraceReport
    from gpuwise.trace.parallel import RunStats

__all__ = ["trace"]

# The trace modules (numpy, msgspec) are imported inside the command so that every other
# command's start-up does not pay for them.

PROGRESS_MIN_BYTES = 8 << 20  # show a progress bar when the files add up to more than this


def _maybe_terminal() -> bool:
    """False where Rich's `Console(stderr=True).is_terminal` is surely False (stderr not a tty and
    neither TTY_COMPATIBLE=1 nor FORCE_COLOR set), without importing Rich; True means "ask Rich"."""
    if os.environ.get("TTY_COMPATIBLE") == "1" or os.environ.get("FORCE_COLOR"):
        return True
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):  # no stream, or a closed one: Rich says False as well
        return False


@contextmanager
def _progress(files: list[str]) -> Iterator[FileProgress | None]:
    """A byte-level progress bar on stderr (only on a terminal, only for big local inputs). Rich is
    imported only when the bar is drawn (start-up time of every other run)."""
    if not _maybe_terminal() or any("://" in f for f in files):
        yield None
        return
    sizes = [Path(f).stat().st_size for f in files]
    if sum(sizes) < PROGRESS_MIN_BYTES:
        yield None
        return
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        DownloadColumn,
        Progress,
        TextColumn,
        TimeRemainingColumn,
        TransferSpeedColumn,
    )

    console = Console(stderr=True)
    if not console.is_terminal:
        yield None
        return
    done_before = [sum(sizes[:i]) for i in range(len(sizes))]
    with Progress(
        TextColumn("[bold]reading traces"),
        BarColumn(),
        DownloadColumn(),
        TransferSpeedColumn(),
        TimeRemainingColumn(),
        TextColumn("{task.description}"),
        console=console,
        transient=True,
    ) as bar:
        task = bar.add_task("", total=sum(sizes))

        def update(index: int, path: Path, read: int) -> None:
            bar.update(task, completed=done_before[index] + min(read, sizes[index]), description=path.name)

        yield update


def _views() -> ModuleType:
    """The report builders, imported when a report is drawn (`--json` never needs them)."""
    from gpuwise.report import trace_view

    return trace_view


def trace(
    paths: Annotated[
        list[str],
        typer.Argument(
            help="Trace files (.json, .json.gz, .pt.trace.json) or a directory of per-rank traces "
            "(or fsspec URLs: s3://bucket/run/, gs://...)."
        ),
    ],
    compare: Annotated[
        bool,
        typer.Option(
            "--compare", help="Compare two traces (or two directories): gpuwise trace --compare A B."
        ),
    ] = False,
    rank: Annotated[
        int | None,
        typer.Option(
            "--rank", help="Show this rank's details (default: every rank up to 2, else the slowest)."
        ),
    ] = None,
    top: Annotated[int, typer.Option("--top", min=1, max=100, help="How many kernels to list.")] = 10,
    as_json: Annotated[
        bool,
        typer.Option(
            "--json", help="Print JSON (schema in docs/json-schema.md); `gpuwise plan --evidence` reads it."
        ),
    ] = False,
    strict: Annotated[
        bool,
        typer.Option("--strict", help="Fail (exit 2) on any unreadable file instead of skipping it."),
    ] = False,
    workers: Annotated[
        int | None,
        typer.Option(
            "--workers",
            min=1,
            help="Processes analyzing ranks in parallel (default: every core, from 32 MB of traces; "
            "1 = in this process).",
        ),
    ] = None,
    dask: Annotated[
        str | None,
        typer.Option(
            "--dask",
            envvar="DASK_SCHEDULER_ADDRESS",
            help="Analyze the ranks on this dask.distributed cluster (tcp://scheduler:8786).",
        ),
    ] = None,
    no_cache: Annotated[
        bool,
        typer.Option("--no-cache", help="Neither read nor write the per-rank summary cache."),
    ] = False,
    as_markdown: MarkdownFlag = False,
    html: HtmlFlag = None,
) -> None:
    """Where a profiled run lost time: HTA's breakdown, kernels, steps, input, syncs, copies, communication,
    ranks, findings."""
    from gpuwise.cli.output import one_format
    from gpuwise.trace.blas_threads import import_numpy_with_one_blas_thread

    one_format(as_json, as_markdown)  # before the work, not after it
    # NumPy first, with one OpenBLAS thread (the analysis is elementwise; the pool of one thread per core
    # costs 20-60 ms of CPU); the variable is removed right after, so no child process inherits it
    import_numpy_with_one_blas_thread()
    from gpuwise.trace.parallel import analyze_many, expand_sources
    from gpuwise.trace.rank_distribution import rank_distribution

    def run(files: list[str]) -> tuple[TraceReport, RunStats]:
        with _progress(files) as progress:
            return analyze_many(
                files,
                workers=workers,
                dask_address=dask,
                use_cache=not no_cache,
                progress=progress,
                strict=strict,
            )

    if compare:
        if rank is not None:
            raise GpuwiseError("--rank shows one run's rank; --compare compares whole runs: give one of them")
        if len(paths) != 2:
            raise GpuwiseError(f"--compare takes exactly two traces (or directories), got {len(paths)}")
        from gpuwise.trace.compare import compare_reports, side_label

        reports = []
        for side in paths:
            reports.append(run(expand_sources([side]))[0])
        result = compare_reports(
            reports[0], reports[1], side_label([paths[0]]), side_label([paths[1]]), top_n=top
        )
        if result.mismatches:
            typer.echo(
                "gpuwise: warning: A and B are not the same job (" + "; ".join(result.mismatches) + "): "
                "no finding is called resolved",
                err=True,
            )
        emit(
            result.to_dict(),
            "trace_compare",
            as_json,
            as_markdown=as_markdown,
            html=html,
            document=lambda: _views().comparison_document(result, top),
        )
        return
    files = expand_sources(paths)
    report, stats = run(files)
    if report.skipped:
        typer.echo(
            f"gpuwise: warning: skipped {len(report.skipped)} of {len(files)} files that are not "
            "readable traces (listed in the report; --strict fails instead)",
            err=True,
        )
    if rank is not None and rank not in {r.rank.rank for r in report.ranks}:
        known = sorted({r.rank.rank for r in report.ranks if r.rank.rank is not None})
        raise GpuwiseError(
            f"no trace for rank {rank} (ranks here: {', '.join(map(str, known)) or 'none known'})"
        )
    emit(
        {
            "files": files,
            **report.to_dict(),
            "rank_distribution": rank_distribution(report.ranks).to_dict(),
            "execution": stats.to_dict(),
        },
        "trace",
        as_json,
        as_markdown=as_markdown,
        html=html,
        document=lambda: _views().report_document(report, top, rank),
    )
