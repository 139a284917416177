"""Every rule × every context (workload kind × evidence source): a rule runs only where `RULES` declares it,
fires there on evidence made for it, and gives no training-only advice to inference, serving or monitor
evidence (issue 25)."""

from pathlib import Path
from typing import Any

import pytest

from gpuwise.diagnose import Evidence, diagnose
from gpuwise.diagnose.evidence import SOURCES, WORKLOAD_KINDS
from gpuwise.diagnose.finding import FINDING_IDS
from gpuwise.diagnose.rules import RULES
from gpuwise.diagnose.rules.common import training_only_terms
from gpuwise.units import GiB

_STEPS = [0.1] * 30 + [0.5, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.5]
_HOLDER = {"process": "4242 python", "user": "ana", "memory_bytes": 70 * GiB, "idle_gpu_hours": 5.0}

# Flat evidence that makes each rule fire when the engine lets it run (kind and source added per case).
FIRING: dict[str, dict[str, Any]] = {
    "input_bound": {
        "step_time_s": 0.1, "phase_s": {"data_wait": 0.03}, "loader_num_workers": 0, "cpu_count": 8,
    },
    "loader_cpu_saturated": {
        "input_wait_pct": 40, "loader_num_workers": 2, "cpu_count": 2, "cpu_util_pct": 97,
    },
    "unexplained_host_time": {"step_time_s": 0.1, "phase_s": {"forward": 0.03, "other": 0.07}},
    "sync_bound": {"sync_wait_pct": 30.0, "sync_calls_per_step": 4.0},
    "launch_bound": {"tiny_kernel_pct": 80.0, "gpu_idle_pct": 60.0},
    "no_mixed_precision": {
        "fp32_matmul_pct": 90.0, "fp32_matmul_time_pct": 40.0, "tensor_core_speedup": 15.0,
    },
    "pageable_copies": {"pageable_copy_pct": 100.0, "h2d_copy_pct": 8.0},
    "small_batch": {"memory_capacity_bytes": 80 * GiB, "memory_peak_bytes": 10 * GiB, "gpu_util_pct": 30.0},
    "oom_risk": {"memory_capacity_bytes": 80 * GiB, "memory_peak_bytes": 78 * GiB},
    "throttling": {"throttle_pct": {"hw_thermal": 45.0}},
    "step_outliers": {"step_times_s": _STEPS},
    "memory_growth": {"memory_per_step_bytes": [1e9 + s * 5e7 for s in range(40)]},
    "comm_bound": {"comm_exposed_pct": 40.0},
    "low_utilization": {"gpu_util_pct": 20.0},
    "straggler": {"rank_step_time_s": {0: 1.0, 1: 1.02, 2: 1.4, 3: 0.99}},
    "no_flash_attention": {
        "memory_peak_bytes": 40 * GiB, "attention_impl": "eager", "attention_scores_bytes": 12 * GiB,
    },
    "no_fused_optimizer": {"step_time_s": 1.0, "phase_s": {"optimizer": 0.1}, "optimizer_fused": False},
    "kv_cache_dominant": {"memory_peak_bytes": 20 * GiB, "kv_cache_bytes": 10 * GiB, "kv_cache_bits": 16},
    "decode_memory_bound": {"weight_bytes": 8 * GiB, "weight_bits": 16, "decode_bandwidth_bound": True},
    "idle_gpu_hours": {"observed_gpu_hours": 100.0, "idle_time_pct": 60.0, "idle_usd": 150.0},
    "chronic_low_busy": {"observed_gpu_hours": 100.0, "busy_in_use_pct": 20.0},
    "oversized_gpu": {
        "observed_gpu_hours": 100.0,
        "memory_capacity_bytes": 80 * GiB,
        "memory_peak_bytes": 10 * GiB,
        "smaller_gpu": {
            "gpu": None, "gpu_name": None, "busy_in_use_pct": 30.0, "busy_kpi_pct": 70.0,
            "current_usd_per_gpu_hour": 2.5, "memory_needed_bytes": 12 * GiB, "closest": None,
        },
    },
    "idle_memory_held": {
        "memory_capacity_bytes": 80 * GiB,
        "idle_memory_held_bytes": 75 * GiB,
        "usd_per_gpu_hour": 2.5,
        "idle_memory_holders": [_HOLDER],
    },
    "gpu_lost": {"gpu_lost": True},
    "gpu_ecc_uncorrected": {"ecc_volatile_uncorrected": 2},
    "gpu_ecc_corrected_storm": {"ecc_volatile_corrected": 250_000},
    "gpu_memory_remapped": {"remap_pending": True},
    "gpu_pcie_replays": {"pcie_replays": 5000},
    "gpu_xid_errors": {"xid_errors": [79]},
    "serving_queueing": {
        "serving_requests": 100, "serving_requests_ok": 100, "serving_offered_rate_rps": 10.0,
        "serving_request_throughput_rps": 5.0, "serving_latency_s": {"ttft_p99": 3.0, "ttft_p50": 2.0},
        "serving_ttft_unloaded_s": 0.1, "serving_slo_s": {"ttft_p99": 1.0},
    },
    "serving_prefill_bound": {
        "serving_requests": 100, "serving_requests_ok": 100,
        "serving_latency_s": {"ttft_p99": 3.0, "ttft_p50": 2.8}, "serving_ttft_unloaded_s": 2.7,
        "serving_slo_s": {"ttft_p99": 1.0},
    },
    "serving_decode_bound": {
        "serving_requests": 100, "serving_requests_ok": 100,
        "serving_latency_s": {"tpot_p99": 0.2, "tpot_p50": 0.15}, "serving_slo_s": {"tpot_p99": 0.05},
    },
    "serving_errors": {"serving_requests": 100, "serving_requests_ok": 50, "serving_errors": {"timeout": 50}},
    "serving_speed_gap": {
        "serving_requests": 100, "serving_requests_ok": 100, "serving_latency_s": {"tpot_p50": 0.1},
        "serving_predicted_tpot_p50_s": 0.02,
    },
}  # fmt: skip

