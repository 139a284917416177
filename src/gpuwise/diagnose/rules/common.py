"""What every rule shares: the `Rule` signature, confidence by source, Amdahl's speed-up.

A rule is a pure, total function of one `Evidence`: it returns a `Finding` when the fields it reads
are present and past their thresholds (all in `diagnose.thresholds`), else None.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from gpuwise.diagnose import thresholds as T
from gpuwise.diagnose.evidence import SOURCES, WORKLOAD_KINDS, Evidence, EvidenceSource, WorkloadKind
from gpuwise.diagnose.finding import Confidence, Finding, Severity

__all__ = [
    "ALL_KINDS",
    "MEASURED_RUN",
    "NOT_SERVING",
    "Rule",
    "RuleSpec",
    "confidence",
    "kinds",
    "on_gpu",
    "severity_for_gain",
    "sources",
    "speedup_from_saving",
    "training_only_terms",
]

# One rule: Evidence in, a Finding (or None when it does not apply) out.
Rule = Callable[[Evidence], "Finding | None"]


# Shorthands for the declarations in `rules.RULES`.
def kinds(*names: WorkloadKind) -> frozenset[WorkloadKind]:
    """A rule's workload kinds, typed (a misspelt kind is a type error, and a ValueError at import)."""
    return frozenset(names)


def sources(*names: EvidenceSource) -> frozenset[EvidenceSource]:
    """A rule's evidence sources, typed like `kinds`."""
    return frozenset(names)


ALL_KINDS = kinds(*WORKLOAD_KINDS)
NOT_SERVING = kinds("training", "inference", "unknown")
MEASURED_RUN = sources("profile", "trace")


@dataclass(frozen=True)
class RuleSpec:
    """One rule and where it applies: the workload kinds (``kinds``; "unknown" listed when the rule has
    something true to say without knowing whether the work trains or serves) and the evidence sources
    whose figures it reads (``sources``). The engine evaluates the rule on no other evidence, so training
    advice never reaches an inference trace and a monitor sample gets only what a sample can support."""

    rule: Rule
    kinds: frozenset[WorkloadKind]
    sources: frozenset[EvidenceSource]

    def __post_init__(self) -> None:
        unknown = (set(self.kinds) - set(WORKLOAD_KINDS)) | (set(self.sources) - set(SOURCES))
        if unknown or not self.kinds or not self.sources:
            raise ValueError(f"rule {self.id}: bad context declaration {sorted(unknown)}")

    @property
    def id(self) -> str:
        """The rule's finding id (the function's name)."""
        return self.rule.__name__

    def applies(self, ev: Evidence) -> bool:
        """True when ``ev``'s source and workload kind are both among the declared ones."""
        return ev.source in self.sources and ev.kind in self.kinds

    def __call__(self, ev: Evidence) -> Finding | None:
        """The rule's finding on ``ev``, or None outside its declared contexts."""
        return self.rule(ev) if self.applies(ev) else None


def training_only_terms() -> tuple[str, ...]:
    """Words of advice that only a training job can follow (lower case): a fix that names one of them on
    inference, serving or monitor evidence is out of context (tests/diagnose/test_rule_contexts.py)."""
    return (
        "gradient accumulation",
        "gradient_accumulation",
        "per_device_train_batch_size",
        "checkpointing",
        "optimizer",
        "backward",
        "no_sync",
    )


def confidence(ev: Evidence) -> Confidence:
    """How sure a finding is by its source: measured (profile, trace, telemetry): high; predicted: low."""
    return "low" if ev.source == "prediction" else "high"


def speedup_from_saving(saving_pct: float) -> float:
    """Removing ``saving_pct`` % of the step time speeds the step up by this factor (Amdahl), the saving
    capped at ``MAX_REMOVABLE_STEP_PCT`` so no fix promises an infinite speed-up."""
    return 1.0 / (1.0 - min(saving_pct, T.MAX_REMOVABLE_STEP_PCT) / 100.0)


def severity_for_gain(severity: Severity, gain_high_x: float) -> Severity:
    """A finding's severity capped by the speed-up it predicts: HIGH only when the fix can give a material
    gain (``MATERIAL_GAIN_X``), MEDIUM from ``NOTABLE_GAIN_X``, else LOW. A share of the step that
    overlaps compute already is not a bottleneck, however large."""
    if severity in ("critical", "high") and gain_high_x < T.MATERIAL_GAIN_X:
        severity = "medium"
    if severity == "medium" and gain_high_x < T.NOTABLE_GAIN_X:
        severity = "low"
    return severity


def on_gpu(ev: Evidence) -> bool:
    """A CPU-only run has no device to idle, nothing to pin; traces and predictions are GPU runs."""
    return ev.device != "cpu"
