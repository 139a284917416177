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
from gpuwise.serving.economics import serving_tco
from gpuwise.workload import workload_from_mapping

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "buy-vs-rent-8xh100.yaml"


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
    # the node: 8 GPUs x 700 W busy 50 %, idle draw 15 % of TDP otherwise, host 0.82 x TDP; x PUE 1.5
    node_kw = 8 * 700 * ((0.5 + 0.5 * 0.15) + 0.82) / 1000 * 1.5
    assert own.power_usd == pytest.approx(node_kw * 730 * 0.10)
    assert own.monthly_usd == pytest.approx(12_000 + node_kw * 73 + 2_000)


def test_break_even_held_hours_is_where_owning_equals_on_demand():
    gpu = get_gpu("h100-sxm")
    od = price("h100-sxm", "on_demand")
    assert od is not None
    at = break_even_utilization(tco_inputs(gpu, W()), own_cost(tco_inputs(gpu, W())), od.usd)  # type: ignore[arg-type]
    assert at is not None and 20 < at < 90  # % of the month held
    hours = at / 100 * 730
    t = tco_for(W(held_hours_per_month=hours))
    own, rent = t.option("own"), t.option("on_demand")
    assert own and rent and own.monthly_usd == pytest.approx(rent.monthly_usd, rel=1e-9)
    assert t.break_even_held_hours_per_month == pytest.approx(hours)
    below = tco_for(W(held_hours_per_month=hours - 70))
    assert below.cheapest is not None and below.cheapest.kind != "own"


def test_break_even_months_pays_back_the_purchase():
    t = compute_tco(get_gpu("h100-sxm"), W(utilization_pct=80))
    assert t.own is not None and t.break_even_months is not None
    rent = t.option("on_demand").monthly_usd  # type: ignore[union-attr]
    saved = t.break_even_months * (rent - t.own.power_usd - t.own.ops_usd)
    assert saved == pytest.approx(t.own.capex_usd)
    assert break_even_months(t.own, t.own.power_usd) is None  # renting cheaper than running: never


def test_rent_follows_held_hours_not_the_busy_share_reserved_follows_neither():
    gpu = get_gpu("a100-80gb-sxm")  # has on-demand and a 1-year reservation
    busy_half, busy_full = (
        compute_tco(gpu, W(gpu="a100-80gb-sxm", utilization_pct=50)),
        compute_tco(gpu, W(gpu="a100-80gb-sxm", utilization_pct=100)),
    )
    for kind in ("on_demand", "reserved_1y"):  # a held GPU is paid every hour, busy or not
        assert busy_half.option(kind).monthly_usd == busy_full.option(kind).monthly_usd  # type: ignore[union-attr]
    held_half = tco_for(W(gpu="a100-80gb-sxm", held_hours_per_month=365))
    od_half, od_full = held_half.option("on_demand"), busy_full.option("on_demand")
    assert od_half and od_full and od_half.monthly_usd * 2 == pytest.approx(od_full.monthly_usd)  # type: ignore[operator]
    res_half, res_full = held_half.option("reserved_1y"), busy_full.option("reserved_1y")
    assert res_half and res_full and res_half.monthly_usd == pytest.approx(res_full.monthly_usd)


