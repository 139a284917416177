"""The plan's result objects. Every renderer (terminal, JSON, Markdown, HTML) reads these."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Literal, get_args

from gpuwise.diagnose import Evidence, Finding
from gpuwise.diagnose.finding import FindingId
from gpuwise.perf.prediction import Bound
from gpuwise.perf.tco import Tco
from gpuwise.workload import Workload
from gpuwise.workload.spec import Goal, Sharding

if TYPE_CHECKING:
    from gpuwise.plan.input_sizing import InputSizing

__all__ = [
    "EFFORTS",
    "QUALITY_RISKS",
    "ConfigPlan",
    "Diagnosis",
    "Effort",
    "FitOption",
    "FitReport",
    "HardwareOption",
    "IdleCause",
    "IdleStatus",
    "Impact",
    "MemoryMethod",
    "MemoryView",
    "NvlinkVerdict",
    "Outcome",
    "Plan",
    "QualityRisk",
    "ScaleOption",
    "ScalingDecision",
    "Technique",
    "ThroughputUnit",
    "ToolAdvice",
    "Verdict",
]

# What an edit may cost besides what the models compute, least to most: none; low; changes-training
# (the optimization changes, e.g. a larger global batch); medium (numerics, e.g. int4 or fp8);
# changes-task (LoRA/QLoRA train adapters instead of all weights).
QualityRisk = Literal["none", "low", "changes-training", "medium", "changes-task"]
QUALITY_RISKS: tuple[QualityRisk, ...] = get_args(QualityRisk)
# What applying a technique takes: a flag or a line (low), a library or a code path to change (medium),
# new kernels, recipes or hardware work (high). A tie-breaker after the expected gain.
Effort = Literal["low", "medium", "high"]
EFFORTS: tuple[Effort, ...] = get_args(Effort)
Verdict = Literal["recommended", "optional", "not-recommended"]
# An idle cause is found (a finding says so), ruled out (measured below the rule's threshold) or not measured.
IdleStatus = Literal["found", "ruled-out", "not-measured"]
# Whether a multi-GPU layout needs NVLink, from the predicted slowdown over PCIe ("n/a": nothing fits).
NvlinkVerdict = Literal["required", "recommended", "not-needed", "n/a"]
MemoryMethod = Literal["analytic", "traced"]
ThroughputUnit = Literal["tokens/s", "output tokens/s", "images/s"]


@dataclass(frozen=True)
class Outcome:
    """Predicted numbers for one workload on one GPU configuration (per-GPU memory, whole-job speed)."""

    gpu: str
    num_gpus: int
    fits: bool
    peak_bytes: int  # predicted peak reserved memory per GPU
    capacity_bytes: int  # device memory per GPU
    headroom_pct: float
    throughput: float | None = None  # tokens/s (LLMs) or images/s (vision), whole job
    throughput_unit: ThroughputUnit = "tokens/s"
    step_time_s: float | None = None  # training step (one micro-batch × accumulation), or one decode step
    mfu_pct: float | None = None  # against the dense BF16 peak (PaLM convention), whatever the dtype
    mfu_compute_dtype_pct: float | None = None  # against the compute dtype's own peak (FP8, FP32, ...)
    compute_dtype: str | None = None  # the matmul dtype the speed model assumed
    ttft_ms: float | None = None
    tpot_ms: float | None = None
    max_concurrency: int | None = None
    bound: Bound | None = None  # what limits the step, as the performance model says (None: no speed)
    comm_exposed_pct: float | None = None
    usd_per_hour: float | None = None  # all GPUs of the job
    run_time_s: float | None = None  # training: train_tokens × epochs
    usd_per_run: float | None = None
    usd_per_1m: float | None = None  # $ per 1M tokens (or images) processed/generated
    notes: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """The JSON form; names carry their unit (throughput_per_s, usd_per_million and its unit)."""
        data = asdict(self)
        data["notes"] = list(self.notes)
        # JSON names carry their unit (schema 2): the speed is per second, the price per million of what.
        data["throughput_per_s"] = data.pop("throughput")
        data["usd_per_million"] = data.pop("usd_per_1m")
        data["usd_per_million_of"] = _PRICED_UNIT.get(self.throughput_unit, self.throughput_unit)
        return data


# What `usd_per_1m` is priced per, by throughput unit: training prices every token processed.
_PRICED_UNIT = {"tokens/s": "training tokens", "output tokens/s": "output tokens", "images/s": "images"}


@dataclass(frozen=True)
class Impact:
    """Before -> after, computed by re-running the models on the changed workload."""

    step_time_pct: float | None  # change of step time (negative = faster)
    throughput_x: float | None  # after / before
    latency_pct: float | None  # change of per-token latency (inference) or step time (training)
    memory_saved_bytes: int  # per GPU (negative = uses more)
    cost_pct: float | None  # change of $ per 1M tokens (negative = cheaper)
    makes_it_fit: bool

    def to_dict(self) -> dict[str, Any]:
        """The JSON form: the fields as they are."""
        return asdict(self)


@dataclass(frozen=True)
class Technique:
    """One technique assessed on the workload: the changes (key -> (before, after)), the outcome
    before and after, its impact and quality risk, and the verdict with its reason in numbers."""

    id: str  # stable: mixed_precision, grad_checkpointing, bigger_batch, qlora, weight_fp8, kv_fp8, ...
    title: str
    changes: dict[str, tuple[Any, Any]]  # workload key -> (before, after)
    before: Outcome
    after: Outcome
    impact: Impact
    quality_risk: QualityRisk
    verdict: Verdict
    reason: str  # one line: why it is (not) recommended, with the numbers
    tools: tuple[str, ...] = ()
    caveat: str = ""
    caveat_source: str = ""
    finding_ids: tuple[FindingId, ...] = ()  # findings this technique addresses
    effort: Effort = "low"
    capped_throughput_x: float | None = None  # the gain while the GPU idles as measured/stated (Amdahl)
    gain_pct: float | None = None  # expected gain toward the goal (capped as above): the ranking key
    needed_to_fit: bool = False  # a step of the recommended config that makes (or helps make) the job fit

    def to_dict(self) -> dict[str, Any]:
        """One entry of the plan's `techniques` (docs/json-schema.md)."""
        return {
            "id": self.id,
            "effort": self.effort,
            "capped_throughput_x": self.capped_throughput_x,
            "gain_pct": self.gain_pct,
            "needed_to_fit": self.needed_to_fit,
            "title": self.title,
            "changes": {k: {"from": a, "to": b} for k, (a, b) in self.changes.items()},
            "before": self.before.to_dict(),
            "after": self.after.to_dict(),
            "impact": self.impact.to_dict(),
            "quality_risk": self.quality_risk,
            "verdict": self.verdict,
            "reason": self.reason,
            "tools": list(self.tools),
            "caveat": self.caveat,
            "caveat_source": self.caveat_source,
            "finding_ids": list(self.finding_ids),
        }


