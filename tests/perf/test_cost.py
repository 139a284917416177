"""gpuwise.perf.cost: arithmetic, energy, break-even, prices, and the `gpuwise cost` command."""

import sys

import pytest

from gpuwise.catalog import get_gpu, list_gpus
from gpuwise.errors import GpuwiseError
from gpuwise.perf import predict
from gpuwise.perf.cost import break_even, compare_gpus, energy, estimate_cost, gpu_price, interruption_factor
from gpuwise.perf.tco import tco_for
from gpuwise.workload import workload_from_mapping


def W(**kw):
    return workload_from_mapping(kw)


def test_training_run_cost_is_time_times_price():
    w = W(
        model="llama-3-8b",
        task="lora",
        gpu="h100-sxm",
        num_gpus=2,
        sharding="ddp",
        train_tokens=2e9,
        epochs=3,
    )
    est = estimate_cost(w, usd_per_gpu_hour=2.5)
    perf = predict(w)
    seconds = 2e9 * 3 / perf.tokens_per_s * interruption_factor(2)  # failures and restarts: +0.001 %
    assert est.training.run_time_s == pytest.approx(seconds)
    assert est.training.gpu_hours == pytest.approx(seconds / 3600 * 2)
    assert est.training.run_cost_usd == pytest.approx(seconds / 3600 * 2 * 2.5)
    assert est.training.usd_per_billion_tokens == pytest.approx(5.0 / (perf.tokens_per_s * 3600) * 1e9)
    assert est.price.origin == "flag"


def test_training_without_dataset_size_gives_per_token_cost_only():
    est = estimate_cost(W(model="llama-3-8b", task="lora", gpu="a100-80gb-sxm"))
    assert est.training.run_cost_usd is None and est.training.usd_per_billion_tokens > 0
    assert est.price.origin == "catalog" and est.price.usd_per_gpu_hour == 1.79


def test_serving_cost_per_million_tokens_and_utilization():
    w = W(model="llama-3-8b", task="serving", gpu="h100-sxm", concurrency=64, seq_len=512, output_len=256)
    full = estimate_cost(w, usd_per_gpu_hour=3.0)
    half = estimate_cost(w, usd_per_gpu_hour=3.0, utilization_pct=50)
    s = full.serving
    assert s.usd_per_million_output_tokens == pytest.approx(3.0 / (s.output_tokens_per_s * 3600) * 1e6)
    assert s.total_tokens_per_s == pytest.approx(s.output_tokens_per_s * (512 + 256) / 256)
    assert half.serving.usd_per_million_tokens == pytest.approx(2 * s.usd_per_million_tokens)
    assert s.monthly_cost_usd == pytest.approx(3.0 * 730)


def test_energy_counts_the_node_busy_idle_and_host_with_one_pue():
    e = energy(get_gpu("h100-sxm"), 2, 50.0, 1.3, usd_per_kwh=0.2, held_hours_per_month=100)
    gpus = 700 * 2 * (0.5 + 0.5 * 0.15)  # busy at TDP half the time, idle draw (15 % of TDP) otherwise
    host = 700 * 2 * 0.82  # DGX H100: (10.2 kW - 8 x 700 W) / (8 x 700 W)
    assert e.gpu_power_w == pytest.approx(gpus) and e.host_power_w == pytest.approx(host)
    assert e.facility_power_w == pytest.approx((gpus + host) * 1.3)
    assert e.energy_usd_per_hour == pytest.approx((gpus + host) * 1.3 / 1000 * 0.2)
    assert e.kwh_per_month == pytest.approx((gpus + host) * 1.3 / 1000 * 100)
    with pytest.raises(GpuwiseError, match="PUE must be between"):
        energy(get_gpu("h100-sxm"), 1, 100, 0.5)
    default = estimate_cost(W(model="llama-3-8b", gpu="h100-sxm"), usd_per_gpu_hour=1).energy
    assert default.pue == 1.56 and default.cooling_overhead_pct == pytest.approx(56.0)  # one PUE, cost.toml
    tco = tco_for(W(model="llama-3-8b", gpu="h100-sxm"))
    assert tco.inputs.pue == default.pue  # the same PUE in buy vs rent


def test_break_even_volume():
    be = break_even(monthly_usd=1000.0, capacity_tokens_per_month=5e9, api_usd_per_mtok=1.0)
    assert be.break_even_tokens_per_month == pytest.approx(1e9)  # $1000 buys 1e9 API tokens
    assert be.self_hosting_can_win and "cheaper above 1,000 M tokens" in be.verdict
    never = break_even(monthly_usd=1000.0, capacity_tokens_per_month=5e9, api_usd_per_mtok=0.1)
    assert not never.self_hosting_can_win
    assert never.self_hosted_usd_per_million_at_capacity == pytest.approx(0.2)
    assert "API is cheaper at any volume" in never.verdict
    with pytest.raises(GpuwiseError):
        break_even(1000.0, 1e9, 0)


def test_break_even_from_a_serving_workload():
    w = W(model="llama-3-8b", task="serving", gpu="h100-sxm", concurrency=128, seq_len=1000, output_len=200)
    est = estimate_cost(w, api_usd_per_mtok=0.2)
    be = est.break_even
    assert be.self_hosted_usd_per_month == pytest.approx(2.99 * 730)
    assert be.capacity_tokens_per_month == pytest.approx(est.serving.total_tokens_per_s * 3600 * 730)


