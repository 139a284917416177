"""Damaged copies of real traces (a header field edited, a file cut, values out of range): the analysis
keeps what it can, says what it dropped in one line, and never lets one bad value cost memory or a verdict.

Source: PARAM's 8-rank DLRM step (param/dlrm_kineto of the third-party data, V100s, NCCL send/recv).
"""

from __future__ import annotations

import gzip
import json
import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO
from gpuwise.diagnose import thresholds as T
from gpuwise.trace.analyze import analyze_traces, expand_paths
from gpuwise.trace.compare import compare_reports
from gpuwise.trace.device import MAX_WORLD_SIZE
from gpuwise.trace.kernel_names import distinct_short_names
from gpuwise.trace.kernels import NAME_READ_CHARS
from gpuwise.trace.rank import analyze_file
from third_party import json_bytes

DLRM = "param/dlrm_kineto"


def dlrm_rank(trace_dir: Path, rank: int) -> Path:
    return next((trace_dir / DLRM).glob(f"worker{rank}_*.json"))


def edited_copy(source: Path, target: Path, **header) -> Path:
    """The trace with top-level fields replaced (``distributedInfo={...}``), as plain JSON."""
    document = json.loads(json_bytes(source))
    document.update(header)
    target.write_text(json.dumps(document))
    return target


def _cap_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))


