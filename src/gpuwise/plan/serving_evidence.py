"""A load test calibrates the serving plan: `plan WORKLOAD --evidence RUN` (run id or loadtest --json file).

The simulator replays the load test's level (its request rate or concurrency, its mean prompt and output
lengths) on the deployment the load test declared (`loadtest --predict`), else the workload's own; the
measured TPOT p50 over the simulated one is the calibration factor, bounded by
``SERVING_CALIBRATION_BOUNDS``, which the plan then applies to every step time (``serving.step_time_factor``).
A load test of another model is refused in one line; an endpoint whose model gpuwise cannot name is used
with the assumption stated.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from gpuwise.catalog import get_gpu
from gpuwise.diagnose import Evidence, load_evidence
from gpuwise.diagnose import thresholds as th
from gpuwise.diagnose.finding import Confidence
from gpuwise.errors import GpuwiseError
from gpuwise.workload import Workload
from gpuwise.workload.serving import ENGINES, LengthDist, ServingSpec

__all__ = [
    "Calibration",
    "calibrate",
    "calibrated",
    "has_loadtest",
    "is_run_ref",
    "max_rate_at",
    "predicted_tpot_p50",
    "read_serving_evidence",
    "unloaded_ttft",
]

_RUN_REF = re.compile(r"^(last|latest|-?\d+)$", re.IGNORECASE)
_CONCURRENT_RATE = 1e6  # a concurrency level: every request queued at once, max_num_seqs = C in flight
_SIZE = re.compile(r"(?<![\d.])(\d+(?:\.\d+)?)\s*b(?![a-z])", re.IGNORECASE)  # "70B", "8b", "1.5B"


@dataclass(frozen=True)
class Calibration:
    """What the plan learned from a load test, and the factor it applied."""

    source: str  # "loadtest run 3" or the file
    level: str
    measured_tpot_p50_s: float
    predicted_tpot_p50_s: float
    raw_factor: float  # measured / predicted
    factor: float  # within SERVING_CALIBRATION_BOUNDS: what the plan applies
    clamped: bool
    confidence: Confidence
    deployment: str  # what was simulated: "1 × h100-sxm (tp 1), bf16, vllm"
    requests_ok: int
    error_pct: float
    notes: tuple[str, ...] = field(default=())
    # with loadtest --find-max-rate: the highest rate it found meeting its own SLO, and the calibrated
    # simulator's goodput for the same SLO on the same deployment (a check of the single factor)
    measured_max_rate_rps: float | None = None
    measured_max_rate_at_least: bool = False  # the search's highest rate still met the SLO
    predicted_max_rate_rps: float | None = None

    @property
    def line(self) -> str:
        """The one wording of the calibration (plan view, notes, README)."""
        measured, predicted = self.measured_tpot_p50_s * 1000, self.predicted_tpot_p50_s * 1000
        text = (
            f"calibrated from {self.source} ({self.level}): measured TPOT p50 {measured:.1f} ms "
            f"vs predicted {predicted:.1f} ms on {self.deployment} → step times × "
            f"{self.factor:.2f}"
            + (f" (clamped from {self.raw_factor:.2f})" if self.clamped else "")
            + f", confidence {self.confidence}"
        )
        if self.measured_max_rate_rps and self.predicted_max_rate_rps is not None:
            text += (
                "; max rate under the load test's SLO: measured "
                + ("≥ " if self.measured_max_rate_at_least else "")
                + f"{self.measured_max_rate_rps:.3g} req/s, "
                f"calibrated simulation {self.predicted_max_rate_rps:.3g} req/s"
            )
        return text

    def to_dict(self) -> dict[str, Any]:
        """The JSON form, with its notes and the one-line summary."""
        data = asdict(self)
        data["notes"] = list(self.notes)
        data["line"] = self.line
        return data


def is_run_ref(text: str) -> bool:
    """'3', 'last', '-2' that is not a file: a run in the store."""
    return bool(_RUN_REF.match(text.strip())) and not Path(text).exists()


def read_serving_evidence(refs: Sequence[str | Path], store: str | Path | None = None) -> list[Evidence]:
    """Every --evidence item: a run id / 'last' from the run store (a load test), or a JSON file."""
    from gpuwise.loadtest import saved_results as loadtest_store
    from gpuwise.loadtest.evidence import loadtest_evidence

    out: list[Evidence] = []
    for ref in refs:
        text = str(ref)
        if not is_run_ref(text):
            out.extend(load_evidence(text))
            continue
        result = loadtest_store.load(text, store)
        ev = loadtest_evidence(result)
        if ev is None:
            raise GpuwiseError(f"loadtest run {result.run_id} has no successful request to calibrate from")
        out.append(ev)
    return out


def has_loadtest(evidence: Sequence[Evidence]) -> bool:
    """Is any of `evidence` a load test (`gpuwise loadtest --json`)? The serving plan calibrates on it."""
    return any(ev.source == "loadtest" for ev in evidence)


def _served_catalog_id(name: str) -> str | None:
    """The catalog id of a served model name ('meta-llama/Meta-Llama-3-8B-Instruct' -> 'llama-3-8b'),
    None when gpuwise cannot tell."""
    from gpuwise.catalog.models import list_models

    ids = {m.id for m in list_models()}
    key = name.strip().lower().split("/")[-1]
    key = re.sub(r"-(instruct|chat|hf|it|base)$", "", key)
    for candidate in (key, key.removeprefix("meta-")):
        if candidate in ids:
            return candidate
    return None


def _deployment(workload: Workload, ev: Evidence) -> tuple[Workload, list[str]]:
    """The workload as the load test ran it: its declared GPU, count, tp and engine; a model mismatch
    is an error, an unnamed endpoint an assumption said out loud."""
    declared = ev.serving.serving_declared or {}
    notes: list[str] = []
    what = ev.label or "the load test"
    model = declared.get("model") or (
        _served_catalog_id(ev.serving.serving_model) if ev.serving.serving_model else None
    )
    if model and model != workload.model:
        raise GpuwiseError(
            f"{what} measured {model} (served as {ev.serving.serving_model!r}), "
            f"the workload is {workload.model}: "
            "calibrating one from the other would be wrong; load-test this model's endpoint "
            "(gpuwise loadtest URL --predict WORKLOAD.yaml)"
        )
    if not model and ev.serving.serving_model:
        notes.extend(_size_check(ev.serving.serving_model, workload, what))
    if not declared.get("gpu"):
        assumed = _where(workload)
        name = "" if model else f"the served model {ev.serving.serving_model!r} is not a catalog name and "
        notes.append(
            f"{what}: {name}no deployment was declared (loadtest --predict); "
            f"assumed it measured {workload.model} on {assumed}, as the workload says"
        )
        return workload, notes
    spec = workload.serving or ServingSpec()
    engine = declared.get("engine")
    changes: dict[str, Any] = {
        "gpu": declared["gpu"],
        "num_gpus": int(declared.get("num_gpus") or workload.num_gpus),
        "tp": int(declared.get("tp") or workload.tp),
    }
    if declared.get("precision"):
        changes["precision"] = declared["precision"]
    if engine in ENGINES:
        changes["serving"] = replace(spec, engine=engine)
    ran = workload.with_changes(**changes)
    if _where(ran) != _where(workload):
        notes.append(
            f"{what} measured {_where(ran)}; the plan is for {_where(workload)}: the factor is "
            "applied as a property of the serving stack"
        )
    return ran, notes


def _size_check(served: str, workload: Workload, what: str) -> list[str]:
    """A served name gpuwise cannot map to the catalog: refuse when the size it states ("…-70B-…") is not
    the workload model's; when it states none, say the match is unchecked (the confidence is then low)."""
    from gpuwise.catalog.models import get_model

    arch = get_model(workload.model)
    params_b = arch.params_b or arch.num_params / 1e9
    sizes = [float(m) for m in _SIZE.findall(served.split("/")[-1])]
    if not sizes:
        return [f"{what}: the served model {served!r} states no size: unchecked against {workload.model}"]
    size = sizes[0]
    if abs(size / params_b - 1) > th.SERVING_MODEL_SIZE_TOLERANCE:
        raise GpuwiseError(
            f"{what} served {served!r} ({size:g}B parameters by its name), the workload is {workload.model} "
            f"({params_b:.3g}B): calibrating one from the other would be wrong; load-test this model's "
            "endpoint (gpuwise loadtest URL --predict WORKLOAD.yaml)"
        )
    return []


