"""A GPU lost before the recorder starts (issue 30 item 1): named and priced from the driver's inventory
or the history's last record, with a gpu_lost finding, counted in the live $/h and the report's lost $.
NVML faked by patching pynvml functions (tests/fake_nvml.py)."""

from __future__ import annotations

from pathlib import Path
from unittest import mock

import pynvml
import pytest

from fake_nvml import fake_nvml
from gpuwise.finops.analyze import Prices, analyze
from gpuwise.monitor import inventory, kpi
from gpuwise.monitor.history_read import load_local_history
from gpuwise.monitor.recorder import Recorder, ResilientSampler
from gpuwise.monitor.tiers import Retention
from gpuwise.store.history import HistoryStore

T0 = 472_222 * 3600.0
A100 = "NVIDIA A100-SXM4-80GB"


def _lost_at_open(index: int):
    """nvmlDeviceGetHandleByIndex fails for ``index`` (the GPU fell off the bus before we started)."""

    def handle(i):
        if i == index:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_GPU_IS_LOST)
        return i

    return mock.patch.object(pynvml, "nvmlDeviceGetHandleByIndex", side_effect=handle)


def _inventory(root: Path, gpus: list[tuple[str, str, str]]) -> Path:
    for bus, model, uuid in gpus:
        (root / bus).mkdir(parents=True)
        (root / bus / "information").write_text(
            f"Model: \t\t {model}\nIRQ:   \t\t 42\nGPU UUID: \t {uuid}\nBus Location: \t {bus}\n"
        )
    return root


def test_a_gpu_lost_before_start_is_named_from_the_drivers_inventory_and_priced(tmp_path):
    root = _inventory(
        tmp_path / "gpus",
        [("0000:07:00.0", A100, "GPU-0a"), ("0000:0f:00.0", "NVIDIA H100 80GB HBM3", "GPU-9z")],
    )
    with fake_nvml("healthy_and_idle"), _lost_at_open(1), mock.patch.object(inventory, "INVENTORY_DIR", root):
        snap = ResilientSampler().sample()
    lost = snap.gpus[1]
    assert lost.lost and lost.name == "NVIDIA H100 80GB HBM3" and lost.uuid == "GPU-9z"
    found = kpi.verdicts(snap, None)
    cost = kpi.cost(snap, found, None)
    prices = [kpi.gpu_price(kpi.catalog_id(g.name), None) for g in snap.gpus]
    assert all(p is not None for p in prices)
    assert cost.usd_per_hour == pytest.approx(sum(prices))  # the lost H100 is paid for too
    finding = next(f for f in found[1].findings if f.id == "gpu_lost")
    assert finding.severity == "critical"


def test_without_an_inventory_a_lost_gpu_is_priced_as_the_nodes_one_model(tmp_path):
    with (
        fake_nvml("healthy_and_idle"),
        _lost_at_open(1),
        mock.patch.object(inventory, "INVENTORY_DIR", tmp_path / "none"),
    ):
        snap = ResilientSampler().sample()
    assert snap.gpus[1].name == A100 and snap.gpus[1].uuid is None
    assert "assumed" in snap.gpus[1].not_available["identity"]


def test_a_gpu_lost_before_the_recorder_starts_keeps_its_recorded_identity_and_lost_dollars(tmp_path):
    store = HistoryStore.open(tmp_path / "monitor.sqlite")
    with fake_nvml("healthy_and_idle"):  # yesterday: both GPUs read
        sampler, rec = ResilientSampler(), Recorder(store, 1.0, Retention())
        for k in range(5):
            snap = sampler.sample()
            snap.time_unix_s = T0 - 86400 + k + 1
            rec.record(snap)
    hostname = snap.hostname
    with (
        fake_nvml("healthy_and_idle"),
        _lost_at_open(1),
        mock.patch.object(inventory, "INVENTORY_DIR", tmp_path / "none"),
    ):
        sampler, rec = ResilientSampler(), Recorder(store, 1.0, Retention())
        sampler.identity = store.last_identity
        for k in range(10):  # today: GPU 1 lost from the start, 10 s
            snap = sampler.sample()
            snap.time_unix_s = T0 + k + 1
            rec.record(snap)
    assert snap.gpus[1].uuid == "GPU-1b" and snap.hostname == hostname
    result = analyze(load_local_history(store, T0, T0 + 10), Prices(3.6, 0.1, "test"))
    gpu1 = next(g for g in result.gpus if g.gpu_index == 1)
    # hand: 10 samples x 1 s lost = 10 s; at $3.60/h = $0.01
    assert gpu1.uuid == "GPU-1b" and gpu1.name == A100
    assert gpu1.lost_hours * 3600 == pytest.approx(10.0) and gpu1.lost_usd == pytest.approx(0.01)
    lost = next(f for f in result.findings if f.id == "gpu_lost")
    assert lost.metrics["gpus"][0]["gpu"].endswith(":1") and "$0.01" in lost.summary
    assert len(store.gpus()) == 2  # the same GPU row as yesterday, not a new nameless one


def test_gpus_lost_on_two_nodes_are_one_finding_naming_each_with_its_hours_and_dollars(tmp_path):
    store = HistoryStore.open(tmp_path / "monitor.sqlite")
    patched = fake_nvml("healthy_and_idle")
    with patched:
        sampler, rec = ResilientSampler(reopen_after_s=1e9), Recorder(store, 1.0, Retention())
        rec2 = Recorder(store, 1.0, Retention())  # the second node's recorder
        for k in range(20):  # GPU 1 lost from the 5th second (16 s), GPU 0 of a second node from the 9th
            patched.fake.gpus[1]["lost"] = k >= 4
            snap = sampler.sample()
            snap.time_unix_s = T0 + k + 1
            rec.record(snap)
            other = sampler.sample()
            other.hostname, other.time_unix_s = "node2", T0 + k + 1
            other.gpus[0].lost = k >= 8
            rec2.record(other)
    result = analyze(load_local_history(store, T0, T0 + 20), Prices(3.6, 0.1, "test"))
    lost = next(f for f in result.findings if f.id == "gpu_lost")
    # hand: this node's GPU 1 16 s = $0.016 (and node2's copy of it, same fake GPU: 16 s), node2:0 12 s
    # = $0.012; named worst first
    assert lost.metrics["gpu_count"] == 3
    assert lost.metrics["lost_usd"] == pytest.approx(0.044)
    assert lost.metrics["lost_gpu_hours"] * 3600 == pytest.approx(44.0)
    assert "node2:0 (0.00 h, $0.01)" in lost.summary and "3 of 4 GPUs" in lost.summary
    assert lost.summary.index("node2:0") > lost.summary.index(":1 (")
