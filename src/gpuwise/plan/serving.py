"""The plan for a serving workload with a demand and an SLO: what limits it, what each technique
changes against the SLO, and the cheapest deployment that meets the SLO at the rate.

Every number comes from the serving simulator (``gpuwise.serving``). A technique is recommended
only when its cheapest deployment still meets the SLO and costs at least
``SERVING_MIN_GAIN_PCT`` less; nothing that breaks the SLO is ever advised to save money, and
under ``goal: fit`` a model that already fits is not told to quantize.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from gpuwise.catalog import GPU, get_gpu, get_model, list_gpus, list_models
from gpuwise.diagnose import thresholds as th
from gpuwise.errors import GpuwiseError
from gpuwise.perf.cost import held_hours
from gpuwise.plan.serving_config import ServingConfig, serving_config, serving_tools
from gpuwise.serving.demand import request_rate
from gpuwise.serving.economics import deployment_at_demand
from gpuwise.serving.engines import scheduler_config
from gpuwise.serving.evaluate import REQUESTS_SIMULATED, Deployment, ReplicaSearch, evaluate_deployment
from gpuwise.serving.sweep import GPU_COUNTS, cheapest, sweep
from gpuwise.workload import Workload
from gpuwise.workload.ml_framework import runs_on

if TYPE_CHECKING:  # pragma: no cover
    from gpuwise.diagnose import Evidence, Finding
    from gpuwise.plan.serving_evidence import Calibration
    from gpuwise.plan.types import ToolAdvice

__all__ = ["Risk", "ServingPlan", "ServingTechnique", "Verdict", "plan_serving", "wants_serving_plan"]

Verdict = Literal["recommended", "optional", "not-recommended", "breaks-slo", "not-needed", "in-use"]
Risk = Literal["none", "low", "medium", "high"]


@dataclass(frozen=True)
class ServingTechnique:
    """One change, re-simulated: its cheapest deployment on the plan's GPU type, against the SLO."""

    id: str
    title: str
    change: dict[str, Any]
    risk: Risk
    verdict: Verdict
    why: str
    best: Deployment | None = None
    monthly_usd: float | None = None
    saving_pct: float | None = None  # vs the plan's cheapest deployment (positive = cheaper)
    goodput_gain_pct: float | None = None  # per replica, same GPU and tp

    def to_dict(self) -> dict[str, Any]:
        """The JSON form, with its best deployment (or None)."""
        data = asdict(self)
        data["best"] = self.best.to_dict() if self.best else None
        return data


@dataclass(frozen=True)
class ServingPlan:
    """`gpuwise plan --rate`: the cheapest deployment meeting the rate (req/s) and latency SLO
    (s) per GPU type, the current one, techniques that lower the cost, and what could not be priced."""

    workload: dict[str, Any]
    rate_rps: float
    slo: dict[str, float]
    engine: str
    current: Deployment  # the workload's own GPU, count and tp
    cheapest: Deployment | None  # cheapest as configured, over every priced catalog GPU
    options: list[Deployment]  # the cheapest deployment of each GPU type that meets the SLO
    unpriced: list[Deployment]  # GPUs meeting the SLO with no verified price (fewest GPUs first)
    techniques: list[ServingTechnique]
    combined: ServingTechnique | None  # the recommended workload changes applied together
    diagnosis: list[str]
    requests_simulated: int
    deployments_evaluated: int
    seconds: float
    notes: list[str] = field(default_factory=list)
    sweep: list[Deployment] = field(default_factory=list)  # every GPU type × node size × tp evaluated
    calibration: Calibration | None = None  # from a load test (plan --evidence RUN)
    findings: list[Finding] = field(default_factory=list)  # the rules over the load test's evidence
    evidence: list[Evidence] = field(default_factory=list)
    config: ServingConfig | None = None  # the recommended deployment's VRAM per GPU and engine commands
    tools: list[ToolAdvice] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """The JSON document's body for a serving plan (docs/json-schema.md, kind "serving")."""
        return {
            "kind": "serving",
            "workload": self.workload,
            "rate_rps": self.rate_rps,
            "slo": self.slo,
            "engine": self.engine,
            "current": self.current.to_dict(),
            "cheapest": self.cheapest.to_dict() if self.cheapest else None,
            "options": [d.to_dict() for d in self.options],
            "unpriced": [d.to_dict() for d in self.unpriced],
            "techniques": [t.to_dict() for t in self.techniques],
            "combined": self.combined.to_dict() if self.combined else None,
            "diagnosis": list(self.diagnosis),
            "requests_simulated": self.requests_simulated,
            "deployments_evaluated": self.deployments_evaluated,
            "seconds": self.seconds,
            "notes": list(self.notes),
            "sweep": [d.to_dict() for d in self.sweep],
            "calibration": self.calibration.to_dict() if self.calibration else None,
            "findings": [f.to_dict() for f in self.findings],
            "evidence": [e.to_dict() for e in self.evidence],
            "config": self.config.to_dict() if self.config else None,
            "tools": [t.to_dict() for t in self.tools],
        }