@dataclass(frozen=True)
class IdleCause:
    """One candidate cause of low utilization, and whether evidence confirms or rules it out."""

    id: FindingId
    what: str
    status: IdleStatus
    detail: str
    how_to_check: str

    def to_dict(self) -> dict[str, Any]:
        """The JSON form: the fields as they are."""
        return asdict(self)


@dataclass(frozen=True)
class Diagnosis:
    """Section 1 of the plan: what limits the workload (one or two sentences with numbers), the
    bound, the ranked findings, and when the GPU idles, each usual cause found or ruled out."""

    summary: str  # one or two sentences: what limits this workload, in numbers
    bound: Bound | None
    findings: tuple[Finding, ...]
    idle_causes: tuple[IdleCause, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """The plan's `diagnosis` in JSON."""
        return {
            "summary": self.summary,
            "bound": self.bound,
            "findings": [f.to_dict() for f in self.findings],
            "idle_causes": [c.to_dict() for c in self.idle_causes],
        }


@dataclass(frozen=True)
class ConfigPlan:
    """The recommended configuration: the diff, what it predicts, and snippets to paste."""

    workload: Workload  # the recommended workload
    changes: dict[str, tuple[Any, Any]]
    applied: tuple[str, ...]  # technique ids, in the order applied
    outcome: Outcome
    snippets: dict[
        str, str
    ]  # label -> text (workload YAML, HF TrainingArguments, DeepSpeed JSON, vLLM command, ...)
    global_batch_before: int | None = None
    global_batch_after: int | None = None
    note: str = ""  # e.g. why the config moves the job to another GPU

    def to_dict(self) -> dict[str, Any]:
        """The plan's `config` in JSON: changes as {from, to}."""
        return {
            "workload": self.workload.to_dict(),
            "applied": list(self.applied),
            "note": self.note,
            "changes": {k: {"from": a, "to": b} for k, (a, b) in self.changes.items()},
            "outcome": self.outcome.to_dict(),
            "snippets": dict(self.snippets),
            "global_batch_before": self.global_batch_before,
            "global_batch_after": self.global_batch_after,
        }


@dataclass(frozen=True)
class MemoryView:
    """VRAM per GPU: the estimate's breakdown for the current and the recommended configuration."""

    current: dict[str, Any]
    recommended: dict[str, Any] | None
    method: MemoryMethod = "analytic"

    def to_dict(self) -> dict[str, Any]:
        """The plan's `memory` in JSON: the estimates as they are."""
        return asdict(self)


@dataclass(frozen=True)
class ScaleOption:
    """One parallel layout evaluated for the scaling decision: its name, GPU count, TP, PP,
    sharding and predicted outcome."""

    label: str  # e.g. "FSDP (ZeRO-3) on 8 GPUs"
    strategy: str  # scaling.strategy_of: single, replicas, ddp, zero2, fsdp, tp, fsdp+tp, tp+pp, ...
    num_gpus: int
    tp: int
    pp: int
    sharding: Sharding
    outcome: Outcome
    best_at_count: bool = False  # the layout the decision rule would pick at this GPU count

    def to_dict(self) -> dict[str, Any]:
        """One entry of the scaling section's `options` in JSON."""
        data = asdict(self)
        data["outcome"] = self.outcome.to_dict()
        return data


@dataclass(frozen=True)
class ScalingDecision:
    """Section 5 of the plan: the layout chosen and why, whether NVLink matters (with the
    predicted slowdown without it, %), every layout evaluated, and buy vs rent vs API."""

    strategy: str  # named: single GPU, DDP, ZeRO-2, FSDP (ZeRO-3), TP, TP + PP, ...
    num_gpus: int
    tp: int
    pp: int
    sharding: Sharding
    reason: str
    nvlink: NvlinkVerdict
    nvlink_reason: str
    nvlink_slowdown_pct: float | None  # predicted step-time (or latency) increase without NVLink
    options: tuple[ScaleOption, ...]
    hold_back: str = ""  # why "buy or rent more GPUs" waits for the pipeline fixes ('' when it need not)
    global_batch_note: str = ""  # why the chosen layout cannot keep the user's global batch ('' when it does)
    tco: Tco | None = None  # buy vs rent vs API at the chosen GPU count (None: not priced, see tco_note)
    tco_note: str = ""  # why there is no buy-vs-rent comparison ('' when there is one)

    def to_dict(self) -> dict[str, Any]:
        """The plan's `scaling` in JSON."""
        data = {k: v for k, v in asdict(self).items() if k not in ("options", "tco")}
        data["options"] = [o.to_dict() for o in self.options]
        data["tco"] = self.tco.to_dict() if self.tco is not None else None
        return data


@dataclass(frozen=True)
class ToolAdvice:
    """A tool advised for this workload: what it does, why here, and where it is documented."""

    id: str
    name: str
    why: str  # why for this workload (names the technique or finding)
    does: str
    source: str

    def to_dict(self) -> dict[str, Any]:
        """The JSON form: the fields as they are."""
        return asdict(self)


@dataclass(frozen=True)
class HardwareOption:
    """One catalog GPU (at a count) ranked for the goal: its predicted outcome, whether it meets
    the requirements, caveats, and the workload edits it needs besides the GPU."""

    gpu: str
    name: str
    num_gpus: int
    outcome: Outcome
    meets_requirements: bool
    caveats: tuple[str, ...]
    config: dict[str, Any]  # workload keys changed to make it fit this hardware (besides the GPU)
    rank: int = 0

    def to_dict(self) -> dict[str, Any]:
        """One entry of the plan's `hardware` in JSON."""
        return {
            "gpu": self.gpu,
            "name": self.name,
            "num_gpus": self.num_gpus,
            "rank": self.rank,
            "meets_requirements": self.meets_requirements,
            "caveats": list(self.caveats),
            "config": dict(self.config),
            "outcome": self.outcome.to_dict(),
        }


@dataclass(frozen=True)
class FitOption:
    """A change that makes the workload fit, with where it then fits."""

    label: str
    changes: dict[str, Any]
    gpu: str
    num_gpus: int
    outcome: Outcome

    def to_dict(self) -> dict[str, Any]:
        """One entry of the fit report's `options` in JSON."""
        return {
            "label": self.label,
            "changes": dict(self.changes),
            "gpu": self.gpu,
            "num_gpus": self.num_gpus,
            "outcome": self.outcome.to_dict(),
        }


@dataclass(frozen=True)
class FitReport:
    """Where the workload as given fits, and, if nowhere, what would make it fit."""

    fits_current: bool
    fits_anywhere: bool  # on any catalog GPU at the workload's GPU count
    message: str
    options: tuple[FitOption, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """The plan's `fit` in JSON."""
        return {
            "fits_current": self.fits_current,
            "fits_anywhere": self.fits_anywhere,
            "message": self.message,
            "options": [o.to_dict() for o in self.options],
        }


@dataclass
class Plan:
    """What `gpuwise plan` returns: diagnosis, ranked techniques, the recommended configuration,
    VRAM, scaling, tools, hardware options, the fit report, the evidence used and notes."""

    workload: Workload
    goal: Goal
    current: Outcome
    diagnosis: Diagnosis
    techniques: list[Technique]  # recommended first (ranked for the goal), then the rest
    config: ConfigPlan
    memory: MemoryView
    scaling: ScalingDecision
    tools: list[ToolAdvice]
    hardware: list[HardwareOption]
    fit: FitReport
    evidence: list[Evidence] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    input_pipeline: InputSizing | None = None  # vision training: cores and storage reads per GPU

    @property
    def recommended(self) -> list[Technique]:
        """The techniques the plan recommends, in ranked order."""
        return [t for t in self.techniques if t.verdict == "recommended"]

    def to_dict(self) -> dict[str, Any]:
        """The JSON document's body for `gpuwise plan --json` (docs/json-schema.md)."""
        return {
            "workload": self.workload.to_dict(),
            "goal": self.goal,
            "current": self.current.to_dict(),
            "fit": self.fit.to_dict(),
            "diagnosis": self.diagnosis.to_dict(),
            "techniques": [t.to_dict() for t in self.techniques],
            "config": self.config.to_dict(),
            "memory": self.memory.to_dict(),
            "scaling": self.scaling.to_dict(),
            "tools": [t.to_dict() for t in self.tools],
            "hardware": [h.to_dict() for h in self.hardware],
            "evidence": [e.to_dict() for e in self.evidence],
            "notes": list(self.notes),
            "input_pipeline": self.input_pipeline.to_dict() if self.input_pipeline else None,
        }