def run_capped(*args: str) -> subprocess.CompletedProcess:
    """`gpuwise ARGS` with its address space capped at 3 GiB: a runaway allocation fails, not the machine."""
    return subprocess.run(
        [sys.executable, "-m", "gpuwise", *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
        preexec_fn=_cap_memory,
    )


def test_a_huge_world_size_is_ignored_with_one_line_and_bounded_memory(trace_dir, tmp_path):
    edited_copy(
        dlrm_rank(trace_dir, 0),
        tmp_path / "rank0.json",
        distributedInfo={"backend": "nccl", "rank": 0, "world_size": 2**62},
    )
    good = tmp_path / "rank1.json"
    good.write_bytes(dlrm_rank(trace_dir, 1).read_bytes())
    out = run_capped("trace", str(tmp_path), "--json")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    rank0 = next(r for r in doc["ranks"] if r["rank"] == 0)
    assert rank0["rank_info"]["world_size"] is None
    assert [w for w in rank0["warnings"] if "world_size" in w] == [
        f"distributedInfo.world_size {2**62} is outside 1..{MAX_WORLD_SIZE:,}: ignored"
    ]
    # the good rank's header still tells the cross-rank view how many ranks the job had
    assert doc["cross_rank"]["world_size"] == 8 and doc["cross_rank"]["missing_ranks"] == [2, 3, 4, 5, 6, 7]


@pytest.mark.parametrize(
    "info, rank, world, warning",
    [
        ({"rank": 9, "world_size": 8}, 9, None, "rank 9 is not below distributedInfo.world_size 8"),
        ({"rank": -1, "world_size": 8}, None, 8, "distributedInfo.rank -1 is outside 0..1,048,575"),
        ({"rank": 3, "world_size": 0}, 3, None, "distributedInfo.world_size 0 is outside 1..1,048,576"),
        ({"rank": 3, "world_size": True}, 3, None, "distributedInfo.world_size True is not an integer"),
        ({"rank": "three", "world_size": 8}, None, 8, "distributedInfo.rank 'three' is not an integer"),
        ({"rank": 2.0, "world_size": "8"}, 2, 8, None),
    ],
)
def test_rank_and_world_size_are_validated(trace_dir, tmp_path, info, rank, world, warning):
    path = edited_copy(dlrm_rank(trace_dir, 2), tmp_path / "trace.json", distributedInfo=info)
    a = analyze_file(path)
    assert (a.rank.rank, a.rank.world_size) == (rank, world)
    found = [w for w in a.warnings if "rank" in w or "world_size" in w]
    if warning is None:
        assert found == []
    else:
        assert len(found) == 1 and found[0].startswith(warning) and "\n" not in found[0]


def test_the_real_dlrm_ranks_pass_validation(trace_dir):
    report = analyze_traces([trace_dir / DLRM])
    assert [r.rank.rank for r in report.ranks] == list(range(8))
    assert all(r.rank.world_size == 8 for r in report.ranks)
    assert report.cross_rank.missing == []
    assert not any("world_size" in w for r in report.ranks for w in r.warnings)


def a_damaged_run(trace_dir: Path, root: Path) -> Path:
    """A killed 3-rank job as it lands on disk: per-worker folders, a rank cut mid-write, an empty file,
    a macOS ``._`` twin and a stray config beside the traces."""
    for rank in (0, 1):
        folder = root / f"worker{rank}"
        folder.mkdir(parents=True)
        (folder / dlrm_rank(trace_dir, rank).name).write_bytes(dlrm_rank(trace_dir, rank).read_bytes())
    (root / "worker0" / f"._{dlrm_rank(trace_dir, 0).name}").write_bytes(b"\x00\x05\x16\x07" + bytes(4000))
    whole = json_bytes(dlrm_rank(trace_dir, 2))
    (root / "worker2.json").write_bytes(whole[: len(whole) * 6 // 10])
    (root / "worker3.json").write_bytes(b"")
    (root / "config.json").write_text(json.dumps({"lr": 0.1, "batch_size": 64}))
    return root


def test_one_bad_file_does_not_abort_a_directory(trace_dir, tmp_path, cli):
    run = a_damaged_run(trace_dir, tmp_path / "run")
    out = cli("trace", str(run), "--json")
    assert out.exit_code == 0, out.stderr
    assert out.stderr.count("\n") == 1 and "skipped 4 of 6 files that are not readable traces" in out.stderr
    doc = out.json()
    assert [r["rank"] for r in doc["ranks"]] == [0, 1]
    reasons = {Path(s["file"]).name: s["reason"] for s in doc["skipped_files"]}
    assert set(reasons) == {
        f"._{dlrm_rank(trace_dir, 0).name}",
        "worker2.json",
        "worker3.json",
        "config.json",
    }
    assert "macOS metadata file" in reasons[f"._{dlrm_rank(trace_dir, 0).name}"]
    assert "truncated" in reasons["worker2.json"] and "empty" in reasons["worker3.json"]
    assert "not a PyTorch profiler trace" in reasons["config.json"]
    assert doc["cross_rank"]["missing_ranks"] == [2, 3, 4, 5, 6, 7]  # the cut rank is missing, not hidden
    text = cli("trace", str(run))
    assert text.exit_code == 0 and "Skipped 4 of 6 files" in text.stdout and "worker2.json" in text.stdout


def test_strict_fails_on_the_first_bad_file(trace_dir, tmp_path, cli):
    out = cli("trace", str(a_damaged_run(trace_dir, tmp_path / "run")), "--strict")
    assert out.exit_code == 2 and out.stdout == ""
    assert out.stderr.count("\n") == 1 and "Traceback" not in out.stderr


def test_a_directory_of_nothing_readable_is_still_an_error(tmp_path, cli):
    (tmp_path / "a.json").write_bytes(b"")
    (tmp_path / "b.json").write_text("{}")
    out = cli("trace", str(tmp_path))
    assert out.exit_code == 2 and "none of the 2 files is a readable trace" in out.stderr


def test_directories_are_searched_deep_and_ranks_sorted_as_numbers(tmp_path):
    for rel in ("w/rank10.json", "w/rank2.json.gz", "w/sub/rank1.json", "w/notes.txt", "x/rank0.json"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("{}")
    found = [p.relative_to(tmp_path).as_posix() for p in expand_paths([tmp_path])]
    assert found == ["w/rank2.json.gz", "w/rank10.json", "w/sub/rank1.json", "x/rank0.json"]


def test_top_kernels_that_share_a_short_name_are_told_apart(trace_dir, cli):
    # three CUTLASS GEMMs (one per tile shape) and NCCL among the top kernels of HTA's A100 sample
    trace = trace_dir / "hta/negative_queue_length_values_check/rank0.json.gz"
    out = cli("trace", str(trace), "--top", "10", env={**os.environ, "COLUMNS": "200"})
    assert out.exit_code == 0, out.stderr
    table = out.stdout.split("kernels by device time")[1].split("└")[0]
    rows = [line.split("│")[1].strip() for line in table.splitlines() if line.startswith("│")]
    assert len(rows) == 10 and len(set(rows)) == 10
    for tile in ("256x64_16x4_tn_align1", "256x128_32x3_nt_align1", "256x128_32x3_nn_align1"):
        assert f"Kernel<cutlass_80_tensorop_s1688gemm_{tile}>" in rows


@pytest.mark.parametrize(
    "rel, expected",
    [
        (
            "kineto/samples/resnet50_num_workers_0/worker0.1623143089861.pt.trace.json.gz",
            {"implicit_convolve_sgemm<1024>", "implicit_convolve_sgemm<128>"},
        ),
        (
            "param/dlrm_kineto/worker1_step_12.1694128201556.pt.trace.json",
            {
                "vectorized_elementwise_kernel<sqrt_kernel_cuda>",
                "unrolled_elementwise_kernel<addcmul_cuda_kernel>",
            },
        ),
        ("hta/trace_file_list/inference_rank_1.json.gz", {"at::native::elementwise_kernel #2"}),
    ],
)
def test_distinct_names_on_real_top_kernels(trace_dir, rel, expected):
    top = analyze_file(trace_dir / rel).kernels.top[:10]
    names = distinct_short_names([k.name for k in top], 60)
    assert len(set(names)) == len(names) and expected <= set(names)
    assert all(len(n) <= 60 for n in names)


def edited_events(source: Path, target: Path, edit) -> Path:
    """The trace with ``edit(events)`` applied to its traceEvents list (in place), as plain JSON."""
    document = json.loads(json_bytes(source))
    edit(document["traceEvents"])
    target.write_text(json.dumps(document))
    return target


def _kernels(events: list[dict]) -> list[dict]:
    return [e for e in events if e.get("cat") == "kernel"]


@pytest.mark.parametrize(
    "field, value, warning",
    [("ts", 1e308, "1 with a timestamp beyond 2^53 µs"), ("dur", 1e300, "1 lasting more than 24 h")],
)
def test_one_absurd_value_is_dropped_and_counted(trace_dir, tmp_path, field, value, warning):
    source = dlrm_rank(trace_dir, 3)
    before = analyze_file(source).temporal

    def spoil(events: list[dict]) -> None:
        _kernels(events)[5][field] = value

    after = analyze_file(edited_events(source, tmp_path / "t.json", spoil))
    assert any(warning in w for w in after.warnings)
    t = after.temporal
    assert t is not None and not t.degenerate
    assert t.span_us == pytest.approx(before.span_us, rel=0.01)  # one kernel fewer, not a 300-digit span
    assert abs(t.compute_pct - before.compute_pct) < 1 and t.idle_pct == pytest.approx(before.idle_pct, abs=1)


def test_kernels_with_a_non_numeric_stream_still_count(trace_dir, tmp_path):
    source = dlrm_rank(trace_dir, 4)
    before = analyze_file(source)

    def spoil(events: list[dict]) -> None:
        for e in _kernels(events):
            e["args"]["stream"] = "cuda:0"

    after = analyze_file(edited_events(source, tmp_path / "t.json", spoil))
    n = len(_kernels(json.loads(json_bytes(source))["traceEvents"]))
    assert any(
        w.startswith(f"{n:,} kernels/copies/memsets had no numeric args.stream") for w in after.warnings
    )
    # one stream instead of several: the union of device time, hence HTA's breakdown, is unchanged
    assert after.temporal.compute_pct == pytest.approx(before.temporal.compute_pct, abs=1e-9)
    assert after.temporal.idle_pct == pytest.approx(before.temporal.idle_pct, abs=1e-9)
    assert after.kernels.count == before.kernels.count


def test_a_sub_microsecond_trace_gives_no_idle_finding(trace_dir, tmp_path, cli):
    def cut_to_one_kernel(events: list[dict]) -> None:
        kernel = _kernels(events)[0]
        launch = next(
            e
            for e in events
            if e.get("cat") == "cuda_runtime"
            and e["args"].get("correlation") == kernel["args"]["correlation"]
        )
        kernel.update(ts=launch["ts"] + 5.3, dur=0.4)
        events[:] = [e for e in events if e.get("ph") == "M" or e is launch or e is kernel]

    path = edited_events(dlrm_rank(trace_dir, 5), tmp_path / "t.json", cut_to_one_kernel)
    a = analyze_file(path)
    assert a.temporal is not None and a.temporal.degenerate and a.temporal.span_us < 0
    assert any("too short for a breakdown" in w for w in a.warnings)
    out = cli("trace", str(path), "--json")
    assert out.exit_code == 0, out.stderr
    doc = out.json()
    assert doc["evidence"][0]["gpu_idle_pct"] is None and doc["evidence"][0]["gpu_util_pct"] is None
    assert doc["evidence"][0]["fp32_matmul_time_pct"] is None and doc["findings"] == []


def _amdahl(time_pct: float, speedup: float) -> float:
    return 1 / (1 - time_pct / 100 * (1 - 1 / speedup))


def test_mixed_precision_gain_is_bounded_by_the_measured_matmul_time(trace_dir):
    # DLRM on V100s: fp32 GEMMs hold ~2 % of the step, so even 16-bit matmuls at the 5.2x cap gain <1.05x
    report = analyze_traces([trace_dir / DLRM])
    shares = [e.precision.fp32_matmul_time_pct for e in report.evidence if e.label != "cross-rank"]
    assert len(shares) == 8 and all(0 < s < 3 for s in shares)
    assert all(_amdahl(s, T.AMP_SPEEDUP_CAP_X) < T.AMP_MIN_GAIN_X for s in shares)
    assert "no_mixed_precision" not in {f.id for f in report.findings}


def test_a_v100_without_device_properties_is_told_fp16_and_a_grad_scaler(trace_dir, tmp_path):
    source = trace_dir / "kineto/samples/resnet50_num_workers_0/worker0.1623143089861.pt.trace.json.gz"
    document = json.loads(gzip.decompress(source.read_bytes()))
    del document["deviceProperties"]
    path = tmp_path / "no_props.json"
    path.write_text(json.dumps(document))
    report = analyze_traces([path])
    rank = report.ranks[0]
    assert rank.device.name is None and rank.device.catalog_id == "v100-sxm2-32gb"
    assert "volta_* kernels are Volta's" in rank.device.catalog_note
    ev = report.evidence[0]
    assert ev.precision.tensor_core_dtype == "fp16" and ev.precision.fp32_matmul_time_pct == pytest.approx(
        39.5, abs=0.5
    )
    f = next(f for f in report.findings if f.id == "no_mixed_precision")
    assert "GradScaler" in f.fix and "float16" in f.fix_snippet and "bf16" not in f.summary
    assert "fp16 tensor cores" in f.summary
    # Amdahl on the measured share: 2x (memory-bound) to 5.2x (cap) faster matmuls, nothing more
    assert f.gain.low == pytest.approx(_amdahl(ev.precision.fp32_matmul_time_pct, T.AMP_MATMUL_SPEEDUP_LOW_X))
    assert f.gain.high == pytest.approx(_amdahl(ev.precision.fp32_matmul_time_pct, T.AMP_SPEEDUP_CAP_X))
    assert f.gain.high < 1 / (1 - ev.precision.fp32_matmul_time_pct / 100)


def test_fbgemm_embedding_kernels_are_not_gemms(trace_dir):
    top = analyze_file(trace_dir / "hta/trace_filter/sampled_rank-0.json.gz").kernels.top
    embedding = [k for k in top if "split_embedding" in k.name]
    assert len(embedding) >= 3 and all(k.category not in ("gemm", "convolution") for k in embedding)


def test_dlrm_straggler_is_the_rank_that_waits_least_not_the_longest_step(trace_dir):
    # PARAM DLRM, clocks aligned: every rank's NCCL kernels end together; rank 1's window starts first,
    # so its step looks longest (19.9 ms vs a 16.1 ms median) while it sits 11.3 ms in SendRecv waiting.
    # Rank 7 arrives last: 1.75 ms in collectives against a 6.25 ms median on the other seven ranks.
    report = analyze_traces([trace_dir / DLRM])
    c = report.cross_rank
    assert c.slowest_rank == 1 and c.least_comm_rank == 7
    assert c.comm_ms_per_step[7] == pytest.approx(1.746, abs=0.01) and c.comm_ms_per_step[1] > 11
    f = next(f for f in report.findings if f.id == "straggler")
    assert f.metrics["straggler_rank"] == 7 and f.title.startswith("Rank 7 ")
    assert f.metrics["comm_wait_gap_s"] == pytest.approx(0.0045, abs=0.0002)
    assert "Rank 1's step looks" in f.summary and "but that is waiting" in f.summary


def test_ranks_are_reported_in_rank_order_whatever_the_file_names(trace_dir, tmp_path):
    names = {10: "a.json", 2: "b.json", 0: "c.json"}
    for rank, name in names.items():
        edited_copy(
            dlrm_rank(trace_dir, rank % 8),
            tmp_path / name,
            distributedInfo={"backend": "nccl", "rank": rank, "world_size": 16},
        )
    report = analyze_traces([tmp_path])
    assert [r.rank.rank for r in report.ranks] == [0, 2, 10]
    assert report.cross_rank.ranks == [0, 2, 10]


def test_deeply_nested_json_is_bad_input_not_an_internal_error(trace_dir, tmp_path, cli):
    raw = gzip.decompress((trace_dir / "hta/trace_compare/base/base.json.gz").read_bytes()).decode()
    depth = 100_000
    nested = raw.replace('"args": {', '"deep": ' + "[" * depth + "]" * depth + ', "args": {', 1)
    assert nested != raw
    path = tmp_path / "nested.json"
    path.write_text(nested)
    out = cli("trace", str(path))
    assert out.exit_code == 2 and out.stderr.count("\n") == 1
    assert "JSON nested deeper than the parser follows" in out.stderr and "internal error" not in out.stderr


def test_fifos_and_devices_are_named_for_what_they_are(tmp_path, cli):
    fifo = tmp_path / "trace.json"
    os.mkfifo(fifo)
    out = cli("trace", str(fifo))
    assert out.exit_code == 2 and "a named pipe (FIFO), not a regular file" in out.stderr
    out = cli("trace", "/dev/null")
    assert out.exit_code == 2 and "/dev/null: a character device, not a regular file" in out.stderr


def test_nan_and_infinity_written_by_python_are_read_then_dropped(trace_dir, tmp_path):
    source = dlrm_rank(trace_dir, 6)
    before = analyze_file(source)
    document = json.loads(json_bytes(source))
    kernels = _kernels(document["traceEvents"])
    kernels[3]["dur"], kernels[4]["ts"] = float("inf"), float("nan")
    path = tmp_path / "python_dump.json"
    path.write_text(json.dumps(document))  # allow_nan=True: Infinity and NaN literals, not JSON
    assert "Infinity" in path.read_text()
    after = analyze_file(path)
    assert any(w.startswith("2 NaN/Infinity values") for w in after.warnings)
    assert any("1 complete (ph='X') events without a numeric ts or dur" in w for w in after.warnings)
    assert any("1 lasting more than 24 h" in w for w in after.warnings)
    assert after.kernels.count == before.kernels.count - 2
    assert after.temporal.span_us == pytest.approx(before.temporal.span_us, rel=0.01)


def test_a_megabyte_kernel_name_is_read_only_up_to_a_bound(trace_dir, tmp_path):
    source = dlrm_rank(trace_dir, 7)
    huge = "void " + "a" * (3 << 20) + "_sgemm_kernel<float>(float*)"  # the GEMM hint lies past the bound

    busiest = analyze_file(source).kernels.top[0].name

    def rename(events: list[dict]) -> None:
        for e in _kernels(events):
            if e["name"] == busiest:
                e["name"] = huge

    a = analyze_file(edited_events(source, tmp_path / "t.json", rename))
    top = a.kernels.top[0]
    assert top.name == huge and len(huge) > NAME_READ_CHARS and top.category == "other"
    assert len(top.to_dict()["short_name"]) <= 70
    assert distinct_short_names([huge, huge], 60)[0].endswith("#1")


NW0 = "kineto/samples/resnet50_num_workers_0/worker0.1623143089861.pt.trace.json.gz"
NW4 = "kineto/samples/resnet50_num_workers_4/worker0.1623212756351.pt.trace.json.gz"
NS_V100 = "hta/ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz"


def test_compare_matches_every_kernel_by_its_full_name(trace_dir):
    before, after = analyze_traces([trace_dir / NW0]), analyze_traces([trace_dir / NW4])
    cmp = compare_reports(before, after, "nw0", "nw4", top_n=40)
    all_a, all_b = before.ranks[0].kernels.by_name_us, after.ranks[0].kernels.by_name_us
    assert len(all_a) > 15  # more kernels than the top list holds
    for c in cmp.kernels:
        assert (c.a is None) == (c.name not in all_a) and (c.b is None) == (c.name not in all_b), c.name
    # the same job on the same V100: a finding that disappears is resolved
    assert "input_bound" in cmp.findings_removed and not any("not the same job" in n for n in cmp.notes)


def test_compare_refuses_resolved_verdicts_across_devices_and_rank_counts(trace_dir):
    dlrm = analyze_traces([trace_dir / DLRM])
    a100 = analyze_traces([trace_dir / "hta/negative_queue_length_values_check/rank0.json.gz"])
    cmp = compare_reports(dlrm, a100, "dlrm", "a100")
    note = next(n for n in cmp.notes if "not the same job" in n)
    assert "the devices differ (v100-sxm2-32gb vs a100-80gb-sxm)" in note
    assert "the rank counts differ (8 vs 1)" in note
    assert cmp.findings_removed == [] and "only in A: " in note


def test_compare_notices_a_different_workload_on_the_same_gpu(trace_dir):
    other = analyze_traces([trace_dir / NS_V100])  # a V100-SXM2-32GB, as the DLRM ranks
    dlrm0 = analyze_traces([dlrm_rank(trace_dir, 0)])
    cmp = compare_reports(other, dlrm0, "hta-ns", "dlrm")
    note = next(n for n in cmp.notes if "not the same job" in n)
    assert "devices differ" not in note and "rank counts" not in note
    assert "of the kernel time is in kernels both ran (different workloads?)" in note
    assert cmp.findings_removed == []


def test_expert_parallel_kernels_count_as_communication_beside_hta_columns(trace_dir, tmp_path):
    # DLRM's NCCL send/recv renamed as DeepEP's dispatch/combine (the kernels of deepseek-ai's EP traces)
    source = dlrm_rank(trace_dir, 0)
    before = analyze_file(source)

    def as_deep_ep(events: list[dict]) -> None:
        for i, e in enumerate(k for k in _kernels(events) if k["name"].startswith("ncclKernel_SendRecv")):
            stage = ("dispatch", "combine")[i % 2]
            e["name"] = (
                f"void deep_ep::internode::{stage}<false, 8, 3, 4, 24, 1024>(int4*, float*, int const*)"
            )

    after = analyze_file(edited_events(source, tmp_path / "ep.json", as_deep_ep))
    assert after.comm.ms_per_step == pytest.approx(before.comm.ms_per_step, rel=1e-6) and after.comm.kernels
    assert after.kernels.categories["communication"]["time_us"] == pytest.approx(
        before.kernels.categories["communication"]["time_us"]
    )
    # HTA's columns keep HTA's classes: `^nccl.*Kernel` is its only communication, DeepEP is compute there
    assert after.temporal.compute_pct > before.temporal.compute_pct + 10
    assert after.temporal.idle_pct == pytest.approx(before.temporal.idle_pct)