CONTEXTS = [(kind, source) for kind in WORKLOAD_KINDS for source in SOURCES]


def _evidence(rule_id: str, kind: str, source: str) -> Evidence:
    return Evidence.flat(source, workload_kind=kind, **FIRING[rule_id])  # type: ignore[arg-type]


def test_every_rule_has_a_firing_case_and_a_declaration():
    assert sorted(FIRING) == sorted(FINDING_IDS) == sorted(spec.id for spec in RULES)


@pytest.mark.parametrize("spec", RULES, ids=lambda s: s.id)
def test_rule_runs_only_in_its_declared_contexts(spec):
    fired_somewhere = False
    for kind, source in CONTEXTS:
        ev = _evidence(spec.id, kind, source)  # a load test is serving whatever it was given
        found = {f.id: f for f in diagnose(ev)}
        declared = ev.kind in spec.kinds and source in spec.sources
        if not declared:
            assert spec.id not in found, f"{spec.id} ran on {kind} {source} evidence"
            continue
        # the rule function itself fires on its case: only the engine's declaration held it back elsewhere
        fired_somewhere |= spec.id in found
    assert fired_somewhere, f"{spec.id}'s case fires in none of its declared contexts"


@pytest.mark.parametrize("spec", RULES, ids=lambda s: s.id)
@pytest.mark.parametrize("kind, source", [(k, s) for k, s in CONTEXTS if k != "training"])
def test_no_training_advice_outside_training(spec, kind, source):
    """Inference, serving and unknown evidence (every monitor sample) never hears training-only advice."""
    for finding in diagnose(_evidence(spec.id, kind, source)):
        advice = f"{finding.fix}\n{finding.fix_snippet}".lower()
        terms = [t for t in training_only_terms() if t in advice]
        assert not terms, f"{finding.id} on {kind} {source} evidence advises {terms}: {finding.fix}"


def test_training_keeps_its_training_advice():
    """The split did not silence training: the batch and OOM fixes still name accumulation there."""
    for rule_id in ("small_batch", "oom_risk"):
        found = {f.id: f for f in diagnose(_evidence(rule_id, "training", "prediction"))}
        assert "accumulation" in found[rule_id].fix + found[rule_id].fix_snippet


def test_idle_gpu_holding_memory_is_a_cost_not_an_oom_risk():
    """Issue 30's case: an idle monitored GPU holding 75 of 80 GiB for another user's process."""
    ev = _evidence("idle_memory_held", "unknown", "telemetry")
    found = {f.id: f for f in diagnose(ev)}
    assert set(found) == {"idle_memory_held"}
    held = found["idle_memory_held"]
    assert "4242 python (ana, 70.0 GiB, 5.0 h idle)" in held.summary and "$2.50 per hour" in held.summary
    small = Evidence.flat(
        "telemetry",
        memory_capacity_bytes=80 * GiB,
        idle_memory_held_bytes=int(0.5 * GiB),
        usd_per_gpu_hour=2.5,
    )
    assert diagnose(small) == []  # a CUDA context, not tensors held


def test_the_docs_table_is_the_registry():
    """docs/README.md's "Where each finding applies" has one row per rule, ticks where RULES declares."""
    text = (Path(__file__).parents[2] / "docs" / "README.md").read_text()
    rows = {
        cells[0].strip("` "): [c.strip() == "✓" for c in cells[1:]]
        for line in text.splitlines()
        if line.startswith("| `") and len(cells := line.strip("|").split("|")) == 1 + len(CONTEXT_COLUMNS)
    }
    expected = {
        spec.id: [k in spec.kinds for k in WORKLOAD_KINDS] + [s in spec.sources for s in SOURCES]
        for spec in RULES
    }
    assert rows == expected


CONTEXT_COLUMNS = (*WORKLOAD_KINDS, *SOURCES)
