"""Collective communication times (ring algorithms) and the pipeline bubble.

Ring all-reduce moves 2(n-1)/n of the buffer through every GPU's slowest link; all-gather and
reduce-scatter move (n-1)/n each (Patarasuk & Yuan 2009; the NCCL "bus bandwidth" convention of
nccl-tests). Each collective also pays a fixed small-message latency.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from gpuwise.catalog import GPU
from gpuwise.perf import efficiency as eff

# Form factors whose NVLink reaches every GPU of the node through NVSwitch (or AMD's
# all-to-all Infinity Fabric); elsewhere an NVLink bridge joins pairs only.
_SWITCHED = ("sxm", "oam", "superchip", "hgx")


@dataclass(frozen=True)
class Link:
    """The link a collective's ring runs over, at its achievable NCCL bus bandwidth."""

    kind: str  # none | nvlink | pcie | network
    bytes_per_s: float
    latency_s: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


NO_LINK = Link("none", float("inf"), 0.0)


def gpus_per_node() -> int:
    return eff.constants().comm.gpus_per_node


def link_for(gpu: GPU, group_size: int, crosses_nodes: bool = False) -> Link:
    """The bottleneck link for a collective among ``group_size`` GPUs of this model."""
    if group_size <= 1:
        return NO_LINK
    latency = eff.constants().comm.latency_us
    if crosses_nodes or group_size > gpus_per_node():
        return Link(
            "network",
            eff.network_bytes_per_s(gpu) * eff.constants().comm.network_fraction,
            latency.network * 1e-6,
        )
    switched = any(tag in gpu.form_factor.lower() for tag in _SWITCHED)
    if gpu.nvlink_gbps and (switched or group_size == 2):
        per_direction = gpu.nvlink_gbps / 2 * 1e9  # catalog lists total bidirectional NVLink bandwidth
        return Link("nvlink", per_direction * eff.constants().comm.nvlink_fraction, latency.nvlink * 1e-6)
    pcie = gpu.pcie_gbps * 1e9 * eff.constants().comm.pcie_fraction
    if gpu.consumer:
        pcie *= eff.constants().comm.consumer_pcie_factor  # no peer-to-peer on GeForce: through host memory
    return Link("pcie", pcie, latency.pcie * 1e-6)


def allreduce_s(n_bytes: float, n: int, link: Link) -> float:
    """Ring all-reduce of an ``n_bytes`` buffer among ``n`` GPUs: 2(n-1)/n · bytes / bandwidth."""
    if n <= 1 or n_bytes <= 0:
        return 0.0
    return 2 * (n - 1) / n * n_bytes / link.bytes_per_s + link.latency_s


def allgather_s(n_bytes: float, n: int, link: Link) -> float:
    """Ring all-gather (or reduce-scatter) of a buffer whose FULL size is ``n_bytes``:
    (n-1)/n · bytes / bw."""
    if n <= 1 or n_bytes <= 0:
        return 0.0
    return (n - 1) / n * n_bytes / link.bytes_per_s + link.latency_s


reduce_scatter_s = allgather_s


def pipeline_bubble_fraction(pp: int, microbatches: int) -> float:
    """Idle share of a 1F1B / GPipe pipeline step: (pp-1) / (microbatches + pp-1)."""
    if pp <= 1:
        return 0.0
    return (pp - 1) / (max(microbatches, 1) + pp - 1)


def exposed_s(comm_s: float, overlappable_s: float) -> float:
    """Communication left visible when it can overlap ``overlappable_s`` of compute.

    Whatever exceeds the compute stays exposed; of the part that fits, the share given by
    ``comm.overlap_fraction`` in efficiency.toml hides (bucketing leaves the last bucket exposed).
    """
    if comm_s <= 0:
        return 0.0
    hidden_fraction = eff.constants().comm.overlap_fraction
    fits = min(comm_s, overlappable_s)
    return (comm_s - fits) + fits * (1 - hidden_fraction)
