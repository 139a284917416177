"""gpuwise bench: real CPU runs on tiny shapes, the byte counts of STREAM and nccl-tests, storage on a
tmp file, and the CUDA-only timing through faked events (no CPU path exists for CUDA events)."""

from __future__ import annotations

import itertools
import os

import pytest
import torch

from gpuwise.bench import matmul, memory, storage, transfers
from gpuwise.bench.cpu_info import parse_cpuinfo, this_cpu
from gpuwise.bench.runner import cpu_matmul
from gpuwise.bench.timing import Samples, event_samples, wall_clock_samples
from gpuwise.report.bench_view import bench_document
from gpuwise.report.markdown import render

TINY = [(32, 64, 64), (64, 64, 64)]


def _cpu_timer(dtype):
    def time_shape(shape):
        m, n, k = shape
        kind = matmul.torch_dtype(torch, dtype)
        a, b = torch.randn(m, k).to(kind), torch.randn(k, n).to(kind)
        return wall_clock_samples(lambda: a @ b, 1, 3, 0.05)

    return time_shape


@pytest.mark.parametrize("dtype", ["fp32", "bf16", "fp16"])
def test_quick_matmul_on_tiny_shapes_gives_positive_gflops(dtype):
    if not matmul.supported(torch, dtype, "cpu"):
        pytest.skip(f"needs hardware: {dtype} matmul on this CPU")
    figure = matmul.best_of_sweep(dtype, TINY, _cpu_timer(dtype), None, "none")
    assert figure.best_tflops > 0 and figure.best_shape_mnk in TINY and figure.shapes_tried == 2
    fields = figure.to_dict()
    assert fields["best_tflops"] == figure.best_tflops and fields["of_peak_pct"] is None
    assert {"best_tflops", "median_tflops_at_best_shape", "peak_tflops", "best_shape_mnk"} <= fields.keys()


def test_best_of_sweep_keeps_the_fastest_shape_and_counts_2mnk():
    times = {(10, 10, 10): 1e-6, (20, 10, 10): 1e-6}  # the larger shape does 2x the work in the same time
    figure = matmul.best_of_sweep("fp32", list(times), lambda s: Samples([times[s], 2 * times[s]]), 0.01, "x")
    assert figure.best_shape_mnk == (20, 10, 10)
    assert figure.best_tflops == pytest.approx(2 * 20 * 10 * 10 / 1e-6 / 1e12)
    assert figure.median_tflops_at_best_shape == pytest.approx(figure.best_tflops / 1.5)
    assert figure.to_dict()["of_peak_pct"] == pytest.approx(100 * figure.best_tflops / 0.01)


def test_sweep_stops_at_its_budget_after_one_shape():
    clock = itertools.count(0.0, 10.0).__next__  # every reading 10 s later
    figure = matmul.best_of_sweep("bf16", TINY, lambda s: Samples([1.0]), None, "", budget_s=5, clock=clock)
    assert figure.shapes_tried == 1


def test_stream_byte_counts_on_a_known_size_run():
    elements = 1_000_000
    assert memory.stream_bytes("copy", elements, 4) == 8_000_000  # read b, write a
    assert memory.stream_bytes("triad", elements, 4) == 12_000_000  # read b and c, write a
    copy = memory.stream_figure("copy", elements, 4, Samples([0.004, 0.002]), 20.0)
    assert copy.best_gb_per_s == pytest.approx(8_000_000 / 0.002 / 1e9)  # 4 GB/s, from the best call
    assert copy.to_dict()["of_peak_pct"] == pytest.approx(20.0)
    assert memory.stream_elements(16 << 20, 4, 1 << 20, 1 << 30) == (64 << 20) // 4  # 4x the cache


def test_stream_kernels_compute_what_stream_defines():
    kernels = memory.stream_kernels(torch, 1000, "cpu")
    out = kernels["triad"]()
    assert torch.all(out == 1.0 + 3.0 * 2.0)  # a = b + s*c with b=1, c=2, s=3
    assert torch.all(kernels["copy"]() == 1.0)


