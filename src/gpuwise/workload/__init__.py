"""The workload spec: one typed object that every command takes."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gpuwise.workload.spec import Workload, load_workload, workload_from_mapping

__all__ = ["Workload", "load_workload", "workload_from_mapping"]


def __getattr__(name: str) -> Any:
    """The spec module (and the catalog it reads) loads on first use: `gpuwise.workload.limits` alone,
    which every command's option checks read, stays cheap to import (start-up time)."""
    if name in __all__:
        from gpuwise.workload import spec

        return getattr(spec, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
