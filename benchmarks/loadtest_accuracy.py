#!/usr/bin/env python
"""How exact `gpuwise loadtest` is: measured vs designed on a scripted-delay server (tests/loadtest_servers).

Usage: python benchmarks/loadtest_accuracy.py

1. Timing: a server with a designed TTFT and per-token delay, loaded at concurrency 1. Prints the p50 error
   of TTFT, TPOT and ITL in ms against the design, and per request against the server-side ground truth
   (same CLOCK_MONOTONIC): the server's TTFT is from the request's arrival (fully read) to the first
   token's bytes written; the client's from the request's last byte written to the first token parsed.
   Their difference is the loopback transit both ways plus parsing: the figure `within 1 ms` is about.
2. Capacity: servers with S slots and a fixed service time T (capacity S/T req/s; above it the queue and
   TTFT grow without bound). `--find-max-rate` with a TTFT SLO must land near S/T; prints the error in %.

Timings depend on the machine's load (printed): run it on a quiet machine for the figures in docs.
The last line is one JSON object with the figures.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from gpuwise.loadtest.endpoint import parse_target
from gpuwise.loadtest.metrics import parse_slo, percentile
from gpuwise.loadtest.prompts import Lengths
from gpuwise.loadtest.session import Settings, run_loadtest
from gpuwise.loadtest.types import RequestRecord
from loadtest_servers import ServerProcess
from wire_proxy import ProxyProcess


def _settings(url: str, **kw) -> Settings:
    target = parse_target(url, None)
    base = {"mode": "concurrency", "targets": [1], "max_requests": 20, "duration_s": 60, "timeout_s": 10}
    return Settings(target.url, target.endpoint, "scripted", **{**base, **kw})


def _outside(ttft_s: float | None, wire: dict[str, float]) -> float:
    """How far the client's TTFT lies outside the packet truth's bracket (the proxy's write of the first
    token to the client started / returned, from the request's last byte's kernel arrival)."""
    assert ttft_s is not None
    low = wire["first_token_handing_at"] - wire["request_at"]
    high = wire["first_token_at"] - wire["request_at"]
    return max(0.0, low - ttft_s, ttft_s - high)


def timing(ttft: float, token: float, tokens: int) -> dict[str, float]:
    records: list[RequestRecord] = []
    with tempfile.TemporaryDirectory() as tmp, ServerProcess(ttft, token) as server:
        with ProxyProcess(server.url, Path(tmp) / "wire.json") as proxy:
            result = run_loadtest(_settings(proxy.url, lengths=Lengths(64, tokens)), on_record=records.append)
        log = httpx.get(f"{server.url}/v1/log", timeout=5).json()[1:]
        wire = [e for e in proxy.entries() if "first_token_at" in e][1:]  # the first is the test request
    level = result.levels[0]
    records.sort(key=lambda r: r.sent_at)
    pairs = list(zip(records, log, strict=True))
    truth = [r.ttft_s - (e["received_at"] - r.sent_at + ttft) for r, e in pairs]  # type: ignore[operator]
    server_side = [abs(r.ttft_s - (e["first_sent_at"] - e["received_at"])) for r, e in pairs]  # type: ignore[operator]
    transit = [e["received_at"] - r.sent_at for r, e in pairs]
    packet = [_outside(r.ttft_s, w) for r, w in zip(records, wire, strict=True)]
    bracket = [w["first_token_at"] - w["first_token_handing_at"] for w in wire]
    start = [abs(r.sent_at - w["request_at"]) for r, w in zip(records, wire, strict=True)]
    ms = 1000.0
    return {
        "ttft_abs_error_vs_packet_p50_ms": percentile(packet, 50) * ms,  # type: ignore[operator]
        "ttft_abs_error_vs_packet_p90_ms": percentile(packet, 90) * ms,  # type: ignore[operator]
        "ttft_abs_error_vs_packet_max_ms": max(packet) * ms,
        "clock_start_abs_error_vs_packet_max_ms": max(start) * ms,
        "packet_truth_bracket_max_ms": max(bracket) * ms,
        "ttft_abs_error_vs_server_p50_ms": percentile(server_side, 50) * ms,  # type: ignore[operator]
        "ttft_abs_error_vs_server_p90_ms": percentile(server_side, 90) * ms,  # type: ignore[operator]
        "ttft_abs_error_vs_server_max_ms": max(server_side) * ms,
        "request_transit_p50_ms": percentile(transit, 50) * ms,  # type: ignore[operator]
        "designed_ttft_ms": ttft * ms,
        "designed_tpot_ms": token * ms,
        "ttft_p50_error_ms": (level.pct("ttft", 50) - ttft) * ms,  # type: ignore[operator]
        "ttft_p50_error_vs_server_receive_ms": percentile(truth, 50) * ms,  # type: ignore[operator]
        "tpot_p50_error_ms": (level.pct("tpot", 50) - token) * ms,  # type: ignore[operator]
        "itl_p50_error_ms": (level.pct("itl", 50) - token) * ms,  # type: ignore[operator]
    }


def capacity(slots: int, ttft: float, token: float, tokens: int, slo: str, low: float, high: float) -> dict:
    service = ttft + (tokens - 1) * token
    designed = slots / service
    with ServerProcess(ttft, token, slots=slots) as server:
        settings = _settings(
            server.url,
            mode="constant",
            max_requests=max(100, int(designed * 2.5)),
            lengths=Lengths(20, tokens),
            slo=parse_slo(slo),
            search_range=(low, high),
            max_probes=9,
            probe_repeats=2,
        )
        search = run_loadtest(settings).search
    assert search is not None
    found = search.max_rate_per_s or 0.0
    return {
        "slots": slots,
        "service_s": service,
        "slo": slo,
        "designed_capacity_per_s": designed,
        "max_rate_per_s": found,
        "offered_rate_per_s": search.offered_rate_per_s,
        "ci_low_per_s": search.ci_low_per_s,
        "ci_high_per_s": search.ci_high_per_s,
        "error_pct": (found - designed) / designed * 100,
        "probes": len(search.probes),
    }


def main() -> None:
    load = os.getloadavg()[0]
    figures = {"load_average_1min": load, "timing": [timing(0.1, 0.02, 16), timing(0.25, 0.05, 8)]}
    figures["capacity"] = [
        capacity(4, 0.05, 0.025, 3, "ttft_p90=0.15", 10, 80),
        capacity(2, 0.1, 0.025, 5, "ttft_p90=0.25", 2, 30),
    ]
    print(f"load average (1 min): {load:.1f} on {os.cpu_count()} CPUs")
    for t in figures["timing"]:
        print(
            f"TTFT {t['designed_ttft_ms']:.0f} ms / TPOT {t['designed_tpot_ms']:.0f} ms designed: p50 error "
            f"TTFT {t['ttft_p50_error_ms']:+.1f} ms ({t['ttft_p50_error_vs_server_receive_ms']:+.1f} ms from "
            f"the server's receive), TPOT {t['tpot_p50_error_ms']:+.1f} ms, "
            f"ITL {t['itl_p50_error_ms']:+.1f} ms; against the server-side TTFT |error| p50 "
            f"{t['ttft_abs_error_vs_server_p50_ms']:.2f} ms, "
            f"p90 {t['ttft_abs_error_vs_server_p90_ms']:.2f} ms, "
            f"max {t['ttft_abs_error_vs_server_max_ms']:.2f} ms (request transit p50 "
            f"{t['request_transit_p50_ms']:.2f} ms)"
        )
    for c in figures["capacity"]:
        print(
            f"capacity {c['designed_capacity_per_s']:.1f} req/s "
            f"({c['slots']} slots x {c['service_s']:.2f} s): "
            f"max rate meeting {c['slo']} = {c['max_rate_per_s']:.1f} req/s nominal "
            f"({c['error_pct']:+.1f} %), offered {c['offered_rate_per_s'] or 0:.1f} req/s, 95 % interval "
            f"{c['ci_low_per_s'] or 0:.1f}-{c['ci_high_per_s'] or 0:.1f} ({c['probes']} probes)"
        )
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
