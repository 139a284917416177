"""A background sampler: CPU per core, process-tree CPU, RSS, disk reads; GPU via NVML.

Runs on a daemon thread at a fixed interval; each sample is a small dict. It never touches torch,
so it cannot change what the training computes. psutil or NVML features that are missing are
recorded in ``not_available`` and skipped. Where Linux offers a cheaper reading than psutil's, it
is used (``os.times()``, ``/proc/self/statm``, ``/proc/diskstats``, the task ``children`` files):
a sample then costs ~110 µs of CPU in a tight loop, ~0.7 ms cold inside a training process.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from typing import Any

from gpuwise.monitor.nvml_sample import NvmlDevice
from gpuwise.profile.memory_probe import rss_reader


def usable_cpus() -> int:
    """Cores this process may run on (the affinity mask, which containers and taskset narrow)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


CHILDREN_REFRESH = 8  # samples between rescans of the process tree


def has_children_files() -> bool:
    """Does this kernel list a task's children in /proc/<pid>/task/<tid>/children (CONFIG_PROC_CHILDREN)?"""
    return os.path.exists(f"/proc/self/task/{threading.get_native_id()}/children")


def descendant_pids(pid: int) -> list[int]:
    """Children, grandchildren, ... of ``pid``, from the children files of each of their threads."""
    found: list[int] = []
    todo = [pid]
    while todo:
        parent = todo.pop()
        try:
            tasks = os.listdir(f"/proc/{parent}/task")
        except OSError:  # exited meanwhile
            continue
        for tid in tasks:
            try:
                with open(f"/proc/{parent}/task/{tid}/children", "rb") as fh:
                    kids = [int(x) for x in fh.read().split()]
            except OSError:
                continue
            found.extend(kids)
            todo.extend(kids)
    return found


def whole_disks() -> set[str]:
    """Names of whole block devices (/sys/block), so partitions are not counted twice; empty off Linux."""
    try:
        return set(os.listdir("/sys/block"))
    except OSError:
        return set()


def diskstats_read_bytes(disks: set[str]) -> int | None:
    """Bytes read from these devices since boot: /proc/diskstats counts 512-byte sectors (field 6)."""
    try:
        with open("/proc/diskstats", "rb") as fh:
            lines = fh.read().split(b"\n")
    except OSError:
        return None
    total = 0
    for line in lines:
        fields = line.split()
        if len(fields) > 5 and fields[2].decode() in disks:
            total += int(fields[5])
    return total * 512


PROC_STAT = "/proc/stat"


def read_cpu_jiffies(path: str = PROC_STAT) -> tuple[int, int | None] | None:
    """(busy + idle jiffies, steal jiffies) of the whole machine from the ``cpu`` line of /proc/stat;
    steal is None when the line has no steal field (kernels before 2.6.11, some containers' emulations),
    the whole reading None where there is no such file. Guest time is inside user time, so the total
    is the first eight fields (user .. steal)."""
    try:
        with open(path, "rb") as fh:
            line = fh.readline()
    except OSError:
        return None
    fields = line.split()
    if not fields or fields[0] != b"cpu" or len(fields) < 5:
        return None
    values = [int(x) for x in fields[1:9]]
    return sum(values), (values[7] if len(values) >= 8 else None)


def steal_pct(before: tuple[int, int | None], after: tuple[int, int | None]) -> float | None:
    """Share of the machine's CPU time the hypervisor took between two readings (None: no steal field)."""
    total = after[0] - before[0]
    if before[1] is None or after[1] is None or total <= 0:
        return None
    return max(0.0, min(100.0, 100.0 * (after[1] - before[1]) / total))


