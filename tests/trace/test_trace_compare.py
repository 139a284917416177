"""`gpuwise trace --compare` end to end on real traces: a real before/after (kineto's resnet50 with 0 and
4 data-loader workers, the same V100 job), and pairs that are not the same job (another GPU model, 8
ranks against 1, a CPU-only trace): those warn once on stderr and call nothing resolved.
"""

from __future__ import annotations

import json

import pytest

from gpuwise.trace.analyze import analyze_traces
from third_party import json_bytes

NW0 = "kineto/samples/resnet50_num_workers_0/worker0.1623143089861.pt.trace.json.gz"
NW4 = "kineto/samples/resnet50_num_workers_4/worker0.1623212756351.pt.trace.json.gz"
DLRM = "param/dlrm_kineto"
CPU_ONLY = "hta/cpu_only/rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz"


def test_a_real_before_after_matches_every_kernel_and_resolves_findings(trace_dir, cli):
    out = cli("trace", "--compare", str(trace_dir / NW0), str(trace_dir / NW4), "--json")
    assert out.exit_code == 0 and out.stderr == "", out.stderr
    doc = json.loads(out.stdout)
    assert doc["comparable"] and doc["mismatches"] == []
    ran = {
        side: analyze_traces([trace_dir / rel]).ranks[0].kernels.by_name_us
        for side, rel in (("a", NW0), ("b", NW4))
    }
    for row in doc["kernels"]:
        for side in ("a", "b"):  # a kernel that both ran is never shown as only in one
            assert (row[side] is None) == (row["name"] not in ran[side]), row["name"]
    assert "input_bound" in doc["findings_removed"]  # 4 workers feed the GPU: the same job, resolved


def test_kernels_that_share_a_short_name_are_told_apart_in_the_compare_table(trace_dir, cli):
    out = cli("trace", "--compare", str(trace_dir / NW0), str(trace_dir / NW4), "--top", "40")
    assert out.exit_code == 0, out.stderr
    table = out.stdout.split("Kernels that changed most")[1].split("resolved in B")[0]
    rows = [line.split("│")[1].strip() for line in table.splitlines() if line.count("│") >= 4]
    # two cudnn::cnn::wgrad_alg0_engine and three implicit_convolve_sgemm instances in the real traces
    assert "wgrad_alg0_engine<7>" in rows and "wgrad_alg0_engine<8>" in rows
    assert len([r for r in rows if r.startswith("implicit_convolve_sgemm<")]) == 3
    assert len(rows) == len(set(rows)) == 40
    assert "resolved in B: input_bound" in out.stdout


@pytest.mark.parametrize(
    ("a", "b", "reasons"),
    [
        # a V100 DGX Station resnet50 against PARAM's 8-rank V100-SXM2 DLRM: device, ranks and workload
        (
            NW0,
            DLRM,
            ("devices differ (v100-dgxs-32gb vs v100-sxm2-32gb)", "rank counts differ (1 vs 8)", "%"),
        ),
        # 8 GPU ranks against a CPU-only trace
        (DLRM, CPU_ONLY, ("devices differ (v100-sxm2-32gb vs cpu)", "rank counts differ (8 vs 1)")),
    ],
)
def test_different_jobs_warn_once_and_resolve_nothing(trace_dir, cli, a, b, reasons):
    out = cli("trace", "--compare", str(trace_dir / a), str(trace_dir / b))
    assert out.exit_code == 0, out.stderr
    warning = out.stderr.strip().splitlines()
    assert len(warning) == 1 and warning[0].startswith("gpuwise: warning: A and B are not the same job")
    assert all(r in warning[0] for r in reasons), warning[0]
    assert "resolved in B" not in out.stdout
    doc = json.loads(cli("trace", "--compare", str(trace_dir / a), str(trace_dir / b), "--json").stdout)
    assert doc["comparable"] is False and doc["findings_removed"] == [] and doc["mismatches"]


def _as_device(source, target, name: str, memory: int):
    """A real trace whose deviceProperties name another GPU (the header edited, events untouched)."""
    doc = json.loads(json_bytes(source))
    for d in doc["deviceProperties"]:
        d.update(name=name, totalGlobalMem=memory)
    target.write_text(json.dumps(doc))
    return target


@pytest.mark.parametrize(
    ("name", "memory", "catalog_id"),
    [
        ("NVIDIA H800", 85_045_477_376, "h800-sxm"),
        ("NVIDIA H800 PCIe", 85_045_477_376, "h800-pcie"),
        ("NVIDIA GeForce RTX 2080 Ti", 11_554_717_696, "rtx-2080-ti"),
    ],
)
def test_h800_and_rtx_2080_ti_traces_map_to_catalog_entries(trace_dir, tmp_path, name, memory, catalog_id):
    path = _as_device(next((trace_dir / DLRM).glob("worker0_*")), tmp_path / "t.json", name, memory)
    device = analyze_traces([path]).ranks[0].device
    assert device.catalog_id == catalog_id


def test_every_gpu_named_in_the_test_traces_maps_to_its_catalog_entry():
    from gpuwise.trace.device import match_catalog

    named = {  # runtime name (deviceProperties), bytes -> catalog id; files of the third-party data
        ("Tesla V100-DGXS-32GB", 34_084_028_416): "v100-dgxs-32gb",  # kineto resnet50 samples
        ("Tesla V100-SXM2-32GB", 34_079_637_504): "v100-sxm2-32gb",  # PARAM DLRM, HTA ns_resolution
        ("Tesla V100-SXM2-16GB", 16_945_512_448): "v100-sxm2-16gb",  # HTA trace_diff/test
        ("NVIDIA A100-SXM4-80GB", 84_990_623_744): "a100-80gb-sxm",  # HTA negative_queue_length
        ("NVIDIA A100-PG509-200", 42_505_273_344): "a100-40gb-sxm",  # HTA critical_path (SXM4 40 GB board)
    }
    for (name, memory), catalog_id in named.items():
        gpu, _ = match_catalog(name, memory)
        assert gpu is not None and gpu.id == catalog_id, name


def test_an_rtx_2080_ti_against_an_h800_is_not_called_resolved(trace_dir, tmp_path):
    from gpuwise.trace.compare import compare_reports

    source = next((trace_dir / DLRM).glob("worker0_*"))
    small = analyze_traces([_as_device(source, tmp_path / "a.json", "NVIDIA GeForce RTX 2080 Ti", 11 << 30)])
    big = analyze_traces([_as_device(source, tmp_path / "b.json", "NVIDIA H800", 80 << 30)])
    cmp = compare_reports(small, big, "2080ti", "h800")
    assert cmp.mismatches == ["the devices differ (rtx-2080-ti vs h800-sxm)"] and cmp.findings_removed == []
