"""The serving figures ``memory`` and ``cost`` add for an inference workload, computed by the same
functions as ``plan``'s serving plan so the three commands show the same numbers."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gpuwise.catalog import get_gpu, get_model
from gpuwise.errors import GpuwiseError
from gpuwise.perf.kv_capacity import KvCapacity, kv_capacity
from gpuwise.serving.economics import deployment_at_demand
from gpuwise.serving.evaluate import Deployment
from gpuwise.workload import Workload

__all__ = ["ServingFigures", "deployment_at_demand", "serving_capacity", "serving_figures"]


def serving_capacity(w: Workload) -> KvCapacity | None:
    """KV capacity on the workload's GPU, for decoder LLM inference (None otherwise)."""
    if not w.is_inference or not w.model:
        return None
    try:
        arch = get_model(w.model)
    except GpuwiseError:
        return None
    if not (arch.is_transformer and arch.is_decoder):
        return None
    return kv_capacity(w, get_gpu(w.gpu))


@dataclass(frozen=True)
class ServingFigures:
    """The serving figures ``memory`` and ``cost`` show: the KV capacity of one replica and, with a demand,
    the deployment that serves it."""

    kv: KvCapacity
    at_demand: Deployment | None

    def to_dict(self) -> dict[str, Any]:
        """JSON form: ``kv_capacity`` and ``at_demand``."""
        return {
            "kv_capacity": self.kv.to_dict(),
            "at_demand": self.at_demand.to_dict() if self.at_demand else None,
        }


def serving_figures(w: Workload) -> ServingFigures | None:
    """KV capacity and, with a demand, the deployment at the demand; None for other workloads."""
    cap = serving_capacity(w)
    return None if cap is None else ServingFigures(cap, deployment_at_demand(w))