def wants_serving_plan(w: Workload) -> bool:
    """A serving workload with a demand gets the serving plan (the dispatch in ``plan``)."""
    if not (w.is_inference and request_rate(w) is not None):
        return False
    arch = get_model(w.model) if w.model else None
    if arch is None or not (arch.is_transformer and arch.is_decoder):
        raise GpuwiseError(
            f"{w.model or 'the model'} is not a decoder LLM: a serving demand (serving.rate) plans generation"
        )
    return True


def plan_serving(
    workload: Workload, gpus: list[GPU] | None = None, evidence: Sequence[Evidence] = ()
) -> ServingPlan:
    """Sweep the catalog at the demand, pick the cheapest deployment meeting the SLO, try techniques.

    With a load test in ``evidence`` every step time is first scaled by its measured / predicted speed
    (``plan.serving_evidence``), and the rules diagnose the measurement against the workload's SLO."""
    start = time.perf_counter()
    if workload.serving is None:
        raise GpuwiseError("a serving plan needs a serving: section with a rate")
    if workload.expert_parallel > 1:
        ep = workload.expert_parallel
        raise GpuwiseError(
            f"expert parallelism (--ep {ep}) is not modelled for serving plans: vLLM and SGLang shard the "
            f"experts over a replica's own GPUs, so plan with --tp {max(ep, workload.tp)} instead (same GPUs "
            "and memory per GPU; the step time then assumes tensor parallelism's all-reduce, not expert "
            "parallelism's all-to-all) and launch with --enable-expert-parallel"
        )
    calibration, findings, measured = _calibrate(workload, evidence)
    if calibration is not None:
        from gpuwise.plan.serving_evidence import calibrated

        workload = calibrated(workload, calibration)
    assert workload.serving is not None
    search = ReplicaSearch(workload)
    candidates = gpus if gpus is not None else list_gpus()
    rows = sweep(workload, [g for g in candidates if runs_on(workload.framework, g)], search=search)
    own_gpu = get_gpu(workload.gpu)
    current = deployment_at_demand(workload, search)  # the figure `cost` shows for this workload
    assert current is not None  # wants_serving_plan: the workload has a demand
    best = cheapest(rows)
    options = _best_per_gpu([r for r in rows if r.meets_slo and r.monthly_usd is not None])
    unpriced = sorted(
        _best_per_gpu([r for r in rows if r.meets_slo and r.monthly_usd is None], key="gpus"),
        key=lambda r: (r.total_gpus, r.gpu),
    )
    target_gpu = get_gpu(best.gpu) if best else own_gpu
    baseline = best or current
    techniques = [_try(t, workload, target_gpu, baseline) for t in _techniques(workload, current)]
    techniques += [_larger_tp(rows, baseline), _mig(search, rows, baseline)]
    combined = _combined(techniques, workload, target_gpu, baseline)
    config = _config(workload, best, techniques, combined)
    return ServingPlan(
        workload=workload.to_dict(),
        rate_rps=search.rate or 0.0,
        slo={t.key: t.seconds for t in search.slo},
        engine=workload.serving.engine,
        current=current,
        cheapest=best,
        options=options,
        unpriced=unpriced[:5],
        techniques=techniques,
        combined=combined,
        diagnosis=_diagnosis(current, best),
        requests_simulated=REQUESTS_SIMULATED,
        deployments_evaluated=len(rows) + 1,
        seconds=time.perf_counter() - start,
        notes=_notes(workload, search) + _evidence_notes(calibration, measured),
        sweep=rows,
        calibration=calibration,
        findings=findings,
        evidence=measured,
        config=config,
        tools=serving_tools(workload, config, search.rate or 0.0) if config else [],
    )


