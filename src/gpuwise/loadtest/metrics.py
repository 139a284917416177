"""From request records to a level summary: percentiles, throughput, errors, goodput, SLO verdict.

Definitions follow vLLM's benchmark_serving (`vllm bench serve`) and NVIDIA genai-perf/AIPerf:
TTFT = send to first non-empty content chunk; ITL = gap between consecutive content chunks (every
chunk is one sample); TPOT = (e2e - TTFT) / (output tokens - 1) per request; throughput = count /
level duration (first send to last completion); goodput = requests meeting every SLO limit per
request, per second. Percentiles interpolate linearly (numpy's default, as vLLM uses).
"""

from __future__ import annotations

import math
import re
from collections import Counter

from gpuwise.errors import GpuwiseError
from gpuwise.loadtest.types import LevelSummary, LoadMode, RequestRecord, Slo

__all__ = ["MAX_ERROR_FRACTION", "METRICS", "PERCENTILES", "parse_slo", "percentile", "summarize"]

METRICS = ("ttft", "tpot", "itl", "e2e")
PERCENTILES = (50, 90, 99)
# A level meets its SLO only if at most this fraction of requests failed (failures count as misses).
MAX_ERROR_FRACTION = 0.01
_SLO_ITEM = re.compile(r"^(ttft|tpot|itl|e2e)_p(\d{1,2}(?:\.\d+)?)=([0-9.]+(?:e-?\d+)?)(ms|s)?$")


def percentile(values: list[float], p: float) -> float | None:
    """The ``p``-th percentile (0–100) of ``values`` by linear interpolation (numpy's default, as vLLM uses);
    None for no values.
    """
    if not values:
        return None
    ordered = sorted(values)
    rank = (len(ordered) - 1) * p / 100
    low, high = math.floor(rank), math.ceil(rank)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def parse_slo(text: str) -> Slo:
    """'ttft_p99=0.5,tpot_p99=0.05' (seconds; '50ms' also accepted) -> Slo; bad syntax -> one clear line."""
    limits: dict[tuple[str, int], float] = {}
    for item in filter(None, (part.strip().lower() for part in text.split(","))):
        match = _SLO_ITEM.match(item.replace(" ", ""))
        if not match:
            raise GpuwiseError(
                f"bad --slo item {item!r}: use METRIC_pNN=SECONDS with METRIC one of ttft, tpot, itl, e2e, "
                "e.g. --slo ttft_p99=0.5,tpot_p99=0.05"
            )
        metric, p, value, unit = match.groups()
        pct = float(p)
        if not pct.is_integer() or not 1 <= pct <= 99:
            raise GpuwiseError(f"bad --slo percentile p{p}: use a whole percentile from p1 to p99")
        seconds = float(value) / (1000 if unit == "ms" else 1)
        if seconds <= 0:
            raise GpuwiseError(f"bad --slo limit {item!r}: the limit must be > 0")
        limits[(metric, int(pct))] = seconds
    if not limits:
        raise GpuwiseError("--slo is empty: e.g. --slo ttft_p99=0.5,tpot_p99=0.05")
    return Slo(limits)


def _samples(records: list[RequestRecord]) -> dict[str, list[float]]:
    ok = [r for r in records if r.ok]
    return {
        "ttft": [r.ttft_s for r in ok if r.ttft_s is not None],
        "tpot": [t for r in ok if (t := r.tpot_s) is not None],
        "itl": [gap for r in ok for gap in r.itl_s],
        "e2e": [r.e2e_s for r in ok if r.e2e_s is not None],
    }


def _request_meets(record: RequestRecord, slo: Slo) -> bool:
    if not record.ok:
        return False
    values = {"ttft": record.ttft_s, "tpot": record.tpot_s, "e2e": record.e2e_s}
    for (metric, _p), limit in slo.limits.items():
        if metric == "itl":
            if any(gap > limit for gap in record.itl_s):
                return False
            continue
        value = values[metric]
        if value is not None and value > limit:
            return False
    return True


def summarize(
    records: list[RequestRecord],
    mode: LoadMode,
    target: float,
    slo: Slo | None = None,
    interrupted: bool = False,
) -> LevelSummary:
    """One load level's summary: counts, errors, tokens, throughput per second of the level's
    duration, latency mean and percentiles per metric (s), and the SLO verdict when `slo` is given.
    Cancelled requests (the level was stopped) count nowhere but in the error tally."""
    done = [r for r in records if r.error != "cancelled"]
    ok = [r for r in done if r.ok]
    duration = _duration_s(done)
    per_s = 1.0 / duration if duration > 0 else 0.0
    samples = _samples(records)
    out_tokens = sum(r.output_tokens for r in ok)
    in_tokens = sum(r.input_tokens or 0 for r in ok)
    summary = LevelSummary(
        mode=mode,
        target=target,
        duration_s=duration,
        requests_sent=len(done),
        requests_ok=len(ok),
        errors=dict(Counter(str(r.error) for r in records if r.error)),
        input_tokens=in_tokens,
        output_tokens=out_tokens,
        token_source=_token_source(ok),
        request_throughput_per_s=len(ok) * per_s,
        output_token_throughput_per_s=out_tokens * per_s,
        total_token_throughput_per_s=(in_tokens + out_tokens) * per_s,
        latency_s=_latency(samples),
        interrupted=interrupted,
    )
    if slo is not None:
        _judge(summary, records, samples, slo, per_s)
    return summary


def _duration_s(done: list[RequestRecord]) -> float:
    """First send to last completion, in s (0 with no request)."""
    ends = [r.start_s + (r.e2e_s or 0.0) for r in done]
    return max(ends) - min(r.start_s for r in done) if done else 0.0


def _latency(samples: dict[str, list[float]]) -> dict[str, dict[str, float | None]]:
    """Per metric: mean and the `PERCENTILES` (p50, p90, p99) in s, None without samples."""
    return {
        m: {"mean": (sum(v) / len(v)) if v else None, **{f"p{p}": percentile(v, p) for p in PERCENTILES}}
        for m, v in samples.items()
    }


def _token_source(ok: list[RequestRecord]) -> str:
    """Where the token counts came from: the one source all requests share, "mixed", or "none"."""
    sources = {r.token_source for r in ok}
    return sources.pop() if len(sources) == 1 else ("mixed" if sources else "none")


def _judge(
    summary: LevelSummary,
    records: list[RequestRecord],
    samples: dict[str, list[float]],
    slo: Slo,
    per_s: float,
) -> None:
    failures = []
    for (metric, p), limit in slo.limits.items():
        value = percentile(samples[metric], p)
        if value is None:
            failures.append(f"{metric}_p{p}: no samples")
        elif value > limit:
            failures.append(f"{metric}_p{p} {value:.3f} s > {limit:g} s")
    failed = summary.requests_sent - summary.requests_ok
    if summary.requests_sent and failed / summary.requests_sent > MAX_ERROR_FRACTION:
        failures.append(f"{failed} of {summary.requests_sent} requests failed")
    if not summary.requests_ok:
        failures.append("no request succeeded")
    summary.goodput_per_s = sum(_request_meets(r, slo) for r in records) * per_s
    summary.slo_failures = failures
    summary.slo_met = not failures


__all__ = ["METRICS", "PERCENTILES", "parse_slo", "percentile", "summarize"]
