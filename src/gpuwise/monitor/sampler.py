"""Open NVML once and sample every GPU of this host into a `Snapshot`.

A GPU that is lost mid-run stays in the snapshot, marked lost (its row says so), instead of ending the
monitor; the others keep being sampled. No NVML (no driver, no library, nvidia-ml-py missing) is
`NoNvml`, one line for the user.
"""

from __future__ import annotations

import contextlib
import socket
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from gpuwise.errors import GpuwiseError
from gpuwise.monitor import inventory
from gpuwise.monitor.nvml_sample import FieldReader, GpuLost, init_nvml, text, why
from gpuwise.monitor.reading import GpuReading, HostReading, read_gpu, read_host


class NoNvml(GpuwiseError):
    """No usable NVIDIA driver here (exit 2)."""


@dataclass
class Snapshot:
    """Every GPU of one host at one moment (Unix s), with the host's CPU and memory when asked for."""

    time_unix_s: float
    hostname: str
    driver_version: str | None = None
    gpus: list[GpuReading] = field(default_factory=list)
    host: HostReading | None = None

    def to_dict(self) -> dict[str, Any]:
        """The snapshot as JSON (what ``gpuwise monitor --json`` prints, before the verdicts)."""
        return {
            "time_unix_s": self.time_unix_s,
            "hostname": self.hostname,
            "driver_version": self.driver_version,
            "gpus": [g.to_dict() for g in self.gpus],
            "host": asdict(self.host) if self.host is not None else None,
        }


