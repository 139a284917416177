"""Rules over a serving endpoint's load test (Evidence source "loadtest"); thresholds in `thresholds`.

Which SLO target the measurement misses says what limits the endpoint: a time-per-output-token target →
decode; a time-to-first-token target → queueing when the TTFT under load is a multiple of the TTFT with
no queue (or the endpoint completes less than it is offered), else the prefill itself. Failed requests
and a measured speed far from gpuwise's prediction are findings of their own.
"""

from __future__ import annotations

from gpuwise.diagnose import thresholds as T
from gpuwise.diagnose.evidence import Evidence
from gpuwise.diagnose.finding import Confidence, Finding

__all__ = [
    "serving_decode_bound",
    "serving_errors",
    "serving_prefill_bound",
    "serving_queueing",
    "serving_speed_gap",
]


def _ms(seconds: float) -> str:
    """Seconds as milliseconds for a summary."""
    return f"{seconds * 1000:,.1f} ms"


def _missed(ev: Evidence, metric: str) -> list[tuple[str, float, float]]:
    """(target, measured, limit) for each target of ``metric`` the level misses."""
    out = []
    latency = ev.serving.serving_latency_s or {}
    for key, limit in (ev.serving.serving_slo_s or {}).items():
        measured = latency.get(key)
        if key.startswith(metric + "_") and measured is not None and measured > limit:
            out.append((key, measured, limit))
    return out


def _e2e_blame(ev: Evidence) -> str:
    """A missed end-to-end target belongs to the larger part of the median request: TTFT or decoding."""
    latency = ev.serving.serving_latency_s or {}
    ttft = latency.get("ttft_p50") or 0.0
    decode = (latency.get("tpot_p50") or 0.0) * max((ev.serving.serving_output_tokens_mean or 1) - 1, 0)
    return "ttft" if ttft >= decode else "tpot"


def _misses(ev: Evidence, metric: str) -> list[tuple[str, float, float]]:
    """The targets of ``metric`` the level misses, with the end-to-end ones when ``metric`` dominates them."""
    found = _missed(ev, metric)
    if _e2e_blame(ev) == metric:
        found += _missed(ev, "e2e")
    return found


def _confidence(ev: Evidence) -> Confidence:
    """Measured directly: high, unless the level is short or errorful."""
    short = (ev.serving.serving_requests_ok or 0) < T.SERVING_CALIBRATION_MIN_REQUESTS
    errorful = (ev.serving.serving_error_pct or 0.0) >= T.SERVING_ERROR_PCT
    return "medium" if short or errorful else "high"


def _where(ev: Evidence) -> str:
    """Which load test and level a summary speaks of."""
    return f"{ev.label}, {ev.serving.serving_level}"


def _miss_text(misses: list[tuple[str, float, float]]) -> str:
    return ", ".join(f"{k} {_ms(m)} > {_ms(limit)}" for k, m, limit in misses)


def _queueing(ev: Evidence) -> tuple[bool, str]:
    """Whether the TTFT is mostly waiting, and the figure that says so."""
    ttft = (ev.serving.serving_latency_s or {}).get("ttft_p50")
    unloaded = ev.serving.serving_ttft_unloaded_s or ev.serving.serving_predicted_ttft_unloaded_s
    what = "at the lightest load level" if ev.serving.serving_ttft_unloaded_s else "predicted with no queue"
    if ev.serving.serving_offered_rate_rps and ev.serving.serving_request_throughput_rps is not None:
        kept = 100 * ev.serving.serving_request_throughput_rps / ev.serving.serving_offered_rate_rps
        if kept < T.SERVING_KEEPS_UP_PCT:
            return (
                True,
                f"it completed {kept:.0f} % of the offered {ev.serving.serving_offered_rate_rps:g} req/s",
            )
    if ttft is not None and unloaded:
        ratio = ttft / unloaded
        text = f"TTFT p50 {_ms(ttft)} is {ratio:.1f}× the {_ms(unloaded)} {what}"
        return ratio >= T.SERVING_QUEUEING_TTFT_X, text
    return False, ""


def serving_queueing(ev: Evidence) -> Finding | None:
    """A TTFT target is missed and the TTFT is mostly waiting (a multiple of the TTFT with no queue, or
    the endpoint completes less than it is offered): requests queue for a slot."""
    misses = _misses(ev, "ttft") if ev.source == "loadtest" else []
    if not misses:
        return None
    queued, why = _queueing(ev)
    if not queued:
        return None
    return Finding(
        id="serving_queueing",
        title="Requests queue: the endpoint misses its TTFT target waiting for a slot",
        severity="high",
        confidence=_confidence(ev),
        category="serving",
        summary=f"{_where(ev)}: {_miss_text(misses)}; {why}.",
        metrics={
            "ttft_p50_s": (ev.serving.serving_latency_s or {}).get("ttft_p50"),
            "ttft_unloaded_s": ev.serving.serving_ttft_unloaded_s,
        }
        | {f"{k}_s": m for k, m, _ in misses},
        fix="Add replicas (the plan sizes them with the calibrated speed) or admit fewer requests at once; "
        "a faster decode (FP8, speculative decoding) frees slots sooner.",
        source=ev.source,
        tools=("vLLM", "SGLang"),
    )