def _config(
    w: Workload,
    best: Deployment | None,
    techniques: list[ServingTechnique],
    combined: ServingTechnique | None,
) -> ServingConfig | None:
    """The deployment the plan recommends, as a launch configuration: the recommended techniques
    together when they were re-simulated together, else the single recommended one that saves most,
    else the cheapest deployment as the workload is."""
    chosen: ServingTechnique | None = None
    if combined is not None and combined.verdict == "recommended" and combined.best is not None:
        chosen = combined
    else:
        singles = [
            t
            for t in techniques
            if t.verdict == "recommended" and t.best is not None and t.change and t.id not in ("mig",)
        ]
        chosen = max(singles, key=lambda t: t.saving_pct or 0.0, default=None)
    if chosen is not None and chosen.best is not None:
        return serving_config(w, chosen.best, chosen.change)
    return serving_config(w, best, {}) if best is not None else None


def _calibrate(
    workload: Workload, evidence: Sequence[Evidence]
) -> tuple[Calibration | None, list[Finding], list[Evidence]]:
    """The load test's calibration (one load test per plan) and the rules' findings on it."""
    if not evidence:
        return None, [], []
    from gpuwise.diagnose import diagnose
    from gpuwise.plan.serving_evidence import calibrate

    loadtests = [ev for ev in evidence if ev.source == "loadtest"]
    if len(loadtests) != 1 or len(evidence) != 1:
        raise GpuwiseError(
            f"a serving plan takes one load test as --evidence (got {len(loadtests)} load test(s) among "
            f"{len(evidence)} item(s)); profile or trace evidence goes to a workload without serving.rate"
        )
    ev = loadtests[0]
    calibration = calibrate(workload, ev)
    return calibration, diagnose(ev), [ev]


def _evidence_notes(calibration: Calibration | None, evidence: list[Evidence]) -> list[str]:
    notes = [n for ev in evidence for n in ev.notes]
    if calibration is not None:
        notes.insert(0, calibration.line)
        notes.extend(calibration.notes)
    return notes


def _best_per_gpu(rows: list[Deployment], key: str = "cost") -> list[Deployment]:
    best: dict[str, Deployment] = {}
    for r in rows:
        score = (r.monthly_usd or 0.0, r.total_gpus) if key == "cost" else (r.total_gpus, 0.0)
        old = best.get(r.gpu)
        if old is None or score < (
            (old.monthly_usd or 0.0, old.total_gpus) if key == "cost" else (old.total_gpus, 0.0)
        ):
            best[r.gpu] = r
    return sorted(best.values(), key=lambda r: (r.monthly_usd or 0.0, r.total_gpus))


