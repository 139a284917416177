"""The shared rule engine: each rule fires on its evidence, stays quiet without it, and round-trips JSON."""

import ast
import json
from pathlib import Path

import pytest

from gpuwise.diagnose import Evidence, Finding, diagnose, load_evidence
from gpuwise.diagnose import thresholds as T
from gpuwise.diagnose.finding import FINDING_IDS
from gpuwise.diagnose.rules import RULES
from gpuwise.errors import GpuwiseError
from gpuwise.units import GiB


def ids(evidence):
    return [f.id for f in diagnose(evidence)]


def test_empty_evidence_finds_nothing():
    assert diagnose(Evidence(source="profile")) == []


@pytest.mark.parametrize("wait, severity", [(0.004, None), (0.006, "medium"), (0.025, "high")])
def test_input_bound_thresholds(wait, severity):
    ev = Evidence.flat(
        source="profile", step_time_s=0.1, phase_s={"data_wait": wait}, loader_num_workers=0, cpu_count=8
    )
    found = {f.id: f for f in diagnose(ev)}
    if severity is None:
        assert "input_bound" not in found
    else:
        assert found["input_bound"].severity == severity
        assert "num_workers=7" in found["input_bound"].fix_snippet
        # Amdahl on the wait, less each batch's hand-off from a worker kept on the training thread
        handoff_s = T.LOADER_HANDOFF_BASE_S + 2 * T.LOADER_HANDOFF_PER_TENSOR_S
        assert found["input_bound"].gain.high == pytest.approx(1 / (1 - wait / 0.1 + handoff_s / 0.1))


def test_saturated_cpu_changes_the_advice():
    ev = Evidence.flat(
        source="profile", input_wait_pct=40, loader_num_workers=2, cpu_count=2, cpu_util_pct=97
    )
    found = {f.id: f for f in diagnose(ev)}
    assert "loader_cpu_saturated" in found
    assert (
        "more workers" not in found["input_bound"].fix
        or "rather than adding workers" in found["input_bound"].fix
    )


def test_oom_risk_and_does_not_fit():
    near = Evidence.flat(source="prediction", memory_capacity_bytes=80 * GiB, memory_peak_bytes=int(75 * GiB))
    over = Evidence.flat(source="prediction", memory_capacity_bytes=80 * GiB, memory_peak_bytes=int(90 * GiB))
    comfortable = Evidence.flat(
        source="prediction", memory_capacity_bytes=80 * GiB, memory_peak_bytes=int(60 * GiB)
    )
    assert diagnose(near)[0].severity == "high"
    assert diagnose(over)[0].severity == "critical"
    assert diagnose(over)[0].confidence == "low"  # predicted, not measured
    assert "oom_risk" not in ids(comfortable)


def test_small_batch_needs_headroom_and_idle_gpu():
    ev = Evidence.flat(
        source="telemetry", memory_capacity_bytes=80 * GiB, memory_peak_bytes=20 * GiB, gpu_util_pct=40
    )
    found = {f.id: f for f in diagnose(ev)}
    assert found["small_batch"].metrics["batch_scale_possible"] == pytest.approx(80 * 0.85 / 20, rel=0.01)
    busy = Evidence.flat(
        source="telemetry", memory_capacity_bytes=80 * GiB, memory_peak_bytes=20 * GiB, gpu_util_pct=95
    )
    assert "small_batch" not in ids(busy)


def test_periodic_outliers_report_their_period():
    times = [0.1] * 40
    for i in range(4, 40, 10):
        times[i] = 0.4
    finding = next(
        f for f in diagnose(Evidence.flat(source="profile", step_times_s=times)) if f.id == "step_outliers"
    )
    assert finding.metrics["period_steps"] == 10
    assert finding.metrics["outlier_steps"] == [4, 14, 24, 34]


def test_steady_steps_have_no_outliers():
    times = [0.1 + 0.001 * (i % 3) for i in range(50)]
    assert "step_outliers" not in ids(Evidence.flat(source="profile", step_times_s=times))


