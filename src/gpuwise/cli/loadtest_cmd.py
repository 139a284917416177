"""`gpuwise loadtest URL`: load an OpenAI-compatible endpoint; report TTFT, TPOT, ITL, goodput, max rate."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from gpuwise.cli.output import HtmlFlag, JsonFlag, MarkdownFlag, emit, one_format
from gpuwise.errors import GpuwiseError, RunFailed

if TYPE_CHECKING:
    from gpuwise.loadtest.types import LoadMode

__all__ = ["loadtest"]

_MAX_REQUESTS_CAP = 100_000
_DURATION_CAP_S = 3600.0
_LEVEL_CAP = 1e6  # requests/s or requests in flight per level (the workload's serving.rate bound)


def _numbers(text: str, flag: str) -> list[float]:
    try:
        values = [float(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise GpuwiseError(
            f"{flag} takes numbers separated by commas (e.g. {flag} 1,4,16); got {text!r}"
        ) from None
    if not values or any(not 0 < v <= _LEVEL_CAP for v in values):  # NaN fails the comparison too
        raise GpuwiseError(f"{flag} values must be finite numbers > 0 and ≤ {_LEVEL_CAP:,.0f}; got {text!r}")
    return values


def _headers(api_key_env: str) -> dict[str, str]:
    """The bearer header from the environment; the key is never printed or stored."""
    key = os.environ.get(api_key_env, "")
    return {"Authorization": f"Bearer {key}"} if key else {}


def _progress_hooks():
    """A Rich progress bar on stderr (off when stderr is not a terminal); returns hooks and a closer."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

    console = Console(stderr=True)
    progress = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=True,
        disable=not console.is_terminal,
    )
    progress.start()
    state: dict[str, TaskID] = {}

    def on_level(label: str, total: int) -> None:
        state["task"] = progress.add_task(label, total=total)

    def on_record(_record) -> None:
        progress.advance(state["task"])

    return on_level, on_record, progress.stop