class TelemetrySampler:
    """Samples CPU, memory, disk and (with ``nvml_index``) GPU every ``interval_s`` seconds on a daemon
    thread; ``on_tick`` runs on that thread after each sample. Missing psutil or NVML features are listed
    in ``not_available``.
    """

    def __init__(
        self, interval_s: float = 0.5, nvml_index: int | None = None, on_tick=None, proc_stat: str = PROC_STAT
    ) -> None:
        self.interval_s = interval_s
        self.proc_stat = proc_stat
        self.samples: list[dict[str, Any]] = []
        self.not_available: dict[str, str] = {}
        self.cpu_count = usable_cpus()
        self.on_tick = on_tick  # called from the sampler thread after each sample (e.g. a periodic flush)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._psutil: Any = None
        self._proc: Any = None
        self._read_rss: Any = None
        self._last: dict[str, Any] = {}
        self._children: list[Any] = []
        self._disks: set[str] | None = None
        self._children_files = has_children_files()
        self._ticks = 0
        self.nvml: NvmlDevice | None = NvmlDevice(nvml_index) if nvml_index is not None else None
        if self.nvml is not None:
            self.not_available.update({f"nvml.{k}": v for k, v in self.nvml.not_available.items()})
        try:
            import psutil

            self._psutil = psutil
            self._proc = psutil.Process()
            found = rss_reader()  # statm where it exists, else psutil
            self._read_rss = found[1] if found else None
        except Exception as exc:
            self.not_available["psutil"] = f"psutil not importable: {exc}"

    # -- lifecycle -----------------------------------------------------------------------------------
    def start(self) -> None:
        """Take the baseline readings and start the sampling thread."""
        self._prime()
        self._thread = threading.Thread(target=self._run, name="gpuwise-telemetry", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop the thread, take a last sample covering the tail of the run, and close NVML."""
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=2 * self.interval_s + 1)
        self.sample_once()  # a last sample covering the tail of the run
        if self.nvml is not None:
            self.not_available.update({f"nvml.{k}": v for k, v in self.nvml.not_available.items()})
            self.nvml.close()

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.sample_once()
            if self.on_tick is not None:
                with contextlib.suppress(Exception):
                    self.on_tick()

    # -- sampling -------------------------------------------------------------------------------------
    def _tree_cpu_s(self) -> float | None:
        """CPU seconds used so far by this process and its children (DataLoader workers).

        The children are looked up every CHILDREN_REFRESH samples (through /proc/<pid>/task/*/children
        where the kernel has it: ~0.1 ms, against ~1 ms for psutil's scan of every process); children
        that exited and were reaped are in children_user."""
        t = (
            os.times()
        )  # this process (all threads) and its reaped children: one system call, nothing to parse
        total = t.user + t.system + t.children_user + t.children_system
        if self._ticks % CHILDREN_REFRESH == 0:
            self._children = self._find_children()
        self._ticks += 1
        for child in self._children:
            try:
                ct = child.cpu_times()
                # with its reaped children: a forkserver's workers are our grandchildren, reaped by it
                # (not by us), so their CPU moves into its children times when they exit
                total += ct.user + ct.system + getattr(ct, "children_user", 0.0)
                total += getattr(ct, "children_system", 0.0)
            except (self._psutil.NoSuchProcess, self._psutil.AccessDenied, self._psutil.ZombieProcess):
                continue
        return total

    def _find_children(self) -> list[Any]:
        if not self._children_files:
            return self._proc.children(recursive=True)
        pids = descendant_pids(self._proc.pid)
        known = {c.pid: c for c in self._children}
        found = []
        for pid in pids:
            try:
                found.append(known.get(pid) or self._psutil.Process(pid))
            except self._psutil.Error:
                continue
        return found

    def _prime(self) -> None:
        now = time.perf_counter()
        self._last = {"t": now}
        if self._psutil is None:
            return
        ps = self._psutil
        self._safe("cpu_per_core", lambda: ps.cpu_percent(percpu=True))
        self._last["tree_cpu_s"] = self._safe("process_cpu", self._tree_cpu_s)
        self._last["disk_read_bytes"] = self._safe("disk_io", self._disk_read_bytes)
        self._last["jiffies"] = self._jiffies()

    def _jiffies(self) -> tuple[int, int | None] | None:
        if "cpu_steal" in self.not_available:
            return None
        reading = self._safe("cpu_steal", lambda: read_cpu_jiffies(self.proc_stat))
        if reading is None:
            self.not_available.setdefault("cpu_steal", f"n/a: no {self.proc_stat}")
        elif reading[1] is None:
            self.not_available["cpu_steal"] = f"n/a: {self.proc_stat} has no steal field"
            return None
        return reading

    def _disk_read_bytes(self) -> int | None:
        """Bytes read from the machine's disks so far (whole disks, not partitions, as psutil counts)."""
        if self._disks is None:
            self._disks = whole_disks()
        if self._disks:
            return diskstats_read_bytes(self._disks)
        return getattr(self._psutil.disk_io_counters(), "read_bytes", None)

    def _safe(self, key: str, fn) -> Any:
        if key in self.not_available:
            return None
        try:
            return fn()
        except Exception as exc:
            self.not_available[key] = str(exc) or type(exc).__name__
            return None

    def sample_once(self) -> dict[str, Any]:
        """Take one sample now, append it to ``samples`` and return it: a dict with ``t``/``dt`` (perf_counter
        s) and the figures read (CPU %, RSS bytes, disk read bytes, GPU fields); a failing reading is left
        out.
        """
        now = time.perf_counter()
        dt = now - self._last.get("t", now)
        sample: dict[str, Any] = {"t": now, "dt": dt}
        ps = self._psutil
        if ps is not None and dt > 0:
            per_core = self._safe("cpu_per_core", lambda: ps.cpu_percent(percpu=True))
            if per_core:
                sample["cpu_per_core_pct"] = [float(x) for x in per_core]
            tree = self._safe("process_cpu", self._tree_cpu_s)
            last_tree = self._last.get("tree_cpu_s")
            if tree is not None and last_tree is not None:
                # A child that exited but is not reaped yet (or one not rescanned yet) drops out of the
                # sum for a moment: keep the running maximum, so a dip is never a negative share and
                # its recovery is not counted twice; a share above all cores is a late-seen child's past.
                tree = max(tree, last_tree)
                share = 100.0 * (tree - last_tree) / dt / self.cpu_count
                sample["process_cpu_pct"] = min(100.0, share)
            self._last["tree_cpu_s"] = tree
            rss = self._safe("rss", self._read_rss) if self._read_rss is not None else None
            if rss is not None:
                sample["rss_bytes"] = int(rss)
            read = self._safe("disk_io", self._disk_read_bytes)
            last_read = self._last.get("disk_read_bytes")
            if read is not None and last_read is not None:
                sample["disk_read_bytes_per_s"] = (read - last_read) / dt
            self._last["disk_read_bytes"] = read
        jiffies, last_jiffies = self._jiffies(), self._last.get("jiffies")
        if jiffies is not None and last_jiffies is not None:
            stolen = steal_pct(last_jiffies, jiffies)
            if stolen is not None:
                sample["cpu_steal_pct"] = stolen
        self._last["jiffies"] = jiffies
        if self.nvml is not None:
            sample.update(self.nvml.sample())
        self._last["t"] = now
        self.samples.append(sample)
        return sample


def in_window(samples: list[dict[str, Any]], window: tuple[float, float]) -> list[dict[str, Any]]:
    """The samples whose interval (previous sample's time to its own, ``t0`` for the first) is mostly
    inside ``window`` (perf_counter seconds): its midpoint falls in it. Set-up before the first
    measured step (imports, data preparation, compilation) and the tail after the last one then never
    dilute a statistic about the steps."""
    start, end = window
    kept = []
    for s in samples:
        t = s["t"]
        mid = t - 0.5 * s.get("dt", 0.0)
        if start <= mid <= end:
            kept.append(s)
    return kept


_GPU_KEYS = ("gpu_util_pct", "memory_used_bytes", "power_w", "temperature_c", "sm_clock_mhz", "clock_reasons")


def summarize(
    samples: list[dict[str, Any]],
    cpu_count: int,
    not_available: dict[str, str],
    interval_s: float,
    window: tuple[float, float] | None = None,
) -> dict[str, Any]:
    """Means, maxima and shares over the samples taken during the measured steps (``window``, when
    at least one sample falls in it; else all of them, said by ``window: "run"``); keys are absent
    when nothing measured them."""
    windowed = in_window(samples, window) if window is not None else []
    samples = windowed or samples
    per_core = [s["cpu_per_core_pct"] for s in samples if s.get("cpu_per_core_pct")]
    cores = [sum(c[i] for c in per_core) / len(per_core) for i in range(len(per_core[0]))] if per_core else []
    out: dict[str, Any] = {
        "samples": len(samples),
        "window": "steps" if windowed else "run",
        "interval_s": interval_s,
        "cpu_count": cpu_count,
        "process_cpu_pct": _mean(samples, "process_cpu_pct"),
        "system_cpu_pct": (sum(cores) / len(cores)) if cores else None,
        "cpu_steal_pct": _mean(samples, "cpu_steal_pct"),
        "cpu_per_core_pct": [round(c, 1) for c in cores],
        "rss_peak_bytes": _peak(samples, "rss_bytes"),
        "disk_read_bytes_per_s": _mean(samples, "disk_read_bytes_per_s"),
        "gpu": None,
        "not_available": dict(sorted(not_available.items())),
    }
    gpu_samples = [s for s in samples if any(k in s for k in _GPU_KEYS)]
    if gpu_samples:
        out["gpu"] = _gpu_summary(samples, gpu_samples)
    return out


def _values(samples: list[dict[str, Any]], key: str) -> list[float]:
    """The samples' values of `key`, where they have one."""
    return [s[key] for s in samples if s.get(key) is not None]


def _mean(samples: list[dict[str, Any]], key: str) -> float | None:
    """Mean of `key` over the samples that have it; None when none does."""
    v = _values(samples, key)
    return sum(v) / len(v) if v else None


def _peak(samples: list[dict[str, Any]], key: str) -> float | None:
    """Maximum of `key` over the samples that have it; None when none does."""
    v = _values(samples, key)
    return max(v) if v else None


def _gpu_summary(samples: list[dict[str, Any]], gpu_samples: list[dict[str, Any]]) -> dict[str, Any]:
    """The NVML part: means and peaks over all `samples`, and the % of the GPU samples with clock-event
    reasons in which each reason was active."""
    reasons: dict[str, float] = {}
    with_reasons = [s["clock_reasons"] for s in gpu_samples if "clock_reasons" in s]
    for names in with_reasons:
        for name in names:
            reasons[name] = reasons.get(name, 0.0) + 1
    return {
        "util_pct": _mean(samples, "gpu_util_pct"),
        "mem_util_pct": _mean(samples, "mem_util_pct"),
        "memory_used_peak_bytes": _peak(samples, "memory_used_bytes"),
        "memory_total_bytes": _peak(samples, "memory_total_bytes"),
        "power_w_mean": _mean(samples, "power_w"),
        "temperature_c_max": _peak(samples, "temperature_c"),
        "sm_clock_mhz_mean": _mean(samples, "sm_clock_mhz"),
        "clock_reason_pct": {k: round(100.0 * v / len(with_reasons), 2) for k, v in sorted(reasons.items())}
        if with_reasons
        else None,
    }


__all__ = [
    "TelemetrySampler",
    "descendant_pids",
    "diskstats_read_bytes",
    "has_children_files",
    "in_window",
    "read_cpu_jiffies",
    "steal_pct",
    "summarize",
    "usable_cpus",
    "whole_disks",
]
