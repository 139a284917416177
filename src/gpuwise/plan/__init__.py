"""The planner: predictions and measurements in, a ranked plan with numbers out.

``make_plan(workload, evidence_files=...)`` returns a ``Plan`` with six sections (diagnosis,
techniques, configuration, VRAM, scaling, tools) plus hardware options and a fit report.
Every technique's impact comes from re-running the memory and performance models on the
changed workload; every threshold comes from ``gpuwise.diagnose.thresholds``. No torch.
"""

from gpuwise.plan.planner import make_plan
from gpuwise.plan.types import Plan

__all__ = ["Plan", "make_plan"]