def test_all_reduce_bus_bandwidth_is_nccl_tests_definition():
    # 8 GB in 1 s on 8 ranks: algbw 8 GB/s, busbw 8 x 2 x 7/8 = 14 GB/s
    assert transfers.algorithm_bandwidth_gb_per_s(8_000_000_000, 1.0) == pytest.approx(8.0)
    assert transfers.all_reduce_bus_bandwidth_gb_per_s(8_000_000_000, 1.0, 8) == pytest.approx(14.0)
    assert transfers.all_reduce_bus_bandwidth_gb_per_s(1_000, 1.0, 1) == 0.0
    with pytest.raises(ValueError):
        transfers.all_reduce_bus_bandwidth_gb_per_s(1, 1.0, 0)


class FakeEvent:
    """torch.cuda.Event stand-in: each record reads a fake device clock in ms (CUDA only, faked)."""

    clock_ms = itertools.count(0.0, 2.5)

    def __init__(self, enable_timing=True):
        self.at = 0.0

    def record(self):
        self.at = next(FakeEvent.clock_ms)

    def elapsed_time(self, end):
        return end.at - self.at


def test_event_timing_converts_milliseconds_and_syncs_once():
    syncs = []
    samples = event_samples(lambda: None, 1, 3, FakeEvent, lambda: syncs.append(1))
    assert samples.times_s == [0.0025] * 3 and syncs == [1]


def test_copy_path_on_real_cpu_tensors():
    """The copy code CUDA uses, on CPU tensors (the API is shared); events faked."""
    src, dst = torch.ones(1 << 20, dtype=torch.uint8), torch.zeros(1 << 20, dtype=torch.uint8)
    samples = transfers.timed_copy(dst, src, 2, FakeEvent, lambda: None)
    figure = transfers.copy_figure("host->device pageable", 1 << 20, samples, 32.0)
    assert torch.all(dst == 1) and figure.best_gb_per_s == pytest.approx((1 << 20) / 0.0025 / 1e9)


def test_storage_reads_a_tmp_file_and_reports_the_page_cache(tmp_path):
    path = storage.scratch_file(tmp_path, 4 << 20)
    figures = storage.storage_figures(tmp_path, 8 << 20)
    assert [f.pattern for f in figures] == ["sequential", "random"]
    for figure in figures:
        assert figure.bytes_read == os.path.getsize(path) == 4 << 20 and figure.mb_per_s > 0
        assert figure.page_cache_fraction is None or 0.0 <= figure.page_cache_fraction <= 1.0
        assert figure.note and "throughput_gb_per_s" in figure.to_dict()


def test_cpu_peak_from_cpuinfo_flags():
    text = (
        "model name\t: Test CPU\nflags\t\t: fpu avx avx2 fma\ncpu MHz\t\t: 2000.0\n"
        "siblings\t: 8\ncpu cores\t: 4\n"
    )
    cpu = parse_cpuinfo(text, usable_cpus=8, llc_size="32768K")
    assert cpu.cores == 4 and cpu.last_level_cache_bytes == 32 << 20  # SMT siblings share the FMA pipes
    peak, how = cpu.peak_tflops("fp32")
    assert peak == pytest.approx(4 * 2.0e9 * 32 / 1e12) and "32 fp32 FLOP/cycle" in how
    assert cpu.peak_tflops("bf16")[0] is None  # no avx512_bf16/amx: emulated, no peak claimed
    avx512 = parse_cpuinfo(text.replace("fma", "fma avx512f avx512_bf16"), 8, max_khz=3_000_000)
    assert avx512.peak_tflops("bf16")[0] == pytest.approx(4 * 3.0e9 * 64 * 2 / 1e12)


def test_cpu_matmul_and_view_on_this_machine():
    figures, _notes = cpu_matmul(torch, this_cpu(), "quick", ("fp32",), lambda label, total: lambda: None)
    assert figures[0].best_tflops > 0
    from gpuwise.bench.types import BenchResult

    result = BenchResult({"kind": "cpu", "name": "cpu", "cpu": {"logical_cpus": 2}}, "quick", matmul=figures)
    text = render(bench_document(result))
    assert "fp32" in text and "GFLOPS" in text


