"""`gpuwise plan --traced`: the VRAM of the current configuration from a traced simulation.

The real model runs on fake tensors (gpuwise.simulation, which imports torch lazily here
only). What-ifs stay on the analytic model: a simulation per edited workload would take
minutes. The result is reshaped to the analytic estimate's keys so one view draws both.
"""

from __future__ import annotations

from typing import Any

from gpuwise.errors import GpuwiseError
from gpuwise.workload import Workload

__all__ = ["traced_memory"]


def traced_memory(
    workload: Workload, model_factory: str | None = None, input_factory: str | None = None
) -> dict[str, Any]:
    """The current configuration's memory from a fake-tensor simulation of the real model, in
    the analytic estimate's JSON form; needs torch and transformers (`gpuwise[sim]`)."""
    try:
        from gpuwise.simulation import traced_estimate
    except ImportError as err:  # torch / transformers missing
        raise GpuwiseError(
            f"--traced needs torch and transformers ({err.name} is not installed): "
            "pip install 'gpuwise[sim]' plus a torch build"
        ) from None
    est = traced_estimate(workload, model_factory=model_factory, input_factory=input_factory)
    capacity = est.device_memory_bytes
    return {
        "method": "traced",
        "model": est.model,
        "peak_phase": est.peak_phase,
        "peak_allocated_bytes": est.peak_allocated_bytes,
        "peak_reserved_bytes": est.peak_reserved_bytes,
        "device_total_bytes": est.device_total_bytes,
        "gpu_memory_bytes": capacity,
        "headroom_pct": round(100.0 * (1 - est.device_total_bytes / capacity), 2) if capacity else None,
        "fits": est.fits,
        "breakdown_bytes": {
            **est.breakdown,
            "cuda_context": est.cuda_context_bytes,
            "allocator_reserve": est.allocator_reserve_bytes,
        },
        "phases": [p.to_dict() for p in est.phases],
        "notes": list(est.notes),
        "simulation_wall_s": est.simulation_wall_s,
    }
