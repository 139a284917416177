"""Collective communication times (ring algorithms) and the pipeline bubble.

Ring all-reduce moves 2(n-1)/n of the buffer through every GPU's slowest link; all-gather and
reduce-scatter move (n-1)/n each (Patarasuk & Yuan 2009; the NCCL "bus bandwidth" convention of
nccl-tests). Each collective also pays a fixed small-message latency. A GPU's links are resolved once
(:func:`gpuwise.perf.hardware.links`); this module picks the bottleneck one for a group.
"""

from __future__ import annotations

from gpuwise.catalog import GPU
from gpuwise.perf import efficiency as eff
from gpuwise.perf.hardware import NO_LINK, Link, links


def gpus_per_node() -> int:
    """GPUs per node a collective stays within before it crosses the network (efficiency.toml)."""
    return eff.constants().comm.gpus_per_node


def link_for(gpu: GPU, group_size: int, crosses_nodes: bool = False, ranks_per_node: int = 1) -> Link:
    """The bottleneck link for a collective among ``group_size`` GPUs of this model.

    Across nodes, NCCL runs one ring channel per NIC (multi-rail: each channel enters and leaves a node
    through the NIC next to its GPU), so a group with ``ranks_per_node`` members in every node moves its
    data through that many NICs at once: the ring's bus bandwidth is ``ranks_per_node`` × the per-GPU
    network, up to what the node's own fabric (NVLink/NVSwitch or PCIe) carries between them
    (NVIDIA, "Massively Scale Your Deep Learning Training with NCCL 2.4", 2019: rings and trees per NIC;
    nccl-tests doc/PERFORMANCE.md bus bandwidth). A group with one member per node (data parallel
    across tensor-parallel nodes) gets one NIC.
    """
    if group_size <= 1:
        return NO_LINK
    resolved = links(gpu)
    if crosses_nodes or group_size > gpus_per_node():
        rails = max(1, min(ranks_per_node, group_size, gpus_per_node()))
        if rails == 1:
            return resolved.network
        inside = (
            resolved.nvlink if resolved.nvlink is not None and resolved.nvlink_switched else resolved.pcie
        )
        bandwidth = min(resolved.network.bytes_per_s * rails, inside.bytes_per_s)
        return Link("network", bandwidth, resolved.network.latency_s)
    if resolved.nvlink is not None and (resolved.nvlink_switched or group_size == 2):
        return resolved.nvlink
    return resolved.pcie


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


__all__ = [
    "NO_LINK",
    "Link",
    "allgather_s",
    "allreduce_s",
    "exposed_s",
    "gpus_per_node",
    "link_for",
    "pipeline_bubble_fraction",
    "reduce_scatter_s",
]
