"""Replay tests/data/nvml/scenarios.json through pynvml: its functions patched with unittest.mock,
returning pynvml's own structs (c_nvmlMemory_t, c_nvmlUtilization_t, c_nvmlProcessInfo_t), so the
monitor's real code paths run as on a host with these GPUs."""

from __future__ import annotations

import json
from pathlib import Path
from unittest import mock

import pynvml

from gpuwise.units import GiB

SCENARIOS = Path(__file__).parent / "data" / "nvml" / "scenarios.json"


def scenario(name: str) -> list[dict]:
    data = json.loads(SCENARIOS.read_text())
    return [{**data["base"], **gpu} for gpu in data["scenarios"][name]]


def scenario_names() -> list[str]:
    return list(json.loads(SCENARIOS.read_text())["scenarios"])


class FakeNvml:
    """The GPUs of one scenario; a handle is the GPU's index. ``samples[i]`` counts the samples read."""

    def __init__(self, gpus: list[dict]) -> None:
        self.gpus = gpus
        self.samples = [0] * len(gpus)
        # XID events queued once, delivered by nvmlEventSetWait_v2 (as NVML queues them per event set)
        self.events = [(i, xid) for i, gpu in enumerate(gpus) for xid in gpu.get("xid", [])]

    def _gpu(self, fn: str, handle: int) -> dict:
        gpu = self.gpus[handle]
        lost = gpu.get("lost_from_sample")
        if gpu.get("lost") or (lost is not None and self.samples[handle] > lost):  # "lost": set by a test
            raise pynvml.NVMLError(pynvml.NVML_ERROR_GPU_IS_LOST)
        if fn in gpu.get("unsupported", ()):
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return gpu

    def patches(self) -> dict:
        def q(fn, answer):
            def call(handle, *args):
                return answer(self._gpu(fn, handle), *args)

            return mock.Mock(side_effect=call)

        def util(g):
            return pynvml.c_nvmlUtilization_t(gpu=g["busy"], memory=g["memory_busy"])

        def memory(g, *version):
            # used_gib is what the v2 call says (the driver's reserved_gib excluded); v1 counts both as used
            total, used = int(g["total_gib"] * GiB), int(g["used_gib"] * GiB)
            reserved = int(g.get("reserved_gib", 0.0) * GiB)
            free = total - used - reserved
            if not version:
                return pynvml.c_nvmlMemory_t(total=total, free=free, used=used + reserved)
            return pynvml.c_nvmlMemory_v2_t(
                version=version[0], total=total, reserved=reserved, free=free, used=used
            )

        def field_values(g, ids):
            values = (pynvml.c_nvmlFieldValue_t * len(ids))()
            for value, field_id in zip(values, ids, strict=True):
                value.fieldId, value.valueType = field_id, pynvml.NVML_VALUE_TYPE_UNSIGNED_INT
                known = {pynvml.NVML_FI_DEV_MEMORY_TEMP: g["mem_temp_c"]}
                value.nvmlReturn = (
                    pynvml.NVML_SUCCESS if field_id in known else pynvml.NVML_ERROR_NOT_SUPPORTED
                )
                value.value.uiVal = int(known.get(field_id, 0))
            return values

        def clock(g, kind, mx=False):
            key = ("sm" if kind == pynvml.NVML_CLOCK_SM else "mem") + ("_max_mhz" if mx else "_mhz")
            return g[key]

        def ecc(g, kind, counter):
            return g["ecc"]["volatile" if counter == pynvml.NVML_VOLATILE_ECC else "aggregate"][kind]

        def procs(g):
            return [
                pynvml.nvmlStructToFriendlyObject(
                    pynvml.c_nvmlProcessInfo_t(pid=pid, usedGpuMemory=int(gib * GiB))
                )
                for pid, gib in g["processes"]
            ]

        def counted_util(handle):
            self.samples[handle] += 1
            return util(self._gpu("nvmlDeviceGetUtilizationRates", handle))

        def register(handle, types, events):
            self._gpu("nvmlDeviceRegisterEvents", handle)

        def wait(events, timeout_ms):
            if not self.events:
                raise pynvml.NVMLError(pynvml.NVML_ERROR_TIMEOUT)
            index, xid = self.events.pop(0)
            data = pynvml.nvmlStructToFriendlyObject(
                pynvml.c_nvmlEventData_t(eventType=pynvml.nvmlEventTypeXidCriticalError, eventData=xid)
            )
            data.device = index  # a handle is the GPU's index here
            return data

        return {
            "nvmlEventSetCreate": mock.Mock(return_value=object()),
            "nvmlEventSetFree": mock.Mock(return_value=None),
            "nvmlDeviceRegisterEvents": mock.Mock(side_effect=register),
            "nvmlEventSetWait_v2": mock.Mock(side_effect=wait),
            "nvmlDeviceGetIndex": mock.Mock(side_effect=lambda handle: handle),
            "nvmlInit": mock.Mock(return_value=None),
            "nvmlShutdown": mock.Mock(return_value=None),
            "nvmlSystemGetDriverVersion": mock.Mock(return_value="580.95.05"),
            "nvmlDeviceGetCount": mock.Mock(return_value=len(self.gpus)),
            "nvmlDeviceGetHandleByIndex": mock.Mock(side_effect=lambda i: i),
            "nvmlDeviceGetName": q("nvmlDeviceGetName", lambda g: g["name"]),
            "nvmlDeviceGetUUID": q("nvmlDeviceGetUUID", lambda g: g["uuid"]),
            "nvmlDeviceGetUtilizationRates": mock.Mock(side_effect=counted_util),
            "nvmlDeviceGetMemoryInfo": q("nvmlDeviceGetMemoryInfo", memory),
            "nvmlDeviceGetClockInfo": q("nvmlDeviceGetClockInfo", clock),
            "nvmlDeviceGetMaxClockInfo": q("nvmlDeviceGetMaxClockInfo", lambda g, k: clock(g, k, True)),
            "nvmlDeviceGetPowerUsage": q("nvmlDeviceGetPowerUsage", lambda g: g["power_mw"]),
            "nvmlDeviceGetEnforcedPowerLimit": q("nvmlDeviceGetEnforcedPowerLimit", lambda g: g["limit_mw"]),
            "nvmlDeviceGetTotalEnergyConsumption": q(
                "nvmlDeviceGetTotalEnergyConsumption", lambda g: g["energy_mj"] + 1000 * self.samples[0]
            ),
            "nvmlDeviceGetTemperature": q("nvmlDeviceGetTemperature", lambda g, s: g["temp_c"]),
            "nvmlDeviceGetCurrentClocksEventReasons": q(
                "nvmlDeviceGetCurrentClocksEventReasons", lambda g: g["reasons"]
            ),
            "nvmlDeviceGetTotalEccErrors": q("nvmlDeviceGetTotalEccErrors", ecc),
            "nvmlDeviceGetRetiredPages": q(
                "nvmlDeviceGetRetiredPages", lambda g, cause: list(range(g["retired_pages"][cause]))
            ),
            "nvmlDeviceGetRemappedRows": q("nvmlDeviceGetRemappedRows", lambda g: tuple(g["remapped_rows"])),
            "nvmlDeviceGetCurrPcieLinkGeneration": q(
                "nvmlDeviceGetCurrPcieLinkGeneration", lambda g: g["pcie"][0]
            ),
            "nvmlDeviceGetMaxPcieLinkGeneration": q(
                "nvmlDeviceGetMaxPcieLinkGeneration", lambda g: g["pcie"][1]
            ),
            "nvmlDeviceGetCurrPcieLinkWidth": q("nvmlDeviceGetCurrPcieLinkWidth", lambda g: g["pcie"][2]),
            "nvmlDeviceGetMaxPcieLinkWidth": q("nvmlDeviceGetMaxPcieLinkWidth", lambda g: g["pcie"][3]),
            "nvmlDeviceGetPcieReplayCounter": q(
                "nvmlDeviceGetPcieReplayCounter", lambda g: g.get("pcie_replays", 0)
            ),
            "nvmlDeviceGetPcieThroughput": q("nvmlDeviceGetPcieThroughput", lambda g, c: g["pcie_kbps"][c]),
            "nvmlDeviceGetMigMode": q("nvmlDeviceGetMigMode", lambda g: list(g["mig"])),
            "nvmlDeviceGetComputeRunningProcesses": q("nvmlDeviceGetComputeRunningProcesses", procs),
            "nvmlDeviceGetProcessUtilization": q(
                "nvmlDeviceGetProcessUtilization",
                lambda g, since: [
                    pynvml.c_nvmlProcessUtilizationSample_t(pid=pid, timeStamp=t, smUtil=sm, memUtil=0)
                    for pid, t, sm in g.get("process_sm", [])
                ],
            ),
            "nvmlDeviceGetGraphicsRunningProcesses": q("nvmlDeviceGetGraphicsRunningProcesses", lambda g: []),
            "nvmlDeviceGetFieldValues": q("nvmlDeviceGetFieldValues", field_values),
            "nvmlDeviceGetEncoderUtilization": q(
                "nvmlDeviceGetEncoderUtilization", lambda g: [g["enc_dec_pct"][0], 167000]
            ),
            "nvmlDeviceGetDecoderUtilization": q(
                "nvmlDeviceGetDecoderUtilization", lambda g: [g["enc_dec_pct"][1], 167000]
            ),
        }


def fake_nvml(name: str):
    """Patch pynvml with scenario ``name``; returns the context manager (its FakeNvml as ``.fake``)."""
    fake = FakeNvml(scenario(name))
    patcher = mock.patch.multiple(pynvml, **fake.patches())
    patcher.fake = fake  # type: ignore[attr-defined]
    return patcher


def no_driver():
    return mock.patch.object(
        pynvml, "nvmlInit", side_effect=pynvml.NVMLError(pynvml.NVML_ERROR_DRIVER_NOT_LOADED)
    )
