"""Wall time of one scrape of `gpuwise exporter`: plain HTTP, HTTPS, HTTPS + basic auth.

    python benchmarks/exporter_scrape_speed.py [--gpus 8] [--scrapes 50]

The exporter runs on faked NVML (tests/fake_nvml.py: every NVML call is a Python mock, so this is
gpuwise's own cost per scrape, not the driver's), served with a web config made here (a self-signed
certificate by the openssl CLI, a bcrypt cost-10 hash as htpasswd -B makes). The first authenticated
scrape pays bcrypt; later ones hit the exporter's cache of good credentials. Last line: one JSON object.
"""

from __future__ import annotations

import argparse
import base64
import json
import shutil
import ssl
import statistics
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from unittest import mock

import bcrypt
import pynvml

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # fake_nvml: test support
from fake_nvml import FakeNvml, scenario
from gpuwise.exporter import scrape as exporter
from gpuwise.exporter import web_config
from gpuwise.monitor.sampler import GpuSampler
from self_signed import self_signed


def scrape_times(url: str, scrapes: int, context: ssl.SSLContext | None, auth: str | None) -> list[float]:
    times = []
    for _ in range(scrapes):
        request = urllib.request.Request(url)
        if auth:
            request.add_header("Authorization", auth)
        t0 = time.perf_counter()
        with urllib.request.urlopen(request, timeout=30, context=context) as response:
            response.read()
        times.append(time.perf_counter() - t0)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpus", type=int, default=8)
    parser.add_argument("--scrapes", type=int, default=50)
    args = parser.parse_args()
    if shutil.which("openssl") is None:
        print(json.dumps({"skipped": "no openssl CLI"}))
        return
    gpus = (scenario("healthy_and_idle") * args.gpus)[: args.gpus]
    figures: dict = {"gpus": args.gpus, "scrapes": args.scrapes}
    with tempfile.TemporaryDirectory() as tmp_dir:
        tmp = Path(tmp_dir)
        cert, key = self_signed(tmp)
        hashed = bcrypt.hashpw(b"pw", bcrypt.gensalt(rounds=10)).decode()
        tls = web_config.WebConfig(cert, key)
        both = web_config.WebConfig(cert, key, {"prometheus": hashed.encode()})
        context = ssl.create_default_context(cafile=str(cert))
        auth = "Basic " + base64.b64encode(b"prometheus:pw").decode()
        cases = [
            ("http", None, None, None),
            ("https", tls, context, None),
            ("https_basic_auth", both, context, auth),
        ]
        with mock.patch.multiple(pynvml, **FakeNvml(gpus).patches()):
            sampler = GpuSampler()
            try:
                for name, config, ctx, header in cases:
                    server = exporter.start(sampler, "127.0.0.1:0", config=config)
                    scheme = "https" if config else "http"
                    url = f"{scheme}://127.0.0.1:{server.server_port}/metrics"
                    try:
                        times = scrape_times(url, args.scrapes + 1, ctx, header)
                    finally:
                        server.shutdown()
                        server.server_close()
                    first, rest = times[0], times[1:]
                    figures[f"{name}_first_ms"] = round(first * 1e3, 2)
                    figures[f"{name}_median_ms"] = round(statistics.median(rest) * 1e3, 2)
                    print(
                        f"{name:>17}: first scrape {first * 1e3:7.2f} ms, "
                        f"median of {args.scrapes} {statistics.median(rest) * 1e3:6.2f} ms ({args.gpus} GPUs)"
                    )
            finally:
                sampler.close()
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