def test_memory_growth_and_flat_memory():
    growing = [1e9 + i * 5e7 for i in range(20)]
    flat = [1e9 + (i % 2) * 1e6 for i in range(20)]
    assert "memory_growth" in ids(Evidence.flat(source="profile", memory_per_step_bytes=growing))
    assert "memory_growth" not in ids(Evidence.flat(source="profile", memory_per_step_bytes=flat))


def test_memory_growth_from_spaced_readings_counts_steps_not_readings():
    """A live run reads memory every few steps (the probe's time budget): growth per step uses the
    step index."""
    steps = list(range(0, 40, 4))  # 10 readings over 37 steps
    growing = [1e9 + s * 5e7 for s in steps]
    finding = next(
        f
        for f in diagnose(
            Evidence.flat(source="profile", memory_per_step_bytes=growing, memory_step_index=steps)
        )
        if f.id == "memory_growth"
    )
    assert finding.metrics["bytes_per_step"] == 5e7 and "over 37 steps" in finding.summary
    # five readings of five consecutive steps: too short a span to call a leak
    assert "memory_growth" not in ids(
        Evidence.flat(source="profile", memory_per_step_bytes=growing[:5], memory_step_index=[0, 1, 2, 3, 4])
    )
    short = [1e9 + s * 5e7 for s in range(4)]
    assert "memory_growth" not in ids(Evidence.flat(source="profile", memory_per_step_bytes=short))


def test_throttling_straggler_comm_launch_sync_precision_pageable():
    # NVML throttling reaches a live run (its telemetry thread) or a monitor, never a trace
    nvml = Evidence.flat(source="profile", throttle_pct={"hw_thermal": 45.0, "sw_power_cap": 5.0})
    assert "throttling" in ids(nvml)
    ev = Evidence.flat(
        source="trace",
        throttle_pct={"hw_thermal": 45.0, "sw_power_cap": 5.0},
        rank_step_time_s={0: 1.0, 1: 1.02, 2: 1.4, 3: 0.99},
        comm_exposed_pct=40.0,
        tiny_kernel_pct=80.0,
        gpu_idle_pct=55.0,
        sync_wait_pct=20.0,
        fp32_matmul_pct=90.0,
        fp32_matmul_time_pct=40.0,  # a trace measures the fp32 matmul time (Amdahl's fraction)
        tensor_core_speedup=15.0,
        pageable_copy_pct=100.0,
        h2d_copy_pct=8.0,
    )
    found = {f.id: f for f in diagnose(ev)} | {f.id: f for f in diagnose(nvml)}
    assert "throttling" not in ids(ev)
    assert {
        "throttling",
        "straggler",
        "comm_bound",
        "launch_bound",
        "sync_bound",
        "no_mixed_precision",
        "pageable_copies",
        "low_utilization",
    } <= set(found)
    assert found["straggler"].metrics["straggler_rank"] == 2
    assert found["throttling"].severity == "high"
    ranked = diagnose(ev)
    assert [f.severity_rank for f in ranked] == sorted(f.severity_rank for f in ranked)


@pytest.mark.parametrize("late_comm_s, severity", [(0.31, None), (0.29, "medium"), (0.14, "high")])
def test_straggler_from_collective_wait_when_steps_are_equal(late_comm_s, severity):
    # synchronous DP: every step 1.0 s; ranks 0, 1, 3 sit 0.4 s per step in collectives
    ev = Evidence.flat(
        source="trace",
        rank_step_time_s={0: 1.0, 1: 1.001, 2: 0.999, 3: 1.0},
        rank_comm_time_s={0: 0.4, 1: 0.41, 2: late_comm_s, 3: 0.39},
    )
    found = {f.id: f for f in diagnose(ev)}
    if severity is None:  # a 9 % gap is below T.STRAGGLER_COMM_GAP_PCT
        assert "straggler" not in found
        return
    f = found["straggler"]
    assert f.severity == severity and f.confidence == "medium" and f.metrics["straggler_rank"] == 2
    assert f.metrics["comm_wait_gap_s"] == pytest.approx(0.4 - late_comm_s)  # median of the others: 0.4
    assert f"wait about {(0.4 - late_comm_s) * 1000:.3g} ms per step" in f.summary
    # the step loses the others' measured wait for it; a trace has one mean wait per rank (no per-step
    # series to give the spread): one figure, and the note says so
    gap = 0.4 - late_comm_s
    assert f.gain.high == pytest.approx(1 / (1 - gap), abs=1e-3) == f.gain.low
    assert "point estimate" in f.gain.note


