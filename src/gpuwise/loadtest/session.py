"""A whole load test: each level (or a max-rate search) in one event loop; Ctrl-C keeps what finished."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from gpuwise.errors import GpuwiseError
from gpuwise.loadtest.client import NOT_STREAMED, send
from gpuwise.loadtest.metrics import summarize
from gpuwise.loadtest.prompts import Lengths, request_bodies
from gpuwise.loadtest.runner import LevelPlan, http_client, proxy_applies, run_level
from gpuwise.loadtest.schedule import arrival_times
from gpuwise.loadtest.search import find_max_rate
from gpuwise.loadtest.tokens import recount
from gpuwise.loadtest.types import (
    Endpoint,
    LevelSummary,
    LoadMode,
    LoadtestResult,
    RequestRecord,
    Slo,
    level_label,
)

if TYPE_CHECKING:  # pragma: no cover
    import httpx

# Progress hooks: a level starts (label, its request count), a request ends.
OnLevel = Callable[[str, int], None]
OnRecord = Callable[[RequestRecord], None]


@dataclass
class Settings:
    """Everything ``gpuwise loadtest`` was asked: the server, the load levels, bounds, prompt lengths or a
    dataset, an optional SLO and ``--find-max-rate`` range (requests/s), and a tokenizer for counts the
    server does not report. Durations and timeouts are in seconds.
    """

    url: str
    endpoint: Endpoint
    model: str
    mode: LoadMode
    targets: list[float]  # concurrencies or rates: one level each (a sweep when several)
    max_requests: int = 200
    duration_s: float = 60.0
    timeout_s: float = 60.0
    lengths: Lengths = field(default_factory=Lengths)
    dataset: list[dict[str, Any]] | None = None
    seed: int = 0
    stream: bool = True
    headers: dict[str, str] = field(default_factory=dict)  # the API key: never stored or printed
    slo: Slo | None = None
    search_range: tuple[float, float] | None = None  # (low, high) rate for --find-max-rate
    max_probes: int = 8
    tokenizer: Any = None  # a tokenizers.Tokenizer: counts tokens where the server sends no `usage`
    ignore_eos: bool = False  # send ignore_eos: true (vLLM/SGLang/TGI), so every reply is max_tokens long
    verify: Any = True  # TLS: True (system CAs), False (--insecure) or an ssl.SSLContext (--ca-cert)
    probe_repeats: int = 1  # --find-max-rate: probes per rate, seeds seed … seed + repeats - 1

    def public(self) -> dict[str, Any]:
        """What the result keeps of the settings: everything but headers (the API key)."""
        return {
            "mode": self.mode,
            "targets": self.targets,
            "max_requests": self.max_requests,
            "duration_s": self.duration_s,
            "timeout_s": self.timeout_s,
            "prompt_tokens": None if self.dataset else self.lengths.prompt_tokens,
            "output_tokens": self.lengths.output_tokens,
            "length_spread": self.lengths.spread,
            "dataset_requests": len(self.dataset) if self.dataset else None,
            "seed": self.seed,
            "ignore_eos": self.ignore_eos,
            "probe_repeats": self.probe_repeats,
            "tls_verify": self.verify is not False,
        }


async def _test_request(client: httpx.AsyncClient, settings: Settings, body: dict[str, Any]) -> None:
    """One request before measuring, as vLLM's benchmark does: a wrong endpoint, model or key is one clear
    error instead of N failed requests, and connection setup and lazy imports stay out of the figures."""
    record = await send(client, settings.url, body, settings.endpoint, time.perf_counter(), settings.headers)
    if record.error == "http_status" and record.error_detail in {"401", "403"}:
        raise GpuwiseError(
            f"{settings.url} refused the API key (HTTP {record.error_detail}): set OPENAI_API_KEY "
            "or name the variable with --api-key-env"
        )
    if record.error_detail == NOT_STREAMED:
        raise GpuwiseError(f"{settings.url} {NOT_STREAMED.removeprefix('the server ')}")
    if record.error == "connect" and record.error_detail.startswith("TLS: "):
        raise GpuwiseError(
            f"TLS failed for {settings.url} ({record.error_detail[5:]}): give the server's CA with "
            "--ca-cert FILE, or --insecure to skip verification"
        )
    if record.error is not None:
        detail = f" ({record.error_detail})" if record.error_detail else ""
        raise GpuwiseError(f"the test request to {settings.url} failed: {record.error}{detail}")


async def _run(settings: Settings, on_level: OnLevel | None, on_record: OnRecord | None) -> LoadtestResult:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):  # not the main thread, Windows
        loop.add_signal_handler(signal.SIGINT, stop.set)
    try:
        return await _levels(settings, stop, on_level, on_record)
    finally:
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.remove_signal_handler(signal.SIGINT)


async def _levels(
    settings: Settings, stop: asyncio.Event, on_level: OnLevel | None, on_record: OnRecord | None
) -> LoadtestResult:
    bodies = request_bodies(
        settings.endpoint,
        settings.model,
        settings.max_requests,
        settings.lengths,
        settings.seed,
        settings.stream,
        settings.dataset,
        settings.ignore_eos,
    )
    result = LoadtestResult(
        settings.url, settings.endpoint, settings.model, settings.stream, [], settings.slo, None, False
    )
    async with http_client(
        settings.timeout_s,
        settings.verify,
        wire=settings.url.startswith("http://") and not proxy_applies(settings.url),
    ) as client:
        await _test_request(client, settings, bodies[0])

        async def level(mode: LoadMode, target: float, seed_offset: int = 0) -> LevelSummary | None:
            if stop.is_set():
                result.interrupted = True
                return None
            if on_level is not None:
                on_level(level_label(mode, target), len(bodies))
            plan = LevelPlan(
                settings.url,
                settings.endpoint,
                mode,
                target,
                bodies,
                settings.duration_s,
                settings.timeout_s,
                settings.seed + seed_offset,
                settings.headers,
            )
            records, cut = await run_level(client, plan, stop, on_record)
            if settings.tokenizer is not None:
                recount(records, bodies, settings.tokenizer)
            result.interrupted |= cut
            summary = summarize(records, mode, target, settings.slo, interrupted=cut)
            summary.seed = plan.seed
            summary.offered_rate_per_s = offered_rate(mode, target, len(records), plan.seed, len(bodies))
            return summary

        if settings.search_range is not None:
            low, high = settings.search_range
            mode: LoadMode = "constant" if settings.mode == "concurrency" else settings.mode
            result.search = await find_max_rate(
                lambda r, k: level(mode, r, k), low, high, settings.max_probes, repeats=settings.probe_repeats
            )
        else:
            for target in settings.targets:
                summary = await level(settings.mode, target)
                if summary is not None:
                    result.levels.append(summary)
                if result.interrupted:
                    break
    result.warnings.extend(_token_warnings(result))
    return result


def offered_rate(mode: LoadMode, target: float, sent: int, seed: int, planned: int) -> float | None:
    """The rate the seeded schedule offered for the ``sent`` requests issued (requests/s): (sent - 1) over
    the span of their scheduled send times; None in concurrency mode or under two requests."""
    if mode == "concurrency" or sent < 2:
        return None
    times = arrival_times(mode, target, min(sent, planned), seed)
    return (len(times) - 1) / times[-1] if times[-1] > 0 else None


def _token_warnings(result: LoadtestResult) -> list[str]:
    """A warning when output tokens were counted one per streamed event (no `usage`, no --tokenizer)."""
    levels = result.search.probes if result.search else result.levels
    if not any(lv.token_source in ("chunks", "mixed") for lv in levels):
        return []
    return [
        "the server sent no `usage`: output tokens were counted one per streamed event; a server that "
        "packs several tokens into one event is undercounted (TPOT overstated, token throughput "
        "understated): give --tokenizer tokenizer.json for exact counts"
    ]


def run_loadtest(
    settings: Settings, on_level: OnLevel | None = None, on_record: OnRecord | None = None
) -> LoadtestResult:
    """Run every level (or the max-rate search) against the server and return the result.

    ``on_level`` is called as each level starts (its label and request count), ``on_record`` as each
    request ends. Ctrl-C stops the run and returns what finished, with ``interrupted`` set.
    """
    result = asyncio.run(_run(settings, on_level, on_record))
    result.settings = settings.public()
    return result


__all__ = ["OnLevel", "OnRecord", "Settings", "run_loadtest"]
