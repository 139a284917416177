"""`gpuwise trace DIR` collects every format it reads (issue 31, item 2 leftover): Kineto JSON, XPlane, XLA
JSON and Nsight SQLite side by side, one file per profiled run, one line per file it cannot read."""

from __future__ import annotations

import shutil
from pathlib import Path

from gpuwise.trace.analyze import analyze_traces, expand_paths
from gpuwise.trace.collect import one_file_per_run
from gpuwise.trace.xla_trace import load_profile_data
from nsys_lookalike import NsysExport
from xla_lookalike import gpu_profile

RANK0 = Path(__file__).resolve().parents[1] / "data" / "traces" / "hand_rank0.json"


def _nsys(path: Path) -> Path:
    e = NsysExport()
    e.gpu(0, "NVIDIA A100-SXM4-80GB", 85_899_345_920, 8, 0)
    for n in range(4):
        e.range(n * 1_000_000, 900_000, f"train_step {n}")
        e.call(n * 1_000_000 + 1000, 2000, "cudaLaunchKernel", n + 1)
        e.kernel(n * 1_000_000 + 5000, 800_000, "ampere_sgemm_128x64_tn", n + 1)
    return e.write(path)


def test_a_directory_yields_every_format_once_per_run(tmp_path):
    shutil.copy(RANK0, tmp_path / "rank0.json")
    run = tmp_path / "plugins" / "profile" / "2026_11_28"
    run.mkdir(parents=True)
    profile = gpu_profile()
    xplane = profile.write_xplane(run / "host.xplane.pb")
    twin = profile.write_json(run / "host.trace.json.gz")  # the same run, written twice by jax.profiler
    sqlite = _nsys(tmp_path / "report.sqlite")
    (tmp_path / "report.nsys-rep").write_bytes(b"not exported here")  # its .sqlite is beside it
    (tmp_path / "notes.txt").write_text("not a profile")
    (tmp_path / "other.sqlite").write_bytes(b"")  # unreadable: listed as skipped with one line
    files = expand_paths([tmp_path])
    kept = xplane if load_profile_data() is not None else twin
    assert set(files) == {tmp_path / "rank0.json", kept, sqlite, tmp_path / "other.sqlite"}
    report = analyze_traces([tmp_path])
    assert len(report.ranks) == 3
    assert {Path(r.file).name for r in report.ranks} == {"rank0.json", kept.name, "report.sqlite"}
    assert [s.file for s in report.skipped] == [str(tmp_path / "other.sqlite")]
    assert "\n" not in report.skipped[0].reason and report.skipped[0].reason


def test_twins_are_dropped_only_beside_their_run(tmp_path):
    a, b = tmp_path / "a.xplane.pb", tmp_path / "b.trace.json.gz"
    assert one_file_per_run([a, b]) == [a, b]  # different runs: both kept
    rep, sql = tmp_path / "r.nsys-rep", tmp_path / "r.sqlite"
    assert one_file_per_run([rep, sql]) == [sql]
    assert one_file_per_run([rep]) == [rep]  # alone, the report is read (exported through nsys)


def test_an_empty_directory_names_the_formats(cli, tmp_path):
    res = cli("trace", str(tmp_path))
    assert res.exit_code == 2
    assert (
        ".xplane.pb" in res.stderr and ".sqlite" in res.stderr and len(res.stderr.strip().splitlines()) == 1
    )