def loadtest(
    url: Annotated[
        str | None, typer.Argument(help="Server URL: http://HOST:PORT\\[/v1\\[/completions]].")
    ] = None,
    endpoint: Annotated[
        str | None,
        typer.Option("--endpoint", help="completions | chat (default: from the URL, else completions)."),
    ] = None,
    model: Annotated[
        str | None, typer.Option("--model", help="Model name (default: the first of /v1/models).")
    ] = None,
    concurrency: Annotated[
        str | None, typer.Option("--concurrency", help="Requests in flight; a list sweeps (1,4,16).")
    ] = None,
    rate: Annotated[str | None, typer.Option("--rate", help="Requests/s; a list sweeps (2,5,10).")] = None,
    arrival: Annotated[str, typer.Option("--arrival", help="With --rate: poisson | constant.")] = "poisson",
    max_requests: Annotated[int, typer.Option("--max-requests", help="Requests per level (bounded).")] = 200,
    duration: Annotated[float, typer.Option("--duration", help="Seconds per level at most.")] = 60.0,
    timeout: Annotated[
        float, typer.Option("--timeout", help="Seconds per request before it counts as a timeout.")
    ] = 60.0,
    prompt_tokens: Annotated[
        int, typer.Option("--prompt-tokens", help="Synthetic prompt length (mean).")
    ] = 256,
    output_tokens: Annotated[
        int, typer.Option("--output-tokens", help="max_tokens per request (mean).")
    ] = 128,
    length_spread: Annotated[
        float,
        typer.Option("--length-spread", help="0 = fixed lengths; 0.5 = uniform ±50 % around the means."),
    ] = 0.0,
    dataset: Annotated[
        Path | None, typer.Option("--dataset", help="JSONL of {prompt | messages, max_tokens?} instead.")
    ] = None,
    tokenizer: Annotated[
        Path | None,
        typer.Option("--tokenizer", help="tokenizer.json to count tokens when the server sends no usage."),
    ] = None,
    seed: Annotated[int, typer.Option("--seed", help="Seed for prompts, lengths and Poisson arrivals.")] = 0,
    slo: Annotated[
        str | None, typer.Option("--slo", help="e.g. ttft_p99=0.5,tpot_p99=0.05 (seconds).")
    ] = None,
    find_max_rate: Annotated[
        bool, typer.Option("--find-max-rate", help="Bisect over --rate-range for the max rate meeting --slo.")
    ] = False,
    rate_range: Annotated[
        str, typer.Option("--rate-range", help="LOW,HIGH req/s for --find-max-rate.")
    ] = "0.5,64",
    max_probes: Annotated[
        int, typer.Option("--max-probes", help="Load levels the search may run (bounded).")
    ] = 8,
    api_key_env: Annotated[
        str, typer.Option("--api-key-env", help="Environment variable holding the API key (never printed).")
    ] = "OPENAI_API_KEY",
    stream: Annotated[bool, typer.Option("--stream/--no-stream", help="Stream tokens (SSE).")] = True,
    ignore_eos: Annotated[
        bool,
        typer.Option("--ignore-eos", help="Send ignore_eos: every reply is max_tokens long (as vLLM's)."),
    ] = False,
    insecure: Annotated[
        bool, typer.Option("--insecure", help="https: do not verify the server's certificate.")
    ] = False,
    ca_cert: Annotated[
        Path | None,
        typer.Option("--ca-cert", help="https: PEM file of the CA that signed the server's cert."),
    ] = None,
    probe_repeats: Annotated[
        int,
        typer.Option(
            "--probe-repeats", help="--find-max-rate: seeds per probed rate (all must meet the SLO)."
        ),
    ] = 3,
    store: Annotated[
        Path | None, typer.Option("--store", help="Run store file (default: GPUWISE_STORE).")
    ] = None,
    save: Annotated[bool, typer.Option("--save/--no-save", help="Save the result in the run store.")] = True,
    predict: Annotated[
        Path | None,
        typer.Option(
            "--predict", help="Workload YAML declaring GPU, model, engine: show measured vs predicted."
        ),
    ] = None,
    show: Annotated[
        str | None, typer.Option("--show", help="Print a saved load test (run id, 'last').")
    ] = None,
    as_json: JsonFlag = False,
    as_markdown: MarkdownFlag = False,
    html: HtmlFlag = None,
) -> None:
    """Measure an OpenAI-compatible endpoint (vLLM, SGLang, TGI, llama.cpp, Ollama): TTFT, TPOT, ITL,
    throughput, goodput under --slo, and with --find-max-rate the highest rate meeting it."""
    from gpuwise.loadtest import saved_results as run_store

    one_format(as_json, as_markdown)
    if show is not None:
        _emit(run_store.load(show, store), as_json, as_markdown, html)
        return
    if not url:
        raise GpuwiseError("give the server URL, e.g. gpuwise loadtest http://127.0.0.1:8000")
    try:
        import httpx  # noqa: F401 - only to say what is missing, in one line
    except ImportError:
        raise GpuwiseError("gpuwise loadtest needs httpx: pip install 'gpuwise[loadtest]'") from None
    settings = _settings(locals())
    declared = None
    if predict is not None:
        from gpuwise.workload.spec import load_workload

        declared = load_workload(predict)
    from gpuwise.loadtest.session import run_loadtest

    on_level, on_record, close = _progress_hooks()
    try:
        result = run_loadtest(settings, on_level, on_record)
    finally:
        close()
    if declared is not None:
        from gpuwise.loadtest.prediction import compare

        result.prediction = compare(result.search.probes if result.search else result.levels, declared)
    failed = _failure(result)
    if save and not result.interrupted and failed is None:  # never a verdict the run did not reach
        run_store.save(result, store)
    _emit(result, as_json, as_markdown, html)
    if result.interrupted:
        typer.echo("gpuwise: interrupted: the partial result above is not saved", err=True)
        raise typer.Exit(130)
    if failed is not None:
        raise RunFailed(failed)


def _failure(result) -> str | None:
    """Why the load test measured nothing (every request failed), naming the error kinds; None if any
    request succeeded."""
    levels = result.search.probes if result.search else result.levels
    if any(lv.requests_ok for lv in levels):
        return None
    kinds: dict[str, int] = {}
    for lv in levels:
        for kind, count in lv.errors.items():
            kinds[kind] = kinds.get(kind, 0) + count
    why = ", ".join(f"{n} {kind}" for kind, n in sorted(kinds.items(), key=lambda kv: -kv[1]))
    return f"every request failed ({why or 'none finished'}): nothing measured, nothing saved"


