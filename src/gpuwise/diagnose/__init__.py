"""The one rule engine: Evidence in, Findings out.

Live profiling, trace analysis, telemetry and prediction all fill the same `Evidence`;
`diagnose(evidence)` runs every rule in `rules.py` (thresholds in `thresholds.py`) and
returns `Finding`s, most important first. The planner re-ranks them for the user's goal.
"""

from gpuwise.diagnose.engine import diagnose, rank_findings
from gpuwise.diagnose.evidence import Evidence, load_evidence
from gpuwise.diagnose.finding import Finding, Gain

__all__ = ["Evidence", "Finding", "Gain", "diagnose", "load_evidence", "rank_findings"]
