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

# The default step: a minute (no shorter than common scrape intervals: a step without a scrape has no
# sample) up to 8 days; beyond, the window over MAX_STEPS, so a report never asks more than 11,520 steps a
# series (8 days of minutes; Prometheus refuses 11,000 in one query, the client cuts chunks) and the step
# grows with the window instead of jumping to an hour (30 days: 225 s).
DEFAULT_STEP_S = 60.0
MAX_STEPS = 11_520


def default_step_s(window_s: float) -> float:
    """The step for a window of ``window_s`` seconds: 60 s, or window / 11,520 beyond 8 days (whole s)."""
    return max(DEFAULT_STEP_S, float(math.ceil(window_s / MAX_STEPS)))


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
    # step end -> [first sample time, last sample time, samples] of the GPU's series in that step
    span: dict[float, list[float]] = field(default_factory=dict)
    energy_at_start_j: float | None = None  # the counter at the window's start (interpolated)
    energy_at_end_j: float | None = None  # ... at its end, where the data goes on after it


@dataclass(frozen=True)
class _Window:
    """The window (start, end] and the step; points at ``end - k * step``, the first one's step holding
    ``start`` (a partial edge step: its interval is the covered part only)."""

    start: float
    end: float
    step: float

    @property
    def first_point(self) -> float:
        return self.end - (math.ceil((self.end - self.start) / self.step - 1e-9) - 1) * self.step


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
    # points end-aligned: the last step ends at `end`, the first one holds `start` (a partial step)
    window = _Window(start_unix_s, end_unix_s, step_s)
    reader = _Reader(api, names, window.first_point, end_unix_s, step_s)
    reader.origin = start_unix_s
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
            series.append(_series(gpu, sources, window))
        notes += _dialect_notes(dialect, sources, skipped, dropped)
    series.sort(key=lambda s: (s.hostname, s.gpu_index))
    return History(start_unix_s, end_unix_s, series, f"prometheus {api.shown}", notes)


_GpuOf = Callable[[dict[str, str]], "_Gpu | None"]


class _Reader:
    def __init__(self, api: PrometheusApi, names: set[str], start: float, end: float, step: float) -> None:
        self.api, self.names, self.start, self.end, self.step = api, names, start, end, step
        self.window = f"{max(1, round(step * 1000))}ms"
        self.origin: float | None = None  # the window's start (the first point's step holds it)

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
        self._spans(d, gpu_of, count)
        energy = next((s for s in d.fields.get("energy_j", ()) if s.metric in self.names), None)
        if energy is not None:
            self._energy_at_start(energy, list(gpus.values()), gpu_of)
            self._energy_at_end(energy, gpu_of)
        return list(gpus.values()), sources, len(skipped)

    def _spans(self, d: Dialect, gpu_of: _GpuOf, count: int) -> None:
        """Per step, the exact times of the GPU's first and last sample in it and how many: where its data
        starts and ends inside a step (subquery resolution a tenth of a step: the first sample is seen
        exactly when scrapes are more than a tenth of a step apart, else within that tenth)."""
        resolution = f"{max(1, round(self.step * 1000 / _BITMASK_EVALS_PER_STEP))}ms"
        exprs = {
            0: f"min_over_time(timestamp({d.detect})[{self.window}:{resolution}])",
            1: f"max_over_time(timestamp({d.detect})[{self.window}:{resolution}])",
            2: f"count_over_time({d.detect}[{self.window}])",
        }
        for slot, expr in exprs.items():
            for row in self.query(expr, count):
                gpu = gpu_of(row["metric"])
                if gpu is None:
                    continue
                for t, v in _values(row):
                    span = gpu.span.setdefault(t, [math.inf, -math.inf, 0.0])
                    span[slot] = min(span[0], v) if slot == 0 else max(span[slot], v)

    def _energy_at_end(self, source: Source, gpu_of: _GpuOf) -> None:
        """The counter at the window's end, interpolated where samples follow it (a past window, --until):
        the last step's energy then ends exactly at the end, not at the last sample before it."""
        around = f"{max(1, round(2 * self.step * 1000))}ms"  # (end - step, end + step]
        at = f"{self.end + self.step:.3f}"
        data = self.api.get("query", [("query", f"{source.metric}[{around}]"), ("time", at)])
        for row in data.get("result", []) if isinstance(data, dict) else []:
            found = gpu_of(row["metric"])
            raw = sorted((float(t), float(v) * source.scale) for t, v in _values(row))
            if found is not None and raw and raw[-1][0] > self.end and raw[0][0] <= self.end:
                found.energy_at_end_j = _at(raw, self.end)

    def _energy_at_start(self, source: Source, gpus: list[_Gpu], gpu_of: _GpuOf) -> None:
        """Each GPU's energy counter where its data starts covering: the window's start (interpolated
        between the raw samples around it) or its first sample, so its first, partial step has energy too.
        One raw query per distinct first step (usually one)."""
        origin = self.origin if self.origin is not None else self.start - self.step
        firsts: dict[float, set[int]] = {}
        for gpu in gpus:
            if gpu.points:
                firsts.setdefault(min(gpu.points), set()).add(id(gpu))
        around = f"{max(1, round(2 * self.step * 1000))}ms"  # (first step's start - step, its end]
        for t_first, members in firsts.items():
            data = self.api.get(
                "query", [("query", f"{source.metric}[{around}]"), ("time", f"{t_first:.3f}")]
            )
            for row in data.get("result", []) if isinstance(data, dict) else []:
                found = gpu_of(row["metric"])
                if found is None or id(found) not in members or found.energy_at_start_j is not None:
                    continue
                raw = sorted((float(t), float(v) * source.scale) for t, v in _values(row))
                first_seen = found.span.get(t_first, [math.inf])[0]
                at = max(origin, t_first - self.step)
                at = first_seen if math.isfinite(first_seen) and first_seen > at else at
                found.energy_at_start_j = _at(raw, at)

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