def _where(w: Workload) -> str:
    return f"{w.num_gpus} × {w.gpu} (tp {w.tp}), {w.precision}, {_engine(w)}"


def _engine(w: Workload) -> str:
    return w.serving.engine if w.serving else "vllm"


def _level_workload(ran: Workload, ev: Evidence) -> tuple[Workload, float, int]:
    """The load test's level as a serving workload on one replica: fixed lengths at the measured means,
    no prefix hits (the load test's prompts are random), the rate or the concurrency split over replicas."""
    from gpuwise.serving.evaluate import REQUESTS_SIMULATED

    spec = ran.serving or ServingSpec()
    replicas = max(1, ran.num_gpus // (ran.tp * ran.pp))
    prompt = max(1, round(ev.serving.serving_prompt_tokens_mean or ran.seq_len))
    output = max(1, round(ev.serving.serving_output_tokens_mean or ran.output_len))
    count = min(max(ev.serving.serving_requests_ok or 0, 20), REQUESTS_SIMULATED)
    knobs: dict[str, Any] = {
        "prompt_len": LengthDist(float(prompt)),
        "output_len": LengthDist(float(output)),
        "prefix_hit_rate": 0.0,
        "step_time_factor": None,
        "rate_rps": 1.0,
        "tokens_per_day": None,
    }
    if ev.serving.serving_offered_rate_rps:
        rate = ev.serving.serving_offered_rate_rps / replicas
    else:
        rate = _CONCURRENT_RATE
        knobs["max_num_seqs"] = max(1, round((ev.serving.serving_concurrency or 1) / replicas))
    w = ran.with_changes(
        seq_len=prompt,
        output_len=output,
        num_gpus=ran.tp * ran.pp,
        serving=replace(spec, **knobs),
    )
    return w, rate, count


def predicted_tpot_p50(ran: Workload, ev: Evidence) -> tuple[float, str]:
    """The simulator's TPOT p50 for the load test's level on the deployment that served it."""
    from gpuwise.serving.demand import draw_requests
    from gpuwise.serving.simulator import Replica, simulate

    w, rate, count = _level_workload(ran, ev)
    gpu = get_gpu(w.gpu)
    run = simulate(Replica(w, gpu), draw_requests(w, count), rate)
    where = _where(ran)
    return run.percentile("tpot", 50), where


def unloaded_ttft(ran: Workload, ev: Evidence, factor: float) -> float:
    """The mean prompt prefilled alone on an idle replica, at the calibrated speed."""
    from gpuwise.serving.evaluate import prefill_seconds
    from gpuwise.serving.simulator import Replica

    w, _, _ = _level_workload(ran, ev)
    return prefill_seconds(Replica(w, get_gpu(w.gpu))) * factor


def calibrate(workload: Workload, ev: Evidence) -> Calibration | None:
    """Measured over predicted TPOT p50 for the load test's level; fills the evidence's predicted fields
    and the SLO it is held to. None when the level has no TPOT (one output token, or no streaming)."""
    ran, assumed = _deployment(workload, ev)
    ev.notes.extend(assumed)
    own_slo = dict(ev.serving.serving_slo_s or {})  # the load test's --slo, before the workload's replaces it
    if workload.serving is not None:
        ev.serving.serving_slo_s = {t.key: t.seconds for t in workload.serving.slo}
    measured = (ev.serving.serving_latency_s or {}).get("tpot_p50")
    if not measured:
        ev.notes.append("no TPOT measured (one output token or no streaming): the plan is not calibrated")
        return None
    predicted, where = predicted_tpot_p50(ran, ev)
    if not predicted or not math.isfinite(predicted):
        ev.notes.append(f"the simulator finished no request of the level on {where}: not calibrated")
        return None
    ev.serving.serving_predicted_tpot_p50_s = predicted
    raw = measured / predicted
    _refuse_factor(ev, raw, measured, predicted, where)
    low, high = th.SERVING_CALIBRATION_BOUNDS
    factor = min(max(raw, low), high)
    clamped = factor != raw
    ok = ev.serving.serving_requests_ok or 0
    error_pct = ev.serving.serving_error_pct or 0.0
    notes = _quality_notes(ok, error_pct, raw if clamped else None)
    ev.serving.serving_predicted_ttft_unloaded_s = unloaded_ttft(ran, ev, factor)
    max_rate = max_rate_at(ran, ev, own_slo, factor) if ev.serving.serving_max_rate_rps else None
    notes.extend(_max_rate_disagreement(ev, max_rate))
    unchecked = any("unchecked against" in n for n in ev.notes)
    confidence: Confidence = "low" if notes or unchecked else "medium"
    return Calibration(
        source=ev.label,
        level=ev.serving.serving_level or "",
        measured_tpot_p50_s=measured,
        predicted_tpot_p50_s=predicted,
        raw_factor=raw,
        factor=factor,
        clamped=clamped,
        confidence=confidence,
        deployment=where,
        requests_ok=ok,
        error_pct=error_pct,
        notes=tuple(notes),
        measured_max_rate_rps=ev.serving.serving_max_rate_rps,
        measured_max_rate_at_least=bool(ev.serving.serving_max_rate_at_least),
        predicted_max_rate_rps=max_rate,
    )


def _quality_notes(ok: int, error_pct: float, clamped_raw: float | None) -> list[str]:
    """Why the calibration's confidence is low: few requests, failed requests, a clamped factor."""
    notes = []
    if ok < th.SERVING_CALIBRATION_MIN_REQUESTS:
        notes.append(f"only {ok} successful requests (< {th.SERVING_CALIBRATION_MIN_REQUESTS}): a p50 of few")
    if error_pct >= th.SERVING_ERROR_PCT:
        notes.append(f"{error_pct:.1f} % of the level's requests failed")
    if clamped_raw is not None:
        low, high = th.SERVING_CALIBRATION_BOUNDS
        notes.append(
            f"measured / predicted = {clamped_raw:.2f} is outside {low:g}–{high:g}: clamped; the endpoint is "
            "probably not the deployment the plan assumes"
        )
    return notes


def _refuse_factor(ev: Evidence, raw: float, measured: float, predicted: float, where: str) -> None:
    """Refuse a load test whose TPOT is so far from the prediction that it measured another deployment."""
    low, high = th.SERVING_CALIBRATION_REFUSE
    if low <= raw <= high:
        return
    raise GpuwiseError(
        f"{ev.label or 'the load test'}: measured TPOT p50 {measured * 1000:.3g} ms is {raw:.3g}× the "
        f"prediction ({predicted * 1000:.3g} ms on {where}), outside {low:g}–{high:g}×: the endpoint is not "
        "the deployment the workload describes (another model size, GPU, quantization or engine); declare "
        "what it runs with gpuwise loadtest URL --predict WORKLOAD.yaml, or plan without this evidence"
    )


def _max_rate_disagreement(ev: Evidence, predicted: float | None) -> list[str]:
    """A note when the measured max rate and the calibrated simulation's are farther apart than
    ``SERVING_MAX_RATE_AGREE_RATIO`` (a measured "at least" only counts when the simulation is lower)."""
    measured = ev.serving.serving_max_rate_rps
    if not measured or not predicted:
        return []
    ratio = measured / predicted
    if ev.serving.serving_max_rate_at_least:
        ratio = max(ratio, 1.0)
    apart = max(ratio, 1 / ratio)
    if apart <= th.SERVING_MAX_RATE_AGREE_RATIO:
        return []
    return [
        f"max rate under the load test's SLO: measured {measured:.3g} req/s vs calibrated simulation "
        f"{predicted:.3g} req/s, {apart:.2g}× apart (beyond {th.SERVING_MAX_RATE_AGREE_RATIO:g}×): one "
        "factor on TPOT does not explain the endpoint's capacity (its scheduler limits, or another "
        "deployment)"
    ]


def max_rate_at(ran: Workload, ev: Evidence, slo_s: dict[str, float], factor: float) -> float | None:
    """The calibrated simulator's highest rate meeting the load test's own SLO on the deployment it
    measured (all its replicas); None when that SLO has no target the simulator checks (p50/p90/p99 of
    TTFT, TPOT/ITL, e2e)."""
    from gpuwise.serving.demand import draw_requests
    from gpuwise.serving.goodput import effective_slo, search_goodput
    from gpuwise.serving.simulator import Replica
    from gpuwise.workload.serving import SLO_PERCENTILES, parse_slo_item

    targets = tuple(
        parse_slo_item(key, seconds)
        for key, seconds in slo_s.items()
        if key.rsplit("_p", 1)[-1].isdigit() and int(key.rsplit("_p", 1)[-1]) in SLO_PERCENTILES
    )
    if not targets:
        return None
    w, _, count = _level_workload(ran, ev)
    assert w.serving is not None
    w = w.with_changes(serving=replace(w.serving, slo=targets, step_time_factor=factor))
    good = search_goodput(Replica(w, get_gpu(w.gpu)), draw_requests(w, count), effective_slo(targets))
    return good.rate_rps * max(1, ran.num_gpus // (ran.tp * ran.pp))


def calibrated(workload: Workload, calibration: Calibration | None) -> Workload:
    """The workload whose every serving step time is scaled by the calibration factor."""
    if calibration is None or workload.serving is None:
        return workload
    return workload.with_changes(serving=replace(workload.serving, step_time_factor=calibration.factor))
