"""One GPU identity: every catalog GPU resolves from the names NVML, Kineto traces and ROCm report, through
the one matcher (catalog.device_names), and a GPU added as one user-file entry works everywhere."""

from __future__ import annotations

import csv
import gzip
import io
import json
from importlib import resources
from pathlib import Path
from typing import Any
from unittest import mock

import msgspec
import pynvml
import pytest

from fake_nvml import FakeNvml, scenario
from gpuwise.catalog import GENERATIONS, get_gpu, list_gpus, match_device_name, resolve_device
from gpuwise.catalog import gpus as gpus_module
from gpuwise.plan.gpu_features import ARCH_FEATURES
from gpuwise.trace.device import device_info

TRACES = Path(__file__).parents[1] / "data" / "traces"


def _bundled_ids() -> list[str]:
    text = resources.files("gpuwise.catalog").joinpath("data/gpus.csv").read_text(encoding="utf-8")
    return [row["id"] for row in csv.DictReader(io.StringIO(text))]


@pytest.mark.parametrize("gpu_id", _bundled_ids())
def test_every_catalog_gpu_resolves_from_its_runtime_names(gpu_id):
    gpu = get_gpu(gpu_id)
    assert gpu.generation != "other", "bundled rows state their generation"
    # CUDA and ROCm parts name their compiler target; TPUs and Gaudi have none a runtime reports.
    assert bool(gpu.arch_target) == (gpu.platform in ("cuda", "rocm")), gpu.platform
    for name in gpu.device_names:
        assert match_device_name(name) == gpu.id, name  # NVML: the name alone
        kineto = resolve_device(name, gpu.memory_bytes)  # Kineto deviceProperties: name + totalGlobalMem
        assert kineto.gpu == gpu and kineto.note == "", name
    # A row that lists no runtime name (its name is not published) still resolves from its catalog name.
    assert resolve_device(gpu.name, gpu.memory_bytes).gpu == gpu
    if gpu.vendor == "AMD":  # ROCm: a gfx target alone, or a generic name with HIP's major.minor
        # Parts sharing a target and a memory size (MI350X / MI355X: gfx950, 288 GB) cannot be told apart
        # by either; the match is then one of them, never another target.
        twins = {g for g in list_gpus() if g.arch_target == gpu.arch_target and g.memory_gb == gpu.memory_gb}
        assert resolve_device(f"{gpu.arch_target}:sramecc+:xnack-", gpu.memory_bytes).gpu in twins
        generic = resolve_device("AMD Radeon Graphics", gpu.memory_bytes, gpu.compute_capability)
        assert generic.gpu in twins and gpu.arch_target in generic.note


def test_no_runtime_name_is_claimed_by_two_gpus():
    owners: dict[str, str] = {}
    for gpu in list_gpus():
        for name in gpu.device_names:
            assert owners.setdefault(name.lower(), gpu.id) == gpu.id, (
                f"{name!r}: {owners[name.lower()]}, {gpu.id}"
            )


@pytest.mark.parametrize(
    ("name", "memory", "expected"),
    [
        ("NVIDIA H100 80GB HBM3", None, "h100-sxm"),
        ("NVIDIA A100-SXM4-80GB", None, "a100-80gb-sxm"),
        ("NVIDIA A100-PCIE-40GB", None, "a100-40gb-pcie"),
        ("Tesla T4", None, "t4"),
        ("NVIDIA GeForce RTX 4090", None, "rtx-4090"),
        ("NVIDIA RTX A6000", None, "rtx-a6000"),  # not the RTX 6000 Ada
        ("NVIDIA A10G", None, "a10g"),  # not the A10
        ("NVIDIA GB200", None, "gb200"),  # not the B200
        ("NVIDIA GH200 480GB", None, "gh200"),  # not the H200
        ("NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition", None, "rtx-pro-6000-blackwell"),
        ("NVIDIA H200 NVL", None, "h200-sxm"),  # same family, noted
        ("AMD Instinct MI300X", None, "mi300x"),
        ("gfx942", 256 * 10**9, "mi325x"),  # two GPUs share gfx942: memory decides
        ("NVIDIA GeForce RTX 3090", None, "rtx-3090"),  # digits match whole: never an RTX 4090
        ("NVIDIA GeForce RTX 3080", None, None),  # neither an RTX 3090 nor an RTX 4080
        ("NVIDIA GeForce RTX 4070 Ti", None, None),  # not the 4070 Ti SUPER
        ("NVIDIA GeForce RTX 4070 Ti SUPER", None, "rtx-4070-ti-super"),
        ("NVIDIA B300 SXM6 AC", None, "b300"),  # NVML's name for an HGX B300
        ("NVIDIA GB300", None, "gb300"),  # not the B300
        ("AMD Instinct MI355X", None, "mi355x"),
        ("AMD Instinct MI350X", None, "mi350x"),
        ("NVIDIA H20", None, "h20"),
        ("NVIDIA L20", None, "l20"),
        ("TPU v5 lite", None, "tpu-v5e"),  # XLA's device_kind for a v5e chip
        ("TPU v5", None, "tpu-v5p"),
        ("TPU v6 lite", None, "tpu-v6e"),
        ("TPU7x", None, "tpu-v7"),
        ("HL-325L", None, "gaudi3"),
        ("NVIDIA A2", None, None),  # not in the bundled catalog
    ],
)
def test_names_runtimes_report(name, memory, expected):
    match = resolve_device(name, memory)
    assert (match.gpu.id if match.gpu else None) == expected, match.note