def _at(raw: list[tuple[float, float]], at: float) -> float | None:
    """A counter's value at time ``at`` from its raw (time, value) samples: interpolated between the two
    around it, the sample at it, or the first after it (the data starts there); None without samples."""
    before = [tv for tv in raw if tv[0] <= at]
    after = [tv for tv in raw if tv[0] > at]
    if before and after and before[-1][0] < at:
        (t0, v0), (t1, v1) = before[-1], after[0]
        return v0 + (v1 - v0) * (at - t0) / (t1 - t0) if v1 >= v0 else None
    if before:
        return before[-1][1]
    return after[0][1] if after else None


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


def _covered(gpu: _Gpu, t: float, w: _Window, times: set[float]) -> tuple[float, float]:
    """(from, to) of the step ending at ``t`` that the GPU's data covers, on exact sample times: a step
    whose neighbour has data is covered on that side up to its edge; where the data starts or stops
    inside a step, from its first sample or to its last (the window's last step: to ``end`` while the
    series is still being scraped, its last sample within two scrape intervals); both cut to the window.
    Inside a step with data on both sides a gap shorter than the step counts as covered."""
    lo, hi = t - w.step, t
    first, last, count = gpu.span.get(t, (math.inf, -math.inf, 0.0))
    if round(t - w.step, 3) not in times and math.isfinite(first):
        lo = max(lo, first)
    if round(t + w.step, 3) not in times and math.isfinite(last):
        scrape = (last - first) / (count - 1) if count > 1 and math.isfinite(first) else w.step
        live = t >= w.end - 1e-6 and w.end - last <= 2 * scrape
        hi = hi if live else min(hi, last)
    return max(lo, w.start), min(hi, w.end)


def _series(gpu: _Gpu, sources: dict[str, str], w: _Window) -> GpuSeries:
    samples: list[GpuSample] = []
    times = {round(t, 3) for t in set(gpu.points) | set(gpu.throttle)}
    covered: dict[float, tuple[float, float]] = {}  # step end -> (covered part's end, its seconds)
    for t in sorted(set(gpu.points) | set(gpu.throttle)):
        lo, hi = _covered(gpu, t, w, times)
        if hi - lo <= 1e-6:  # one lone sample: it stands for no time
            continue
        share = hi - lo
        covered[t] = (hi, share)
        p = gpu.points.get(t, {})
        used, total = p.get("memory_used_bytes"), p.get("memory_total_bytes")
        energy, delta = p.get("energy_j"), None
        if t >= w.end - 1e-6 and gpu.energy_at_end_j is not None and hi >= w.end - 1e-6:
            energy = gpu.energy_at_end_j
        first_step = t == min(gpu.points, default=None)  # its counter at the start is energy_at_start_j
        if first_step and gpu.energy_at_start_j is not None and energy is not None:
            delta = energy - gpu.energy_at_start_j if energy >= gpu.energy_at_start_j else None
        samples.append(
            GpuSample(
                time_unix_s=hi,
                interval_s=share,
                busy_pct=p.get("busy_pct"),
                sm_active_pct=p.get("sm_active_pct"),
                memory_used_bytes=None if used is None else round(used),
                memory_total_bytes=None if total is None else round(total),
                power_w=p.get("power_w"),
                energy_j=energy,
                energy_delta_j=delta,
                temperature_c=p.get("temperature_c"),
                # a reason's share of the step's samples, over the covered part of the step
                throttle_s={r: v * share / w.step for r, v in gpu.throttle.get(t, {}).items()},
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
                    *covered[t],
                    None if (m := v.get("gpu_memory_bytes")) is None else round(m),
                    v.get("sm_pct"),
                )
                for t, v in sorted(proc.points.items())
                if t in covered
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


__all__ = ["DEFAULT_STEP_S", "MAX_STEPS", "default_step_s", "load_history"]
