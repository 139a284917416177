"""The exporter's server under probes, with real sockets on 127.0.0.1: plain HTTP and TLS 1.1 on the HTTPS
port, malformed requests, 200 idle connections, a slow-loris client; the headers and the paths served.
Every wait is a bounded loop; nothing asserts a duration."""

from __future__ import annotations

import logging
import socket
import ssl
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from fake_nvml import fake_nvml
from gpuwise.exporter import scrape as exporter
from gpuwise.exporter import web_config
from gpuwise.monitor.sampler import GpuSampler
from self_signed import self_signed


def metrics_app(environ, start_response):
    start_response("200 OK", [("Content-Type", "text/plain; version=0.0.4")])
    return [b"up 1\n"]


@pytest.fixture(scope="module")
def certs(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("certs")
    self_signed(tmp)
    return tmp


def tls_config(certs: Path) -> web_config.WebConfig:
    return web_config.WebConfig(certs / "server.crt", certs / "server.key")


class Served:
    """A server on a free loopback port for the test's duration."""

    def __init__(self, config: web_config.WebConfig | None = None, **limits: float) -> None:
        self.server = web_config.serve(
            metrics_app, "127.0.0.1", 0, config or web_config.WebConfig(), **limits
        )
        self.port = self.server.server_port

    def __enter__(self) -> Served:
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


def wait_for(condition, limit_s: float = 20.0) -> bool:
    """Poll ``condition`` every 50 ms up to ``limit_s`` (a bound, not a timing assert)."""
    end = time.monotonic() + limit_s
    while time.monotonic() < end:
        if condition():
            return True
        time.sleep(0.05)
    return condition()


def ended(sock: socket.socket, limit_s: float = 20.0) -> bool:
    """Whether the server closed ``sock`` (EOF or reset) within ``limit_s``."""
    sock.settimeout(limit_s)
    try:
        while sock.recv(4096):
            pass
        return True
    except (ConnectionResetError, BrokenPipeError):
        return True
    except TimeoutError:
        return False


def raw(port: int, data: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(data)
        chunks = []
        while chunk := sock.recv(4096):
            chunks.append(chunk)
        return b"".join(chunks)


def warnings_of(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "gpuwise.exporter"]


def test_plain_http_on_the_tls_port_is_one_log_line_no_traceback(certs, caplog, capfd):
    caplog.set_level(logging.WARNING, "gpuwise.exporter")
    with Served(tls_config(certs)) as served:
        with socket.create_connection(("127.0.0.1", served.port), timeout=10) as sock:
            sock.sendall(b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            assert ended(sock)
        assert wait_for(lambda: any("TLS handshake failed" in m for m in warnings_of(caplog)))
    lines = [m for m in warnings_of(caplog) if "TLS handshake failed" in m]
    assert len(lines) == 1 and "127.0.0.1" in lines[0] and "\n" not in lines[0]
    assert "Traceback" not in capfd.readouterr().err


@pytest.mark.filterwarnings("ignore:ssl.TLSVersion.TLSv1_1 is deprecated:DeprecationWarning")
def test_a_tls_1_1_client_is_refused_in_one_line(certs, caplog, capfd):
    caplog.set_level(logging.WARNING, "gpuwise.exporter")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    try:
        context.set_ciphers("DEFAULT:@SECLEVEL=0")  # let this OpenSSL offer TLS 1.1 at all
        context.minimum_version = context.maximum_version = ssl.TLSVersion.TLSv1_1
    except (ssl.SSLError, ValueError) as err:
        pytest.skip(f"this OpenSSL cannot speak TLS 1.1: {err}")
    with Served(tls_config(certs)) as served:
        with (
            socket.create_connection(("127.0.0.1", served.port), timeout=10) as sock,
            pytest.raises(ssl.SSLError),
        ):
            context.wrap_socket(sock, server_hostname="127.0.0.1")
        assert wait_for(lambda: any("TLS handshake failed" in m for m in warnings_of(caplog)))
        # the server still serves a TLS 1.2+ client afterwards
        good = ssl.create_default_context(cafile=str(certs / "server.crt"))
        url = f"https://127.0.0.1:{served.port}/metrics"
        with urllib.request.urlopen(url, timeout=10, context=good) as response:
            assert response.read() == b"up 1\n"
    assert "Traceback" not in capfd.readouterr().err


def test_a_malformed_request_gets_400_and_one_line(caplog, capfd):
    caplog.set_level(logging.WARNING, "gpuwise.exporter")
    with Served() as served:
        assert b"Error code: 400" in raw(served.port, b"GARBAGE\r\n\r\n")  # HTTP/0.9: no status line
        assert b"Error code: 400" in raw(served.port, b"\x16\x03\x01\x00\xff\x01tls-hello\r\n\r\n")
        answer = raw(served.port, b"GET /metrics HTTP/1.1\r\n" + b"X: y\r\n" * 101 + b"\r\n")
        assert answer.startswith(b"HTTP/1.0 431")
        assert b"\r\nServer: gpuwise\r\n" in answer and b"Python" not in answer
        assert wait_for(lambda: len(warnings_of(caplog)) >= 3)
    assert all("\n" not in m for m in warnings_of(caplog))
    assert "Traceback" not in capfd.readouterr().err


def test_200_idle_connections_hold_a_bounded_pool_and_time_out():
    before = set(threading.enumerate())

    def ours() -> set[threading.Thread]:
        return {t for t in threading.enumerate() if t not in before}

    with Served(workers=4, backlog=8, idle_timeout_s=0.3, request_deadline_s=2.0) as served:
        pool = ours()
        assert len(pool) == 4 + 2  # 4 workers, the watchdog, serve_forever
        clients = [socket.create_connection(("127.0.0.1", served.port), timeout=10) for _ in range(200)]
        try:
            assert ours() == pool  # no thread per connection
            assert all(ended(c) for c in clients)  # closed at once (queue full) or after the idle timeout
            assert ours() == pool
            # and the server still answers
            with urllib.request.urlopen(f"http://127.0.0.1:{served.port}/metrics", timeout=10) as response:
                assert response.status == 200
        finally:
            for c in clients:
                c.close()
    assert wait_for(lambda: not any(t.is_alive() for t in pool))  # server_close stops the pool


def test_a_slow_loris_client_is_cut_off_at_the_request_deadline():
    with (
        Served(idle_timeout_s=1.0, request_deadline_s=1.0) as served,
        socket.create_connection(("127.0.0.1", served.port), timeout=10) as sock,
    ):
        sock.sendall(b"GET /metrics HTTP/1.1\r\n")
        cut = False
        for _ in range(200):  # one header byte every 0.1 s: never idle for 1 s, never done
            try:
                sock.sendall(b"X")
            except (BrokenPipeError, ConnectionResetError):
                cut = True
                break
            time.sleep(0.1)
        assert cut or ended(sock, 1.0)


def test_headers_paths_and_404_on_the_real_exporter():
    with fake_nvml("healthy_and_idle"):
        sampler = GpuSampler()
        server = exporter.start(sampler, "127.0.0.1:0")
        base = f"http://127.0.0.1:{server.server_port}"
        try:
            with urllib.request.urlopen(f"{base}/metrics", timeout=10) as response:
                assert response.headers["Server"] == "gpuwise"
                assert b"gpuwise_gpu_busy_ratio" in response.read()
            with urllib.request.urlopen(f"{base}/", timeout=10) as response:
                assert response.headers["Server"] == "gpuwise"
                assert b'<a href="/metrics">' in response.read()
            for path in ("/foo", "/metrics/x", "/metricsx", "/favicon.ico"):
                with pytest.raises(urllib.error.HTTPError) as err:
                    urllib.request.urlopen(f"{base}{path}", timeout=10)
                assert err.value.code == 404 and err.value.headers["Server"] == "gpuwise"
        finally:
            server.shutdown()
            server.server_close()
            sampler.close()
