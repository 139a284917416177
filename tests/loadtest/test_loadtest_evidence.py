"""A load test feeds `plan --evidence`: real load tests against scripted servers on 127.0.0.1
(tests/loadtest_servers.py), saved in a real SQLite run store, then the serving plan reads them back.

Each server is designed to be slow in one place (decode, TTFT under load, prefill) or to run exactly at
gpuwise's predicted speed, so the calibration factor and the diagnosis have a known right answer.
"""

from __future__ import annotations

import json

import pytest

from gpuwise.diagnose import Evidence, diagnose
from gpuwise.plan.serving_evidence import predicted_tpot_p50
from gpuwise.workload.spec import load_workload
from loadtest_servers import ServerProcess

CHAT_70B = "examples/serving-70b-10rps.yaml"  # llama-3-70b, 4 × h100-sxm, tp 4
CHAT = "examples/serving-chat-50rps.yaml"  # llama-3-8b, 1 × h100-sxm, vLLM; ttft_p99 500 ms, tpot_p99 60 ms


def _loadtest_json(cli, url: str, store, *args: str) -> dict:
    out = cli("loadtest", url, "--store", str(store), "--json", "--prompt-tokens", "30", *args)
    assert out.exit_code == 0, out.stderr
    return out.json()


def _loadtest(cli, url: str, store, *args: str) -> int:
    return _loadtest_json(cli, url, store, *args)["run_id"]


def _plan(cli, store, run: int | str, *args: str, workload: str = CHAT) -> dict:
    out = cli("plan", workload, "--evidence", str(run), "--store", str(store), "--json", *args)
    assert out.exit_code == 0, out.stderr
    return out.json()["plan"]


def _ids(plan: dict) -> set[str]:
    return {f["id"] for f in plan["findings"]}


def test_a_server_at_the_predicted_speed_calibrates_to_one_and_raises_nothing(cli, tmp_path):
    """The calibration can fail: a server designed to decode exactly as fast as gpuwise predicts gives a
    factor of ~1 and no finding, so the factors of the other tests are not an artefact."""
    level = Evidence.flat(
        source="loadtest",
        serving_prompt_tokens_mean=30,
        serving_output_tokens_mean=32,
        serving_concurrency=8,
        serving_requests_ok=48,
    )
    predicted, _ = predicted_tpot_p50(load_workload(CHAT), level)
    store = tmp_path / "runs.sqlite"
    with ServerProcess(0.05, predicted) as server:
        run = _loadtest(
            cli, server.url, store, "--concurrency", "8", "--max-requests", "48", "--output-tokens", "32"
        )
    plan = _plan(cli, store, run)
    cal = plan["calibration"]
    assert abs(cal["predicted_tpot_p50_s"] - predicted) < 1e-9
    assert 0.85 < cal["factor"] < 1.15 and not cal["clamped"], cal
    assert plan["findings"] == []
    assert plan["evidence"][0]["serving_run_id"] == run and plan["evidence"][0]["source"] == "loadtest"
    assert any("no deployment was declared" in n for n in plan["notes"])  # 'scripted' is not a catalog model


def test_a_server_slow_in_decode_is_decode_bound_and_the_plan_pays_for_it(cli, tmp_path):
    store = tmp_path / "runs.sqlite"
    with ServerProcess(0.05, 0.02) as server:  # 20 ms per token: ~3x what an H100 does for an 8B model
        run = _loadtest(
            cli, server.url, store, "--concurrency", "8", "--max-requests", "48", "--output-tokens", "16"
        )
    slo = ("--slo", "ttft_p99=500ms,tpot_p99=15ms")
    plan = _plan(cli, store, run, *slo)
    cal = plan["calibration"]
    assert abs(cal["measured_tpot_p50_s"] - 0.02) < 0.003
    assert cal["factor"] == pytest.approx(cal["measured_tpot_p50_s"] / cal["predicted_tpot_p50_s"])
    assert 2 < cal["factor"] < 4 and not cal["clamped"]
    assert cal["confidence"] == "low"  # 48 requests: fewer than SERVING_CALIBRATION_MIN_REQUESTS
    assert {"serving_decode_bound", "serving_speed_gap"} <= _ids(plan)
    assert not {"serving_queueing", "serving_prefill_bound", "serving_errors"} & _ids(plan)
    assert any(n.startswith(f"calibrated from loadtest run {run}") for n in plan["notes"])
    # The calibrated simulator is slower, so the same deployment serves less and the answer costs more.
    plain = cli("plan", CHAT, *slo, "--json").json()["plan"]
    assert plan["current"]["goodput_rps_per_replica"] < plain["current"]["goodput_rps_per_replica"]
    assert plan["cheapest"]["prices"]["monthly_usd"] > plain["cheapest"]["prices"]["monthly_usd"]
    assert plan["workload"]["serving"]["step_time_factor"] == cal["factor"]
    assert plan["cheapest"]["meets_slo"]  # never advice that breaks the SLO


def test_a_server_that_queues_under_load_is_queueing_not_prefill(cli, tmp_path):
    """2 slots x 0.12 s per request: at 12 in flight a request waits for a slot ~6x its own TTFT."""
    store = tmp_path / "runs.sqlite"
    with ServerProcess(0.05, 0.01, slots=2) as server:
        run = _loadtest(
            cli, server.url, store, "--concurrency", "1,12", "--max-requests", "12", "--output-tokens", "8"
        )
    plan = _plan(cli, store, "last", "--slo", "ttft_p99=300ms,tpot_p99=60ms")
    ev = plan["evidence"][0]
    assert ev["serving_level"] == "concurrency 12" and ev["serving_ttft_unloaded_s"] < 0.1
    assert "serving_queueing" in _ids(plan) and "serving_prefill_bound" not in _ids(plan)
    assert plan["calibration"]["source"] == f"loadtest run {run}"


