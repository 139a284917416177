"""Who used (and who wasted) a GPU's hours: each interval split among the processes on it.

The rule (docs/monitoring.md): in every interval of a GPU's history, the processes present share its
GPU-hours, busy hours, idle hours, energy and dollars — by their SM share when NVML gave one for every
process there, else by GPU memory held, else equally. A process that holds memory on an idle GPU is
charged that idle time: it is what keeps the GPU from being released. Hours with no process are
"no process". In a 1-min or 1-h bucket the processes share the time the longest-present one was there
(a job that ended mid-hour leaves the rest to "no process"). A user's figures are the sum of their
processes' (user "n/a" when psutil could not see it).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import asdict, dataclass
from typing import Any

from gpuwise.monitor.series import GpuSample, GpuSeries, ProcessSample

NO_PROCESS = "no process"


@dataclass
class Usage:
    """One process's (or user's) share of a GPU's window."""

    gpu_hours: float = 0.0  # held, split among co-resident processes
    busy_gpu_hours: float = 0.0
    idle_gpu_hours: float = 0.0
    energy_kwh: float = 0.0
    usd: float | None = None
    idle_usd: float | None = None
    memory_max_bytes: int | None = None

    def add(self, other: Usage) -> None:
        """Add another share into this one (a user's sum of processes, a fleet's sum of GPUs); dollars stay
        None until a priced share is added.
        """
        self.gpu_hours += other.gpu_hours
        self.busy_gpu_hours += other.busy_gpu_hours
        self.idle_gpu_hours += other.idle_gpu_hours
        self.energy_kwh += other.energy_kwh
        self.memory_max_bytes = _max(self.memory_max_bytes, other.memory_max_bytes)
        if other.usd is not None:
            self.usd = (self.usd or 0.0) + other.usd
            self.idle_usd = (self.idle_usd or 0.0) + (other.idle_usd or 0.0)

    def priced(self, usd_per_gpu_hour: float | None) -> Usage:
        """Set the dollars from the GPU's $/GPU-hour (None: left unpriced); returns self for chaining."""
        if usd_per_gpu_hour is not None:
            self.usd = self.gpu_hours * usd_per_gpu_hour
            self.idle_usd = self.idle_gpu_hours * usd_per_gpu_hour
        return self

    def to_dict(self) -> dict[str, Any]:
        """The share as JSON, one key per field."""
        return asdict(self)


def _max(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else max(a, b)


def _weights(present: list[tuple[str, ProcessSample]]) -> dict[str, float]:
    if all(p.sm_pct is not None for _, p in present) and sum(p.sm_pct or 0 for _, p in present) > 0:
        raw = {k: float(p.sm_pct or 0) for k, p in present}
    elif all(p.gpu_memory_bytes for _, p in present):
        raw = {k: float(p.gpu_memory_bytes or 0) for k, p in present}
    else:
        raw = {k: 1.0 for k, _ in present}
    total = sum(raw.values())
    return {k: v / total for k, v in raw.items()}


def _key_ms(t: float) -> int:
    return int(t * 1000 + 0.5)


def attribute(
    series: GpuSeries, energy_j: list[float | None], idle: list[bool]
) -> tuple[dict[str, Usage], dict[str, str | None]]:
    """Per process key ('pid name'), its usage of this GPU; and each key's user."""
    at: dict[int, list[tuple[str, ProcessSample]]] = defaultdict(list)
    users: dict[str, str | None] = {}
    for proc in series.processes:
        key = f"{proc.pid} {proc.name or 'n/a'}"
        users[key] = proc.user
        for ps in proc.samples:
            at[_key_ms(ps.time_unix_s)].append((key, ps))
    out: dict[str, Usage] = defaultdict(Usage)
    nobody: list[tuple[str, float, int | None]] = [(NO_PROCESS, 1.0, None)]
    for sample, energy, is_idle in zip(series.samples, energy_j, idle, strict=True):
        if sample.lost:
            continue
        present = at.get(_key_ms(sample.time_unix_s))
        if not present:
            shares = nobody
        else:
            # a bucket's processes may have been there only part of it (a job that ended mid-hour): they
            # share the time the longest-present one was there, "no process" the rest
            covered = min(1.0, max(p.interval_s for _, p in present) / sample.interval_s)
            if len(present) == 1:
                shares = [(present[0][0], covered, present[0][1].gpu_memory_bytes)]
            else:
                weights = _weights(present)
                shares = [(k, weights[k] * covered, p.gpu_memory_bytes) for k, p in present]
            if covered < 1.0:
                shares.append((NO_PROCESS, 1.0 - covered, None))
        for key, share, memory in shares:
            _charge(out[key], sample, share, energy, is_idle, memory)
    users[NO_PROCESS] = None
    return dict(out), users


def _charge(
    u: Usage, s: GpuSample, share: float, energy: float | None, idle: bool, memory: int | None
) -> None:
    hours = s.interval_s / 3600 * share
    u.gpu_hours += hours
    if s.busy_pct is not None:
        u.busy_gpu_hours += hours * s.busy_pct / 100
    if idle:
        u.idle_gpu_hours += hours
    if energy is not None:
        u.energy_kwh += energy * share / 3.6e6
    u.memory_max_bytes = _max(u.memory_max_bytes, memory)


def by_user(processes: dict[str, Usage], users: dict[str, str | None]) -> dict[str, Usage]:
    """Per-process shares summed per user (``"n/a"``: user unknown; ``NO_PROCESS`` stays itself)."""
    out: dict[str, Usage] = defaultdict(Usage)
    for key, usage in processes.items():
        out[NO_PROCESS if key == NO_PROCESS else users.get(key) or "n/a"].add(usage)
    return dict(out)


__all__ = ["NO_PROCESS", "Usage", "attribute", "by_user"]