def _check_ranges(opts: dict) -> None:
    """Every option with a closed set or a bounded range (one line, exit 2 on a bad value)."""
    if opts["endpoint"] not in (None, "completions", "chat"):
        raise GpuwiseError(f"--endpoint must be completions or chat; got {opts['endpoint']!r}")
    if opts["arrival"] not in ("poisson", "constant"):
        raise GpuwiseError(f"--arrival must be poisson or constant; got {opts['arrival']!r}")
    if not 1 <= opts["max_requests"] <= _MAX_REQUESTS_CAP:
        raise GpuwiseError(f"--max-requests must be 1 to {_MAX_REQUESTS_CAP:,}")
    if not 0 < opts["duration"] <= _DURATION_CAP_S or not 0 < opts["timeout"] <= _DURATION_CAP_S:
        raise GpuwiseError(f"--duration and --timeout must be > 0 and at most {_DURATION_CAP_S:g} s")
    if opts["prompt_tokens"] < 1 or opts["output_tokens"] < 1 or not 0 <= opts["length_spread"] < 1:
        raise GpuwiseError("--prompt-tokens and --output-tokens must be >= 1, --length-spread in [0, 1)")
    if opts["concurrency"] and opts["rate"]:
        raise GpuwiseError("--concurrency and --rate are exclusive: choose one way to load the server")
    if not 1 <= opts["max_probes"] <= 20:
        raise GpuwiseError("--max-probes must be 1 to 20")
    if not 1 <= opts["probe_repeats"] <= 10:
        raise GpuwiseError("--probe-repeats must be 1 to 10")
    if opts["insecure"] and opts["ca_cert"] is not None:
        raise GpuwiseError("--insecure and --ca-cert are exclusive: verify with the CA, or not at all")


def _verify(opts: dict):
    """httpx's TLS setting: False with --insecure, an SSL context trusting --ca-cert, else True."""
    if opts["insecure"]:
        return False
    if opts["ca_cert"] is None:
        return True
    import ssl

    try:
        return ssl.create_default_context(cafile=str(opts["ca_cert"]))
    except (OSError, ssl.SSLError) as err:
        raise GpuwiseError(
            f"cannot read --ca-cert {opts['ca_cert']}: {err}; give a PEM certificate file"
        ) from None


def _search_range(opts: dict, slo: object) -> tuple[float, float] | None:
    """``--find-max-rate``'s (low, high) requests/s from ``--rate-range``; None without the search."""
    if not opts["find_max_rate"]:
        return None
    if slo is None:
        raise GpuwiseError("--find-max-rate needs --slo (e.g. --slo ttft_p99=0.5)")
    bounds = _numbers(opts["rate_range"], "--rate-range")
    if len(bounds) != 2 or bounds[0] >= bounds[1]:
        raise GpuwiseError(f"--rate-range takes LOW,HIGH with LOW < HIGH; got {opts['rate_range']!r}")
    return (bounds[0], bounds[1])


def _load_mode(opts: dict, search: tuple[float, float] | None) -> tuple[LoadMode, list[float]]:
    """How the server is loaded (poisson | constant arrivals, or closed-loop concurrency) and the levels."""
    if opts["rate"]:
        return opts["arrival"], _numbers(opts["rate"], "--rate")
    targets = _numbers(opts["concurrency"] or "1", "--concurrency")
    return (opts["arrival"] if search and opts["rate"] is None else "concurrency"), targets


def _settings(opts: dict):
    """Validated settings from the command's options (every bad value: one line, exit 2)."""
    from gpuwise.loadtest.endpoint import parse_target, resolve_model
    from gpuwise.loadtest.metrics import parse_slo
    from gpuwise.loadtest.prompts import Lengths, read_dataset
    from gpuwise.loadtest.session import Settings
    from gpuwise.loadtest.tokens import load_tokenizer

    _check_ranges(opts)
    target = parse_target(opts["url"], opts["endpoint"])
    slo = parse_slo(opts["slo"]) if opts["slo"] else None
    search = _search_range(opts, slo)
    mode, targets = _load_mode(opts, search)
    dataset = read_dataset(opts["dataset"]) if opts["dataset"] else None
    tokenizer = load_tokenizer(opts["tokenizer"]) if opts["tokenizer"] else None
    headers = {**target.headers, **_headers(opts["api_key_env"])}  # URL user:password, else the key
    verify = _verify(opts)
    name = resolve_model(target, opts["model"], headers, opts["timeout"], verify)
    return Settings(
        url=target.url,
        endpoint=target.endpoint,
        model=name,
        mode=mode,
        targets=targets,
        max_requests=opts["max_requests"],
        duration_s=opts["duration"],
        timeout_s=opts["timeout"],
        lengths=Lengths(opts["prompt_tokens"], opts["output_tokens"], opts["length_spread"]),
        dataset=dataset,
        seed=opts["seed"],
        stream=opts["stream"],
        headers=headers,
        slo=slo,
        search_range=search,
        max_probes=opts["max_probes"],
        tokenizer=tokenizer,
        ignore_eos=opts["ignore_eos"],
        verify=verify,
        probe_repeats=opts["probe_repeats"],
    )


def _emit(result, as_json: bool, as_markdown: bool, html: Path | None) -> None:
    from gpuwise.report import loadtest_view

    emit(
        result.to_dict(),
        "loadtest",
        as_json,
        as_markdown=as_markdown,
        html=html,
        document=lambda: loadtest_view.document(result),
    )