class _TraceHeader(msgspec.Struct):
    """The one key of a trace this test reads; msgspec checks the whole document is JSON but skips the
    other keys (``traceEvents``: nearly all of its bytes) without building them."""

    deviceProperties: list[dict[str, Any]] | None = None  # the trace's own key


_HEADER = msgspec.json.Decoder(_TraceHeader)


def _trace_devices(roots: list[Path]) -> dict[tuple[str, int | None, int | None], int | None]:
    """(name, computeMajor, computeMinor) -> totalGlobalMem of every device named in the real traces
    (other projects' traces from the third-party data directory, and the repository's own)."""
    found: dict[tuple[str, int | None, int | None], int | None] = {}
    for path in sorted(p for root in roots for p in root.rglob("*.json*")):
        raw = path.read_bytes()
        try:
            doc = _HEADER.decode(gzip.decompress(raw) if path.suffix == ".gz" else raw)
        except (msgspec.DecodeError, OSError):  # not JSON, or JSON that is no trace object
            continue
        for d in doc.deviceProperties or []:
            found[(d["name"], d.get("computeMajor"), d.get("computeMinor"))] = d.get("totalGlobalMem")
    return found


def test_every_gpu_named_in_the_real_traces_resolves_to_its_compute_capability(trace_dir):
    devices = _trace_devices([TRACES, trace_dir / "hta", trace_dir / "kineto", trace_dir / "param"])
    names = {name for name, _, _ in devices}
    assert {"Tesla V100-SXM2-32GB", "NVIDIA A100-PG509-200", "AMD Radeon Graphics"} <= names
    not_in_catalog = {"ARTEMIS", "AMD Radeon Graphics"}  # an MTIA, and an MI250 (gfx90a: no catalog row)
    for (name, major, minor), memory in devices.items():
        kind = "rocm" if name.startswith("AMD") else "cuda"
        info = device_info({"deviceProperties": [{"name": name, "totalGlobalMem": memory}]}, kind)
        if name in not_in_catalog:
            assert info.catalog_id is None, name
            continue
        gpu = get_gpu(info.catalog_id or "?")
        assert major is None or gpu.compute_capability == (major, minor), (name, gpu.id)


def test_generation_is_typed_and_keys_the_feature_table():
    assert {g.generation for g in list_gpus()} <= set(GENERATIONS)
    assert set(ARCH_FEATURES) == set(GENERATIONS) - {"other"}
    assert get_gpu("b200").compute_capability == (10, 0) and get_gpu("mi300x").compute_capability == (9, 4)


A2 = """\
- id: a2
  name: NVIDIA A2 16GB
  vendor: NVIDIA
  architecture: Ampere (GA107)
  generation: ampere
  arch_target: sm_86
  device_names: [NVIDIA A2]
  memory_gb: 16
  mem_bw_tbps: 0.2
  fp32_tflops: 4.5
  tf32_tflops: 9
  bf16_tflops: 18
  fp16_tflops: 18
  int8_tops: 36
  tdp_w: 60
  pcie_gen: 4
  spec_source: NVIDIA A2 Tensor Core GPU datasheet (dense = half the sparse tensor rates)
"""


@pytest.fixture
def a2_file(tmp_path, monkeypatch):
    """A GPU the bundled catalog lacks, added the documented way: one entry in a user gpus file."""
    path = tmp_path / "gpus.yaml"
    path.write_text(A2)
    monkeypatch.setenv("GPUWISE_GPUS", str(path))
    gpus_module.clear_cache()
    yield path
    monkeypatch.delenv("GPUWISE_GPUS")
    gpus_module.clear_cache()


def test_an_added_gpu_resolves_in_trace_and_monitor(a2_file, tmp_path):
    from gpuwise.monitor import kpi
    from gpuwise.monitor.sampler import GpuSampler
    from gpuwise.trace.analyze import analyze_traces

    doc = json.loads((TRACES / "hand_rank0.json").read_text())
    doc["deviceProperties"] = [{"id": 0, "name": "NVIDIA A2", "totalGlobalMem": 15_828_320_256}]
    (tmp_path / "a2_rank0.json").write_text(json.dumps(doc))
    device = analyze_traces([tmp_path / "a2_rank0.json"]).ranks[0].device
    assert (device.catalog_id, device.catalog_note) == ("a2", "")

    gpus = scenario("healthy_and_idle")
    gpus[0]["name"] = "NVIDIA A2"
    with mock.patch.multiple(pynvml, **FakeNvml(gpus).patches()):
        sampler = GpuSampler()
        snap = sampler.sample(False)
        sampler.close()
    assert kpi.verdicts(snap)[0].catalog_id == "a2"


def test_an_added_gpu_works_in_gpus_and_plan(a2_file, cli):
    shown = cli("--gpus-file", str(a2_file), "gpus", "a2", "--json")
    assert shown.exit_code == 0, shown.stderr
    assert shown.json()["gpu"]["generation"] == "ampere" and shown.json()["gpu"]["device_names"] == [
        "NVIDIA A2"
    ]
    plan = cli(
        "--gpus-file", str(a2_file), "plan", "-m", "llama-3.2-1b", "-t", "inference", "-g", "a2", "--json"
    )
    assert plan.exit_code == 0, plan.stderr
    current = plan.json()["plan"]["current"]
    assert current["gpu"] == "a2" and current["fits"] and current["throughput_per_s"] > 0
