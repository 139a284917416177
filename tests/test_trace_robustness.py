"""Damaged copies of real traces (a header field edited, a file cut, values out of range): the analysis
keeps what it can, says what it dropped in one line, and never lets one bad value cost memory or a verdict.

Source: PARAM's 8-rank DLRM step (tests/data/traces/param/dlrm_kineto, V100s, NCCL send/recv).
"""

from __future__ import annotations

import gzip
import json
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO
from gpuwise.trace.device import MAX_WORLD_SIZE
from gpuwise.trace.rank import analyze_file
from gpuwise.trace.report import analyze_traces

DLRM = "param/dlrm_kineto"


def dlrm_rank(trace_dir: Path, rank: int) -> Path:
    return next((trace_dir / DLRM).glob(f"worker{rank}_*.json.gz"))


def edited_copy(source: Path, target: Path, **header) -> Path:
    """The trace with top-level fields replaced (``distributedInfo={...}``), as plain JSON."""
    document = json.loads(gzip.decompress(source.read_bytes()))
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
    good = tmp_path / "rank1.json.gz"
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
