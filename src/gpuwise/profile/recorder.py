"""The in-process recorder: phases per step, memory, copies and syncs, telemetry, contained errors.

One ``Recorder`` is active per process (torch's hooks are global). It produces a *raw record*, a
plain JSON-able dict that ``gpuwise.profile.analysis.build_run`` turns into a ``ProfileRun``; the
split keeps this side free of gpuwise's CLI dependencies, so it also runs inside a user's
interpreter that only has torch.

The hot path is ``mark(code)``: two appends to the event log (see ``phases.py`` for why). Step
boundaries do the little that must happen at once (count the step, read live memory within its
budget, narrow the hooks after warm-up, end the window); the log becomes ``StepRecord``s every
``DRAIN_EVERY_EVENTS`` entries or ``DRAIN_EVERY_S`` seconds, and whenever the record is read on the
training thread.
"""

from __future__ import annotations

import os
import sys
import threading
import time
import traceback
import weakref
from time import perf_counter, thread_time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from gpuwise.profile.memory_probe import COST_WINDOW, MAX_FREE_CHUNKS, MEMORY_PROBE_BUDGET, rss_reader
from gpuwise.profile.phases import DATA_IN, DATA_OUT, EXIT, MEMORY, STEP, PhaseTimer, StepRecord, phase_of

RAW_FORMAT = 1
MAX_CONTAINED_ERRORS = 50  # after this many, profiling switches itself off for the rest of the run
DRAIN_EVERY_EVENTS = 2048  # log entries (code + value) between replays into StepRecords: ~100 steps
DRAIN_EVERY_S = 2.0  # ... or this long, so a periodic flush (child.py, every 5 s) is never far behind
LOADER_CPU_SAMPLE_EVERY = 8  # one batch wait in this many also reads the thread's CPU clock (a syscall)

if TYPE_CHECKING:  # pragma: no cover
    from gpuwise.profile.cuda_timing import CudaPhaseTimer
    from gpuwise.profile.hooks import Instrumentation
    from gpuwise.profile.telemetry import TelemetrySampler

_ACTIVE: Recorder | None = None


def _no_loader() -> None:
    return None


def _after_fork_in_child() -> None:
    """A forked process (a DataLoader worker) keeps our hooks but must not record: its log would only grow."""
    global _ACTIVE
    recorder, _ACTIVE = _ACTIVE, None
    if recorder is not None:
        recorder.active = False
        recorder.tid = None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def _timed(read) -> float:
    t0 = perf_counter()
    read()
    return perf_counter() - t0


def active_recorder() -> Recorder | None:
    return _ACTIVE


