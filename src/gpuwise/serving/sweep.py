"""The serving sweep: every catalog GPU × {1, 2, 4, 8} GPUs per node × every tensor-parallel size
that divides the node, at one demand; and the cheapest deployment that meets the SLO."""

from __future__ import annotations

from collections.abc import Sequence

from gpuwise.catalog import GPU, list_gpus
from gpuwise.serving.evaluate import Deployment, ReplicaSearch, evaluate_deployment
from gpuwise.workload import Workload

__all__ = ["GPU_COUNTS", "TP_SIZES", "cheapest", "sweep"]


GPU_COUNTS = (1, 2, 4, 8)
TP_SIZES = (1, 2, 4, 8)


def sweep(
    workload: Workload,
    gpus: Sequence[GPU] | None = None,
    counts: Sequence[int] = GPU_COUNTS,
    search: ReplicaSearch | None = None,
) -> list[Deployment]:
    """Deployments of ``workload`` (pipeline parallelism as given) on each GPU type, node size and tp."""
    search = search or ReplicaSearch(workload)
    rows: list[Deployment] = []
    for gpu in gpus if gpus is not None else list_gpus():
        for count in counts:
            for tp in TP_SIZES:
                if tp * workload.pp <= count and count % (tp * workload.pp) == 0:
                    rows.append(evaluate_deployment(search, gpu, count, tp, workload.pp))
    return rows


def cheapest(rows: Sequence[Deployment]) -> Deployment | None:
    """The lowest monthly bill among deployments that meet the SLO at the rate (fewer GPUs on ties)."""
    ok = [r for r in rows if r.meets_slo and r.monthly_usd is not None]
    return min(ok, key=lambda r: (r.monthly_usd, r.total_gpus, r.tp)) if ok else None