def test_price_precedence_and_missing_price():
    gpu = get_gpu("h100-sxm")
    w = W(model="llama-3-8b", gpu="h100-sxm", usd_per_gpu_hour=1.5)
    assert gpu_price(gpu, w, 4.0).origin == "flag"
    assert gpu_price(gpu, w).usd_per_gpu_hour == 1.5
    assert gpu_price(gpu).origin == "catalog"
    with pytest.raises(GpuwiseError, match=r"no verified \$/GPU-hour for gb200.*NVL72.*--usd-per-hour"):
        estimate_cost(W(model="llama-3-8b", gpu="gb200"))


def test_compare_gpus_covers_the_catalog_and_sorts_by_cost():
    w = W(model="llama-3-8b", task="serving", gpu="h100-sxm", concurrency=32, seq_len=512, output_len=128)
    rows = compare_gpus(w)
    # every accelerator a PyTorch workload runs on (TPUs run JAX/TensorFlow: --framework jax adds them)
    assert {r.gpu for r in rows} == {g.id for g in list_gpus() if not g.is_tpu}
    on_jax = {r.gpu for r in compare_gpus(w.with_changes(framework="jax"))}
    assert {"tpu-v5e", "tpu-v6e"} <= on_jax and "gaudi3" not in on_jax
    priced = [r for r in rows if r.fits and r.usd_per_million_tokens is not None]
    assert priced == sorted(priced, key=lambda r: r.usd_per_million_tokens)
    assert any(r.usd_per_gpu_hour is None and r.tokens_per_s for r in rows)  # speed even without a price


# --- the command ------------------------------------------------------------------------------


def test_cli_cost_terminal_json_markdown(cli):
    term = cli("cost", "llama-3-8b", "-t", "lora", "-g", "a100-80gb-sxm", "--set", "train_tokens=1e9")
    assert term.exit_code == 0, term.stderr
    assert "run cost" in term.stdout and "$/GPU-hour" in term.stdout
    doc = cli(
        "cost", "llama-3-8b", "-t", "serving", "-g", "h100-sxm", "--api-usd-per-mtok", "0.3", "--json"
    ).json()
    assert doc["kind"] == "cost" and doc["schema_version"] == 2
    assert doc["cost"]["break_even"]["api_usd_per_million_tokens"] == 0.3
    assert doc["cost"]["perf"]["inference"]["tpot_s"] > 0
    md = cli("cost", "llama-3-8b", "-g", "rtx-4090", "--usd-per-hour", "0.4", "--markdown")
    assert md.exit_code == 0 and "| $/GPU-hour | $0.40 (flag) |" in md.stdout


def test_cli_cost_all_gpus(cli):
    res = cli("cost", "llama-3-8b", "-t", "lora", "--all-gpus", "--json")
    assert res.exit_code == 0, res.stderr
    doc = res.json()
    assert doc["kind"] == "cost_comparison" and len(doc["gpus"]) == len(
        [g for g in list_gpus() if not g.is_tpu]
    )
    table = cli("cost", "llama-3-8b", "-t", "lora", "--all-gpus")
    assert "h100-sxm" in table.stdout and "$/h" in table.stdout


def test_cli_cost_vision_in_images(cli):
    res = cli("cost", "resnet-50", "-t", "cv-inference", "-b", "64", "-p", "int8", "--all-gpus", "--markdown")
    assert res.exit_code == 0, res.stderr
    assert "| img/s |" in res.stdout and "| l4 |" in res.stdout
    train = cli("cost", "vit-b-16", "-t", "cv-train", "-g", "a100-80gb-sxm", "--set", "train_tokens=1.28e6")
    assert train.exit_code == 0, train.stderr
    assert "images/s (all GPUs)" in train.stdout and "$ per 1M training images" in train.stdout


@pytest.mark.parametrize(
    "args, message",
    [
        (("llama-3-8b", "-g", "h100"), "did you mean 'h100-sxm'"),
        (("llama-3-8b", "-g", "gb200"), "pass --usd-per-hour"),
        (("llama-3-8b", "-g", "h100-sxm", "--cooling-overhead", "500"), "--cooling-overhead must be"),
        (("llama-3-8b", "-g", "h100-sxm", "--api-usd-per-mtok", "-1"), "--api-usd-per-mtok must be"),
    ],
)
def test_cli_cost_bad_input_is_one_line(cli, args, message):
    res = cli("cost", *args)
    assert res.exit_code == 2
    assert message in res.stderr
    assert "Traceback" not in res.stderr and len(res.stderr.strip().splitlines()) == 1


def test_cli_cost_never_imports_torch(cli):
    import subprocess

    code = (
        "import sys\nfrom gpuwise.cli.app import main\n"
        "try:\n    main(['cost', 'llama-3-8b', '-t', 'lora', '--all-gpus', '--json'])\nexcept SystemExit:\n  "
        "  pass\nsys.stderr.write('TORCH=' + str('torch' in sys.modules))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert "TORCH=False" in proc.stderr
