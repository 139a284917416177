"""Buy vs rent vs API: owning, renting and a hosted API priced for the same work, with break-evens."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuwise.catalog import get_gpu
from gpuwise.catalog.prices import price
from gpuwise.perf.tco import (
    break_even_months,
    break_even_utilization,
    comparable_api,
    compute_tco,
    own_cost,
    tco_for,
    tco_inputs,
)
from gpuwise.workload import workload_from_mapping

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "buy-vs-rent-8xh100.yaml"


def W(**kw):
    base = {
        "model": "llama-3-8b",
        "task": "full-finetune",
        "gpu": "h100-sxm",
        "num_gpus": 8,
        "sharding": "fsdp",
    }
    return workload_from_mapping({**base, **kw})


def test_owning_is_amortization_plus_power_plus_ops_by_hand():
    w = W(
        utilization_pct=50,
        purchase_usd_per_gpu=36_000,
        amortization_months=24,
        pue=1.5,
        usd_per_kwh=0.10,
        ops_usd_per_month=2_000,
    )
    own = own_cost(tco_inputs(get_gpu("h100-sxm"), w))
    assert own is not None
    assert own.capex_usd == 8 * 36_000
    assert own.amortization_usd == pytest.approx(8 * 36_000 / 24)
    # 8 x 700 W x 50 % x PUE 1.5 = 4.2 kW, x 730 h x $0.10
    assert own.power_usd == pytest.approx(4.2 * 730 * 0.10)
    assert own.monthly_usd == pytest.approx(12_000 + 306.6 + 2_000)


def test_break_even_utilization_is_where_owning_equals_on_demand():
    gpu = get_gpu("h100-sxm")
    od = price("h100-sxm", "on_demand")
    assert od is not None
    at = break_even_utilization(tco_inputs(gpu, W()), own_cost(tco_inputs(gpu, W())), od.usd)  # type: ignore[arg-type]
    assert at is not None and 20 < at < 90
    t = compute_tco(gpu, W(utilization_pct=at))
    own, rent = t.option("own"), t.option("on_demand")
    assert own and rent and own.monthly_usd == pytest.approx(rent.monthly_usd, rel=1e-9)
    below = compute_tco(gpu, W(utilization_pct=at - 10))
    assert below.cheapest is not None and below.cheapest.kind != "own"


def test_break_even_months_pays_back_the_purchase():
    t = compute_tco(get_gpu("h100-sxm"), W(utilization_pct=80))
    assert t.own is not None and t.break_even_months is not None
    rent = t.option("on_demand").monthly_usd  # type: ignore[union-attr]
    saved = t.break_even_months * (rent - t.own.power_usd - t.own.ops_usd)
    assert saved == pytest.approx(t.own.capex_usd)
    assert break_even_months(t.own, t.own.power_usd) is None  # renting cheaper than running: never


def test_rent_on_demand_scales_with_utilization_reserved_does_not():
    gpu = get_gpu("a100-80gb-sxm")  # has on-demand and a 1-year reservation
    half, full = (
        compute_tco(gpu, W(gpu="a100-80gb-sxm", utilization_pct=50)),
        compute_tco(gpu, W(gpu="a100-80gb-sxm", utilization_pct=100)),
    )
    assert half.option("on_demand").monthly_usd * 2 == pytest.approx(full.option("on_demand").monthly_usd)  # type: ignore[union-attr,operator]
    assert half.option("reserved_1y").monthly_usd == pytest.approx(full.option("reserved_1y").monthly_usd)  # type: ignore[union-attr]


def test_api_only_for_llm_serving():
    training = tco_for(W())
    assert training.option("api").monthly_usd is None  # type: ignore[union-attr]
    assert "n/a" in training.option("api").detail  # type: ignore[union-attr]
    serving = tco_for(
        workload_from_mapping(
            {
                "model": "llama-3-70b",
                "task": "serving",
                "gpu": "h100-sxm",
                "num_gpus": 4,
                "tp": 4,
                "concurrency": 64,
            }
        )
    )
    api = serving.option("api")
    assert api is not None and api.monthly_usd is not None and api.monthly_usd > 0
    assert "70B" in api.detail and "Together" in api.detail
    assert comparable_api(8.0).model != comparable_api(70.0).model != comparable_api(405.0).model


def test_no_purchase_price_says_so_and_rentals_still_compare():
    t = compute_tco(get_gpu("l4"), W(model="llama-3.2-1b", gpu="l4", num_gpus=1, sharding="none"))
    assert t.own is None and "purchase_usd_per_gpu" in t.option("own").detail  # type: ignore[union-attr]
    assert t.cheapest is not None and t.cheapest.kind in ("on_demand", "reserved_1y")
    assert t.break_even_utilization_pct is None and t.break_even_months is None


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"purchase_usd_per_gpu": -1}, "purchase_usd_per_gpu must be a finite number ≥ 0"),
        ({"amortization_months": 0}, "amortization_months must be a finite number > 0"),
        ({"pue": 0.5}, "pue must be a finite number ≥ 1 and ≤ 5"),
    ],
)
def test_bad_tco_inputs_are_refused(changes, message):
    from gpuwise.errors import GpuwiseError

    with pytest.raises(GpuwiseError, match=message):
        compute_tco(get_gpu("h100-sxm"), W(**changes))


def test_startup_question_buy_8xh100_or_rent_on_20k_a_month(cli):
    """examples/buy-vs-rent-8xh100.yaml: the answer is numeric and reads as a decision."""
    res = cli("cost", str(EXAMPLE), "--json")
    assert res.exit_code == 0, res.stderr
    tco = res.json()["tco"]
    assert tco["inputs"]["monthly_budget_usd"] == 20_000 and tco["inputs"]["num_gpus"] == 8
    options = {o["kind"]: o for o in tco["options"]}
    own, od = options["own"], options["on_demand"]
    # DGX H100 $270k / 36 months + power + colocation < Lambda $2.99/GPU-h x 8 x 730 h x 70 %
    assert own["monthly_usd"] == pytest.approx(9_097, rel=0.01)
    assert od["monthly_usd"] == pytest.approx(2.99 * 8 * 730 * 0.70, rel=1e-6)
    assert tco["cheapest"] == "own" and own["within_budget"] and od["within_budget"]
    assert 45 < tco["break_even_utilization_pct"] < 60
    assert 20 < tco["break_even_months"] < 36  # pays back within the amortization period
    assert "$270,000 up front" in tco["verdict"] and "$20,000/month budget" in tco["verdict"]
    assert options["api"]["monthly_usd"] is None
    term = cli("cost", str(EXAMPLE), "--budget", "8000")
    assert term.exit_code == 0 and "Buy vs rent vs API" in term.stdout and "over" in term.stdout


def test_cost_refuses_negative_budget_in_one_line(cli):
    res = cli("cost", str(EXAMPLE), "--set", "purchase_usd_per_gpu=-5")
    assert (
        res.exit_code == 2 and "must be a finite number ≥ 0" in res.stderr and "Traceback" not in res.stderr
    )


def test_plan_scaling_section_answers_buy_vs_rent():
    from gpuwise.plan import make_plan
    from gpuwise.report.plan_view import markdown
    from gpuwise.workload import load_workload

    text = markdown(make_plan(load_workload(EXAMPLE)))
    scaling = text[text.index("5. Scaling") : text.index("6. Tools")]
    assert "Buy vs rent vs API" in scaling and "buying is cheapest" in scaling
    assert "break-even utilization" in scaling


def test_low_utilization_makes_renting_win_and_says_payback_outlives_the_gpus():
    t = tco_for(W(utilization_pct=40, monthly_budget_usd=20_000))
    assert t.cheapest is not None and t.cheapest.kind in ("on_demand", "spot")
    assert t.break_even_months is not None and t.break_even_months > 36
    assert "later than its 36-month life" in t.verdict


def test_your_hourly_rate_replaces_the_catalog_on_demand_rate(cli):
    res = cli("cost", str(EXAMPLE), "--usd-per-hour", "2.0", "--json")
    assert res.exit_code == 0, res.stderr
    od = next(o for o in res.json()["tco"]["options"] if o["kind"] == "on_demand")
    assert od["monthly_usd"] == pytest.approx(2.0 * 8 * 730 * 0.70) and od["source"] == "--usd-per-hour"
    assert tco_for(W(usd_per_gpu_hour=1.0)).option("on_demand").monthly_usd == pytest.approx(8 * 730)  # type: ignore[union-attr]
