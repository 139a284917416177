"""`gpuwise loadtest` against real HTTP servers on 127.0.0.1 with scripted timings (loadtest_servers.py).

Timing checks use the median (p50) and, for TTFT, the server's own receive time on the shared monotonic
clock, so that a loaded machine's scheduling delays before the server sees a request do not count against
the client's measurement.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import statistics
import subprocess
import sys
import time

import httpx
import pytest

from conftest import REPO
from gpuwise.errors import GpuwiseError
from gpuwise.loadtest.endpoint import parse_target
from gpuwise.loadtest.metrics import parse_slo, percentile
from gpuwise.loadtest.prompts import Lengths
from gpuwise.loadtest.schedule import arrival_times
from gpuwise.loadtest.session import Settings, run_loadtest
from gpuwise.loadtest.types import RequestRecord
from gpuwise.perf.predict import predict
from gpuwise.workload.spec import load_workload
from loadtest_servers import ServerProcess


def _settings(url: str, **kw) -> Settings:
    target = parse_target(url, kw.pop("endpoint", None))
    base = {"mode": "concurrency", "targets": [1], "max_requests": 8, "duration_s": 20, "timeout_s": 5}
    base.update(kw)
    return Settings(target.url, target.endpoint, "scripted", **base)


def test_slo_syntax_and_percentiles():
    slo = parse_slo("ttft_p99=0.5, tpot_p50=50ms,e2e_p90=2")
    assert slo.limits == {("ttft", 99): 0.5, ("tpot", 50): 0.05, ("e2e", 90): 2.0}
    for bad in ("ttft=0.5", "latency_p99=1", "ttft_p100=1", "ttft_p99=0", ""):
        with pytest.raises(GpuwiseError):
            parse_slo(bad)
    assert percentile([1.0, 2.0, 3.0, 4.0], 50) == 2.5 and percentile([], 50) is None


def test_arrivals_are_seeded_and_at_the_rate():
    poisson = arrival_times("poisson", 10.0, 2000, seed=1)
    assert (
        poisson
        == arrival_times("poisson", 10.0, 2000, seed=1)
        != arrival_times("poisson", 10.0, 2000, seed=2)
    )
    assert abs(poisson[-1] / 1999 - 0.1) < 0.01  # mean gap 1/rate
    assert arrival_times("constant", 4.0, 3, seed=0) == [0.0, 0.25, 0.5]


def test_url_forms():
    assert parse_target("http://h:8000", None).url == "http://h:8000/v1/completions"
    assert parse_target("http://h:8000/v1/chat/completions", None).endpoint == "chat"
    assert parse_target("https://h/v1/", "chat").url == "https://h/v1/chat/completions"
    for bad in ("h:8000", "ftp://h", "http://h:99999"):
        with pytest.raises(GpuwiseError):
            parse_target(bad, None)


def test_ttft_tpot_itl_are_exact_at_p50():
    ttft, token, n = 0.1, 0.02, 8
    with ServerProcess(ttft, token) as server:
        result = run_loadtest(_settings(server.url, lengths=Lengths(30, n)))
        log = httpx.get(f"{server.url}/v1/log", timeout=5).json()[1:]  # [0] is the test request
    (level,) = result.levels
    assert level.requests_ok == 8 and level.token_source == "usage" and level.output_tokens == 8 * n
    assert abs(level.pct("tpot", 50) - token) < 0.005
    assert abs(level.pct("itl", 50) - token) < 0.005
    records: list[RequestRecord] = []
    # TTFT against the server's truth: its receive time (same CLOCK_MONOTONIC) + the designed delay.
    with ServerProcess(ttft, token) as server:
        run_loadtest(_settings(server.url, lengths=Lengths(30, n)), on_record=records.append)
        log = httpx.get(f"{server.url}/v1/log", timeout=5).json()[1:]
    records.sort(key=lambda r: r.sent_at)
    errors = [
        r.ttft_s - (entry["received_at"] - r.sent_at + ttft) for r, entry in zip(records, log, strict=True)
    ]
    assert abs(percentile(errors, 50)) < 0.005, errors


def test_errors_are_counted_by_kind_not_fatal(tmp_path):
    prompts = ["fine", "#500", "#drop", "#bad", "#hang", "fine again"]
    with ServerProcess(0.01, 0.01) as server:
        settings = _settings(
            server.url,
            targets=[6],
            max_requests=6,
            timeout_s=1.5,
            dataset=[{"prompt": p, "max_tokens": 4} for p in prompts],
            slo=parse_slo("ttft_p99=1"),
        )
        level = run_loadtest(settings).levels[0]
    assert level.errors == {"http_status": 1, "dropped": 1, "malformed_sse": 1, "timeout": 1}
    assert level.requests_ok == 2 and level.slo_met is False
    assert any("failed" in f for f in level.slo_failures)


def test_without_usage_tokens_are_counted_chunks():
    with ServerProcess(0.01, 0.005, usage=False) as server:
        level = run_loadtest(_settings(server.url, endpoint="chat", lengths=Lengths(10, 5))).levels[0]
    assert level.token_source == "chunks" and level.output_tokens == 8 * 5 and level.input_tokens == 0


def test_not_streamed_ttft_is_the_whole_reply():
    with ServerProcess(0.05, 0.01) as server:
        settings = _settings(
            server.url, endpoint="chat", lengths=Lengths(10, 6), stream=False, max_requests=4
        )
        level = run_loadtest(settings).levels[0]
    assert level.requests_ok == 4 and level.output_tokens == 4 * 6 and level.token_source == "usage"
    assert level.pct("ttft", 50) == level.pct("e2e", 50) >= 0.1 and level.pct("tpot", 50) is None


def test_a_tokenizer_counts_tokens_when_the_server_sends_no_usage(cli, tmp_path):
    tokenizers = pytest.importorskip("tokenizers")
    tok = tokenizers.Tokenizer(tokenizers.models.WordLevel({"[UNK]": 0, "w": 1}, unk_token="[UNK]"))
    split = tokenizers.pre_tokenizers
    tok.pre_tokenizer = split.Sequence([split.Whitespace(), split.Digits(individual_digits=True)])
    tok.save(str(tmp_path / "tokenizer.json"))  # " w3" is 2 tokens ("w", "3"): 2 per streamed chunk
    with ServerProcess(0.01, 0.005, usage=False) as server:
        args = [
            "loadtest",
            server.url,
            "--concurrency",
            "2",
            "--max-requests",
            "4",
            "--output-tokens",
            "5",
            "--prompt-tokens",
            "12",
        ]
        out = cli(*args, "--tokenizer", str(tmp_path / "tokenizer.json"), "--no-save", "--json")
    assert out.exit_code == 0, out.stderr
    (level,) = out.json()["levels"]
    assert level["token_source"] == "tokenizer" and level["output_tokens"] == 4 * 5 * 2
    assert level["input_tokens"] == 4 * 12
    bad = cli("loadtest", "http://127.0.0.1:9", "--tokenizer", str(tmp_path / "missing.json"), "--no-save")
    assert bad.exit_code == 2 and "cannot read tokenizer" in bad.stderr


from gpuwise.report.loadtest_view import latency_chart  # noqa: E402


@pytest.mark.slow
def test_max_rate_under_slo_is_within_10_percent_of_capacity():
    """4 slots x 0.1 s service (TTFT 50 ms + 2 x 25 ms) = 40 req/s; above it the queue (and TTFT) grows.
    The capacity compared with is the one the server delivered: slots / its mean measured service time
    (40 req/s on a quiet machine; a busy one wakes its event loop late, so each slot is held longer)."""
    with ServerProcess(0.05, 0.025, slots=4) as server:
        settings = _settings(
            server.url,
            mode="constant",
            max_requests=100,
            lengths=Lengths(20, 3),
            slo=parse_slo("ttft_p90=0.15"),
            search_range=(25, 60),
            max_probes=7,
        )
        search = run_loadtest(settings).search
        log = httpx.get(f"{server.url}/v1/log", timeout=5).json()
    held_s = [e["done_at"] - e["slot_at"] for e in log if "done_at" in e]
    assert len(held_s) >= 100 and min(held_s) > 0.099  # the designed service time is a floor
    capacity = 4 / statistics.fmean(held_s)
    assert search is not None and search.max_rate_per_s is not None
    assert abs(search.max_rate_per_s - capacity) / capacity < 0.10, (
        capacity,
        [(p.target, p.slo_met) for p in search.probes],
    )
    chart = latency_chart(search.probes)  # the report draws latency against the offered rate
    assert chart is not None and chart.x_label.startswith("offered load (requests/s")
    ttft_p99 = next(s.values for s in chart.series if s.name == "TTFT p99")
    assert ttft_p99[-1] > ttft_p99[0]  # above capacity the queue shows in TTFT
    by_rate = sorted(search.probes, key=lambda p: p.target)
    assert chart.marked == [i for i, p in enumerate(by_rate) if p.slo_met is False] and chart.marked


def test_cli_json_store_and_secret(cli, tmp_path):
    store = tmp_path / "runs.sqlite"
    env = {**os.environ, "MY_KEY": "sk-very-secret-0123"}
    with ServerProcess(0.02, 0.01) as server:
        args = [
            "loadtest",
            server.url,
            "--concurrency",
            "2",
            "--max-requests",
            "6",
            "--output-tokens",
            "4",
            "--store",
            str(store),
        ]
        args += ["--predict", "examples/inference-7b.yaml"]
        out = cli(*args, "--api-key-env", "MY_KEY", "--slo", "ttft_p99=1", "--json", env=env)
    assert out.exit_code == 0, out.stderr
    doc = out.json()
    assert doc["kind"] == "loadtest" and doc["levels"][0]["requests_ok"] == 6
    assert doc["levels"][0]["ttft_p50_s"] > 0.02 and doc["levels"][0]["slo_met"] is True
    (compared,) = doc["prediction"]["levels"]  # measured vs gpuwise's model for the declared L4
    declared = load_workload(REPO / "examples/inference-7b.yaml")
    expected = predict(declared.with_changes(seq_len=256, output_len=4, concurrency=2)).inference
    assert doc["prediction"]["gpu"] == "l4" and compared["predicted_tpot_p50_s"] == pytest.approx(
        expected.tpot_s
    )
    gap = (compared["measured_ttft_p50_s"] / expected.ttft_s - 1) * 100
    assert compared["ttft_gap_pct"] == pytest.approx(gap)
    assert "sk-very-secret" not in out.stdout + out.stderr and b"sk-very-secret" not in store.read_bytes()
    runs = cli("runs", "list", "--store", str(store), "--json").json()["runs"]
    assert runs[0]["kind"] == "loadtest" and runs[0]["measured_steps"] == 6
    shown = cli("loadtest", "--show", "last", "--store", str(store))
    assert shown.exit_code == 0 and "TTFT" in shown.stdout
    also = cli("runs", "show", "last", "--store", str(store))  # issue #25: every kind of run shows
    assert also.exit_code == 0 and "TTFT" in also.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["not-a-url"], "bad URL"),
        (["http://127.0.0.1:9", "--slo", "ttft=1"], "bad --slo"),
        (["http://127.0.0.1:9", "--concurrency", "2", "--rate", "3"], "exclusive"),
        (["http://127.0.0.1:9", "--find-max-rate"], "needs --slo"),
        (["http://127.0.0.1:9"], "cannot reach"),
    ],
)
def test_cli_bad_input_is_one_line(cli, args, message):
    out = cli("loadtest", *args, "--no-save")
    assert out.exit_code == 2 and message in out.stderr and len(out.stderr.strip().splitlines()) == 1


def test_ctrl_c_keeps_partial_results(tmp_path):
    command = [
        sys.executable,
        "-m",
        "gpuwise",
        "loadtest",
        "--concurrency",
        "2",
        "--max-requests",
        "5000",
        "--duration",
        "30",
    ]
    command += ["--output-tokens", "5", "--json", "--store", str(tmp_path / "r.sqlite")]
    with ServerProcess(0.02, 0.02) as server:
        proc = subprocess.Popen(
            [*command, server.url], stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=REPO
        )
        for _ in range(300):  # until the server has seen the test request and 4 measured ones (<= 30 s)
            if len(httpx.get(f"{server.url}/v1/log", timeout=5).json()) >= 5 or proc.poll() is not None:
                break
            time.sleep(0.1)
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 130, stderr  # the contract: an interrupted run exits 130, saves nothing
    assert b"not saved" in stderr
    doc = json.loads(stdout)
    assert doc["interrupted"] is True and 0 < doc["levels"][0]["requests_ok"] < 5000
    assert not (tmp_path / "r.sqlite").exists() or "loadtest" not in str(
        sqlite3.connect(tmp_path / "r.sqlite").execute("SELECT kind FROM runs").fetchall()
    )
