"""Load tests in the run store (kind "loadtest"): `gpuwise runs list` lists them next to profiled runs.

The store keeps rows and JSON (`gpuwise.store.runs`); this module makes the row's columns from a
`LoadtestResult` and rebuilds the result from its document, so `loadtest --show` prints a saved test as
it printed the live one."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from gpuwise.errors import GpuwiseError
from gpuwise.loadtest.metrics import METRICS
from gpuwise.loadtest.types import LevelSummary, LoadtestResult, RateSearch, Slo
from gpuwise.store.runs import RunStore

__all__ = ["KIND", "from_dict", "load", "save"]

KIND = "loadtest"


def _headline(result: LoadtestResult) -> tuple[int, float | None, str | None, str]:
    """Requests, req/s, the verdict and status shown in `runs list`."""
    levels = result.search.probes if result.search else result.levels
    count = sum(lv.requests_sent for lv in levels)
    best = max((lv.request_throughput_per_s for lv in levels), default=None)
    if result.search is not None:
        rate = result.search.max_rate_per_s
        top = f"max rate {rate:.3g} req/s meeting the SLO" if rate else "no probed rate met the SLO"
    elif result.slo is not None and levels:
        top = "SLO met" if all(lv.slo_met for lv in levels) else "SLO missed"
    else:
        top = None
    failed = sum(lv.requests_sent - lv.requests_ok for lv in levels)
    status = "interrupted" if result.interrupted else ("errors" if failed else "ok")
    return count, best, top, status


def save(result: LoadtestResult, store: str | Path | None) -> int:
    """Save a load test in the run store at `store` (default path if None); returns its run id, also
    set on the result as `run_id`."""
    count, best, top, status = _headline(result)
    with RunStore.open(store) as runs:
        result.run_id = runs.save_document(
            KIND,
            f"loadtest {result.url}",
            result.to_dict(),
            command="gpuwise loadtest",
            status=status,
            device="http",
            count=count,
            per_s=best,
            top=top,
        )
    return result.run_id


def _level(data: dict[str, Any]) -> LevelSummary:
    latency: dict[str, dict[str, float | None]] = {}
    for metric in METRICS:
        latency[metric] = {
            stat: data.pop(f"{metric}_{stat}_s", None) for stat in ("mean", "p50", "p90", "p99")
        }
    concurrency, rate = data.pop("concurrency", None), data.pop("rate_per_s", None)
    target = concurrency if concurrency is not None else rate
    return LevelSummary(**data, target=target, latency_s=latency)


def from_dict(doc: dict[str, Any]) -> LoadtestResult:
    """A LoadtestResult from its `to_dict` document (the per-metric latency columns regrouped)."""
    slo = None
    if doc.get("slo"):
        slo = Slo({(k.split("_p")[0], int(k.split("_p")[1][:-2])): v for k, v in doc["slo"].items()})
    search = None
    if doc.get("search"):
        s = doc["search"]
        probes = [_level(dict(p)) for p in s["probes"]]
        search = RateSearch(
            s["max_rate_per_s"],
            s["low_per_s"],
            s["high_per_s"],
            probes,
            s["bounded_by_high"],
            s.get("interrupted", False),
            s.get("repeats", 1),
            s.get("offered_rate_per_s"),
            s.get("ci_low_per_s"),
            s.get("ci_high_per_s"),
        )
    return LoadtestResult(
        doc["url"],
        doc["endpoint"],
        doc["model"],
        doc["stream"],
        [_level(dict(lv)) for lv in doc["levels"]],
        slo,
        search,
        doc.get("interrupted", False),
        doc.get("run_id"),
        doc.get("settings", {}),
        doc.get("prediction"),
        list(doc.get("warnings") or []),
    )


def load(ref: str, store: str | Path | None) -> LoadtestResult:
    """The load test `ref` names (id, 'last', -N) in the run store at `store`; a GpuwiseError when that run
    is not a load test."""
    with RunStore.open(store, create=False) as runs:
        run_id = runs.resolve(ref)
        row = runs.kind_and_document(run_id)
    if row is None:
        raise GpuwiseError(f"no run {run_id} in the run store (see `gpuwise runs list`)")
    if row[0] != KIND:
        raise GpuwiseError(
            f"run {run_id} is a {row[0]} run, not a load test: a run id here names a load test; for a "
            f"{row[0]} run give its --json output (`gpuwise runs show {run_id} --json > run.json`)"
            if row[0] in ("profile", "tune-trial")
            else f"run {run_id} is a {row[0]} run, not a load test, and carries no evidence: give a load "
            "test's run id, or the --json output of a profile, tune-trial, trace or load test"
        )
    result = from_dict(json.loads(row[1]))
    result.run_id = run_id
    return result
