"""Measured against predicted: each load level next to gpuwise's performance model for the declared
GPU, model and engine (a workload file), at the level's measured lengths and requests in flight."""

from __future__ import annotations

from typing import Any

from gpuwise.errors import GpuwiseError
from gpuwise.loadtest.types import LevelSummary
from gpuwise.workload import Workload


def in_flight(lv: LevelSummary) -> float:
    """Concurrency as set, or for a rate Little's law: rate × mean end-to-end latency."""
    if lv.mode == "concurrency":
        return lv.target
    return lv.request_throughput_per_s * (lv.latency_s.get("e2e", {}).get("mean") or 0.0)


def _gap_pct(measured: float | None, predicted: float | None) -> float | None:
    if measured is None or not predicted:
        return None
    return (measured - predicted) / predicted * 100


def compare(levels: list[LevelSummary], workload: Workload) -> dict[str, Any]:
    """Per level: TTFT and TPOT at p50 and output tokens/s, measured vs predicted, and the gap in %."""
    from gpuwise.perf.predict import predict

    rows = []
    for lv in levels:
        if not lv.requests_ok:
            continue
        prompt = round(lv.input_tokens / lv.requests_ok) or workload.seq_len
        output = round(lv.output_tokens / lv.requests_ok) or workload.output_len
        flying = max(1, round(in_flight(lv)))
        w = workload.with_changes(task="serving", seq_len=prompt, output_len=output, concurrency=flying)
        inference = predict(w).inference
        if inference is None:
            raise GpuwiseError(f"the workload {workload.name or workload.model!r} has no serving prediction")
        pairs = {
            "ttft": ("ttft_p50_s", lv.pct("ttft", 50), inference.ttft_s),
            "tpot": ("tpot_p50_s", lv.pct("tpot", 50), inference.tpot_s),
            "output_tokens": (
                "output_tokens_per_s",
                lv.output_token_throughput_per_s,
                inference.output_tokens_per_s,
            ),
        }
        row: dict[str, Any] = {"concurrency": flying, "prompt_tokens": prompt, "output_tokens": output}
        for name, (field, measured, predicted) in pairs.items():
            row[f"measured_{field}"] = measured
            row[f"predicted_{field}"] = predicted
            row[f"{name}_gap_pct"] = _gap_pct(measured, predicted)
        rows.append(row)
    return {
        "workload": workload.name or workload.model,
        "model": workload.model,
        "precision": workload.precision,
        "gpu": workload.gpu,
        "tp": workload.tp,
        "num_gpus": workload.num_gpus,
        "engine": workload.framework,
        "levels": rows,
    }


__all__ = ["compare", "in_flight"]