def test_collective_wait_outranks_a_step_time_skew_that_is_waiting():
    # rank 1's longer step is 0.5 s more waiting in collectives (issue 12.2): rank 0 is the late one
    ev = Evidence.flat(source="trace", rank_step_time_s={0: 1.0, 1: 1.5}, rank_comm_time_s={0: 0.1, 1: 0.6})
    f = next(f for f in diagnose(ev) if f.id == "straggler")
    assert (
        f.metrics["straggler_rank"] == 0 and f.confidence == "medium" and "but that is waiting" in f.summary
    )


def test_step_time_skew_names_the_straggler_when_it_is_not_waiting():
    ev = Evidence.flat(source="trace", rank_step_time_s={0: 1.0, 1: 1.5}, rank_comm_time_s={0: 0.1, 1: 0.1})
    f = next(f for f in diagnose(ev) if f.id == "straggler")
    assert f.metrics["straggler_rank"] == 1 and f.confidence == "high" and "comm_wait_gap_s" not in f.metrics


def test_amp_enabled_silences_precision_rule():
    ev = Evidence.flat(source="profile", fp32_matmul_pct=90.0, tensor_core_speedup=15.0, amp_enabled=True)
    assert "no_mixed_precision" not in ids(ev)


def test_thresholds_are_the_only_numbers_rules_compare_against():
    assert T.INPUT_WAIT_MODERATE_PCT == 5.0 and T.INPUT_WAIT_HIGH_PCT == 20.0 and T.OOM_HEADROOM_PCT == 10.0


def test_evidence_json_round_trip(tmp_path):
    ev = Evidence.flat(
        source="trace",
        rank=3,
        step_times_s=[0.1, 0.2],
        rank_step_time_s={0: 0.1, 1: 0.2},
        rank_comm_time_s={0: 0.03, 1: 0.01},
        phase_s={"forward": 0.05},
    )
    doc = {"schema_version": 1, "kind": "trace", "evidence": [ev.to_dict()]}
    path = tmp_path / "t.json"
    path.write_text(json.dumps(doc))
    loaded = load_evidence(path)
    assert loaded[0].comm.rank_step_time_s == {0: 0.1, 1: 0.2}
    assert loaded[0].comm.rank_comm_time_s == {0: 0.03, 1: 0.01}
    assert loaded[0].rank == 3
    finding = diagnose(Evidence.flat(source="profile", input_wait_pct=30))[0]
    assert Finding.from_dict(json.loads(json.dumps(finding.to_dict()))) == finding


