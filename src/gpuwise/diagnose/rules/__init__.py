"""The rules, one module per category, and `RULES`: the one registry the engine runs.

Each rule reads `Evidence` and returns a `Finding` or None; thresholds come from `diagnose.thresholds`.
A rule fires only on the fields it needs; it states how sure it is (measured directly: high; derived
or predicted: medium/low) and what the fix should buy, as a range.

A new rule is one function in its category module, its id in `finding.FindingId` (the function's
name), and one `RuleSpec` line in `RULES` below saying where it applies: the workload kinds
(training / inference / serving / unknown) and the evidence sources (profile, trace, prediction,
telemetry, loadtest). The engine evaluates it nowhere else (issue 25).

- `input_pipeline`: input_bound, loader_cpu_saturated, pageable_copies
- `host`: unexplained_host_time, sync_bound, launch_bound, step_outliers
- `compute`: no_mixed_precision, small_batch, low_utilization, no_fused_optimizer
- `memory`: oom_risk, memory_growth, no_flash_attention, kv_cache_dominant, decode_memory_bound
- `hardware`: throttling; from `monitor` samples and history idle_gpu_hours, chronic_low_busy,
  oversized_gpu, idle_memory_held
- `health`: from `monitor` samples and history gpu_lost, gpu_ecc_uncorrected, gpu_ecc_corrected_storm,
  gpu_memory_remapped, gpu_pcie_replays, gpu_xid_errors
- `distributed`: comm_bound, straggler
- `serving` (a load test): serving_queueing, serving_prefill_bound, serving_decode_bound,
  serving_errors, serving_speed_gap

Helpers the rules share live beside them (`common`, `loader_advice`, `host_frames`); statistics the
views also use live in `diagnose.statistics`.
"""

from __future__ import annotations

from gpuwise.diagnose.rules import (
    compute,
    distributed,
    hardware,
    health,
    host,
    input_pipeline,
    memory,
    serving,
)
from gpuwise.diagnose.rules.common import ALL_KINDS, MEASURED_RUN, NOT_SERVING, Rule, RuleSpec, kinds, sources

__all__ = ["RULES", "Rule", "RuleSpec"]

_RUN_OR_PLAN = sources("profile", "trace", "prediction")
_LIVE = sources("profile")
_NVML = sources("profile", "telemetry")  # NVML readings: the live run's telemetry thread, `monitor`
_WATCHED = sources("profile", "trace", "prediction", "telemetry")  # everything that sees a GPU's memory
_MONITOR = sources("telemetry")
_PLAN = sources("prediction")
_LOADTEST = sources("loadtest")
_GENERATION = kinds("inference", "serving")

# Every rule with where it applies, in the order the engine applies them (the ranking afterwards does not
# depend on it). Kinds: the workloads its advice fits ("unknown": it speaks in neutral terms when the
# evidence cannot tell; each rule's docstring says why). Sources: the evidence that fills what it reads.
# The table in docs/README.md ("Where each finding applies") is this list;
# tests/diagnose/test_rule_contexts.py walks every entry.
RULES: list[RuleSpec] = [
    RuleSpec(input_pipeline.input_bound, NOT_SERVING, MEASURED_RUN),
    RuleSpec(input_pipeline.loader_cpu_saturated, NOT_SERVING, _LIVE),
    RuleSpec(host.unexplained_host_time, NOT_SERVING, _LIVE),
    RuleSpec(host.sync_bound, NOT_SERVING, MEASURED_RUN),
    RuleSpec(host.launch_bound, NOT_SERVING, MEASURED_RUN),
    RuleSpec(compute.no_mixed_precision, ALL_KINDS, _RUN_OR_PLAN),
    RuleSpec(input_pipeline.pageable_copies, NOT_SERVING, MEASURED_RUN),
    RuleSpec(compute.small_batch, ALL_KINDS, _WATCHED),
    RuleSpec(memory.oom_risk, ALL_KINDS, _WATCHED),
    RuleSpec(hardware.throttling, ALL_KINDS, _NVML),
    RuleSpec(host.step_outliers, NOT_SERVING, MEASURED_RUN),
    RuleSpec(memory.memory_growth, NOT_SERVING, MEASURED_RUN),
    RuleSpec(distributed.comm_bound, ALL_KINDS, _RUN_OR_PLAN),
    RuleSpec(compute.low_utilization, ALL_KINDS, _WATCHED),
    RuleSpec(distributed.straggler, NOT_SERVING, MEASURED_RUN),
    RuleSpec(memory.no_flash_attention, ALL_KINDS, _PLAN),
    RuleSpec(compute.no_fused_optimizer, kinds("training"), _RUN_OR_PLAN),
    RuleSpec(memory.kv_cache_dominant, _GENERATION, _PLAN),
    RuleSpec(memory.decode_memory_bound, _GENERATION, _PLAN),
    RuleSpec(hardware.idle_gpu_hours, ALL_KINDS, _MONITOR),
    RuleSpec(hardware.chronic_low_busy, ALL_KINDS, _MONITOR),
    RuleSpec(hardware.oversized_gpu, ALL_KINDS, _MONITOR),
    RuleSpec(hardware.idle_memory_held, ALL_KINDS, _MONITOR),
    RuleSpec(health.gpu_lost, ALL_KINDS, _MONITOR),
    RuleSpec(health.gpu_ecc_uncorrected, ALL_KINDS, _MONITOR),
    RuleSpec(health.gpu_ecc_corrected_storm, ALL_KINDS, _MONITOR),
    RuleSpec(health.gpu_memory_remapped, ALL_KINDS, _MONITOR),
    RuleSpec(health.gpu_pcie_replays, ALL_KINDS, _MONITOR),
    RuleSpec(health.gpu_xid_errors, ALL_KINDS, _MONITOR),
    RuleSpec(serving.serving_queueing, kinds("serving"), _LOADTEST),
    RuleSpec(serving.serving_prefill_bound, kinds("serving"), _LOADTEST),
    RuleSpec(serving.serving_decode_bound, kinds("serving"), _LOADTEST),
    RuleSpec(serving.serving_errors, kinds("serving"), _LOADTEST),
    RuleSpec(serving.serving_speed_gap, kinds("serving"), _LOADTEST),
]
