"""The in-process recorder: phases per step, memory, copies and syncs, telemetry, contained errors.

One ``Recorder`` is active per process (torch's hooks are global). It produces a *raw record*, a
plain JSON-able dict that ``gpuwise.profile.result.build_run`` turns into a ``ProfileRun``; the
split keeps this side free of gpuwise's CLI dependencies, so it also runs inside a user's
interpreter that only has torch.
"""

from __future__ import annotations

import os
import sys
import threading
import time
import traceback
from time import perf_counter, thread_time
from typing import Any

from gpuwise.profile.phases import PhaseTimer, StepRecord

RAW_FORMAT = 1
MAX_CONTAINED_ERRORS = 50  # after this many, profiling switches itself off for the rest of the run

_ACTIVE: Recorder | None = None


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
        self.records: list[StepRecord] = []
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
        self._tid: int | None = None
        self._pid = os.getpid()
        self._started_wall = 0.0
        self._started = 0.0
        self._stopped = 0.0
        self._sync_calls = 0
        self._sync_wait = 0.0
        self._h2d_bytes = 0
        self._h2d_pageable = 0
        self._data_cpu = 0.0
        self._data_wall = 0.0
        self._data_t0 = (0.0, 0.0)
        self._device_checked = False
        self._cuda_possible = False
        self._cuda_timer = None
        self._nvtx = None
        self._nvtx_open: list[str] = []
        self._memory_measure = "not available"
        self._memory_read = None
        self.instrumentation = None
        self.sampler = None
        self.notes: list[str] = []

    # -- lifecycle ------------------------------------------------------------------------------------
    def start(self) -> Recorder:
        global _ACTIVE
        if _ACTIVE is not None and _ACTIVE is not self:
            raise RuntimeError("a gpuwise profile is already active in this process; finish it before starting another")
        import torch

        from gpuwise.profile.hooks import Instrumentation
        from gpuwise.profile.memory_probe import live_memory_probe

        self._cuda_possible = bool(torch.cuda.is_available())
        copies = self._cuda_possible if self._copies_and_syncs is None else self._copies_and_syncs
        self.instrumentation = Instrumentation(self, copies_and_syncs=copies)
        self._memory_measure, self._memory_read = live_memory_probe("cpu")
        self._started_wall = time.time()
        self._started = perf_counter()
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
        except Exception as exc:  # noqa: BLE001
            self.sampler = None
            self.contain("telemetry", exc)

    def _nvml_index_of_current_device(self) -> int:
        try:
            import torch

            local = int(os.environ.get("LOCAL_RANK", "0"))
            index = torch.cuda.current_device() if torch.cuda.is_initialized() else local % max(1, torch.cuda.device_count())
            # honours CUDA_VISIBLE_DEVICES (UUIDs or indices); private helper, hence the fallback
            return int(torch.cuda._get_nvml_device_index(index))
        except Exception:  # noqa: BLE001
            return int(os.environ.get("LOCAL_RANK", "0") or 0)

    def detach(self, from_hook: bool = False) -> None:
        """Remove every hook and stop telemetry; the program keeps running at full speed."""
        global _ACTIVE
        if not self.active:
            if not from_hook and self.instrumentation is not None and self.instrumentation._optimizer_handles:
                self.instrumentation.uninstall()  # the inert optimizer hooks left by a detach from inside a hook
            return
        self.active = False
        self._stopped = perf_counter()
        if self.instrumentation is not None:
            try:
                self.instrumentation.uninstall(from_hook=from_hook)
            except Exception as exc:  # noqa: BLE001
                self.contain("uninstall", exc, active_check=False)
        if self.sampler is not None:
            try:
                self.sampler.stop()
            except Exception as exc:  # noqa: BLE001
                self.contain("telemetry", exc, active_check=False)
        if self._cuda_timer is not None:
            try:
                self._finish_cuda_timing()
            except Exception as exc:  # noqa: BLE001
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
        """True on the training thread: the first thread that reaches a hook (not autograd's or a worker's)."""
        if not self.active:
            return False
        tid = threading.get_ident()
        if self._tid is None:
            if os.getpid() != self._pid:  # a forked DataLoader worker: never record there
                return False
            self._tid = tid
            return True
        return tid == self._tid

    def contain(self, where: str, exc: BaseException, active_check: bool = True) -> None:
        """Record a failure inside gpuwise and keep the user's program running; report each kind once."""
        self.error_count += 1
        key = (where, type(exc).__name__)
        if key not in self.errors:
            tb = traceback.format_exception(type(exc), exc, exc.__traceback__)
            self.errors[key] = {"where": where, "error": f"{type(exc).__name__}: {exc}", "count": 0, "traceback": "".join(tb[-3:])}
            print(f"gpuwise: internal error in its {where} (contained; your program continues, this part of the profile "
                  f"may be incomplete): {type(exc).__name__}: {exc}", file=sys.stderr)
        self.errors[key]["count"] += 1
        if active_check and self.error_count >= MAX_CONTAINED_ERRORS and self.active:
            print(f"gpuwise: {self.error_count} internal errors; profiling switched off for the rest of the run", file=sys.stderr)
            self.notes.append("profiling switched itself off after repeated internal errors")
            self.detach(from_hook=True)

    # -- phases ------------------------------------------------------------------------------------------------
    def enter(self, phase: str, module: Any = None) -> None:
        now = perf_counter()
        self.timer.push(phase, now)
        if phase == "data_wait":
            self._data_t0 = (now, thread_time())
        elif phase == "forward" and not self._device_checked:
            self._inspect_model(module)
        if self._cuda_timer is not None:
            self._cuda_timer.begin(phase)
        if self._nvtx is not None:
            self._nvtx.range_push(f"gpuwise.{phase}")
            self._nvtx_open.append(phase)

    def exit(self, phase: str) -> None:
        now = perf_counter()
        self.timer.pop(phase, now)
        if phase == "data_wait":
            self._data_wall += now - self._data_t0[0]
            self._data_cpu += thread_time() - self._data_t0[1]
        if self._cuda_timer is not None:
            self._cuda_timer.end(phase, len(self.records))
        if self._nvtx_open and self._nvtx_open[-1] == phase:  # only ranges we opened (NVTX may start mid-phase)
            self._nvtx_open.pop()
            self._nvtx.range_pop()

    def note_h2d(self, seconds: float, nbytes: int, pinned: bool) -> None:
        self.timer.reassign("h2d_copy", seconds)
        self._h2d_bytes += nbytes
        if not pinned:
            self._h2d_pageable += nbytes

    def note_sync(self, seconds: float) -> None:
        self._sync_calls += 1
        self._sync_wait += seconds

    def note_loader(self, it: Any) -> None:
        key = (id(getattr(it, "_dataset", None)), getattr(it, "_num_workers", None), getattr(it, "_pin_memory", None))
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
        info["batches"] += 1

    def _inspect_model(self, module: Any) -> None:
        """Which device and precision the model runs in (checked until a module with parameters shows up)."""
        import torch

        try:
            param = next(module.parameters(), None) if module is not None else None
        except Exception:  # noqa: BLE001
            param = None
        if param is None:
            return
        self._device_checked = True
        self.device = param.device.type
        self.model["param_dtype"] = str(param.dtype).replace("torch.", "")
        self.model["root_module"] = type(module).__name__
        try:
            self.model["num_params"] = sum(p.numel() for p in module.parameters())
        except Exception:  # noqa: BLE001
            pass
        if self.device == "cuda":
            try:
                self.model["amp_enabled"] = bool(torch.is_autocast_enabled("cuda"))
            except TypeError:  # torch < 2.4 has no device argument
                self.model["amp_enabled"] = bool(torch.is_autocast_enabled())
            self.model["tf32_matmul"] = torch.backends.cuda.matmul.allow_tf32
            self.cuda_index = param.device.index if param.device.index is not None else torch.cuda.current_device()
            self.gpu_name = torch.cuda.get_device_name(self.cuda_index)
            self._memory_measure, self._memory_read = "torch.cuda.memory_allocated", lambda: float(torch.cuda.memory_allocated(self.cuda_index))
            from gpuwise.profile.cuda_timing import CudaPhaseTimer

            self._cuda_timer = CudaPhaseTimer()
            self._cuda_timer.begin("forward")  # this forward is already open
            self._nvtx = torch.cuda.nvtx
        else:
            try:
                self.model["amp_enabled"] = bool(torch.is_autocast_enabled("cpu"))
            except TypeError:
                self.model["amp_enabled"] = bool(torch.is_autocast_cpu_enabled())

    # -- steps ----------------------------------------------------------------------------------------------------
    def auto_boundary(self) -> None:
        if self.auto_step and not self.manual_steps:
            self._boundary()

    def step(self) -> None:
        """A manual step boundary (``p.step()``); from then on optimizer steps no longer mark steps."""
        if not self.active:
            return
        first_manual = not self.manual_steps
        self.manual_steps = True
        if self.on_thread():
            try:
                if first_manual and self.records:
                    self._merge_auto_steps()
                self._boundary()
            except Exception as exc:  # noqa: BLE001
                self.contain("step", exc)

    def _merge_auto_steps(self) -> None:
        """The first ``p.step()`` ends one step that began at the first activity: fold the optimizer-step
        boundaries recorded so far back into the open step."""
        wall = sum(r.wall_s for r in self.records)
        for name, seconds in self.timer.acc.items():
            self.timer.acc[name] = seconds + sum(r.phase_s.get(name, 0.0) for r in self.records if name != "other")
        self._sync_calls += sum(r.sync_calls for r in self.records)
        self._sync_wait += sum(r.sync_wait_s for r in self.records)
        self._h2d_bytes += sum(r.h2d_bytes for r in self.records)
        self._h2d_pageable += sum(r.h2d_pageable_bytes for r in self.records)
        if self.timer.step_start is not None:
            self.timer.step_start -= wall
        self.records.clear()

    def _boundary(self) -> None:
        closed = self.timer.boundary()
        if closed is None:
            return
        start, wall, phases = closed
        record = StepRecord(start_s=start - self._started, wall_s=wall, phase_s=phases, sync_calls=self._sync_calls,
                            sync_wait_s=self._sync_wait, h2d_bytes=self._h2d_bytes, h2d_pageable_bytes=self._h2d_pageable)
        self._sync_calls, self._sync_wait, self._h2d_bytes, self._h2d_pageable = 0, 0.0, 0, 0
        if self._memory_read is not None:
            try:
                t0 = perf_counter()
                record.memory_bytes = self._memory_read()
                if len(self.records) < 3 and self._memory_measure.startswith("glibc"):
                    self._check_memory_probe_cost(perf_counter() - t0)
                    record.memory_bytes = self._memory_read() if self._memory_read is not None else None
            except Exception as exc:  # noqa: BLE001
                self._memory_read = None
                self.contain("memory probe", exc)
        if self._nvtx is not None:
            self._nvtx.mark(f"gpuwise.step {len(self.records)}")
        self.records.append(record)
        if self._cuda_timer is not None:
            self._cuda_timer.drain()
        n = len(self.records)
        if n == max(1, self.warmup) and self.instrumentation is not None:
            self.instrumentation.narrow_to_roots()
        if self.on_step is not None:
            try:
                self.on_step(n)
            except Exception as exc:  # noqa: BLE001
                self.contain("step callback", exc)
        if self.steps_requested is not None and n >= self.warmup + self.steps_requested and not self.window_complete:
            self.window_complete = True
            self.status = "completed"
            self.detach(from_hook=not self.manual_steps)
            if self.on_window_complete is not None:
                self.on_window_complete(self)

    def _check_memory_probe_cost(self, seconds: float) -> None:
        """mallinfo2 slows down as the heap fragments: past the budget, use RSS from the start instead."""
        from gpuwise.profile.memory_probe import MAX_READ_S, _rss_reader

        if seconds <= MAX_READ_S:
            return
        reader = _rss_reader()
        self._memory_measure, self._memory_read = ("process RSS (psutil)", reader) if reader else ("not available", None)
        for rec in self.records:
            rec.memory_bytes = None
        self.notes.append(f"live memory: mallinfo2 took {seconds * 1e6:.0f} µs per read on this heap; using process RSS")

    def _finish_cuda_timing(self) -> None:
        per_step = self._cuda_timer.finish()
        for index, phases in per_step.items():
            if index < len(self.records):
                self.records[index].gpu_phase_s = phases

    # -- output ---------------------------------------------------------------------------------------------------
    def raw(self) -> dict[str, Any]:
        """Everything measured so far, JSON-able (also used for periodic partial flushes)."""
        from gpuwise.profile.telemetry import summarize, usable_cpus

        records = [r.to_dict() for r in list(self.records)]
        sampler = self.sampler
        telemetry = None
        if sampler is not None:
            telemetry = summarize(list(sampler.samples), sampler.cpu_count, dict(sampler.not_available), sampler.interval_s)
        loader = max(self.loaders.values(), key=lambda d: d["batches"], default=None)
        if loader is not None and self._data_wall > 0:
            loader = {**loader, "main_thread_cpu_share_pct": round(100.0 * min(1.0, self._data_cpu / self._data_wall), 1)}
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
        except Exception as exc:  # noqa: BLE001
            self.contain("CUDA memory statistics", exc, active_check=False)
            return {}
