"""The workload spec: one typed object that every command takes."""

from gpuwise.workload.spec import Workload, load_workload, workload_from_mapping

__all__ = ["Workload", "load_workload", "workload_from_mapping"]
