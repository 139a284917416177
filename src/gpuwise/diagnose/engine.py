"""Run every rule over the evidence it applies to and rank what they find."""

from __future__ import annotations

from collections.abc import Iterable

from gpuwise.diagnose.evidence import Evidence
from gpuwise.diagnose.finding import Finding
from gpuwise.diagnose.framework_fixes import in_framework
from gpuwise.diagnose.rules import RULES

__all__ = ["diagnose", "rank_findings"]


def _gain_score(finding: Finding) -> float:
    gain = finding.gain
    if gain is None:
        return 0.0
    if gain.metric == "throughput_x":
        return (gain.high - 1.0) * 100.0
    if gain.metric in {"step_time_pct", "cost_pct"}:
        return gain.high
    return 0.0


def rank_findings(findings: Iterable[Finding]) -> list[Finding]:
    """Most important first: severity, then expected gain. Duplicate ids keep the most severe."""
    best: dict[str, Finding] = {}
    for finding in findings:
        current = best.get(finding.id)
        if current is None or (finding.severity_rank, -_gain_score(finding)) < (
            current.severity_rank,
            -_gain_score(current),
        ):
            best[finding.id] = finding
    return sorted(best.values(), key=lambda f: (f.severity_rank, -_gain_score(f), f.id))


def diagnose(evidence: Evidence | Iterable[Evidence]) -> list[Finding]:
    """Apply every rule to each piece of evidence whose source and workload kind the rule declares
    (`rules.RULES`); contain nothing — rules are pure and total."""
    items = [evidence] if isinstance(evidence, Evidence) else list(evidence)
    found = [
        in_framework(f, ev.context.framework)  # a JAX/TensorFlow run gets its fixes in its own terms
        for ev in items
        for spec in RULES
        if spec.applies(ev) and (f := spec.rule(ev)) is not None
    ]
    return rank_findings(found)
