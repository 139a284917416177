"""What the recorder adds on CUDA: CUDA-event phase times, NVTX ranges and the allocator's peaks.

Installed once the model is seen on a CUDA device; from then on ``mark`` also opens and closes a
CUDA-event pair and an NVTX range per phase (the host-only ``mark`` stays two appends).
"""

from __future__ import annotations

from time import perf_counter
from typing import Any

from gpuwise.profile.cuda_timing import CudaPhaseTimer
from gpuwise.profile.event_log import EventLog
from gpuwise.profile.phases import StepRecord, phase_of


class CudaSide:
    """The recorder's CUDA part for device ``index``: per-phase CUDA-event timing, NVTX ranges
    (``gpuwise.<phase>``, visible in Nsight Systems) and the caching allocator's peaks.
    """

    def __init__(self, events: EventLog, index: int) -> None:
        import torch

        self.index = index
        self.timer = CudaPhaseTimer()
        self.nvtx: Any = torch.cuda.nvtx
        self._append = events.append
        self._open: list[str] = []  # NVTX ranges we opened
        self.step = 0  # steps closed so far (the recorder keeps it current)

    def mark(self, code: int) -> None:
        """``EventLog.mark`` plus CUDA events and NVTX ranges for the phase."""
        append = self._append
        append(code)
        append(perf_counter())
        phase, entering = phase_of(code)
        if entering:
            self.timer.begin(phase)
            self.nvtx.range_push(f"gpuwise.{phase}")
            self._open.append(phase)
        else:
            self.timer.end(phase, self.step)
            if self._open and self._open[-1] == phase:  # only ranges we opened (NVTX may start mid-phase)
                self._open.pop()
                self.nvtx.range_pop()

    def step_closed(self, n: int) -> None:
        """Step ``n`` closed: mark it in NVTX and resolve the phase timings that have completed
        (non-blocking).
        """
        self.step = n
        self.nvtx.mark(f"gpuwise.step {n - 1}")
        self.timer.drain()

    def finish(self, records: list[StepRecord]) -> None:
        """Wait once for the last events and attach each step's GPU phase times."""
        for index, phases in self.timer.finish().items():
            if index < len(records):
                records[index].gpu_phase_s = phases

    def memory_stats(self) -> dict[str, int]:
        """The caching allocator's peak reserved and allocated bytes and the device's capacity in bytes."""
        import torch

        return {
            "peak_reserved_bytes": int(torch.cuda.max_memory_reserved(self.index)),
            "peak_allocated_bytes": int(torch.cuda.max_memory_allocated(self.index)),
            "capacity_bytes": int(torch.cuda.get_device_properties(self.index).total_memory),
        }


__all__ = ["CudaSide"]
