"""The load tester's wire clock (`gpuwise.loadtest.wire`) against a packet-level truth.

A timestamping TCP proxy in its own process (tests/wire_proxy.py) sits between the load tester and a
scripted server; its request time is the kernel's receive timestamp of the request's last byte and its
first-token time is bracketed by its own write to the client. The client's clock is read from the kernel
too (transmit timestamp of the request, receive timestamp of the first token's bytes), so both sides
agree whatever the machine's load: the client's scheduling delays after the bytes arrive do not count.
"""

from __future__ import annotations

import asyncio
import socket
import struct

import httpx
import pytest

from gpuwise.loadtest.endpoint import parse_target
from gpuwise.loadtest.prompts import Lengths
from gpuwise.loadtest.runner import http_client
from gpuwise.loadtest.session import Settings, run_loadtest
from gpuwise.loadtest.types import RequestRecord
from gpuwise.loadtest.wire import SO_TIMESTAMPNS, WireStream, kernel_time_s
from loadtest_servers import ServerProcess
from wire_proxy import ProxyProcess

KERNEL_AGREEMENT_S = 0.001  # two kernel timestamps of the same loopback bytes: microseconds apart


def _settings(url: str, **kw) -> Settings:
    target = parse_target(url, None)
    base = {"mode": "concurrency", "targets": [2], "max_requests": 10, "duration_s": 30, "timeout_s": 10}
    return Settings(target.url, target.endpoint, "scripted", **{**base, **kw})


def test_kernel_timestamps_are_read_from_ancillary_data():
    stamp = struct.pack("qq", 1_700_000_000, 250_000_000)
    assert kernel_time_s([(socket.SOL_SOCKET, SO_TIMESTAMPNS, stamp)], 1_699_999_000.0) == pytest.approx(
        1000.25
    )
    assert kernel_time_s([(0, 11, b"\0" * 32)], 0.0) is None  # the extended error beside a TX stamp
    assert kernel_time_s([], 0.0) is None


def test_ttft_and_clock_start_agree_with_the_packet_truth(tmp_path):
    records: list[RequestRecord] = []
    with ServerProcess(0.05, 0.01) as server, ProxyProcess(server.url, tmp_path / "wire.json") as proxy:
        result = run_loadtest(_settings(proxy.url, lengths=Lengths(32, 6)), on_record=records.append)
    wire = [e for e in proxy.entries() if "first_token_at" in e]
    assert result.levels[0].requests_ok == 10 and len(wire) == 11  # the test request, then the level's ten
    for record in records:
        assert record.ttft_s is not None
        # the request whose last byte the proxy's kernel saw when the client's kernel sent it
        truth = min(wire, key=lambda e: abs(e["request_at"] - record.sent_at))
        assert abs(record.sent_at - truth["request_at"]) < KERNEL_AGREEMENT_S
        low = truth["first_token_handing_at"] - truth["request_at"] - KERNEL_AGREEMENT_S
        high = truth["first_token_at"] - truth["request_at"] + KERNEL_AGREEMENT_S
        assert low <= record.ttft_s <= high


def test_only_plain_http_uses_the_wire_clock():
    async def streams() -> tuple[object, object]:
        async with http_client(5.0, wire=True) as wired, http_client(5.0) as plain:
            return wired._transport, plain._transport

    wired, plain = asyncio.run(streams())
    assert "WireBackend" in type(wired._pool._network_backend).__name__  # type: ignore[attr-defined]
    assert "WireBackend" not in type(plain._pool._network_backend).__name__  # type: ignore[attr-defined]


def test_the_wire_backend_maps_socket_failures_to_httpx_errors():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # nothing listens here once closed

    async def refused() -> None:
        async with http_client(5.0, wire=True) as client:
            await client.get(f"http://127.0.0.1:{port}/v1/models")

    with pytest.raises(httpx.ConnectError):
        asyncio.run(refused())

    async def served() -> type:
        with ServerProcess(0.0, 0.0) as server:
            async with (
                http_client(5.0, wire=True) as client,
                client.stream("GET", f"{server.url}/v1/models") as response,
            ):
                await response.aread()
                return type(response.extensions["network_stream"])

    assert asyncio.run(served()) is WireStream


def test_a_proxied_target_keeps_httpx_transport(monkeypatch):
    """The wire clock opens its own sockets: where the environment routes the target through a proxy,
    httpx's transport (which honours HTTP_PROXY / ALL_PROXY and NO_PROXY) is kept instead."""
    from gpuwise.loadtest.runner import proxy_applies

    for name in ("http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY", "no_proxy", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
    assert not proxy_applies("http://10.0.0.5:8000/v1")
    monkeypatch.setenv("HTTP_PROXY", "http://proxy.internal:3128")
    assert proxy_applies("http://10.0.0.5:8000/v1")
    monkeypatch.setenv("NO_PROXY", "10.0.0.5,localhost")
    assert not proxy_applies("http://10.0.0.5:8000/v1")
    assert proxy_applies("http://gpu-box:8000/v1")
