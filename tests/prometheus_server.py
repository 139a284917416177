"""A real Prometheus (Debian's `prometheus` binary) on a free loopback port, scraping given targets every
second into a temporary TSDB, and small real HTTP servers serving /metrics text. Bounded waits only."""

from __future__ import annotations

import contextlib
import json
import shutil
import socket
import subprocess
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def prometheus_binary() -> str:
    found = shutil.which("prometheus")
    if found is None:
        # Not a hardware skip: `make test` (strict skips) fails without it, as it does without Chromium.
        pytest.skip("no prometheus binary: .ci/run installs Debian's prometheus (apt-get install prometheus)")
    return found


Opener = Callable[..., Any]  # urllib.request.urlopen or one with TLS context and credentials


@contextlib.contextmanager
def prometheus(
    targets: list[str],
    tmp: Path,
    jobs: tuple[dict, ...] = (),
    web_config: Path | None = None,
    urlopen: Opener = urllib.request.urlopen,
    ready_within_s: float = 30,
    rule_files: tuple[Path, ...] = (),
) -> Iterator[str]:
    """Run Prometheus scraping ``targets`` (host:port) and ``jobs`` (scrape configs) every second, served
    with ``web_config`` (its --web.config.file) and evaluating ``rule_files`` every second; yields its URL
    (https with TLS), stops it after."""
    binary = prometheus_binary()
    port = free_port()
    config = tmp / "prometheus.yml"
    config.write_text(
        json.dumps(  # JSON is YAML
            {
                "global": {"scrape_interval": "1s", "scrape_timeout": "1s", "evaluation_interval": "1s"},
                "rule_files": [str(f) for f in rule_files],
                "scrape_configs": [
                    {"job_name": f"t{i}", "static_configs": [{"targets": [target]}]}
                    for i, target in enumerate(targets)
                ]
                + list(jobs),
            }
        )
    )
    proc = subprocess.Popen(
        [
            binary,
            f"--config.file={config}",
            f"--storage.tsdb.path={tmp / 'tsdb'}",
            f"--web.listen-address=127.0.0.1:{port}",
            "--log.level=warn",
            *([f"--web.config.file={web_config}"] if web_config else []),
        ],
        stdout=subprocess.DEVNULL,
        stderr=(tmp / "prometheus.log").open("w"),
    )
    scheme = "https" if web_config and "tls_server_config" in web_config.read_text() else "http"
    url = f"{scheme}://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + ready_within_s
        while True:
            with (
                contextlib.suppress(OSError),
                urlopen(url + "/-/ready", timeout=2) as response,
            ):
                if response.status == 200:
                    break
            if proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(
                    f"prometheus did not start: {(tmp / 'prometheus.log').read_text()[-2000:]}"
                )
            time.sleep(0.2)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def instant(url: str, expr: str, urlopen: Opener = urllib.request.urlopen) -> list[dict]:
    query = urllib.parse.urlencode({"query": expr})
    with urlopen(f"{url}/api/v1/query?{query}", timeout=10) as response:
        return json.load(response)["data"]["result"]


def _wait_until_enough(
    url: str, expr: str, enough: Callable[[float], bool], series: int, within_s: float, urlopen: Opener
) -> list[float]:
    """Poll the instant query ``expr`` until ``series`` of its values are ``enough`` (bounded); the values
    last read, for the caller's message when the wait ran out (then an AssertionError)."""
    deadline = time.monotonic() + within_s
    while True:
        values = [float(r["value"][1]) for r in instant(url, expr, urlopen)]
        if sum(enough(v) for v in values) >= series:
            return values
        if time.monotonic() > deadline:
            raise AssertionError(f"{expr}: {values} after {within_s} s (wanted {series} series)")
        time.sleep(0.5)


def wait_for_samples(
    url: str,
    metric: str,
    series: int,
    samples: int,
    within_s: float = 25,
    urlopen: Opener = urllib.request.urlopen,
) -> None:
    """Until ``series`` series of ``metric`` hold at least ``samples`` samples each (bounded)."""
    expr = f"count_over_time({metric}[5m])"
    _wait_until_enough(url, expr, lambda count: count >= samples, series, within_s, urlopen)


def latest_sample_unix_s(url: str, metric: str, urlopen: Opener = urllib.request.urlopen) -> float:
    """The time of the newest sample of ``metric`` (any series), as Prometheus stores it (ms)."""
    return max(float(r["value"][1]) for r in instant(url, f"timestamp({metric})", urlopen))


def wait_for_sample_after(
    url: str,
    metric: str,
    series: int,
    after_unix_s: float,
    within_s: float = 25,
    urlopen: Opener = urllib.request.urlopen,
) -> None:
    """Until ``series`` series of ``metric`` hold a sample later than ``after_unix_s`` (bounded): a counter
    read at that time is then interpolated between fixed samples, and later scrapes cannot move it."""
    expr = f"timestamp({metric})"
    _wait_until_enough(url, expr, lambda t: t > after_unix_s, series, within_s, urlopen)


@contextlib.contextmanager
def text_server(
    body: Callable[[], bytes],
    status: int = 200,
    content_type: str = "text/plain",
    authorization: list[str] | None = None,
) -> Iterator[str]:
    """Serve ``body()`` on every GET at a free loopback port; yields host:port. The Authorization
    headers received are appended to ``authorization``."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if authorization is not None:
                authorization.append(self.headers.get("Authorization", ""))
            data = body()
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        server.server_close()
