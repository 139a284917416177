"""`gpuwise trace` on Nsight Systems SQLite exports: a real one (pipit's test data) and look-alikes written
to the documented schema (tests/nsys_lookalike.py) for what the real one lacks: pinned copies, NVTX steps,
gpuwise's own marks, two devices, two processes, NCCL kernels, newer releases' ENUM tables."""

from __future__ import annotations

import os
import sqlite3
import stat
from pathlib import Path

import pytest

from gpuwise.trace.analyze import build_report
from gpuwise.trace.formats import sniff
from gpuwise.trace.rank import analyze_file
from nsys_lookalike import NsysExport

REAL = "nsys/saxpy-mpi-cuda_nsys_perlmutter0.sqlite"


def _report(path: Path):
    analysis = analyze_file(path)
    return analysis, build_report([analysis])


def test_real_export_reads_kernels_copies_calls_and_rank(trace_dir):
    path = trace_dir / REAL
    assert sniff(path) == "nsys-sqlite"
    r, report = _report(path)
    # Checked against direct SQL on the file: 5 saxpy kernels, 10 HtoD + 5 DtoH copies of 262,144,000 B,
    # all from/to pageable memory (srcKind/dstKind 0), device span 1,097.33 ms, kernels 8.07 % of it.
    assert r.kernels.count == 5
    htod, dtoh = r.copies.directions["HtoD"], r.copies.directions["DtoH"]
    assert (htod["count"], htod["bytes"], htod["pageable_count"]) == (10, 10 * 262_144_000, 10)
    assert (dtoh["count"], dtoh["pageable_count"]) == (5, 5)
    assert r.copies.pageable_copy_pct == 100.0
    assert r.temporal is not None
    assert r.temporal.span_us == pytest.approx(1_097_327.843)
    assert r.temporal.compute_pct == pytest.approx(8.0717, abs=1e-3)
    assert r.temporal.idle_pct == pytest.approx(65.9834, abs=1e-3)
    # cudaMemcpy is synchronizing: 15 calls (the 2022 export lists each twice, as cudaMemcpy and _v3020)
    assert r.sync.by_name == {"cudaMemcpy": 15}
    assert r.launches.launches == 5
    assert (r.rank.rank, r.rank.world_size) == (0, 2)  # PMI_RANK / PMI_SIZE recorded by Nsight
    assert r.device.name == "NVIDIA A100-SXM4-40GB" and r.device.kind == "cuda"
    assert any("Nsight Systems 2022.2.1.31" in w for w in r.warnings)
    ids = {f.id for f in report.findings}
    assert {"pageable_copies", "low_utilization"} <= ids


def test_real_export_through_the_cli(cli, trace_dir):
    res = cli("trace", str(trace_dir / REAL), "--json")
    assert res.exit_code == 0, res.stderr
    rank = res.json()["ranks"][0]
    assert rank["kernels"]["count"] == 5
    assert rank["memcpy"]["pageable_copy_pct"] == 100.0


def _training_export(**kw) -> NsysExport:
    """3 steps of one process: H2D copy, GEMM, NCCL all-reduce, memset, a sync; 1 ms per step."""
    e = NsysExport(**kw)
    e.gpu(0, "NVIDIA H100 80GB HBM3", 85_520_809_984, 9, 0)
    corr = 1
    for step in range(3):
        t = 1_000_000 + step * 1_000_000  # ns
        e.range(t, 1_000_000, f"ProfilerStep#{step}")
        e.call(t + 10_000, 5_000, "cudaMemcpyAsync_v3020", corr)
        pinned = step > 0  # step 0 copies from pageable memory, the others from pinned
        e.memcpy(t + 20_000, 100_000, 1, 1 if pinned else 0, 2, 4_000_000, corr)
        e.call(t + 130_000, 5_000, "cudaLaunchKernel_v7000", corr + 1)
        e.kernel(
            t + 140_000, 400_000, "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64", corr + 1
        )
        e.call(t + 150_000, 5_000, "cudaLaunchKernel_v7000", corr + 2)
        e.kernel(
            t + 560_000,
            200_000,
            "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
            corr + 2,
            stream=9,
        )
        e.call(t + 160_000, 3_000, "cudaMemsetAsync_v3020", corr + 3)
        e.memset(t + 800_000, 10_000, 1_000_000, corr + 3)
        e.call(t + 900_000, 50_000, "cudaStreamSynchronize_v3020", corr + 4)
        corr += 5
    return e


def test_lookalike_steps_pinned_and_pageable_copies_nccl(tmp_path):
    path = _training_export().write(tmp_path / "run.sqlite")
    r, report = _report(path)
    # HTA's window drops the last of the 3 ProfilerStep ranges, as on a Kineto trace
    assert r.steps.count == 3 and r.steps.mean_ms == pytest.approx(1.0)
    assert r.dropped_last_step and r.steps_in_window == 2
    htod = r.copies.directions["HtoD"]
    assert (htod["count"], htod["pageable_count"]) == (2, 1)  # in the window: step 0 pageable, step 1 pinned
    assert r.copies.pageable_copy_pct == pytest.approx(50.0)
    assert r.kernels.categories["gemm"]["count"] == 2
    assert r.kernels.categories["communication"]["count"] == 2
    assert r.kernels.precision_us == {"bf16": pytest.approx(800.0)}
    assert r.comm.kernels == 2
    assert r.sync.by_name == {"cudaStreamSynchronize": 3}  # every step's, host side
    assert r.launches.launches == 4
    assert r.device.catalog_id == "h100-sxm"
    assert any("2024.5.1.113" in w for w in r.warnings)
    assert report.findings is not None