_TEXT = {
    "queueing": "requests queue: the replicas are busy when requests arrive, so TTFT includes waiting",
    "prefill-bound": "prefill (prompt processing) takes most of the GPU time and sets time to first token",
    "decode-bandwidth-bound": "decode is bandwidth-bound: each step reads all weights and the KV cache",
    "decode-compute-bound": "decode is compute-bound: the batch is large enough that matmul FLOPs dominate",
    "kv-capacity-bound": "the KV cache is full: the batch is capped by KV memory (or requests are preempted)",
}


def _diagnosis(current: Deployment, best: Deployment | None) -> list[str]:
    lines: list[str] = []
    where = f"{current.gpus_per_node} × {current.gpu} (tp {current.tp})"
    if not current.fits:
        lines.append(f"{where}: {current.note}")
    elif current.goodput_rps_per_replica <= 0:
        lines.append(
            f"{where} cannot meet the SLO at any rate ({current.binding_slo} is missed even at low load)"
        )
    else:
        lines.append(
            f"{where}: one replica meets the SLO up to {current.goodput_rps_per_replica:.2f} req/s "
            f"(limit: {current.binding_slo or 'throughput, before any SLO target'}); "
            f"the rate needs {current.replicas} replica(s)"
        )
        lines.extend(f"{where}: {_TEXT[b]}" for b in current.diagnosis)
    if best is not None and (best.gpu, best.gpus_per_node, best.tp) != (
        current.gpu,
        current.gpus_per_node,
        current.tp,
    ):
        lines.append(
            f"cheapest meeting the SLO: {best.where}: " + "; ".join(_TEXT[b] for b in best.diagnosis[:2])
        )
    return lines


def _notes(w: Workload, search: ReplicaSearch) -> list[str]:
    notes = [
        f"each goodput search simulates {REQUESTS_SIMULATED} Poisson arrivals "
        f"(seed {w.serving.seed if w.serving else 0}); p99 is read from them",
        f"prices: catalog $/GPU-hour x the hours the GPUs are held ({held_hours(w).detail}); "
        "GPUs without a verified price are listed apart",
    ]
    if w.serving and not any(t.metric == "ttft" for t in w.serving.slo):
        notes.append(
            f"no TTFT target given: p99 TTFT ≤ {th.SERVING_IMPLICIT_TTFT_P99_S:g} s keeps queues bounded"
        )
    return notes


# --- techniques -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Candidate:
    id: str
    title: str
    change: dict[str, Any]
    risk: Risk
    note: str = ""  # set: the technique is not simulated (verdict and why given here)
    verdict: Verdict = "not-recommended"


def _techniques(w: Workload, current: Deployment) -> list[_Candidate]:
    spec = w.serving
    assert spec is not None
    out: list[_Candidate] = []
    fits_now = current.fits and current.goodput_rps_per_replica > 0
    quant_note = (
        "the model already fits and meets the SLO; goal is fit" if w.goal == "fit" and fits_now else ""
    )
    if w.precision in ("bf16", "fp16"):
        out.append(
            _Candidate("weight_fp8", "FP8 weights", {"precision": "fp8"}, "low", quant_note, "not-needed")
        )
        out.append(
            _Candidate(
                "weight_int4",
                "INT4 (AWQ/GPTQ) weights",
                {"precision": "int4"},
                "medium",
                quant_note,
                "not-needed",
            )
        )
    if w.kv_cache_dtype in ("auto", "bf16", "fp16"):
        out.append(_Candidate("kv_fp8", "FP8 KV cache", {"kv_cache_dtype": "fp8"}, "low"))
    if spec.prefix_hit_rate > 0:
        out.append(
            _Candidate(
                "prefix_off",
                f"prefix caching (at the given {spec.prefix_hit_rate:.0%} hit rate) — shown switched off",
                {"serving.prefix_hit_rate": 0.0},
                "none",
            )
        )
    else:
        out.append(
            _Candidate(
                "prefix_cache",
                "prefix caching",
                {},
                "none",
                "give serving.prefix_hit_rate (share of prompt tokens seen before) to quantify it",
                "optional",
            )
        )
    if spec.speculative_tokens == 0:
        out.append(
            _Candidate(
                "speculative",
                "speculative decoding (3 draft tokens, 70 % acceptance)",
                {"serving.speculative_tokens": 3, "serving.acceptance_rate": 0.7},
                "low",
            )
        )
    chunked = scheduler_config(spec).chunked_prefill
    out.append(
        _Candidate(
            "chunked_prefill",
            "chunked prefill " + ("off" if chunked else "on"),
            {"serving.chunked_prefill": not chunked},
            "none",
        )
    )
    smaller = _smaller_model(w.model)
    if smaller:
        out.append(_Candidate("smaller_model", f"a smaller model: {smaller}", {"model": smaller}, "high"))
    for engine in ("vllm", "sglang", "tensorrt-llm", "tgi", "llama.cpp"):
        if engine != spec.engine:
            out.append(_Candidate(f"engine_{engine}", f"engine: {engine}", {"serving.engine": engine}, "low"))
    return out


