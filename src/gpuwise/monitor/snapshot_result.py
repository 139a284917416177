"""One `gpuwise monitor --once` (or ``--json``) answer: the sampled snapshot, its KPI verdicts and cost.

The command used to build this JSON as a dict; here it is a typed result whose ``to_dict`` is the
``monitor`` document. The verdicts and the cost are computed by the KPI module (FinOps analysis) and
handed in, so this module depends on nothing above the sampler.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gpuwise.monitor.kpi import Cost, GpuVerdict
    from gpuwise.monitor.sampler import Snapshot

__all__ = ["SnapshotResult"]


@dataclass(frozen=True)
class SnapshotResult:
    """A snapshot with its verdicts and $/h; ``no_gpu`` says why only the host was sampled (no NVML),
    in which case there are no verdicts and no cost."""

    snapshot: Snapshot
    verdicts: list[GpuVerdict] = field(default_factory=list)
    cost: Cost | None = None
    no_gpu: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The snapshot's keys, then ``verdicts``, ``cost`` (USD per hour, null without a GPU) and,
        for a host-only snapshot, ``no_gpu``."""
        out: dict[str, Any] = {
            **self.snapshot.to_dict(),
            "verdicts": [v.to_dict() for v in self.verdicts],
            "cost": None
            if self.cost is None
            else {
                "usd_per_hour": self.cost.usd_per_hour,
                "idle_usd_per_hour": self.cost.idle_usd_per_hour,
                "price_source": self.cost.price_source,
            },
        }
        if self.no_gpu is not None:
            out["no_gpu"] = self.no_gpu
        return out