def serving_prefill_bound(ev: Evidence) -> Finding | None:
    """A TTFT target is missed without a queue to blame: the prompt's prefill itself is slow."""
    misses = _misses(ev, "ttft") if ev.source == "loadtest" else []
    if not misses or _queueing(ev)[0]:
        return None
    _, why = _queueing(ev)
    return Finding(
        id="serving_prefill_bound",
        title="Prefill is slow: the first token misses its target even without a queue",
        severity="high",
        confidence=_confidence(ev),
        category="serving",
        summary=f"{_where(ev)}: {_miss_text(misses)}"
        + (f"; {why}, so the prompt's prefill itself is slow" if why else "")
        + f" (mean prompt {ev.serving.serving_prompt_tokens_mean or 0:.0f} tokens).",
        metrics={f"{k}_s": m for k, m, _ in misses}
        | {"prompt_tokens_mean": ev.serving.serving_prompt_tokens_mean},
        fix="Cut prefill time: prefix caching for shared prompt heads, chunked prefill, FP8 weights, "
        "a larger tensor-parallel size, or a GPU with more compute.",
        fix_snippet="vllm serve MODEL --enable-prefix-caching --enable-chunked-prefill",
        source=ev.source,
        tools=("vLLM", "SGLang"),
    )


def serving_decode_bound(ev: Evidence) -> Finding | None:
    """A time-per-output-token target is missed: each decode step is too slow."""
    misses = _misses(ev, "tpot") if ev.source == "loadtest" else []
    if not misses:
        return None
    itl = (ev.serving.serving_latency_s or {}).get("itl_p50")
    return Finding(
        id="serving_decode_bound",
        title="Decoding is slow: time per output token misses its target",
        severity="high",
        confidence=_confidence(ev),
        category="serving",
        summary=f"{_where(ev)}: {_miss_text(misses)}"
        + (f" (ITL p50 {_ms(itl)})" if itl is not None else "")
        + f" with {ev.serving.serving_concurrency or 0:.0f} requests in flight.",
        metrics={f"{k}_s": m for k, m, _ in misses} | {"concurrency": ev.serving.serving_concurrency},
        fix="Speed up each decode step: FP8 weights (half the bytes read per token), speculative decoding, "
        "a larger tensor-parallel size, or fewer sequences per batch (max_num_seqs) at the cost of replicas.",
        fix_snippet="vllm serve MODEL --quantization fp8 --max-num-seqs 64",
        source=ev.source,
        tools=("vLLM", "TensorRT-LLM"),
    )


def serving_errors(ev: Evidence) -> Finding | None:
    """At least ``SERVING_ERROR_PCT`` of the level's requests failed (timeouts, HTTP errors)."""
    share = ev.serving.serving_error_pct
    if ev.source != "loadtest" or share is None or share < T.SERVING_ERROR_PCT:
        return None
    errors = ev.serving.serving_errors or {}
    kinds = ", ".join(f"{n} {kind}" for kind, n in sorted(errors.items(), key=lambda kv: -kv[1]))
    timeouts = errors.get("timeout", 0)
    return Finding(
        id="serving_errors",
        title="Requests fail under load",
        severity="high" if share >= T.SERVING_ERROR_HIGH_PCT else "medium",
        confidence="high",
        category="serving",
        summary=f"{_where(ev)}: {share:.1f} % of {ev.serving.serving_requests} requests failed ({kinds}); "
        "failed requests count as SLO misses and make every measured figure less sure.",
        metrics={"error_pct": round(share, 2), "errors": dict(errors)},
        fix=(
            "Timeouts mean the queue outgrew the client's patience: add replicas or lower the load. "
            if timeouts
            else ""
        )
        + "Read the server log for HTTP errors and dropped streams (KV cache out of memory, "
        "max_num_seqs or the request size limit reached).",
        source=ev.source,
    )


def serving_speed_gap(ev: Evidence) -> Finding | None:
    """The measured TPOT p50 differs from gpuwise's prediction by ``SERVING_SPEED_GAP_PCT`` or more."""
    measured = (ev.serving.serving_latency_s or {}).get("tpot_p50")
    predicted = ev.serving.serving_predicted_tpot_p50_s
    if ev.source != "loadtest" or not measured or not predicted:
        return None
    ratio = measured / predicted
    gap = 100 * (ratio - 1)
    if abs(gap) < T.SERVING_SPEED_GAP_PCT:
        return None
    low, high = T.SERVING_CALIBRATION_BOUNDS
    clamped = not low <= ratio <= high
    slower = ratio > 1
    declared = ev.serving.serving_declared or {}
    where = (
        f"{declared.get('num_gpus')} × {declared.get('gpu')} with {declared.get('engine')}"
        if declared.get("gpu")
        else "the workload's GPU and engine"
    )
    confidence: Confidence = "low" if clamped or _confidence(ev) != "high" else "medium"
    return Finding(
        id="serving_speed_gap",
        title=f"The endpoint decodes {'slower' if slower else 'faster'} than gpuwise predicts",
        severity="medium" if slower else "low",
        confidence=confidence,
        category="serving",
        summary=f"{_where(ev)}: TPOT p50 {_ms(measured)} measured vs {_ms(predicted)} predicted for {where} "
        f"({gap:+.0f} %)."
        + (
            f" The ratio is outside {low:g}–{high:g}×: the endpoint is probably not the declared deployment."
            if clamped
            else " The serving plan scales its step times by the measured ratio."
        ),
        metrics={
            "measured_tpot_p50_s": measured,
            "predicted_tpot_p50_s": predicted,
            "ratio": round(ratio, 3),
        },
        fix=(
            "Check the engine's launch flags (CUDA graphs / --enforce-eager, max_num_seqs, chunked prefill), "
            "the GPU clocks and the declared GPU, model and precision (loadtest --predict)."
            if slower
            else "Check that the declared GPU and model are the ones serving (loadtest --predict)."
        ),
        source=ev.source,
    )