def _smaller_model(model_id: str) -> str | None:
    """The largest catalog model of the same family line with at most half the parameters."""
    try:
        arch = get_model(model_id)
    except GpuwiseError:
        return None
    root = arch.family.split(".")[0]
    size = arch.param_counts().total
    same = [
        m
        for m in list_models()
        if m.is_decoder and m.family.split(".")[0] == root and m.param_counts().total <= size / 2
    ]
    return max(same, key=lambda m: m.param_counts().total).id if same else None


def _changed(w: Workload, change: dict[str, Any]) -> Workload:
    from gpuwise.workload import workload_from_mapping

    data = {**w.to_dict(), **change}
    return workload_from_mapping(data, source=w.source)


def _try(c: _Candidate, w: Workload, gpu: GPU, baseline: Deployment) -> ServingTechnique:
    """Re-simulate the changed workload on ``gpu`` (node sizes up to the baseline's: a technique is
    worth it when it needs no more GPUs per node) and judge it against the SLO and the baseline."""
    if c.note:
        return ServingTechnique(c.id, c.title, c.change, c.risk, c.verdict, c.note)
    try:
        changed = _changed(w, c.change)
        counts = tuple(n for n in GPU_COUNTS if n <= baseline.gpus_per_node) or (1,)
        rows = sweep(changed, [gpu], counts=counts, search=ReplicaSearch(changed))
    except GpuwiseError as err:
        return ServingTechnique(c.id, c.title, c.change, c.risk, "not-recommended", str(err))
    best = cheapest(rows)
    same = next((r for r in rows if (r.gpus_per_node, r.tp) == (baseline.gpus_per_node, baseline.tp)), None)
    gain = None
    if same is not None and baseline.goodput_rps_per_replica > 0:
        gain = 100 * (same.goodput_rps_per_replica / baseline.goodput_rps_per_replica - 1)
    if not any(r.meets_slo for r in rows):
        why = f"no deployment on {gpu.id} meets the SLO with it"
        return ServingTechnique(c.id, c.title, c.change, c.risk, "breaks-slo", why, best, None, None, gain)
    verdict, why, saving = _verdict(best, baseline, c.risk)
    if c.id == "prefix_off" and saving is not None and saving < 0:
        verdict, why = "in-use", f"keep it on: switched off, the deployment costs {-saving:.0f} % more"
    monthly = best.monthly_usd if best else None
    return ServingTechnique(c.id, c.title, c.change, c.risk, verdict, why, best, monthly, saving, gain)


