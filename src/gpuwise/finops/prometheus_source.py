"""A fleet's GPU history from a Prometheus server: `load_history(url, start, end, step) -> History`.

Which exporters are scraped is found from the metric names Prometheus holds over the window; each one's
metrics are read with one aggregation-free range query per metric (never one per GPU or host), so 500
GPUs cost the same number of queries as one. A point at time t stands for the step that ends at t: gauges
are averaged over it (`avg_over_time`), counters take their last value, a throttle reason becomes the
seconds of the step it was active. GPUs are keyed by UUID (else host and index), so one GPU scraped by two
exporters counts once (gpuwise's exporter first, then dcgm-exporter, then nvitop-exporter).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from gpuwise.errors import GpuwiseError
from gpuwise.finops.prometheus_dialects import DIALECTS, Dialect, ProcessField, Reduce, Source
from gpuwise.finops.prometheus_http import DEFAULT_TIMEOUT_S, PrometheusApi
from gpuwise.monitor.nvml_sample import REASON_BITS
from gpuwise.monitor.series import GpuSample, GpuSeries, History, ProcessSample, ProcessSeries

_REDUCED: dict[Reduce, str] = {"avg": "mean over each step", "last": "last value", "max": "highest value"}
# Subquery resolution for a bitmask (a mask cannot be averaged; each bit is): this many evaluations a step.
_BITMASK_EVALS_PER_STEP = 10


@dataclass
class _Process:
    user: str | None
    name: str | None
    points: dict[float, dict[ProcessField, float]] = field(default_factory=dict)


@dataclass
class _Gpu:
    host: str
    index: int
    uuid: str | None
    name: str
    points: dict[float, dict[str, float]] = field(default_factory=dict)
    throttle: dict[float, dict[str, float]] = field(default_factory=dict)
    processes: dict[tuple[str, str | None], _Process] = field(default_factory=dict)


def load_history(
    url: str, start_unix_s: float, end_unix_s: float, step_s: float, timeout_s: float = DEFAULT_TIMEOUT_S
) -> History:
    """Every GPU the Prometheus server at ``url`` scraped in [start, end], one sample per ``step_s``.

    Raises GpuwiseError (one line) when the server cannot be reached or read, or holds no GPU metrics of
    gpuwise's exporter, dcgm-exporter or nvitop-exporter in the window.
    """
    if not step_s > 0 or not math.isfinite(step_s):
        raise GpuwiseError(f"the step must be a positive number of seconds (got {step_s:g})")
    if not end_unix_s >= start_unix_s + step_s:
        raise GpuwiseError(f"the window must hold at least one step of {step_s:g} s")
    api = PrometheusApi(url, timeout_s)
    names = api.metric_names(start_unix_s, end_unix_s)
    found = [d for d in DIALECTS if d.detect in names]
    if not found:
        looked = ", ".join(f"{d.detect} ({d.exporter})" for d in DIALECTS)
        raise GpuwiseError(
            f"Prometheus at {api.shown} holds no GPU metrics in this window: looked for {looked}"
        )
    # the first point stands for [start, start + step]: every sample lies inside the window
    reader = _Reader(api, names, start_unix_s + step_s, end_unix_s, step_s)
    series: list[GpuSeries] = []
    seen: set[str] = set()
    notes: list[str] = []
    for dialect in found:
        gpus, sources, skipped = reader.dialect(dialect)
        dropped = 0
        for gpu in gpus:
            key = gpu.uuid or f"{gpu.host}/{gpu.index}"
            if key in seen:
                dropped += 1
                continue
            seen.add(key)
            series.append(_series(gpu, sources, step_s))
        notes += _dialect_notes(dialect, sources, skipped, dropped)
    series.sort(key=lambda s: (s.hostname, s.gpu_index))
    return History(start_unix_s, end_unix_s, series, f"prometheus {api.shown}", notes)


_GpuOf = Callable[[dict[str, str]], "_Gpu | None"]


class _Reader:
    def __init__(self, api: PrometheusApi, names: set[str], start: float, end: float, step: float) -> None:
        self.api, self.names, self.start, self.end, self.step = api, names, start, end, step
        self.window = f"{max(1, round(step * 1000))}ms"

    def query(self, expr: str, series: int) -> Iterator[dict]:
        return self.api.query_range(expr, self.start, self.end, self.step, series)

    def over(self, source: Source, metric: str | None = None) -> str:
        return f"{source.reduce}_over_time({metric or source.metric}[{self.window}])"

    def dialect(self, d: Dialect) -> tuple[list[_Gpu], dict[str, str], int]:
        gpus: dict[tuple[str, int], _Gpu] = {}
        skipped: set[tuple[str, str]] = set()
        inventory = self.api.get(
            "series", [("match[]", d.detect), ("start", f"{self.start:.3f}"), ("end", f"{self.end:.3f}")]
        )
        count = max(1, len(inventory) if isinstance(inventory, list) else 1)
        sources: dict[str, str] = {}

        def gpu_of(labels: dict[str, str]) -> _Gpu | None:
            host = next((labels[k] for k in d.host_labels if labels.get(k)), labels.get("instance", "?"))
            index = labels.get(d.gpu_label, "")
            if not index.isdigit():  # a MIG instance ("0:1") or a series without the GPU label
                skipped.add((host, index))
                return None
            key = (host, int(index))
            if key not in gpus:
                gpus[key] = _Gpu(
                    host, int(index), labels.get(d.uuid_label) or None, labels.get(d.name_label, "?")
                )
            return gpus[key]

        for name, candidates in d.fields.items():
            source = next((s for s in candidates if s.metric in self.names), None)
            if source is None:
                continue
            for metric in (source.metric, *(m for m in source.plus if m in self.names)):
                # Several series of one metric for one GPU (scraped by two jobs, or dcgm-exporter's pod
                # labels changing) are averaged; the ``plus`` metrics are then added (used + free).
                rows: dict[tuple[str, int], list[dict]] = {}
                for row in self.query(self.over(source, metric), count):
                    gpu = gpu_of(row["metric"])
                    if gpu is not None:
                        rows.setdefault((gpu.host, gpu.index), []).append(row)
                for key, same in rows.items():
                    points = gpus[key].points
                    for t, v in _values(same[0]) if len(same) == 1 else _mean(same):
                        point = points.get(t)
                        if point is None:
                            point = points[t] = {}
                        point[name] = point.get(name, 0.0) + v * source.scale
            sources[name] = _source_text(d, source)
        self._reasons(d, gpu_of, count, sources)
        self._processes(d, gpu_of, count, sources)
        return list(gpus.values()), sources, len(skipped)

    def _reasons(self, d: Dialect, gpu_of: _GpuOf, count: int, sources: dict[str, str]) -> None:
        if d.reasons_metric and d.reasons_metric in self.names:
            for row in self.query(
                f"avg_over_time({d.reasons_metric}[{self.window}])", count * len(REASON_BITS)
            ):
                gpu, reason = gpu_of(row["metric"]), row["metric"].get("reason", "")
                if gpu is not None and reason:
                    for t, v in _values(row):
                        _throttle(gpu, t, reason, v * self.step)
            sources["throttle_s"] = f"{d.reasons_metric} ({d.exporter}; share of each step per reason)"
            return
        mask = next((m for m in d.reasons_bitmask if m in self.names), None)
        if mask is None:
            return
        resolution = f"{max(1, round(self.step * 1000 / _BITMASK_EVALS_PER_STEP))}ms"
        for bit, reason in REASON_BITS.items():
            expr = f"avg_over_time((floor({mask} / {bit}) % 2)[{self.window}:{resolution}])"
            for row in self.query(expr, count):
                gpu = gpu_of(row["metric"])
                if gpu is not None:
                    for t, v in _values(row):
                        _throttle(gpu, t, reason, v * self.step)
        sources["throttle_s"] = (
            f"{mask} ({d.exporter}; NVML clock-event bitmask, each bit's share of the step "
            f"sampled {_BITMASK_EVALS_PER_STEP} times a step)"
        )

    def _processes(self, d: Dialect, gpu_of: _GpuOf, count: int, sources: dict[str, str]) -> None:
        for name, source in (d.process_fields or {}).items():
            if source.metric not in self.names:
                continue
            for row in self.query(self.over(source), count):
                labels = row["metric"]
                gpu = gpu_of(labels)
                pid = labels.get(d.pid_label, "")
                if gpu is None or not pid.isdigit():
                    continue
                user = labels.get(d.user_label) or None
                proc = gpu.processes.setdefault(
                    (pid, user), _Process(user, labels.get(d.process_label or "", "") or None)
                )
                for t, v in _values(row):
                    proc.points.setdefault(t, {})[name] = v * source.scale
            sources[f"process_{name}"] = _source_text(d, source)


def _source_text(d: Dialect, source: Source) -> str:
    metrics = " + ".join((source.metric, *source.plus)) if source.plus else source.metric
    unit = f", {source.unit}" if source.unit else ""
    return f"{metrics} ({d.exporter}{unit}; {_REDUCED[source.reduce]})"


_NOT_FINITE = frozenset(("NaN", "+Inf", "-Inf"))


def _values(row: dict) -> Iterator[tuple[float, float]]:
    # Prometheus sends [unix seconds (ms precision), "value"]; NaN and infinities are not readings
    for t, v in row.get("values") or []:
        if v not in _NOT_FINITE:
            yield t, float(v)


def _mean(rows: list[dict]) -> Iterator[tuple[float, float]]:
    by_time: dict[float, list[float]] = {}
    for row in rows:
        for t, v in _values(row):
            by_time.setdefault(t, []).append(v)
    return ((t, sum(vs) / len(vs)) for t, vs in by_time.items())


def _throttle(gpu: _Gpu, t: float, reason: str, seconds: float) -> None:
    reasons = gpu.throttle.setdefault(t, {})
    if seconds > 0:
        reasons[reason] = seconds


def _series(gpu: _Gpu, sources: dict[str, str], step_s: float) -> GpuSeries:
    samples = []
    for t in sorted(set(gpu.points) | set(gpu.throttle)):
        p = gpu.points.get(t, {})
        used, total = p.get("memory_used_bytes"), p.get("memory_total_bytes")
        samples.append(
            GpuSample(
                time_unix_s=t,
                interval_s=step_s,
                busy_pct=p.get("busy_pct"),
                sm_active_pct=p.get("sm_active_pct"),
                memory_used_bytes=None if used is None else round(used),
                memory_total_bytes=None if total is None else round(total),
                power_w=p.get("power_w"),
                energy_j=p.get("energy_j"),
                temperature_c=p.get("temperature_c"),
                throttle_s=gpu.throttle.get(t, {}),
                lost=p.get("lost", 0.0) >= 1.0,
            )
        )
    processes = [
        ProcessSeries(
            pid=int(pid),
            user=proc.user,
            name=proc.name,
            samples=[
                ProcessSample(
                    t,
                    step_s,
                    None if (m := v.get("gpu_memory_bytes")) is None else round(m),
                    v.get("sm_pct"),
                )
                for t, v in sorted(proc.points.items())
            ],
        )
        for (pid, _user), proc in sorted(gpu.processes.items(), key=lambda kv: int(kv[0][0]))
    ]
    return GpuSeries(gpu.host, gpu.index, gpu.uuid, gpu.name, samples, processes, dict(sources))


def _dialect_notes(d: Dialect, sources: dict[str, str], skipped: int, dropped: int) -> list[str]:
    wanted = ("busy_pct", "memory_used_bytes", "power_w", "energy_j", "temperature_c", "throttle_s")
    missing = [f for f in wanted if f not in sources]
    notes = []
    if missing:
        notes.append(f"{d.exporter}: no metric for {', '.join(missing)} in this window (n/a)")
    if skipped:
        notes.append(f"{d.exporter}: {skipped} series without a whole GPU index (MIG instances) left out")
    if dropped:
        notes.append(f"{d.exporter}: {dropped} GPUs also scraped through another exporter counted once")
    return notes


__all__ = ["load_history"]
