"""One serving economics (issue #25, items 2-4): `cost` prices a serving demand exactly as `plan` does,
the hosted API is priced for the same tokens, and the busy share never moves a rental figure."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuwise.catalog import get_gpu
from gpuwise.plan.serving import plan_serving
from gpuwise.serving.economics import serving_cost, serving_economics, serving_tco
from gpuwise.workload import workload_from_mapping

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
# Every shipped example with a serving demand (a `serving:` section): cost must equal plan on each.
DEMAND_EXAMPLES = sorted(p.name for p in EXAMPLES.glob("*.yaml") if "\nserving:" in p.read_text())
RENTAL_KINDS = ("on_demand", "spot", "reserved_1y", "reserved_3y")


def _json(cli, *args: str) -> dict:
    res = cli(*args, "--json")
    assert res.exit_code == 0, res.stderr
    return json.loads(res.stdout)


def test_the_shipped_serving_examples_are_found():
    assert {"serving-chat-50rps.yaml", "serving-70b-10rps.yaml"} <= set(DEMAND_EXAMPLES)


@pytest.mark.slow
@pytest.mark.parametrize("name", DEMAND_EXAMPLES)
def test_cost_and_plan_agree_on_a_serving_demand(cli, name):
    """Same replicas, same $/month, same $/1M input, output and blended tokens, within 1 %."""
    spec = str(EXAMPLES / name)
    cost = _json(cli, "cost", spec)
    plan = _json(cli, "plan", spec)["plan"]["current"]
    s, p = cost["cost"]["serving"], plan["prices"]
    assert (
        s["basis"] == "demand" and s["replicas"] == plan["replicas"] and s["total_gpus"] == plan["total_gpus"]
    )
    assert cost["cost"]["num_gpus"] == plan["total_gpus"]
    assert s["monthly_cost_usd"] == pytest.approx(p["monthly_usd"], rel=0.01)
    assert s["usd_per_million_tokens"] == pytest.approx(p["usd_per_million_blended"], rel=0.01)
    for key in ("usd_per_million_input", "usd_per_million_output", "usd_per_million_blended"):
        assert s["token_prices"][key] == pytest.approx(p[key], rel=0.01)
    # the buy-vs-rent-vs-API table compares the deployment, not one GPU
    tco = cost["tco"]
    assert tco["inputs"]["num_gpus"] == plan["total_gpus"]
    on_demand = next(o for o in tco["options"] if o["kind"] == "on_demand")
    assert on_demand["monthly_usd"] == pytest.approx(p["monthly_usd"], rel=0.01)
    # the hosted API is priced for the tokens the deployment serves
    assert tco["api_input_tokens_per_month"] == pytest.approx(p["input_tokens_per_month"], rel=1e-9)
    assert tco["api_output_tokens_per_month"] == pytest.approx(p["output_tokens_per_month"], rel=1e-9)
    assert tco["api_input_tokens_per_month"] == pytest.approx(s["input_tokens_per_month"], rel=1e-9)


def test_api_option_tokens_equal_the_deployments_without_a_demand(cli):
    """No demand: the GPUs at their concurrency, flat out for the busy share; the API gets the same tokens."""
    doc = _json(cli, "cost", str(EXAMPLES / "inference-7b.yaml"), "--set", "utilization_pct=40")
    s, tco = doc["cost"]["serving"], doc["tco"]
    assert s["basis"] == "concurrency" and "concurrency 16" in s["basis_label"]
    assert tco["api_input_tokens_per_month"] == pytest.approx(s["input_tokens_per_month"], rel=1e-9)
    assert tco["api_output_tokens_per_month"] == pytest.approx(s["output_tokens_per_month"], rel=1e-9)
    api = next(o for o in tco["options"] if o["kind"] == "api")
    assert api["monthly_usd"] > 0


def test_batch_one_figures_are_labelled_batch_one():
    w = workload_from_mapping({"model": "llama-3-8b", "task": "serving", "gpu": "h100-sxm"})
    econ = serving_economics(w)
    assert econ is not None and econ.basis == "batch-1" and "batch 1" in econ.label
    busy = serving_economics(w.with_changes(concurrency=32))
    assert busy is not None and busy.basis == "concurrency"


def _rentals(doc: dict) -> dict[str, float]:
    out = {o["kind"]: o["monthly_usd"] for o in doc["tco"]["options"] if o["kind"] in RENTAL_KINDS}
    out["usd_per_hour"] = doc["cost"]["usd_per_hour"]
    if doc["cost"]["serving"]:
        out["serving_monthly"] = doc["cost"]["serving"]["monthly_cost_usd"]
    return out


@pytest.mark.parametrize(
    "name",
    ["resnet50-40pct.yaml", "buy-vs-rent-8xh100.yaml", "inference-7b.yaml", "serving-chat-50rps.yaml"],
)
def test_no_rental_figure_moves_when_only_the_busy_share_changes(cli, name):
    spec = str(EXAMPLES / name)
    low = _json(cli, "cost", spec, "--set", "utilization_pct=25")
    high = _json(cli, "cost", spec, "--set", "utilization_pct=95")
    assert _rentals(low) == _rentals(high)
    assert len(_rentals(low)) >= 2
    # the busy share is still read: it changes the power drawn
    assert low["cost"]["energy"]["gpu_power_w"] < high["cost"]["energy"]["gpu_power_w"]


def test_held_hours_scale_rent_and_run_prices_only_the_run(cli):
    spec = str(EXAMPLES / "buy-vs-rent-8xh100.yaml")
    month = _rentals(_json(cli, "cost", spec))
    half = _rentals(_json(cli, "cost", spec, "--set", "held_hours_per_month=365"))
    assert half["on_demand"] == pytest.approx(month["on_demand"] / 2)
    for kind in ("reserved_1y", "reserved_3y"):  # a reservation is paid every hour of its term
        assert half.get(kind) == month.get(kind)
    run = _json(cli, "cost", spec, "--set", "held_hours_per_month=run", "--set", "train_tokens=2e9")
    hours = run["cost"]["training"]["run_time_s"] / 3600
    assert run["tco"]["inputs"]["held_hours_per_month"] == pytest.approx(min(hours, 730))
    refused = cli("cost", spec, "--set", "held_hours_per_month=run")  # no run time without train_tokens
    assert refused.exit_code == 2 and "train_tokens" in refused.stderr and "Traceback" not in refused.stderr
    for value in ("900", "0", "nan", "often"):
        bad = cli("cost", spec, "--set", f"held_hours_per_month={value}")
        assert bad.exit_code == 2 and "held_hours_per_month must be" in bad.stderr, value
        assert "Traceback" not in bad.stderr


_MODELS = st.sampled_from(["llama-3.2-1b", "llama-3-8b"])
_GPUS = st.sampled_from(["h100-sxm", "a100-80gb-sxm"])


@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    model=_MODELS,
    gpu=_GPUS,
    rate=st.floats(0.5, 20.0),
    prompt=st.integers(64, 2048),
    output=st.integers(16, 400),
)
def test_cost_equals_plan_at_the_demand_for_generated_workloads(model, gpu, rate, prompt, output):
    w = workload_from_mapping(
        {
            "model": model,
            "task": "serving",
            "gpu": gpu,
            "serving": {"rate": rate, "prompt_len": prompt, "output_len": output, "slo": {"ttft_p99": "2s"}},
        }
    )
    econ = serving_economics(w)
    current = plan_serving(w, gpus=[get_gpu(gpu)]).current
    assert econ is not None and econ.basis == "demand"
    assert econ.replicas == current.replicas and econ.total_gpus == current.total_gpus
    if current.prices is None:
        assert econ.prices is None
        return
    assert econ.prices is not None
    assert econ.prices.monthly_usd == pytest.approx(current.prices.monthly_usd, rel=1e-9)
    assert econ.prices.usd_per_million_blended == pytest.approx(
        current.prices.usd_per_million_blended, rel=1e-9
    )
    cost = serving_cost(econ)
    assert cost is not None and cost.usd_per_million_tokens == econ.prices.usd_per_million_blended
    tco = serving_tco(w, econ)
    assert tco.inputs.num_gpus == current.total_gpus
    assert tco.api_tokens_per_month == (
        econ.prices.input_tokens_per_month,
        econ.prices.output_tokens_per_month,
    )
