"""Live profiling of a real PyTorch training run.

How a run is measured, one idea per module:

- ``phases``     exclusive phase accounting on the host clock (data_wait, h2d_copy, forward, backward,
                 optimizer, other) with a step boundary at each optimizer step;
- ``hooks``      installs torch's global module/optimizer hooks and wraps DataLoader iteration,
                 autograd backward, host->device copies and synchronizing calls;
- ``cuda_timing``CUDA-event timing of the same phases on the GPU (resolved without stalling the run);
- ``telemetry``  a sampler thread: psutil always, NVML when an NVIDIA GPU is used;
- ``event_log``  the hooks' hot path (two appends per event) and its replay into steps;
- ``loader_watch`` / ``live_memory`` / ``cuda_side`` / ``contained_errors``  DataLoader settings and
                 waits, live memory within a time budget, CUDA events + NVTX, gpuwise's own errors;
- ``recorder``   ties them together step by step and produces a raw record;
- ``analysis``   raw record -> ``ProfileRun`` (a typed ``RunSummary`` from ``types``, ``Evidence`` from
                 ``run_evidence``, statistics from ``step_stats``) with ranked findings;
- ``api``        ``gpuwise.profile()``; ``callbacks`` for Hugging Face and Lightning;
- ``launcher`` / ``child`` / ``_boot``  ``gpuwise profile -- python train.py`` (script unchanged);
                 ``knobs_boot`` applies a ``gpuwise tune`` trial's knobs inside that child;
- ``saved_runs`` a run in the SQLite run store (``gpuwise.store.runs``) and back; ``run_comparison``
                 compares two runs; ``rank_spread`` compares the ranks of one distributed run.

The modules that run inside the profiled process (phases, hooks, cuda_timing, telemetry, recorder,
child) import only the standard library at import time, and torch/psutil/pynvml when started, so
they also work in an interpreter that has torch but not gpuwise's CLI dependencies.
"""

import sys as _sys
import types as _types

__all__: list[str] = []


class _CallableModule(_types.ModuleType):
    """``gpuwise.profile(...)`` must work even after ``gpuwise.profile.*`` was imported, when Python
    has replaced the lazy ``gpuwise.profile`` function attribute by this package: calling the
    package calls ``gpuwise.profile.api.profile``."""

    def __call__(self, *args, **kwargs):
        from gpuwise.profile.api import profile

        return profile(*args, **kwargs)


_sys.modules[__name__].__class__ = _CallableModule
