"""The in-process recorder: one step at a time, it ties together the parts that measure a run.

One ``Recorder`` is active per process (torch's hooks are global). It produces a *raw record*, a
plain JSON-able dict that ``gpuwise.profile.analysis.build_run`` turns into a ``ProfileRun``; the
split keeps this side free of gpuwise's CLI dependencies, so it also runs inside a user's
interpreter that only has torch. Its parts, one role each:
- ``EventLog`` (event_log.py): the hooks' hot path (``mark``: two appends) and its replay into steps;
- ``LoaderWatch`` (loader_watch.py): DataLoader settings and batch waits;
- ``LiveMemory`` (live_memory.py): live memory at step boundaries, within a time budget;
- ``CudaSide`` (cuda_side.py): CUDA events, NVTX ranges and allocator peaks, once the model is on CUDA;
- ``ContainedErrors`` (contained_errors.py): gpuwise's own failures, kept out of the user's program;
- ``TelemetrySampler`` (telemetry.py): CPU, memory, disk and GPU samples on a thread;
- ``FrameSampler`` (host_frames.py): the training thread's Python frames while it is between phases.
The recorder itself owns the lifecycle (start, detach, stop), the training thread and step boundaries.
"""

from __future__ import annotations

import functools
import os
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from time import perf_counter
from typing import TYPE_CHECKING, Any

from gpuwise.profile.collectives import CollectiveWatch
from gpuwise.profile.contained_errors import MAX_CONTAINED_ERRORS, ContainedErrors
from gpuwise.profile.event_log import DRAIN_EVERY_EVENTS, DRAIN_EVERY_S, EventLog
from gpuwise.profile.kept_objects import KeptTensors
from gpuwise.profile.live_memory import LiveMemory
from gpuwise.profile.loader_watch import LoaderWatch
from gpuwise.profile.phases import STEP, StepRecord

if TYPE_CHECKING:  # pragma: no cover
    from gpuwise.profile.cuda_side import CudaSide
    from gpuwise.profile.hooks import Instrumentation
    from gpuwise.profile.host_frames import FrameSampler
    from gpuwise.profile.telemetry import TelemetrySampler

RAW_FORMAT = 1
# After the live-tensor listing paused the loop, warm-up goes on while the DataLoader workers' ready
# batches keep falling over this many steps (a loader that matches the loop's pace keeps a steady count) ...
DRAIN_STALL_STEPS = 4
# ... for at most this many times num_workers * prefetch_factor steps (a loader 1.5x slower than the loop
# drains a full queue of 8 in ~24 steps: one batch each third step, measured on vision_like --io-wait-ms 2)
DRAIN_MAX_QUEUES = 4


@dataclass
class _Drain:
    """Batches the loader's workers queued while the profiler paused the loop: the step of the pause, its
    length (s), the most that could queue, and the ready count read at each step since."""

    step: int
    pause_s: float
    queued: int
    ready: list[int]


_ACTIVE: Recorder | None = None


def _after_fork_in_child() -> None:
    """A forked process (a DataLoader worker) keeps our hooks but must not record: its log would only grow."""
    global _ACTIVE
    recorder, _ACTIVE = _ACTIVE, None
    if recorder is not None:
        recorder.active = False
        recorder.tid = None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


# A training framework by the files on the training thread's stack at the first step boundary (the
# optimizer step runs inside its loop): its fixes then come in its own form (TrainingArguments(...)).
_FRAMEWORK_FILES = (
    ("hf-trainer", ("/transformers/trainer.py",)),
    ("lightning", ("/lightning/pytorch/", "/pytorch_lightning/")),
)


def framework_on_stack(frame: Any) -> str | None:
    """'hf-trainer' or 'lightning' when a frame of their training loop is on the stack, else None."""
    while frame is not None:
        filename = frame.f_code.co_filename.replace(os.sep, "/")
        for name, parts in _FRAMEWORK_FILES:
            if any(part in filename for part in parts):
                return name
        frame = frame.f_back
    return None


def active_recorder() -> Recorder | None:
    """The recorder running in this process; None when none is."""
    return _ACTIVE