def test_documented_enums_are_used_without_the_enum_tables(tmp_path):
    """Older releases (no ENUM_* tables, EXPORT_META_DATA) give the same copies as newer ones."""
    new = analyze_file(_training_export().write(tmp_path / "new.sqlite"))
    old = analyze_file(
        _training_export(with_enums=False, meta_table="EXPORT_META_DATA").write(tmp_path / "old.sqlite")
    )
    assert old.copies.to_dict() == new.copies.to_dict()
    assert old.kernels.to_dict() == new.kernels.to_dict()


def test_gpuwise_marks_and_data_wait_ranges_give_steps_and_input_wait(tmp_path):
    e = NsysExport()
    e.gpu(0, "NVIDIA A100-SXM4-80GB", 85_899_345_920, 8, 0)
    for n in range(5):  # `gpuwise profile` marks step n as it closes; data_wait opens each step
        t = n * 2_000_000
        e.range(t, 500_000, "gpuwise.data_wait")
        e.range(t + 500_000, 1_000_000, "gpuwise.forward")
        e.call(t + 600_000, 5_000, "cudaLaunchKernel", n + 1)
        e.kernel(t + 610_000, 1_200_000, "ampere_sgemm_128x64_tn", n + 1)
        e.range(t + 2_000_000, None, f"gpuwise.step {n}")
    r = analyze_file(e.write(tmp_path / "ours.sqlite"))
    assert r.steps.count == 4 and r.steps.mean_ms == pytest.approx(2.0)  # marks 0..4: steps 1..4
    assert r.steps.input_wait_pct == pytest.approx(25.0)  # 0.5 ms of each 2 ms step in data_wait
    assert any("gpuwise's NVTX marks" in w for w in r.warnings)


def test_user_step_ranges(tmp_path):
    e = NsysExport()
    for n in range(4):
        e.range(n * 1_000_000, 900_000, f"train_step {n}")
        e.call(n * 1_000_000 + 1000, 2000, "cudaLaunchKernel", n + 1)
        e.kernel(n * 1_000_000 + 5000, 800_000, "vectorized_elementwise_kernel", n + 1)
    r = analyze_file(e.write(tmp_path / "user.sqlite"))
    assert r.steps.count == 4 and r.steps.mean_ms == pytest.approx(0.9)
    assert any("train_step 0" in w for w in r.warnings)


def test_two_devices_and_two_processes(tmp_path):
    e = NsysExport()
    e.gpu(0, "NVIDIA A100-SXM4-80GB", 85_899_345_920, 8, 0)
    e.gpu(1, "NVIDIA A100-SXM4-80GB", 85_899_345_920, 8, 0)
    for pid, device in ((100, 0), (200, 1)):  # one rank per process; correlation ids repeat across processes
        e.call(1000, 1000, "cudaLaunchKernel", 1, pid=pid, tid=pid)
        e.kernel(
            5000 + device * 100,
            10_000,
            "ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_tn",
            1,
            device=device,
            pid=pid,
        )
    r = analyze_file(e.write(tmp_path / "two.sqlite"))
    assert r.kernels.count == 2
    assert r.launches.launches == 2  # each kernel linked to its own process's launch
    assert sorted(s.stream for s in r.idle_by_stream) == [7, 1_000_007]
    assert any("2 processes" in w for w in r.warnings)
    assert any("2 devices" in w for w in r.warnings)


def test_sqlite_without_nsight_tables_is_named(cli, tmp_path):
    path = tmp_path / "other.sqlite"
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE users (id INT)")
    db.commit()
    db.close()
    res = cli("trace", str(path))
    assert res.exit_code == 2
    assert "a SQLite file without Nsight Systems tables" in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1


def test_nsys_rep_without_nsys_says_how_to_export(cli, tmp_path):
    rep = tmp_path / "report.nsys-rep"
    rep.write_bytes(b"\x00NSYS-REP look-alike bytes")
    res = cli("trace", str(rep), env={**os.environ, "PATH": str(tmp_path / "empty")})
    assert res.exit_code == 2
    assert "nsys export --type sqlite" in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1


def test_nsys_rep_is_exported_with_the_nsys_on_path(cli, tmp_path):
    """A stand-in `nsys` (copies a prepared export to --output) checks the call gpuwise makes."""
    prepared = _training_export().write(tmp_path / "prepared.sqlite")
    bindir = tmp_path / "bin"
    bindir.mkdir()
    fake = bindir / "nsys"
    fake.write_text(
        "#!/bin/sh\n"
        '[ "$1" = export ] || exit 9\n'
        'while [ $# -gt 1 ]; do [ "$1" = --output ] && out="$2"; shift; done\n'
        f'cp "{prepared}" "$out"\n'
    )
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    rep = tmp_path / "run.nsys-rep"
    rep.write_bytes(b"\x00look-alike report")
    res = cli("trace", str(rep), "--json", env={**os.environ, "PATH": f"{bindir}:{os.environ['PATH']}"})
    assert res.exit_code == 0, res.stderr
    rank = res.json()["ranks"][0]
    assert rank["file"] == str(rep)
    assert rank["kernels"]["count"] == 4


def test_damaged_export_gets_one_line(cli, tmp_path):
    path = _training_export().write(tmp_path / "cut.sqlite")
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    res = cli("trace", str(path))
    assert res.exit_code == 2
    assert len(res.stderr.strip().splitlines()) == 1 and "cut.sqlite" in res.stderr
