"""`plan --evidence loadtest` checks that the load test can calibrate this workload: the served model
matches (by catalog name, else by the size its name states), the calibration factor is not that of another
deployment, and the measured max rate agrees with the calibrated simulation; it lowers the confidence or
refuses, saying why (real simulator runs, no server needed: the evidence is a load test's figures)."""

from __future__ import annotations

import pytest

from gpuwise.diagnose import Evidence
from gpuwise.errors import GpuwiseError
from gpuwise.plan.serving_evidence import calibrate, max_rate_at, predicted_tpot_p50
from gpuwise.workload.spec import load_workload

CHAT = "examples/serving-chat-50rps.yaml"  # llama-3-8b, 1 × h100-sxm, vLLM


def _evidence(**kw) -> Evidence:
    base = {
        "source": "loadtest",
        "label": "loadtest run 9",
        "serving_prompt_tokens_mean": 30,
        "serving_output_tokens_mean": 16,
        "serving_concurrency": 4,
        "serving_requests_ok": 80,
        "serving_requests": 80,
    }
    base.update(kw)
    return Evidence.flat(**base)


def _predicted() -> float:
    return predicted_tpot_p50(load_workload(CHAT), _evidence())[0]


def test_a_served_name_stating_another_size_is_refused_and_no_size_lowers_confidence():
    tpot = {"tpot_p50": _predicted()}
    with pytest.raises(GpuwiseError, match=r"served 'acme/house-llama-70b-awq' \(70B .* llama-3-8b"):
        calibrate(
            load_workload(CHAT), _evidence(serving_model="acme/house-llama-70b-awq", serving_latency_s=tpot)
        )
    same = _evidence(serving_model="acme/house-llama-8b-awq", serving_latency_s=tpot)
    cal = calibrate(load_workload(CHAT), same)
    assert cal is not None and cal.confidence == "medium" and abs(cal.factor - 1) < 0.05
    unnamed = _evidence(serving_model="prod-endpoint", serving_latency_s=tpot)
    cal = calibrate(load_workload(CHAT), unnamed)
    assert cal is not None and cal.confidence == "low"
    assert any("states no size: unchecked against llama-3-8b" in n for n in unnamed.notes)


def test_a_factor_of_another_deployment_is_refused_and_a_large_one_clamped():
    predicted = _predicted()
    with pytest.raises(GpuwiseError, match=r"is 15× the prediction .* outside 0.1–10×.*--predict"):
        calibrate(load_workload(CHAT), _evidence(serving_latency_s={"tpot_p50": 15 * predicted}))
    cal = calibrate(load_workload(CHAT), _evidence(serving_latency_s={"tpot_p50": 6 * predicted}))
    assert cal is not None and cal.clamped and cal.factor == 4.0 and cal.confidence == "low"


def test_a_max_rate_far_from_the_calibrated_simulation_lowers_confidence():
    predicted = _predicted()
    slo = {"ttft_p90": 0.5}
    simulated = max_rate_at(load_workload(CHAT), _evidence(), slo, 1.0)
    assert simulated is not None and simulated > 0

    def with_max_rate(rate: float, at_least: bool = False):
        ev = _evidence(
            serving_latency_s={"tpot_p50": predicted},
            serving_slo_s=slo,
            serving_max_rate_rps=rate,
            serving_max_rate_at_least=at_least,
        )
        return calibrate(load_workload(CHAT), ev)

    close = with_max_rate(simulated * 1.1)
    assert close is not None and close.confidence == "medium" and not close.notes
    far = with_max_rate(simulated / 54)  # the 54x gap
    assert far is not None and far.confidence == "low"
    assert any("54× apart" in n or "apart (beyond 1.5×)" in n for n in far.notes), far.notes
    bound = with_max_rate(simulated / 3, at_least=True)  # "at least X": a simulation above X agrees
    assert bound is not None and bound.confidence == "medium"
