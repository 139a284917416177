"""A GPU's recorded history over a window: what the FinOps report reads, whoever recorded it.

Two sources fill these types: the local SQLite history that `gpuwise monitor --record` writes, and a
Prometheus server scraping gpuwise's exporter, NVIDIA's dcgm-exporter or nvitop's exporter. The report
never knows which; each series names where its numbers came from (``sources``) so the report can say it.

A series is a list of samples at irregular times. Each sample stands for ``interval_s`` seconds that end at
``time_unix_s`` (the local recorder's interval, a downsampled tier's bucket, or a PromQL step), so a
report sums ``interval_s`` to get GPU-hours and never guesses the spacing. Every field a source cannot
tell is None ("n/a" in views), never 0.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class GpuSample:
    """One interval of one GPU in a ``History``: the end time (Unix s) and length (s) it stands for, and what
    was read in it (None: not read). Downsampled tiers give means (power), maxima (memory) and the seconds
    each throttle reason was active.
    """

    time_unix_s: float  # the end of the interval this sample stands for
    interval_s: float  # how long it stands for (> 0)
    busy_pct: float | None = None  # NVML utilization.gpu: time one or more kernels ran, not SM occupancy
    sm_active_pct: float | None = None  # DCGM/GPM profiling field where a source has it
    memory_used_bytes: int | None = None
    memory_total_bytes: int | None = None
    power_w: float | None = None  # mean over the interval
    energy_j: float | None = None  # the GPU's cumulative energy counter at time_unix_s (None: unsupported)
    # energy used in this interval where the source already diffed the counter (gpuwise's downsampled
    # tiers); None: the report diffs energy_j itself (monitor/energy.py)
    energy_delta_j: float | None = None
    temperature_c: float | None = None
    # throttle (clock-event) reason -> seconds of this interval it was active (nvml_sample.REASON_BITS names)
    throttle_s: dict[str, float] = field(default_factory=dict)
    lost: bool = False  # the GPU could not be read in this interval


@dataclass(frozen=True)
class ProcessSample:
    """One interval of one process on one GPU: end time (Unix s), length (s), GPU memory (bytes) and SM share
    (%), None where not read.
    """

    time_unix_s: float
    interval_s: float
    gpu_memory_bytes: int | None = None
    sm_pct: float | None = None


@dataclass(frozen=True)
class ProcessSeries:
    """One process on one GPU: pid, user and process name only (never its command line)."""

    pid: int
    user: str | None
    name: str | None
    samples: list[ProcessSample]


@dataclass(frozen=True)
class Gap:
    """Time between two samples of one GPU that no sample stands for (Unix s), and its energy.

    ``energy_j`` is the counter's rise from the sample before the gap to the sample after it, so it
    covers ``energy_span_s`` (the gap plus the after-sample's own interval, whose own delta is unknown);
    None without a counter on both sides or when it went down. ``held``: the counter ran on across the
    gap, so the GPU stayed up and its hours are estimated GPU-hours."""

    start_unix_s: float  # the end of the last sample before
    end_unix_s: float  # the start of the first sample after
    energy_j: float | None
    energy_span_s: float

    @property
    def duration_s(self) -> float:
        """How long no sample stood for this GPU."""
        return self.end_unix_s - self.start_unix_s

    @property
    def held(self) -> bool:
        """True when the energy counter ran on across the gap (the GPU stayed powered and billed)."""
        return self.energy_j is not None


@dataclass(frozen=True)
class GpuSeries:
    """One GPU's samples over the window, the processes seen on it, and where each field came from."""

    hostname: str
    gpu_index: int
    uuid: str | None
    name: str  # the GPU's marketing name as NVML reports it ("NVIDIA A100-SXM4-80GB")
    samples: list[GpuSample]  # sorted by time_unix_s
    processes: list[ProcessSeries] = field(default_factory=list)
    # field -> where it came from, e.g. {"busy_pct": "nvml utilization.gpu (gpuwise monitor --record)"}
    sources: dict[str, str] = field(default_factory=dict)
    # gaps the recorder wrote down (the local store); None: the source keeps none, find them between
    # the samples (monitor/gaps.py)
    gaps: list[Gap] | None = None


@dataclass(frozen=True)
class History:
    """Every GPU's series over one window [start_unix_s, end_unix_s]."""

    start_unix_s: float
    end_unix_s: float
    gpus: list[GpuSeries]
    origin: str  # "local store /path/monitor.sqlite" or "prometheus http://host:9090"
    notes: list[str] = field(default_factory=list)  # what the source could not give, said once each


__all__ = ["Gap", "GpuSample", "GpuSeries", "History", "ProcessSample", "ProcessSeries"]