def test_a_server_slow_to_first_token_without_a_queue_is_prefill_bound(cli, tmp_path):
    store = tmp_path / "runs.sqlite"
    with ServerProcess(0.4, 0.005) as server:  # 400 ms to the first token whatever the load
        _loadtest(
            cli, server.url, store, "--concurrency", "1,4", "--max-requests", "4", "--output-tokens", "8"
        )
    plan = _plan(cli, store, "last", "--slo", "ttft_p99=300ms")
    assert "serving_prefill_bound" in _ids(plan) and "serving_queueing" not in _ids(plan)


def test_a_loadtest_json_file_of_another_model_is_refused_in_one_line(cli, tmp_path):
    """loadtest --predict declares what serves the endpoint; a plan for another model refuses it."""
    with ServerProcess(0.02, 0.01) as server:
        args = ("--concurrency", "2", "--max-requests", "4", "--output-tokens", "4")
        doc = _loadtest_json(cli, server.url, tmp_path / "runs.sqlite", *args, "--predict", CHAT_70B)
    assert doc["evidence"]["serving_declared"]["model"] == "llama-3-70b"
    path = tmp_path / "lt.json"
    path.write_text(json.dumps(doc))
    bad = cli("plan", CHAT, "--evidence", str(path))
    assert bad.exit_code == 2 and "Traceback" not in bad.stderr
    assert "measured llama-3-70b" in bad.stderr and "the workload is llama-3-8b" in bad.stderr
    training = cli("plan", "examples/llama-3-8b-lora.yaml", "--evidence", str(path))
    assert training.exit_code == 2 and "calibrates a serving plan" in training.stderr


def test_errors_and_a_short_level_are_findings_and_lower_confidence():
    ev = Evidence.flat(
        source="loadtest",
        label="loadtest run 7",
        serving_level="poisson 5 req/s",
        serving_requests=100,
        serving_requests_ok=90,
        serving_errors={"timeout": 8, "http_status": 2},
        serving_latency_s={"ttft_p99": 0.9, "ttft_p50": 0.2, "tpot_p50": 0.01},
        serving_ttft_unloaded_s=0.15,
        serving_offered_rate_rps=5.0,
        serving_request_throughput_rps=4.9,
        serving_slo_s={"ttft_p99": 0.5},
    )
    found = {f.id: f for f in diagnose(ev)}
    assert found["serving_errors"].severity == "high" and "8 timeout" in found["serving_errors"].summary
    # TTFT p50 0.2 s is 1.3x the lightest level's 0.15 s and the endpoint kept up: prefill, not queueing
    assert "serving_prefill_bound" in found and found["serving_prefill_bound"].confidence == "medium"
    ev.serving.serving_request_throughput_rps = 3.0  # 60 % of the offered rate: the queue grows
    assert "serving_queueing" in {f.id for f in diagnose(ev)}


def test_a_served_model_name_is_matched_to_the_catalog_and_another_model_refused():
    from gpuwise.errors import GpuwiseError
    from gpuwise.plan.serving_evidence import calibrate

    ev = Evidence.flat(
        source="loadtest",
        label="loadtest run 2",
        serving_model="meta-llama/Meta-Llama-3-70B-Instruct",
        serving_latency_s={"tpot_p50": 0.02},
        serving_prompt_tokens_mean=30,
        serving_output_tokens_mean=16,
        serving_concurrency=4,
        serving_requests_ok=60,
        serving_requests=60,
    )
    with pytest.raises(GpuwiseError, match=r"measured llama-3-70b .* the workload is llama-3-8b"):
        calibrate(load_workload(CHAT), ev)
    ev.serving.serving_model = "meta-llama/Meta-Llama-3-8B-Instruct"  # the same model: no assumption to state
    cal = calibrate(load_workload(CHAT), ev)
    assert cal is not None and cal.confidence == "medium"
    assert not any("not a catalog name" in n for n in ev.notes)


def test_a_max_rate_search_is_checked_against_the_calibrated_simulation(cli, tmp_path):
    """loadtest --find-max-rate: the plan sets the measured max rate next to the calibrated simulator's
    goodput for the load test's own SLO on the same deployment; slowed down, the simulator serves less."""
    from gpuwise.plan.serving_evidence import max_rate_at

    store = tmp_path / "runs.sqlite"
    with ServerProcess(0.03, 0.012, slots=4) as server:  # 4 slots x ~0.054 s: ~74 req/s at most
        _loadtest(
            cli,
            server.url,
            store,
            "--find-max-rate",
            "--slo",
            "ttft_p90=0.15",
            "--rate-range",
            "10,120",
            "--max-probes",
            "3",
            "--max-requests",
            "40",
            "--output-tokens",
            "3",
        )
    plan = _plan(cli, store, "last")
    cal, ev = plan["calibration"], plan["evidence"][0]
    assert cal["measured_max_rate_rps"] == ev["serving_max_rate_rps"] is not None
    assert cal["predicted_max_rate_rps"] > 0 and "max rate under the load test's SLO" in cal["line"]
    uncalibrated = max_rate_at(load_workload(CHAT), Evidence.from_dict(ev), {"ttft_p90": 0.15}, 1.0)
    # The goodput search resolves a rate to ~4 % (log bisection): a factor within 10 % of 1 (a busy machine
    # can slow the scripted server to about the simulator's speed) may land on the same rate, never past it.
    factor, predicted, seen = cal["factor"], cal["predicted_max_rate_rps"], (cal, uncalibrated)
    if factor > 1:
        assert predicted < uncalibrated if factor > 1.1 else predicted <= uncalibrated, seen
    else:
        assert predicted > uncalibrated if factor < 0.9 else predicted >= uncalibrated, seen