class Recorder:
    """Records one run in this process (see the module docstring for its parts).

    ``steps`` is the measured window after ``warmup`` steps (None: until stop); ``auto_step`` makes
    optimizer steps the boundaries; ``sample_interval_s`` is the telemetry period (s).
    ``on_window_complete`` is called once the window is measured, ``on_tick`` after each telemetry sample.
    ``nvml_index`` is the GPU NVML reads (None: the current CUDA device's, if CUDA is available);
    ``copies_and_syncs`` forces the copy/sync wrappers on or off (None: on when CUDA is available).
    Raises ``ValueError`` for ``steps`` < 1 or ``warmup`` < 0.
    """

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
        on_window_complete: Callable[[Recorder], None] | None = None,
        on_tick: Callable[[], None] | None = None,
        nvml_index: int | None = None,
        copies_and_syncs: bool | None = None,
    ) -> None:
        if steps is not None and steps < 1:
            raise ValueError("steps must be at least 1")
        if warmup < 0:
            raise ValueError("warmup must be 0 or more")
        self.steps_requested = steps
        self.warmup = warmup
        self.warmup_requested = warmup  # warmup may grow (``_drain_after_pause``); hooks narrow after this
        self.auto_step = auto_step
        self.manual_steps = False
        # What ends a step: "optimizer" (optimizer.step()), "backward" (backward to backward, for manual
        # SGD that never calls an optimizer), "manual" (p.step()); None until a boundary is seen.
        self.step_boundary: str | None = None
        self._backwards = 0  # backwards begun while no optimizer step was seen
        self.telemetry_enabled = telemetry
        self.sample_interval_s = sample_interval_s
        self.label = label
        self.meta = dict(meta or {})
        self.on_window_complete = on_window_complete
        self.on_tick = on_tick
        self.nvml_index = nvml_index
        self._copies_and_syncs = copies_and_syncs

        self.events = EventLog()
        self.mark: Callable[[int], None] = self.events.mark  # the hooks' hot path; CudaSide.mark on CUDA
        self.log = self.events.log
        self.loader = LoaderWatch()
        self.collectives = CollectiveWatch(self)
        self.notes: list[str] = []
        self.memory = LiveMemory(self.events, self.notes)
        self.kept = KeptTensors()
        self.kept_report: list[dict[str, Any]] = []
        self._drain: _Drain | None = None  # batches queued while the profiler paused the loop
        if steps is not None:
            self.memory.pace_for_window(warmup + steps)
        self.errors = ContainedErrors()
        self.cuda: CudaSide | None = None
        self.instrumentation: Instrumentation | None = None
        self.sampler: TelemetrySampler | None = None
        self.frames: FrameSampler | None = None
        self.events.timer.sample_from_step = warmup

        self.steps_closed = 0  # steps ended so far, replayed or not
        self.status = "running"
        self.error: str | None = None
        self.active = False
        self.window_complete = False
        self.device = "cpu"
        self.gpu_name = ""
        self.model: dict[str, Any] = {}
        self.device_checked = False
        self.tid: int | None = None  # the training thread, once a hook has run on it (hooks compare it first)
        self._pid = os.getpid()
        self._started_wall = 0.0
        self._started = 0.0
        self._stopped = 0.0

    @property
    def records(self) -> list[StepRecord]:
        """The steps replayed so far."""
        return self.events.records

    # -- lifecycle ------------------------------------------------------------------------------------
    def start(self) -> Recorder:
        """Install the hooks and start telemetry and frame sampling; returns self.

        Raises ``RuntimeError`` when another recorder is active in this process, and re-raises (after
        removing what was installed) when the hooks cannot be installed. A collective-timing failure is
        contained.
        """
        global _ACTIVE
        if _ACTIVE is not None and _ACTIVE is not self:
            raise RuntimeError(
                "a gpuwise profile is already active in this process; finish it before starting another"
            )
        import torch

        from gpuwise.profile.hooks import Instrumentation

        cuda_possible = bool(torch.cuda.is_available())
        copies = cuda_possible if self._copies_and_syncs is None else self._copies_and_syncs
        instrumentation = self.instrumentation = Instrumentation(self, copies_and_syncs=copies)
        self.memory.start()
        self._started_wall = time.time()
        self._started = perf_counter()
        self.events.start(self._started)
        _ACTIVE = self
        self.active = True
        try:
            instrumentation.install()
        except Exception:
            instrumentation.uninstall()
            self.active = False
            _ACTIVE = None
            raise
        try:
            self.collectives.install()
        except Exception as exc:
            self.collectives.uninstall()
            self.contain("collective timing", exc)
        if self.telemetry_enabled:
            self._start_telemetry(cuda_possible)
            self._start_frame_sampler()
        return self

    def _start_frame_sampler(self) -> None:
        from gpuwise.profile.host_frames import FrameSampler

        try:
            self.frames = FrameSampler(self.events, lambda: self.tid)
            self.frames.start()
        except Exception as exc:
            self.frames = None
            self.contain("frame sampler", exc)

    def _start_telemetry(self, cuda_possible: bool) -> None:
        from gpuwise.profile.telemetry import TelemetrySampler

        index = self.nvml_index
        if index is None and cuda_possible:
            index = _nvml_index_of_current_device()
        try:
            self.sampler = TelemetrySampler(self.sample_interval_s, nvml_index=index, on_tick=self.on_tick)
            self.sampler.start()
        except Exception as exc:
            self.sampler = None
            self.contain("telemetry", exc)

    def detach(self, from_hook: bool = False) -> None:
        """Remove every hook and stop telemetry; the program keeps running at full speed."""
        global _ACTIVE
        instrumentation = self.instrumentation
        if not self.active:
            if not from_hook and instrumentation is not None and instrumentation.has_optimizer_hooks():
                instrumentation.uninstall()  # the inert optimizer hooks left by a detach inside a hook
            return
        self.active = False
        self.tid = None
        self._stopped = perf_counter()
        parts: list[tuple[str, Callable[[], None]]] = []
        if instrumentation is not None:
            parts.append(("uninstall", functools.partial(instrumentation.uninstall, from_hook=from_hook)))
        parts.append(("collective timing", self.collectives.uninstall))
        if self.sampler is not None:
            parts.append(("telemetry", self.sampler.stop))
        if self.frames is not None:
            parts.append(("frame sampler", self.frames.stop))
        parts.append(("step replay", self.events.drain))
        if self.cuda is not None:
            parts.append(("CUDA event timing", functools.partial(self.cuda.finish, self.events.records)))
        for where, action in parts:
            try:
                action()
            except Exception as exc:
                self.contain(where, exc, active_check=False)
        if _ACTIVE is self:
            _ACTIVE = None

    def stop(self, status: str | None = None, error: str | None = None) -> dict[str, Any]:
        """Detach and return the raw record; ``status`` (default ``completed`` for a running record) and
        ``error`` mark how the run ended.
        """
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
        count = self.errors.add(where, exc)
        if active_check and count >= MAX_CONTAINED_ERRORS and self.active:
            print(
                f"gpuwise: {count} internal errors; profiling switched off for the rest of the run",
                file=sys.stderr,
            )
            self.notes.append("profiling switched itself off after repeated internal errors")
            self.detach(from_hook=True)

    def _contained(self, where: str, run: Callable[[], Any]) -> None:
        """Run a one-off probe on the training thread; a failure is contained (reported once)."""
        try:
            run()
        except Exception as exc:
            self.contain(where, exc, active_check=False)

    # -- the model -------------------------------------------------------------------------------------------
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
        except Exception:  # an exotic module whose parameters cannot be counted: the count is optional
            self.model.pop("num_params", None)
        if self.device == "cuda":
            self._use_cuda(torch, param)
        else:
            try:
                self.model["amp_enabled"] = bool(torch.is_autocast_enabled("cpu"))
            except TypeError:
                self.model["amp_enabled"] = bool(torch.is_autocast_cpu_enabled())

    def _use_cuda(self, torch: Any, param: Any) -> None:
        from gpuwise.profile.cuda_side import CudaSide

        try:
            self.model["amp_enabled"] = bool(torch.is_autocast_enabled("cuda"))
        except TypeError:  # torch < 2.4 has no device argument
            self.model["amp_enabled"] = bool(torch.is_autocast_enabled())
        self.model["tf32_matmul"] = torch.backends.cuda.matmul.allow_tf32
        index = param.device.index if param.device.index is not None else torch.cuda.current_device()
        self.gpu_name = torch.cuda.get_device_name(index)
        self.memory.use("torch.cuda.memory_allocated", lambda: float(torch.cuda.memory_allocated(index)))
        self.cuda = CudaSide(self.events, index)
        self.cuda.step = self.steps_closed
        self.mark = self.cuda.mark  # from the forward being entered on

    # -- steps -----------------------------------------------------------------------------------------------
    def has_activity(self) -> bool:
        """Has a step begun: a phase entered, a batch fetched or a step boundary passed?"""
        return bool(self.steps_closed or self.loader.loaders or self.events.has_activity())

    def auto_boundary(self) -> None:
        """An optimizer step ended: the boundary of choice (steps counted from backwards fold back)."""
        if self.auto_step and not self.manual_steps:
            if self.step_boundary != "optimizer":
                self._switch_boundary("optimizer")
            self.end_step()

    def backward_boundary(self) -> None:
        """A backward begins: a step boundary until an optimizer step shows up (manual SGD,
        ``p.data.add_(...)``, never calls one); each step then runs backward to backward."""
        if self.auto_step and not self.manual_steps and self.step_boundary in (None, "backward"):
            self._backwards += 1
            if self._backwards >= 2:  # the first step runs from the first activity to the second backward
                self.step_boundary = "backward"
                self.end_step()

    def _switch_boundary(self, boundary: str) -> None:
        if self.step_boundary is not None and self.step_boundary != boundary and self.steps_closed:
            self.events.reopen_closed_steps()
            self.steps_closed = 0
        self.step_boundary = boundary

    def step(self) -> None:
        """A manual step boundary (``p.step()``); from then on optimizer steps no longer mark steps."""
        if not self.active:
            return
        self.manual_steps = True
        if self.on_thread():
            try:
                self._switch_boundary("manual")
                self.end_step()
            except Exception as exc:
                self.contain("step", exc)

    def end_step(self) -> None:
        """A step boundary: log it and do what cannot wait for the replay."""
        now = perf_counter()
        if not self.steps_closed and not self.has_activity():
            self.log(STEP, now)  # nothing happened yet: this only starts the first step
            return
        self.log(STEP, now)
        n = self.steps_closed = self.steps_closed + 1
        if n == 1 and "framework" not in self.meta:  # a framework's callback (callbacks.py) names itself
            self.meta["framework"] = framework_on_stack(sys._getframe(1))
        memory, events = self.memory, self.events
        # checked inline: a call costs µs here
        if memory.read is not None and (now >= memory.due_s or n >= memory.due_step):
            try:
                memory.sample(n)
            except Exception as exc:
                memory.read = None
                self.contain("memory probe", exc)
        if self.cuda is not None:
            self.cuda.step_closed(n)
        self._warm_up_ends(n, now)
        if len(events.entries) >= DRAIN_EVERY_EVENTS or now - events.drained_at >= DRAIN_EVERY_S:
            events.drain()
        if self.steps_requested is not None and n >= self.warmup + self.steps_requested:
            self._end_window()

    def _warm_up_ends(self, n: int, now: float) -> None:
        """Step ``n`` closed in warm-up: list the live tensors (last warm-up step), let the batches queued
        meanwhile drain, narrow the hooks to the roots."""
        if n == max(1, self.warmup - 1) and self.steps_requested is not None and not self.kept.marked:
            self._contained("kept tensors", self.kept.mark)  # in a warm-up step: outside the window
            self._drain_after_pause(n, perf_counter() - now)
        elif self._drain is not None and n >= self.warmup:
            self._drain_step(n)
        if n == max(1, self.warmup_requested) and self.instrumentation is not None:
            self.instrumentation.narrow_to_roots()

    def _drain_after_pause(self, n: int, pause_s: float) -> None:
        """The live-tensor listing just paused the training thread; DataLoader worker processes kept
        loading meanwhile and may now hold up to ``num_workers * prefetch_factor`` batches ready. Steps
        that take those run at compute speed, not at the loader's pace (measured: a 2-worker loader with
        a 2 ms read per sample, a 120 ms listing, then 14 steps at 10 ms against 20-33 ms after: profiled
        4.4x gain where the bare script gave 1.95x), so warm-up goes on while the ready batches drain
        (``_drain_step``); where their count cannot be read, for the most batches that could queue."""
        queued = self.loader.queue_bound()
        if queued <= 0:
            return
        self._drain = _Drain(n, pause_s, queued, [])
        ready = self.loader.ready_batches()
        if ready is None:
            self._extend_warmup(n + queued)
            self._drain = None
            return
        self._drain.ready.append(ready)
        self._extend_warmup(n + 1)

    def _drain_step(self, n: int) -> None:
        """One step after the pause: warm-up goes on while the ready batches keep falling (over the last
        ``DRAIN_STALL_STEPS``) and more than one is left, for at most ``DRAIN_MAX_QUEUES`` queues' worth
        of steps (a loader faster than the loop keeps its queue full: nothing to drain)."""
        drain = self._drain
        assert drain is not None
        ready = self.loader.ready_batches()
        seen = drain.ready
        if ready is not None:
            seen.append(ready)
        falling = len(seen) <= DRAIN_STALL_STEPS or seen[-1] < seen[-1 - DRAIN_STALL_STEPS]
        if ready is not None and ready > 1 and falling and n - drain.step < DRAIN_MAX_QUEUES * drain.queued:
            self._extend_warmup(n + 1)
            return
        self._drain = None
        if n > drain.step + 1 and seen and seen[-1] >= seen[0]:
            self.notes.append(
                f"warm-up extended to {n} steps to see whether the DataLoader workers' ready batches "
                f"({seen[0]}) drain after the profiler's {drain.pause_s * 1000:.0f} ms listing of live "
                "tensors: they did not (the loader keeps ahead of the loop)"
            )
        elif n > drain.step + 1:
            self.notes.append(
                f"warm-up extended to {n} steps: the profiler's listing of live tensors paused the loop "
                f"{drain.pause_s * 1000:.0f} ms while the DataLoader workers queued batches "
                f"({seen[0]} ready after it), which later steps take at once; the window starts once they "
                f"are taken ({seen[-1]} left)"
            )

    def _extend_warmup(self, warmup: int) -> None:
        if warmup > self.warmup:
            self.warmup = warmup
            self.events.timer.sample_from_step = warmup

    def _end_window(self) -> None:
        if self.window_complete:
            return
        self.window_complete = True
        self.status = "completed"
        if self.steps_requested is not None:
            frame, window = sys._getframe(1), self.steps_requested + 1
            self._contained(
                "kept tensors", lambda: setattr(self, "kept_report", self.kept.report(window, frame))
            )
        self.detach(from_hook=not self.manual_steps)
        if self.on_window_complete is not None:
            self.on_window_complete(self)

    # -- output ----------------------------------------------------------------------------------------------
    def raw(self, steps_from: int | None = None) -> dict[str, Any]:
        """Everything measured so far, JSON-able. ``steps_from``: a periodic flush that already wrote
        the steps before this index takes only the newer ones, and ``steps_total`` (all of them)."""
        from gpuwise.profile.host_frames import top_frames
        from gpuwise.profile.telemetry import summarize, usable_cpus

        self.events.drain()  # from any thread: a periodic flush keeps every step logged so far
        closed = list(self.events.records)
        records = [r.to_dict() for r in closed[steps_from or 0 :]]
        self.collectives.annotate(records, self.events.origin)
        sampler = self.sampler
        telemetry = None
        if sampler is not None:
            telemetry = summarize(
                list(sampler.samples),
                sampler.cpu_count,
                dict(sampler.not_available),
                sampler.interval_s,
                window=self._measured_window(),
            )
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
            "step_boundary": self.step_boundary,
            "wall_s": end - self._started if self._started else 0.0,
            "steps": records,
            "loader": self.loader.summary(),
            "model": dict(self.model),
            "memory": self._memory_section(),
            "telemetry": telemetry,
            "host_frames": {
                **top_frames(self.events.frame_counts(), self.frames.interval_s),
                "forward_callers": sorted(self.instrumentation.forward_callers)
                if self.instrumentation is not None
                else [],
            }
            if self.frames is not None
            else None,
            "hook_errors": self.errors.to_list(),
            "notes": list(self.notes),
            **({"steps_total": len(closed)} if steps_from is not None else {}),
        }

    def _measured_window(self) -> tuple[float, float] | None:
        """The measured steps (after warm-up) on the perf_counter clock; None before the first one ends."""
        records = self.events.records
        measured = records[self.warmup :] or records
        if not measured:
            return None
        origin = self.events.origin
        return origin + measured[0].start_s, origin + measured[-1].start_s + measured[-1].wall_s

    def _memory_section(self) -> dict[str, Any]:
        memory: dict[str, Any] = {"measure": self.memory.measure}
        if self.kept_report:
            memory["kept"] = self.kept_report
        if self.cuda is not None:
            try:
                memory.update(self.cuda.memory_stats())
            except Exception as exc:
                self.contain("CUDA memory statistics", exc, active_check=False)
        return memory


def _nvml_index_of_current_device() -> int:
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


__all__ = ["Recorder", "active_recorder", "framework_on_stack"]