class GpuSampler:
    """Every GPU NVML sees; ``sample()`` reads them all (a few ms per GPU on a real driver)."""

    def __init__(self) -> None:
        try:
            self._nv = init_nvml()
        except ImportError:
            raise NoNvml(
                "NVML is not available: nvidia-ml-py is not installed (pip install 'gpuwise[monitor]')"
            ) from None
        except Exception as exc:
            raise NoNvml(
                f"no NVIDIA GPU to monitor: NVML could not start ({why(exc)}); --host shows the host"
            ) from None
        nv = self._nv
        self.driver_version: str | None = None
        with contextlib.suppress(Exception):
            self.driver_version = text(nv.nvmlSystemGetDriverVersion())
        self._devices: list[tuple[Any, GpuReading, FieldReader]] = []
        try:
            count = nv.nvmlDeviceGetCount()
        except Exception as exc:
            raise NoNvml(f"NVML cannot list the GPUs: {why(exc)}") from None
        for index in range(count):
            self._devices.append(self._open(index))
        self._name_lost(count)
        self.hostname = socket.gethostname()
        self._xids: dict[int, list[int]] = {}
        self._events = self._watch_xids()
        self._replays: dict[int, tuple[float, int]] = {}  # index -> first (time, PCIe replay count)

    def _watch_xids(self) -> Any:
        """An NVML event set for XID critical errors on every GPU that supports it (None: none does)."""
        nv = self._nv
        try:
            events = nv.nvmlEventSetCreate()
        except Exception:
            return None
        for handle, base, fields in self._devices:
            try:
                nv.nvmlDeviceRegisterEvents(handle, nv.nvmlEventTypeXidCriticalError, events)
                self._xids[base.index] = []
            except Exception as exc:
                fields.not_available["xid"] = why(exc)
        return events

    def _drain_xids(self) -> None:
        """Collect the XIDs NVML queued since the last sample (waits 0 ms; bounded per sample)."""
        nv = self._nv
        for _ in range(256):
            try:
                data = nv.nvmlEventSetWait_v2(self._events, 0)
            except Exception:  # NVML_ERROR_TIMEOUT: nothing queued (or the set broke: try next sample)
                return
            if data.eventType & nv.nvmlEventTypeXidCriticalError:
                with contextlib.suppress(Exception):
                    self._xids.setdefault(int(nv.nvmlDeviceGetIndex(data.device)), []).append(
                        int(data.eventData)
                    )

    def _open(self, index: int) -> tuple[Any, GpuReading, FieldReader]:
        """Handle, name and UUID of one GPU; one NVML cannot open is listed lost (its row says so)."""
        nv, base = self._nv, GpuReading(index)
        try:
            handle = nv.nvmlDeviceGetHandleByIndex(index)
            base.name = text(nv.nvmlDeviceGetName(handle))
        except Exception as exc:
            base.lost = True
            base.not_available = {"gpu": why(exc)}
            return None, base, FieldReader()
        with contextlib.suppress(Exception):
            base.uuid = text(nv.nvmlDeviceGetUUID(handle))
        return handle, base, FieldReader()

    def _name_lost(self, count: int) -> None:
        """A GPU NVML could not open gets its model and UUID from the driver's inventory (the same count
        of GPUs in PCI bus order, NVML's index order), so it is named and priced, not a blank row."""
        lost = [base for _, base, _ in self._devices if base.lost and not base.name]
        if not lost:
            return
        listed = inventory.node_gpus()
        if len(listed) == count:
            for base in lost:
                base.uuid, base.name = listed[base.index]
                base.not_available["identity"] = "from the driver's inventory (/proc/driver/nvidia/gpus)"
            return
        seen = {base.name for _, base, _ in self._devices if not base.lost}
        if len(seen) == 1:  # a node of one model (the common case): priced as one, and said so
            model = seen.pop()
            for base in lost:
                base.name = model
                base.not_available["identity"] = f"assumed: the node's other GPUs are all {model}"

    @property
    def count(self) -> int:
        """The GPUs NVML listed when the sampler opened (lost ones included)."""
        return len(self._devices)

    def sample(self, host: bool = False) -> Snapshot:
        """Read every GPU now (and the host when ``host``); a GPU lost during the read is marked lost from
        then on, and the XID errors seen since the sampler started are attached to their GPUs.
        """
        snap = Snapshot(time.time(), self.hostname, self.driver_version)
        if self._events is not None:
            self._drain_xids()
        for handle, base, fields in self._devices:
            reading = GpuReading(base.index, base.name, base.uuid, lost=base.lost)
            if not base.lost:
                try:
                    read_gpu(self._nv, handle, reading, fields)
                except GpuLost as lost:
                    base.lost = reading.lost = True  # NVML cannot bring it back without a reset
                    reading = GpuReading(base.index, base.name, base.uuid, lost=True)
                    reading.not_available = {"gpu": str(lost)}
            else:
                reading.not_available = dict(base.not_available) or {"gpu": "GPU is lost"}
            if base.index in self._xids:
                reading.xid_errors = list(self._xids[base.index])
            self._replay_rate(reading, snap.time_unix_s)
            snap.gpus.append(reading)
        if host:
            snap.host = read_host()
        return snap

    def _replay_rate(self, reading: GpuReading, now_s: float) -> None:
        """PCIe replays a minute since this sampler's first reading, once a minute has passed (DCGM's
        health watch judges the rate, not the count since boot)."""
        if reading.pcie_replays is None:
            return
        first = self._replays.setdefault(reading.index, (now_s, reading.pcie_replays))
        minutes = (now_s - first[0]) / 60
        if minutes >= 1 and reading.pcie_replays >= first[1]:
            reading.pcie_replays_per_min = (reading.pcie_replays - first[1]) / minutes

    def close(self) -> None:
        """Free the XID event set and shut NVML down, ignoring errors."""
        if self._events is not None:
            with contextlib.suppress(Exception):
                self._nv.nvmlEventSetFree(self._events)
        with contextlib.suppress(Exception):
            self._nv.nvmlShutdown()


def host_snapshot() -> Snapshot:
    """No GPU: the host alone (``monitor --host`` on a machine without NVIDIA driver)."""
    return Snapshot(time.time(), socket.gethostname(), host=read_host())


__all__ = ["GpuSampler", "NoNvml", "Snapshot", "host_snapshot"]