def test_bad_evidence_files(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"evidence": {"source": "profile",\n "step_time_s": }')
    with pytest.raises(GpuwiseError, match=r"bad.json: invalid JSON at line 2"):
        load_evidence(bad)
    bad.write_text('{"kind": "memory", "peak_allocated_bytes": 1}')
    with pytest.raises(GpuwiseError, match="carries no evidence"):
        load_evidence(bad)
    bad.write_text('{"evidence": {"source": "guess"}}')
    with pytest.raises(GpuwiseError, match="unknown evidence source"):
        load_evidence(bad)
    with pytest.raises(GpuwiseError, match="does not exist"):
        load_evidence(tmp_path / "missing.json")


# --- prediction-specific rules (filled by the planner) --------------------------------------------


def test_oom_risk_names_the_computed_changes_that_fit():
    ev = Evidence.flat(
        source="prediction",
        memory_capacity_bytes=24 * GiB,
        memory_peak_bytes=30 * GiB,
        fit_options_bytes={
            "precision=nf4": 12 * GiB,
            "grad_checkpointing=full": 23.5 * GiB,
            "lora": 20 * GiB,
        },
    )
    found = {f.id: f for f in diagnose(ev)}["oom_risk"]
    assert "precision=nf4 (12.0 GiB)" in found.fix and "lora (20.0 GiB)" in found.fix
    assert "grad_checkpointing" not in found.fix  # 23.5 of 24 GiB leaves less than the required headroom
    nothing = Evidence.flat(
        source="prediction",
        memory_capacity_bytes=24 * GiB,
        memory_peak_bytes=30 * GiB,
        fit_options_bytes={"grad_checkpointing=full": 26 * GiB},
    )
    assert "No single change tried fits" in diagnose(nothing)[0].fix


def test_no_flash_attention_fires_on_large_score_matrices_only():
    ev = Evidence.flat(
        source="prediction",
        memory_peak_bytes=40 * GiB,
        attention_impl="eager",
        attention_scores_bytes=12 * GiB,
    )
    found = {f.id: f for f in diagnose(ev)}["no_flash_attention"]
    assert found.severity == "high" and found.gain.high == 12 * GiB
    small = Evidence.flat(
        source="prediction",
        memory_peak_bytes=40 * GiB,
        attention_impl="eager",
        attention_scores_bytes=int(40 * GiB * (T.ATTENTION_SCORES_SHARE_PCT - 1) / 100),
    )
    flash = Evidence.flat(
        source="prediction",
        memory_peak_bytes=40 * GiB,
        attention_impl="flash",
        attention_scores_bytes=12 * GiB,
    )
    assert "no_flash_attention" not in ids(small) and "no_flash_attention" not in ids(flash)


def test_no_fused_optimizer_needs_an_unfused_optimizer_and_a_visible_phase():
    ev = Evidence.flat(
        source="prediction",
        step_time_s=1.0,
        phase_s={"optimizer": 0.1},
        optimizer_fused=False,
        workload_kind="training",
    )
    assert {f.id: f for f in diagnose(ev)}["no_fused_optimizer"].gain.high == pytest.approx(5.0)
    assert "no_fused_optimizer" not in ids(
        Evidence.flat(source="prediction", step_time_s=1.0, phase_s={"optimizer": 0.1}, optimizer_fused=True)
    )
    assert "no_fused_optimizer" not in ids(
        Evidence.flat(
            source="prediction", step_time_s=1.0, phase_s={"optimizer": 0.01}, optimizer_fused=False
        )
    )


def test_kv_cache_dominant_and_decode_memory_bound():
    ev = Evidence.flat(
        source="prediction",
        memory_peak_bytes=20 * GiB,
        kv_cache_bytes=10 * GiB,
        kv_cache_bits=16,
        weight_bytes=8 * GiB,
        weight_bits=16,
        decode_bandwidth_bound=True,
        workload_kind="inference",
    )
    found = {f.id: f for f in diagnose(ev)}
    assert found["kv_cache_dominant"].gain.high == 5 * GiB
    assert found["decode_memory_bound"].gain.high == pytest.approx(18 / 14, rel=1e-3)
    fp8 = Evidence.flat(
        source="prediction",
        memory_peak_bytes=20 * GiB,
        kv_cache_bytes=10 * GiB,
        kv_cache_bits=8,
        weight_bytes=8 * GiB,
        weight_bits=4,
        decode_bandwidth_bound=True,
        workload_kind="inference",
    )
    found = {f.id: f for f in diagnose(fp8)}
    assert "kv_cache_dominant" not in found
    assert found["decode_memory_bound"].gain is None and "Quantize" not in found["decode_memory_bound"].fix
    assert "decode_memory_bound" not in ids(
        Evidence.flat(source="prediction", weight_bytes=8 * GiB, decode_bandwidth_bound=False)
    )


def test_new_evidence_fields_round_trip(tmp_path):
    ev = Evidence.flat(
        source="prediction",
        kv_cache_bytes=5,
        attention_impl="eager",
        fit_options_bytes={"lora": 3.0},
        optimizer_fused=False,
    )
    path = tmp_path / "ev.json"
    path.write_text(json.dumps({"kind": "plan", "evidence": [ev.to_dict()]}))
    back = load_evidence(path)[0]
    assert (
        back.model.fit_options_bytes == {"lora": 3.0}
        and back.model.optimizer_fused is False
        and back.model.attention_impl == "eager"
    )


def test_launch_bound_not_blamed_for_data_waits_or_a_few_launches_per_long_step():
    base = dict(source="trace", tiny_kernel_pct=62.0, gpu_idle_pct=39.0)
    assert "launch_bound" in ids(Evidence.flat(**base))
    # the idle time is the input pipeline's
    # (ResNet-50, num_workers=0: 40 % of each step in DataLoader.__next__)
    assert "launch_bound" not in ids(Evidence.flat(**base, input_wait_pct=39.6))
    # 1,462 launches cannot fill a 175 ms step at ~10 µs each
    assert "launch_bound" not in ids(Evidence.flat(**base, kernels_per_step=1462, step_time_s=0.175))
    # ... but 1,000 launches can fill a 30 ms step
    assert "launch_bound" in ids(Evidence.flat(**base, kernels_per_step=1000, step_time_s=0.030))
    limit = 100 * 1000 * T.LAUNCH_HOST_US_PER_KERNEL / 0.030e6
    assert limit >= T.LAUNCH_STEP_SHARE_PCT


def test_documents_without_evidence_objects_are_one_clear_error(tmp_path):
    path = tmp_path / "run.json"
    for body in (
        '{"kind": "profile", "evidence": null}',
        '{"kind": "trace", "evidence": []}',
        '{"evidence": [1, 2]}',
    ):
        path.write_text(body)
        with pytest.raises(GpuwiseError, match="evidence' is empty or not an object"):
            load_evidence(path)


def test_input_bound_names_the_loader_settings_it_suggests():
    ev = Evidence.flat(
        source="profile", step_time_s=0.1, phase_s={"data_wait": 0.05}, loader_num_workers=0, cpu_count=4
    )
    found = {f.id: f for f in diagnose(ev)}
    assert found["input_bound"].metrics["suggested_num_workers"] == 3
    assert found["input_bound"].metrics["suggested_prefetch_factor"] == 4
    saturated = Evidence.flat(
        source="profile", input_wait_pct=40, loader_num_workers=2, cpu_count=2, cpu_util_pct=97
    )
    assert {f.id: f for f in diagnose(saturated)}["input_bound"].metrics["suggested_num_workers"] is None


def test_back_to_back_slow_steps_have_no_period():
    times = [0.1 + 0.002 * (i % 5) for i in range(30)]
    for i in (10, 11, 12, 13):
        times[i] = 1.0
    finding = {f.id: f for f in diagnose(Evidence.flat(source="profile", step_times_s=times))}[
        "step_outliers"
    ]
    assert finding.metrics["period_steps"] is None and "recur" not in finding.summary


def test_rules_and_planner_compare_against_named_thresholds_only():
    """ARCHITECTURE.md: every threshold lives in diagnose/thresholds.py. An ordering comparison with a
    number other than 0, 1 or 2 in diagnose/ or plan/ is a threshold hiding in a module."""
    src = Path(__file__).resolve().parents[2] / "src" / "gpuwise"
    found = []
    for path in sorted([*src.glob("diagnose/**/*.py"), *src.glob("plan/*.py")]):
        if path.name == "thresholds.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Compare):
                continue
            if not any(isinstance(op, (ast.Lt, ast.LtE, ast.Gt, ast.GtE)) for op in node.ops):
                continue
            for side in (node.left, *node.comparators):
                value = side.operand if isinstance(side, ast.UnaryOp) else side
                literal = isinstance(value, ast.Constant) and type(value.value) in (int, float)
                if literal and value.value not in (0, 1, 2):
                    found.append(f"{path.name}:{node.lineno} {value.value}")
    assert not found


def test_every_rule_has_its_finding_id_and_no_id_lacks_a_rule():
    """FindingId lists each rule by name, so the planner's maps from findings to techniques and tools
    are checked by mypy against ids that exist."""
    assert sorted(spec.id for spec in RULES) == sorted(FINDING_IDS)
