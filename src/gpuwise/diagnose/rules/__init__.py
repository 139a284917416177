"""The rules, one module per category, and `RULES`: the one registry the engine runs.

Each rule reads `Evidence` and returns a `Finding` or None; thresholds come from `diagnose.thresholds`.
A rule fires only on the fields it needs; it states how sure it is (measured directly: high; derived
or predicted: medium/low) and what the fix should buy, as a range.

A new rule is one function in its category module, its id in `finding.FindingId` (the function's
name), and one line in `RULES` below.

- `input_pipeline`: input_bound, loader_cpu_saturated, pageable_copies
- `host`: unexplained_host_time, sync_bound, launch_bound, step_outliers
- `compute`: no_mixed_precision, small_batch, low_utilization, no_fused_optimizer
- `memory`: oom_risk, memory_growth, no_flash_attention, kv_cache_dominant, decode_memory_bound
- `hardware`: throttling; from recorded history idle_gpu_hours, chronic_low_busy, oversized_gpu
- `distributed`: comm_bound, straggler
- `serving` (a load test): serving_queueing, serving_prefill_bound, serving_decode_bound,
  serving_errors, serving_speed_gap

Helpers the rules share live beside them (`common`, `loader_advice`, `host_frames`); statistics the
views also use live in `diagnose.statistics`.
"""

from __future__ import annotations

from gpuwise.diagnose.rules import compute, distributed, hardware, host, input_pipeline, memory, serving
from gpuwise.diagnose.rules.common import Rule

__all__ = ["RULES", "Rule"]

# Every rule, in the order the engine applies them (the ranking afterwards does not depend on it).
RULES: list[Rule] = [
    input_pipeline.input_bound,
    input_pipeline.loader_cpu_saturated,
    host.unexplained_host_time,
    host.sync_bound,
    host.launch_bound,
    compute.no_mixed_precision,
    input_pipeline.pageable_copies,
    compute.small_batch,
    memory.oom_risk,
    hardware.throttling,
    host.step_outliers,
    memory.memory_growth,
    distributed.comm_bound,
    compute.low_utilization,
    distributed.straggler,
    memory.no_flash_attention,
    compute.no_fused_optimizer,
    memory.kv_cache_dominant,
    memory.decode_memory_bound,
    hardware.idle_gpu_hours,
    hardware.chronic_low_busy,
    hardware.oversized_gpu,
    serving.serving_queueing,
    serving.serving_prefill_bound,
    serving.serving_decode_bound,
    serving.serving_errors,
    serving.serving_speed_gap,
]