class Recorder:
    def __init__(
        self,
        *,
        steps: int | None = None,
        warmup: int = 5,
        auto_step: bool = True,
        telemetry: bool = True,
        sample_interval_s: float = 0.5,
        label: str = "",
        meta: dict[str, Any] | None = None,
        on_window_complete=None,
        on_step=None,
        on_tick=None,
        nvml_index: int | None = None,
        copies_and_syncs: bool | None = None,
    ) -> None:
        if steps is not None and steps < 1:
            raise ValueError("steps must be at least 1")
        if warmup < 0:
            raise ValueError("warmup must be 0 or more")
        self.steps_requested = steps
        self.warmup = warmup
        self.auto_step = auto_step
        self.manual_steps = False
        self.telemetry_enabled = telemetry
        self.sample_interval_s = sample_interval_s
        self.label = label
        self.meta = dict(meta or {})
        self.on_window_complete = on_window_complete
        self.on_step = on_step
        self.on_tick = on_tick
        self._nvml_index = nvml_index
        self._copies_and_syncs = copies_and_syncs

        self.timer = PhaseTimer()
        self.mark: Callable[[int], None] = self._mark_host  # the hot path; _mark_cuda on CUDA
        self.records: list[StepRecord] = []
        self._log: list = []  # [code, value, code, value, ...] since the last replay (phases.py)
        self._log_append = self._log.append
        self._drain_lock = threading.Lock()
        self.steps_closed = 0  # steps ended so far, replayed or not
        self._drained_at = 0.0
        self.status = "running"
        self.error: str | None = None
        self.errors: dict[tuple[str, str], dict[str, Any]] = {}
        self.error_count = 0
        self.active = False
        self.window_complete = False
        self.device = "cpu"
        self.gpu_name = ""
        self.cuda_index: int | None = None
        self.model: dict[str, Any] = {}
        self.loaders: dict[tuple, dict[str, Any]] = {}
        self.tid: int | None = None  # the training thread, once a hook has run on it (hooks compare it first)
        self._pid = os.getpid()
        self._started_wall = 0.0
        self._started = 0.0
        self._stopped = 0.0
        self._loader_ref = _no_loader  # weak reference to the DataLoader iterator seen last
        self._loader_info: dict[str, Any] = {}
        self._data_cpu = 0.0  # thread CPU and wall seconds of the sampled batch waits
        self._data_wall = 0.0
        self.device_checked = False
        self._cuda_possible = False
        self._cuda_timer: CudaPhaseTimer | None = None
        self._nvtx: Any = None  # torch.cuda.nvtx once the model is seen on CUDA
        self._nvtx_open: list[str] = []
        self._memory_measure = "not available"
        self._memory_read: Callable[[], float] | None = None
        self._memory_due_s = 0.0  # no read before this time (the probe's time budget)
        self._memory_costs: list[float] = []  # seconds of the last COST_WINDOW reads
        self.instrumentation: Instrumentation | None = None
        self.sampler: TelemetrySampler | None = None
        self.notes: list[str] = []

    # -- lifecycle ------------------------------------------------------------------------------------
    def start(self) -> Recorder:
        global _ACTIVE
        if _ACTIVE is not None and _ACTIVE is not self:
            raise RuntimeError(
                "a gpuwise profile is already active in this process; finish it before starting another"
            )
        import torch

        from gpuwise.profile.hooks import Instrumentation
        from gpuwise.profile.memory_probe import live_memory_probe

        self._cuda_possible = bool(torch.cuda.is_available())
        copies = self._cuda_possible if self._copies_and_syncs is None else self._copies_and_syncs
        self.instrumentation = Instrumentation(self, copies_and_syncs=copies)
        self._memory_measure, self._memory_read = live_memory_probe("cpu")
        if (
            self._memory_read is not None
        ):  # seed the pacing: one preempted first read must not space out the rest
            self._memory_costs = [_timed(self._memory_read)]
        self._started_wall = time.time()
        self._started = self._drained_at = perf_counter()
        _ACTIVE = self
        self.active = True
        try:
            self.instrumentation.install()
        except Exception:
            self.instrumentation.uninstall()
            self.active = False
            _ACTIVE = None
            raise
        if self.telemetry_enabled:
            self._start_telemetry()
        return self

    def _start_telemetry(self) -> None:
        from gpuwise.profile.telemetry import TelemetrySampler

        index = self._nvml_index
        if index is None and self._cuda_possible:
            index = self._nvml_index_of_current_device()
        try:
            self.sampler = TelemetrySampler(self.sample_interval_s, nvml_index=index, on_tick=self.on_tick)
            self.sampler.start()
        except Exception as exc:
            self.sampler = None
            self.contain("telemetry", exc)

    def _nvml_index_of_current_device(self) -> int:
        try:
            import torch

            local = int(os.environ.get("LOCAL_RANK", "0"))
            index = (
                torch.cuda.current_device()
                if torch.cuda.is_initialized()
                else local % max(1, torch.cuda.device_count())
            )
            # honours CUDA_VISIBLE_DEVICES (UUIDs or indices); private helper, hence the fallback
            return int(torch.cuda._get_nvml_device_index(index))
        except Exception:
            return int(os.environ.get("LOCAL_RANK", "0") or 0)

    def detach(self, from_hook: bool = False) -> None:
        """Remove every hook and stop telemetry; the program keeps running at full speed."""
        global _ACTIVE
        if not self.active:
            if not from_hook and self.instrumentation is not None and self.instrumentation._optimizer_handles:
                self.instrumentation.uninstall()  # the inert optimizer hooks left by a detach from inside a hook
            return
        self.active = False
        self.tid = None
        self._stopped = perf_counter()
        if self.instrumentation is not None:
            try:
                self.instrumentation.uninstall(from_hook=from_hook)
            except Exception as exc:
                self.contain("uninstall", exc, active_check=False)
        if self.sampler is not None:
            try:
                self.sampler.stop()
            except Exception as exc:
                self.contain("telemetry", exc, active_check=False)
        try:
            self.drain()
        except Exception as exc:
            self.contain("step replay", exc, active_check=False)
        if self._cuda_timer is not None:
            try:
                self._finish_cuda_timing(self._cuda_timer)
            except Exception as exc:
                self.contain("CUDA event timing", exc, active_check=False)
        if _ACTIVE is self:
            _ACTIVE = None

    def stop(self, status: str | None = None, error: str | None = None) -> dict[str, Any]:
        self.detach()
        if status is not None:
            self.status = status
        elif self.status == "running":
            self.status = "completed"
        if error:
            self.error = error
        return self.raw()

    # -- thread binding and error containment -------------------------------------------------------------
    def on_thread(self) -> bool:
        """True on the training thread: the first thread that reaches a hook (not autograd's or a worker's).
        Hooks test ``rec.tid == get_ident()`` first and call this only when that fails."""
        if not self.active:
            return False
        tid = threading.get_ident()
        if self.tid is None:
            if os.getpid() != self._pid:  # a forked DataLoader worker: never record there
                return False
            self.tid = tid
            return True
        return tid == self.tid

    def contain(self, where: str, exc: BaseException, active_check: bool = True) -> None:
        """Record a failure inside gpuwise and keep the user's program running; report each kind once."""
        self.error_count += 1
        key = (where, type(exc).__name__)
        if key not in self.errors:
            tb = traceback.format_exception(type(exc), exc, exc.__traceback__)
            self.errors[key] = {
                "where": where,
                "error": f"{type(exc).__name__}: {exc}",
                "count": 0,
                "traceback": "".join(tb[-3:]),
            }
            print(
                f"gpuwise: internal error in its {where} (contained; your program continues, this part of the profile "
                f"may be incomplete): {type(exc).__name__}: {exc}",
                file=sys.stderr,
            )
        self.errors[key]["count"] += 1
        if active_check and self.error_count >= MAX_CONTAINED_ERRORS and self.active:
            print(
                f"gpuwise: {self.error_count} internal errors; profiling switched off for the rest of the run",
                file=sys.stderr,
            )
            self.notes.append("profiling switched itself off after repeated internal errors")
            self.detach(from_hook=True)

    # -- the hot path: the event log ------------------------------------------------------------------------------
    def _mark_host(self, code: int) -> None:
        """Log entering or leaving a phase now (codes in ``phases.py``). On CUDA ``_mark_cuda`` replaces it."""
        append = self._log_append
        append(code)
        append(perf_counter())

    def _mark_cuda(self, code: int) -> None:
        """``mark`` plus CUDA events and NVTX ranges for the phase."""
        append = self._log_append
        append(code)
        append(perf_counter())
        phase, entering = phase_of(code)
        assert self._cuda_timer is not None  # _mark_cuda is installed with the timer
        if entering:
            self._cuda_timer.begin(phase)
            self._nvtx.range_push(f"gpuwise.{phase}")
            self._nvtx_open.append(phase)
        else:
            self._cuda_timer.end(phase, self.steps_closed)
            if (
                self._nvtx_open and self._nvtx_open[-1] == phase
            ):  # only ranges we opened (NVTX may start mid-phase)
                self._nvtx_open.pop()
                self._nvtx.range_pop()

    def log(self, code: int, value: float) -> None:
        """A counted event of the open step (``SYNC``, ``H2D_BYTES``, ...) or a phase at a given time."""
        append = self._log_append
        append(code)
        append(value)

    def batch_wait_begins(self, it: Any) -> float | None:
        """A wait for the next batch starts; returns the thread CPU clock when this wait is sampled."""
        self.mark(DATA_IN)
        if self._loader_ref() is not it:
            self.note_loader(it)
        info = self._loader_info
        info["batches"] += 1
        if info["batches"] % LOADER_CPU_SAMPLE_EVERY == 1:
            self._data_wall -= perf_counter()
            return thread_time()
        return None

    def batch_wait_ends(self, cpu0: float | None) -> None:
        self.mark(DATA_OUT)
        if cpu0 is not None:
            self._data_cpu += thread_time() - cpu0
            self._data_wall += perf_counter()

    def note_loader(self, it: Any) -> None:
        """A DataLoader iterator not seen last: find (or start) the entry for its loader settings."""
        key = (
            id(getattr(it, "_dataset", None)),
            getattr(it, "_num_workers", None),
            getattr(it, "_pin_memory", None),
        )
        info = self.loaders.get(key)
        if info is None:
            sampler = getattr(it, "_index_sampler", None)
            info = {
                "dataset": type(getattr(it, "_dataset", None)).__name__,
                "num_workers": getattr(it, "_num_workers", None),
                "pin_memory": getattr(it, "_pin_memory", None),
                "prefetch_factor": getattr(it, "_prefetch_factor", None),
                "persistent_workers": getattr(it, "_persistent_workers", None),
                "batch_size": getattr(sampler, "batch_size", None),
                "batches": 0,
            }
            self.loaders[key] = info
        self._loader_info = info
        try:
            self._loader_ref = weakref.ref(it)
        except TypeError:  # an iterator without weak references: note it again next time
            self._loader_ref = _no_loader

    def inspect_model(self, module: Any) -> None:
        """Which device and precision the model runs in (checked until a module with parameters shows up)."""
        import torch

        try:
            param = next(module.parameters(), None) if module is not None else None
        except Exception:
            param = None
        if param is None:
            return
        self.device_checked = True
        self.device = param.device.type
        self.model["param_dtype"] = str(param.dtype).replace("torch.", "")
        self.model["root_module"] = type(module).__name__
        try:
            self.model["num_params"] = sum(p.numel() for p in module.parameters())
        except Exception:
            pass
        if self.device == "cuda":
            try:
                self.model["amp_enabled"] = bool(torch.is_autocast_enabled("cuda"))
            except TypeError:  # torch < 2.4 has no device argument
                self.model["amp_enabled"] = bool(torch.is_autocast_enabled())
            self.model["tf32_matmul"] = torch.backends.cuda.matmul.allow_tf32
            self.cuda_index = (
                param.device.index if param.device.index is not None else torch.cuda.current_device()
            )
            self.gpu_name = torch.cuda.get_device_name(self.cuda_index)
            self._memory_measure, self._memory_read = (
                "torch.cuda.memory_allocated",
                lambda: float(torch.cuda.memory_allocated(self.cuda_index)),
            )
            from gpuwise.profile.cuda_timing import CudaPhaseTimer

            self._cuda_timer = CudaPhaseTimer()
            self._nvtx = torch.cuda.nvtx
            self.mark = self._mark_cuda  # from the forward being entered on
        else:
            try:
                self.model["amp_enabled"] = bool(torch.is_autocast_enabled("cpu"))
            except TypeError:
                self.model["amp_enabled"] = bool(torch.is_autocast_cpu_enabled())

    # -- steps ----------------------------------------------------------------------------------------------------
    def has_activity(self) -> bool:
        """Has a step begun: a phase entered, a batch fetched or a step boundary passed (as ``PhaseTimer``
        sees it once the log is replayed)?"""
        return bool(
            self.steps_closed
            or self.timer.step_start is not None
            or self.loaders
            or any(code < EXIT or code == STEP for code in self._log[::2])
        )

    def auto_boundary(self) -> None:
        if self.auto_step and not self.manual_steps:
            self.end_step()

    def step(self) -> None:
        """A manual step boundary (``p.step()``); from then on optimizer steps no longer mark steps."""
        if not self.active:
            return
        first_manual = not self.manual_steps
        self.manual_steps = True
        if self.on_thread():
            try:
                if first_manual and self.steps_closed:
                    self._merge_auto_steps()
                self.end_step()
            except Exception as exc:
                self.contain("step", exc)

    def _merge_auto_steps(self) -> None:
        """The first ``p.step()`` ends one step that began at the first activity: fold the optimizer-step
        boundaries recorded so far back into the open step."""
        self.drain()
        timer = self.timer
        wall = sum(r.wall_s for r in self.records)
        for name in timer.acc:
            if name != "other":
                timer.acc[name] += sum(r.phase_s.get(name, 0.0) for r in self.records)
        for r in self.records:
            timer.counters[0] += r.sync_calls
            timer.counters[1] += r.sync_wait_s
            timer.counters[2] += r.h2d_bytes
            timer.counters[3] += r.h2d_pageable_bytes
        if timer.step_start is not None:
            timer.step_start -= wall
        self.records.clear()
        self.steps_closed = 0

    def end_step(self) -> None:
        """A step boundary: log it and do what cannot wait for the replay."""
        now = perf_counter()
        if not self.steps_closed and not self.has_activity():
            self.log(STEP, now)  # nothing happened yet: this only starts the first step
            return
        self.log(STEP, now)
        n = self.steps_closed = self.steps_closed + 1
        if self._memory_read is not None and now >= self._memory_due_s:
            self._read_memory()
        if self._nvtx is not None:
            self._nvtx.mark(f"gpuwise.step {n - 1}")
        if self._cuda_timer is not None:
            self._cuda_timer.drain()
        if n == max(1, self.warmup) and self.instrumentation is not None:
            self.instrumentation.narrow_to_roots()
        if len(self._log) >= DRAIN_EVERY_EVENTS or now - self._drained_at >= DRAIN_EVERY_S:
            self.drain()
        if self.on_step is not None:
            try:
                self.on_step(n)
            except Exception as exc:
                self.contain("step callback", exc)
        if (
            self.steps_requested is not None
            and n >= self.warmup + self.steps_requested
            and not self.window_complete
        ):
            self.window_complete = True
            self.status = "completed"
            self.detach(from_hook=not self.manual_steps)
            if self.on_window_complete is not None:
                self.on_window_complete(self)

    def _read_memory(self) -> None:
        """Live memory at this boundary. A heap with more than MAX_FREE_CHUNKS free chunks (mallinfo2 walks
        them) switches to RSS; reads are spaced to cost about MEMORY_PROBE_BUDGET of the run's time."""
        try:
            read = self._memory_read
            if read is None:
                return
            t0 = perf_counter()
            value = read()
            costs = self._memory_costs
            costs.append(perf_counter() - t0)
            del costs[:-COST_WINDOW]
            free_chunks = getattr(read, "free_chunks", 0)
            if free_chunks > MAX_FREE_CHUNKS:
                read = self._switch_memory_probe_to_rss(free_chunks)
                if read is None:
                    return
                t0 = perf_counter()
                value = read()
                costs.append(perf_counter() - t0)
            self.log(MEMORY, value)
            self._memory_due_s = t0 + min(costs) / MEMORY_PROBE_BUDGET
        except Exception as exc:
            self._memory_read = None
            self.contain("memory probe", exc)

    def _switch_memory_probe_to_rss(self, free_chunks: int) -> Callable[[], float] | None:
        """The heap fragmented (mallinfo2 got slow): RSS from here on; readings of the two measures do not mix."""
        found = rss_reader()
        self._memory_measure, self._memory_read = found if found else ("not available", None)
        self._memory_costs.clear()
        self.drain()
        for rec in self.records:
            rec.memory_bytes = None
        self.notes.append(
            f"live memory: the heap had {free_chunks} free chunks for mallinfo2 to walk; "
            f"{self._memory_measure} from step {self.steps_closed} on"
        )
        return self._memory_read

    def drain(self) -> None:
        """Replay the event log into StepRecords (on the training thread, or after the hooks are gone)."""
        self._drained_at = perf_counter()
        with self._drain_lock:
            if self._log:
                self.timer.replay(self._log, self._started, self.records)
                self._log.clear()

    def _finish_cuda_timing(self, timer: CudaPhaseTimer) -> None:
        per_step = timer.finish()
        for index, phases in per_step.items():
            if index < len(self.records):
                self.records[index].gpu_phase_s = phases

    # -- output ---------------------------------------------------------------------------------------------------
    def raw(self) -> dict[str, Any]:
        """Everything measured so far, JSON-able (also used for periodic partial flushes)."""
        from gpuwise.profile.telemetry import summarize, usable_cpus

        if not self.active or threading.get_ident() == self.tid:
            self.drain()  # another thread (a periodic flush) takes the steps replayed so far
        records = [r.to_dict() for r in list(self.records)]
        sampler = self.sampler
        telemetry = None
        if sampler is not None:
            telemetry = summarize(
                list(sampler.samples), sampler.cpu_count, dict(sampler.not_available), sampler.interval_s
            )
        loader = max(self.loaders.values(), key=lambda d: d["batches"], default=None)
        if loader is not None and self._data_wall > 0:
            loader = {
                **loader,
                "main_thread_cpu_share_pct": round(100.0 * min(1.0, self._data_cpu / self._data_wall), 1),
            }
        memory: dict[str, Any] = {"measure": self._memory_measure}
        if self.device == "cuda":
            memory.update(self._cuda_memory())
        end = self._stopped if not self.active and self._stopped else perf_counter()
        return {
            "format": RAW_FORMAT,
            "label": self.label,
            "meta": {**self.meta, "pid": self._pid, "started_at": self._started_wall},
            "status": self.status,
            "error": self.error,
            "device": self.device,
            "gpu_name": self.gpu_name,
            "cpu_count": usable_cpus(),
            "warmup": self.warmup,
            "steps_requested": self.steps_requested,
            "manual_steps": self.manual_steps,
            "wall_s": end - self._started if self._started else 0.0,
            "steps": records,
            "loader": loader,
            "model": dict(self.model),
            "memory": memory,
            "telemetry": telemetry,
            "hook_errors": [dict(v) for v in self.errors.values()],
            "notes": list(self.notes),
        }

    def _cuda_memory(self) -> dict[str, Any]:
        try:
            import torch

            index = self.cuda_index if self.cuda_index is not None else torch.cuda.current_device()
            return {
                "peak_reserved_bytes": int(torch.cuda.max_memory_reserved(index)),
                "peak_allocated_bytes": int(torch.cuda.max_memory_allocated(index)),
                "capacity_bytes": int(torch.cuda.get_device_properties(index).total_memory),
            }
        except Exception as exc:
            self.contain("CUDA memory statistics", exc, active_check=False)
            return {}