def test_bad_input_is_one_line_and_exit_2(cli, tmp_path):
    for args in (["--dtype", "fp64"], ["--data", str(tmp_path / "missing")]):
        result = cli("bench", "--quick", *args)
        assert result.exit_code == 2, result.stderr
        assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.stderr


@pytest.mark.slow
def test_cli_json_has_units_and_is_stored(cli, tmp_path):
    store = tmp_path / "runs.sqlite"
    data = tmp_path / "data"
    data.mkdir()
    (data / "shard.bin").write_bytes(os.urandom(1 << 20))
    args = ["bench", "--quick", "--dtype", "fp32", "--data", str(data), "--store", str(store), "--json"]
    doc = cli(*args).json()
    assert doc["kind"] == "bench" and doc["device"]["kind"] in ("cpu", "cuda")
    assert doc["matmul"][0]["best_tflops"] > 0 and doc["memory_bandwidth"][0]["best_gb_per_s"] > 0
    assert doc["storage"][0]["bytes_read_bytes"] == 1 << 20
    from gpuwise.store.runs import RunStore

    with RunStore.open(store) as runs:
        row = runs.list()[0]
    assert row.id == doc["run_id"] and row.kind == "bench"
    shown = cli("runs", "show", "last", "--store", str(store), "--json")  # issue #25: every kind shows
    assert shown.exit_code == 0 and shown.json()["kind"] == "bench" and shown.json()["run_id"] == row.id


@pytest.mark.slow
def test_all_reduce_runs_for_real_on_two_cpu_ranks_with_gloo():
    from gpuwise.bench.allreduce import all_reduce_figure

    figure = all_reduce_figure(2, 1 << 20, 3, "gloo", None, timeout_s=60)
    assert figure.best_gb_per_s > 0 and "2 ranks" in figure.name
    expected = transfers.all_reduce_bus_bandwidth_gb_per_s(1 << 20, figure.best_time_s, 2)
    assert figure.best_gb_per_s == pytest.approx(expected)


def _bench_row(store, kind: str, of_peak_pct: float) -> None:
    from gpuwise.store.runs import RunStore

    device = {"kind": kind, "name": "NVIDIA A100-SXM4-80GB", "catalog_id": "a100-80gb-sxm" if kind else None}
    matmul_row = {"dtype": "bf16", "best_tflops": 3.12 * of_peak_pct, "of_peak_pct": of_peak_pct}
    with RunStore.open(store) as runs:
        runs.save_document(
            "bench",
            "bench full",
            {"device": device, "matmul": [matmul_row]},
            device=kind,
            gpu="a100-80gb-sxm",
        )


def test_calibrate_replaces_the_table_mamf_and_says_so(cli, tmp_path):
    store = tmp_path / "runs.sqlite"
    env = {**os.environ, "GPUWISE_STORE": str(store)}
    args = ["cost", "examples/llama-3-8b-lora.yaml", "--gpu", "a100-80gb-sxm", "--json"]
    base = cli(*args, env=env).json()["cost"]["perf"]["tokens_per_s"]
    _bench_row(store, "cuda", 40.0)  # a slower A100 than the table's
    calibrated = cli(*args, "--calibrate", "last", env=env)
    assert calibrated.exit_code == 0, calibrated.stderr
    assert (
        "calibrated: a100-80gb-sxm matmul efficiency 40% of peak measured in bench run 1" in calibrated.stderr
    )
    assert calibrated.json()["cost"]["perf"]["tokens_per_s"] < base
    _bench_row(store, "cpu", 30.0)
    refused = cli(*args, "--calibrate", "2", env=env)
    assert refused.exit_code == 2 and "needs a GPU bench run" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1