def _verdict(best: Deployment | None, baseline: Deployment, risk: Risk) -> tuple[Verdict, str, float | None]:
    """Recommended only when it meets the SLO and saves at least SERVING_MIN_GAIN_PCT."""
    if best is None or best.monthly_usd is None:
        return "not-recommended", "no priced deployment meets the SLO with it", None
    saving = 100 * (1 - best.monthly_usd / baseline.monthly_usd) if baseline.monthly_usd else None
    if saving is not None and saving >= th.SERVING_MIN_GAIN_PCT:
        verdict: Verdict = "recommended" if risk in ("none", "low") else "optional"
        return verdict, f"meets the SLO on {best.where} for {saving:.0f} % less", saving
    if saving is not None and saving <= -th.SERVING_MIN_GAIN_PCT:
        return "not-recommended", f"costs {-saving:.0f} % more at this rate and SLO", saving
    return "not-recommended", f"{best.where}: no saving at this rate and SLO", saving


def _larger_tp(rows: list[Deployment], baseline: Deployment) -> ServingTechnique:
    """Tensor parallelism above the baseline's on the same GPU type (from the sweep itself)."""
    bigger = [r for r in rows if r.gpu == baseline.gpu and r.tp > baseline.tp and r.meets_slo]
    best = min(bigger, key=lambda r: (r.monthly_usd or float("inf"), r.total_gpus), default=None)
    title = f"larger tensor parallelism (tp > {baseline.tp})"
    if best is None:
        return ServingTechnique(
            "larger_tp", title, {}, "none", "not-recommended", "no larger tp meets the SLO"
        )
    verdict, why, saving = _verdict(best, baseline, "none")
    gain = 100 * (
        best.goodput_rps_per_replica / best.tp / (baseline.goodput_rps_per_replica / baseline.tp) - 1
    )
    return ServingTechnique(
        "larger_tp", title, {"tp": best.tp}, "none", verdict, why, best, best.monthly_usd, saving, gain
    )


def _mig(search: ReplicaSearch, rows: list[Deployment], baseline: Deployment) -> ServingTechnique:
    """Serve from MIG slices of the cheapest priced MIG-capable GPU (small models)."""
    from gpuwise.serving.mig import MIG_PROFILES, can_slice, mig_slice

    sliceable = [
        get_gpu(r.gpu) for r in sorted(rows, key=lambda r: r.monthly_usd or float("inf")) if r.monthly_usd
    ]
    gpu = next((g for g in sliceable if can_slice(g)), None)
    title = "MIG slices (fractional GPUs)"
    if gpu is None:
        return ServingTechnique("mig", title, {}, "low", "not-recommended", "no priced MIG-capable GPU fits")
    tried = [evaluate_deployment(search, mig_slice(gpu, n), 1, 1) for n in MIG_PROFILES]
    ok = [d for d in tried if d.meets_slo and d.monthly_usd is not None]
    best = min(ok, key=lambda d: d.monthly_usd or 0.0, default=None)
    verdict, why, saving = _verdict(best, baseline, "low")
    if best is None:
        why = f"no MIG slice of {gpu.id} meets the SLO"
    return ServingTechnique(
        "mig",
        title,
        {"gpu": best.gpu} if best else {},
        "low",
        verdict,
        why,
        best,
        best.monthly_usd if best else None,
        saving,
        None,
    )


def _combined(
    techniques: list[ServingTechnique], w: Workload, gpu: GPU, baseline: Deployment
) -> ServingTechnique | None:
    """The recommended workload changes together (one engine: the one that saved most), re-simulated:
    the cheapest configuration meeting the SLO with low-risk techniques."""
    chosen = [
        t for t in techniques if t.verdict == "recommended" and t.change and t.id not in ("mig", "larger_tp")
    ]
    engines = sorted((t for t in chosen if t.id.startswith("engine_")), key=lambda t: -(t.saving_pct or 0.0))
    chosen = [t for t in chosen if not t.id.startswith("engine_")] + engines[:1]
    if len(chosen) < 2:
        return None
    change: dict[str, Any] = {}
    for t in chosen:
        change.update(t.change)
    title = " + ".join(t.title for t in chosen)
    return _try(_Candidate("combined", title, change, "low"), w, gpu, baseline)