def test_api_only_for_llm_serving():
    training = tco_for(W())
    assert training.option("api").monthly_usd is None  # type: ignore[union-attr]
    assert "n/a" in training.option("api").detail  # type: ignore[union-attr]
    serving = serving_tco(
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
    images = tco_for(workload_from_mapping({"model": "sdxl", "task": "cv-inference"})).option("api")
    assert images is not None and "n/a" in images.detail
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
    # DGX H100 $270k / 36 months + node power + colocation on the node's 10.2 kW (8 x 700 W GPUs x 1.82,
    # the DGX H100 datasheet's system power) < Lambda $2.99/GPU-h x 8 x 730 h held
    assert own["monthly_usd"] == pytest.approx(7_500 + 1_268 + 184 * 10.192, rel=0.01)
    assert od["monthly_usd"] == pytest.approx(2.99 * 8 * 730, rel=1e-6)  # held all month, 70 % busy or not
    # a 1-year reservation at $1.79/GPU-h (CoreWeave, 2026) is paid every hour: $10,454, 2 % under owning
    reserved = options["reserved_1y"]
    assert reserved["monthly_usd"] == pytest.approx(1.79 * 8 * 730, rel=1e-6)
    assert tco["cheapest"] == "reserved_1y" and own["monthly_usd"] < 1.03 * reserved["monthly_usd"]
    assert own["within_budget"] and od["within_budget"]
    assert 45 < tco["break_even_utilization_pct"] < 60  # % of the month held
    assert 12 < tco["break_even_months"] < 36  # pays back within the amortization period
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
    assert "Buy vs rent vs API" in scaling and "a 1-year reservation is cheapest" in scaling
    assert "held h/month" in scaling


def test_few_held_hours_make_renting_win_and_say_payback_outlives_the_gpus():
    t = tco_for(W(held_hours_per_month=200, monthly_budget_usd=20_000))
    assert t.cheapest is not None and t.cheapest.kind in ("on_demand", "spot")
    assert t.break_even_months is not None and t.break_even_months > 36
    assert "later than its 36-month life" in t.verdict


def test_your_hourly_rate_replaces_the_catalog_on_demand_rate(cli):
    res = cli("cost", str(EXAMPLE), "--usd-per-hour", "2.0", "--json")
    assert res.exit_code == 0, res.stderr
    od = next(o for o in res.json()["tco"]["options"] if o["kind"] == "on_demand")
    assert od["monthly_usd"] == pytest.approx(2.0 * 8 * 730) and od["source"] == "--usd-per-hour"
    assert tco_for(W(usd_per_gpu_hour=1.0)).option("on_demand").monthly_usd == pytest.approx(8 * 730)  # type: ignore[union-attr]


def test_rent_and_resale_sensitivity_by_hand():
    """At the on-demand price x 0.7 / 1 / 1.3 the rent and the break-even move as hand arithmetic says;
    resale value shrinks only the amortized part of owning."""
    w = W(purchase_usd_per_gpu=36_000, amortization_months=36, usd_per_gpu_hour=2.0, ops_usd_per_month=800)
    t = compute_tco(get_gpu("h100-sxm"), w)
    own = t.own
    assert own is not None and [c.rent_factor for c in t.rent_sensitivity] == [0.7, 1.0, 1.3]
    held = t.inputs.held_hours_per_month
    power_per_hour = own.power_usd / held
    for case in t.rent_sensitivity:
        rate = 2.0 * case.rent_factor
        assert case.rent_usd_per_month == pytest.approx(rate * 8 * held)
        hours = (36_000 * 8 / 36 + 800) / (rate * 8 - power_per_hour)
        expected = hours if hours <= t.inputs.hours_per_month else None
        assert case.break_even_held_hours_per_month == pytest.approx(expected)
        assert case.cheaper == ("own" if own.monthly_usd < case.rent_usd_per_month else "rent")
    middle = t.rent_sensitivity[1]
    assert middle.break_even_held_hours_per_month == pytest.approx(t.break_even_held_hours_per_month)
    assert [r.resale_share for r in t.resale_sensitivity] == [0.0, 0.2, 0.4]
    assert t.resale_sensitivity[0].own_usd_per_month == pytest.approx(own.monthly_usd)
    assert t.resale_sensitivity[2].own_usd_per_month == pytest.approx(own.monthly_usd - 0.4 * 8_000)
    doc = t.to_dict()
    assert len(doc["rent_sensitivity"]) == 3 and doc["resale_sensitivity"][1]["resale_share"] == 0.2


def test_long_runs_on_many_gpus_include_failures_and_restarts():
    """The lost share grows with the GPU count (Llama 3 paper: >90 % effective time on 16,384 GPUs)."""
    from gpuwise.perf.cost import estimate_cost, interruption_factor

    assert interruption_factor(64) == pytest.approx(1 / (1 - 1.973e-5 * 64 * 0.309))
    assert 1.10 < interruption_factor(16_384) < 1.12  # the paper's run: about 90 % effective
    big = workload_from_mapping(
        {"model": "llama-3-8b", "task": "pretrain", "gpu": "h100-sxm", "num_gpus": 1024, "sharding": "fsdp",
         "train_tokens": 1e12}
    )  # fmt: skip
    est = estimate_cost(big)
    clean = 1e12 / est.training.tokens_per_s
    assert est.training.run_time_s == pytest.approx(clean * interruption_factor(1024))
    assert any("failures and restarts on 1,024 GPUs" in n for n in est.notes)


def test_colocation_provisions_the_node_not_only_its_gpus():
    """Colocation is billed on the node's kW: 8 x H100 SXM (700 W) with the host's 0.82 share is the DGX
    H100 datasheet's 10.2 kW, not the GPUs' 5.6 kW; a T4 (70 W) node is 0.13 kW per GPU."""
    from gpuwise.perf.tco import node_kw, tco_inputs

    assert node_kw(get_gpu("h100-sxm"), 8) == pytest.approx(10.192)
    assert node_kw(get_gpu("t4"), 1) == pytest.approx(0.1274)
    inputs = tco_inputs(get_gpu("h100-sxm"), W(num_gpus=8))
    assert (
        inputs.ops_usd_per_month == pytest.approx(184 * 10.192)
        and "10.2 kW of node power" in inputs.ops_source
    )


@pytest.mark.parametrize(
    ("gpu_id", "kinds"),
    [
        ("h100-sxm", {"own", "on_demand", "spot", "reserved_1y"}),
        ("a100-80gb-sxm", {"own", "on_demand", "reserved_1y"}),
        ("a100-40gb-sxm", {"own", "on_demand", "reserved_1y"}),
        ("t4", {"own", "on_demand", "reserved_1y"}),
    ],
)
def test_purchase_and_reservation_prices_price_owning_and_reserving(gpu_id, kinds):
    """A100 and T4 purchases and the H100 1-year reservation are in the price data (dated, sourced): the TCO
    prices every way of getting the GPUs that has a public price."""
    tco = compute_tco(get_gpu(gpu_id), W(gpu=gpu_id, num_gpus=8 if gpu_id != "t4" else 1))
    priced = {o.kind for o in tco.options if o.monthly_usd is not None}
    assert kinds <= priced, priced
    for kind in ("purchase_server", "purchase_gpu", "reserved_1y"):
        p = price(gpu_id, kind)
        assert p is None or (p.source and p.as_of[:2] == "20")