class _FakeCuda:
    """torch.cuda for a pretend 2-GPU A100 box; tensors stay on the CPU (faked CUDA, function level)."""

    Event = FakeEvent

    def __init__(self):
        self.syncs = 0

    def is_available(self):
        return True

    def device_count(self):
        return 2

    def get_device_name(self, index=0):
        return "NVIDIA A100-SXM4-80GB"

    def get_device_properties(self, index=0):
        from types import SimpleNamespace

        return SimpleNamespace(total_memory=80 * 10**9, L2_cache_size=40 << 20)

    def synchronize(self):
        self.syncs += 1

    def device(self, index):
        import contextlib

        return contextlib.nullcontext()

    def can_device_access_peer(self, a, b):
        return True


class _FakeTorch:
    """The real torch, with `cuda` faked and device/pin_memory placement dropped."""

    def __init__(self):
        self.cuda = _FakeCuda()

    def __getattr__(self, name):
        real = getattr(torch, name)
        if name in {"randn", "empty", "zeros", "ones", "full"}:
            return lambda *a, device=None, pin_memory=False, **kw: real(*a, **kw)
        return real


def test_gpu_wiring_with_faked_cuda(monkeypatch):
    """The GPU sequence end to end (catalog match, % of datasheet, copies, device-to-device, CPU
    comparison) with faked CUDA; the kernels are real CPU ones on tiny sizes, all-reduce replaced."""
    from gpuwise.bench import runner
    from gpuwise.bench.types import BandwidthFigure

    monkeypatch.setitem(runner.matmul.GPU_SHAPES, "quick", TINY)
    monkeypatch.setitem(runner.matmul.CPU_SHAPES, "quick", TINY)
    quick = {**runner.BUDGETS["quick"], "gpu_stream_floor_bytes": 1 << 20, "stream_cap_bytes": 1 << 18}
    monkeypatch.setitem(runner.BUDGETS, "quick", {**quick, "copy_bytes": 1 << 16})
    monkeypatch.setattr(runner, "require_torch", _FakeTorch)
    fake_all_reduce = BandwidthFigure("all-reduce busbw (2 ranks, nccl)", 1.0, 1, 1.0, None, "busbw")
    monkeypatch.setattr(runner.allreduce, "all_reduce_figure", lambda *a, **k: fake_all_reduce)
    result = runner.run_bench(runner.BenchOptions(dtypes=("fp32", "bf16"), storage=False))
    assert result.device["catalog_id"] == "a100-80gb-sxm" and result.device["count"] == 2
    assert [f.peak_tflops for f in result.matmul] == [19.5, 312.0]  # the catalog's dense datasheet peaks
    assert [m.name for m in result.memory] == ["copy", "triad"] and result.memory[0].peak_gb_per_s > 1000
    names = [t.name for t in result.transfers]
    assert names[:4] == [
        "host->device pinned",
        "device->host pinned",
        "host->device pageable",
        "device->host pageable",
    ]
    assert names[4] == "device->device peer-to-peer" and names[5].startswith("all-reduce")
    assert result.cpu_matmul and any("this CPU's fp32" in note for note in result.notes)
    assert "% of peak" in render(bench_document(result))


def test_dataloader_samples_per_s_of_a_users_dataset(tmp_path):
    from gpuwise.bench.dataloader import load_dataset, loader_samples_per_s

    (tmp_path / "data.py").write_text(
        "import torch\n"
        "class Squares(torch.utils.data.Dataset):\n"
        "    def __len__(self):\n        return 256\n"
        "    def __getitem__(self, i):\n        return torch.tensor([float(i * i)])\n"
        "def make():\n    return Squares()\n"
    )
    dataset = load_dataset(f"{tmp_path / 'data.py'}:make")
    figure = loader_samples_per_s(torch, dataset, 16, 0, 5.0)
    assert figure["batches_timed"] == 15 and figure["samples_per_s"] > 0  # 256 / 16 batches, first untimed
    from gpuwise.errors import GpuwiseError

    with pytest.raises(GpuwiseError, match="defines no 'missing'"):
        load_dataset(f"{tmp_path / 'data.py'}:missing")
    with pytest.raises(GpuwiseError, match=r"FILE\.py:NAME"):
        load_dataset("data.py")
