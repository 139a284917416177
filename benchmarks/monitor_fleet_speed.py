"""Wall time of `load_history` on a fleet's week in a real Prometheus (Debian's binary).

    python benchmarks/monitor_fleet_speed.py [--gpus 64] [--days 7] [--scrape-s 300] [--hosts-of 8]

Writes N GPUs × D days of synthetic gpuwise-exporter series (busy, memory, power, energy, temperature,
clock-event reasons; busy GPUs, idle ones and a throttled one per host) as OpenMetrics, backfills them
with `promtool tsdb create-blocks-from openmetrics` (the realistic way to get a week into a TSDB in
seconds), starts Prometheus on that TSDB on a free loopback port, and times `load_history` over the week
at hourly and at scrape-interval steps. Last line: one JSON object with the figures.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from gpuwise.finops.prometheus_source import load_history
from gpuwise.units import GiB

REASONS = ("gpu_idle", "sw_power_cap", "hw_thermal_slowdown")


def write_openmetrics(path: Path, gpus: int, per_host: int, start: int, end: int, scrape_s: int) -> int:
    """The series as OpenMetrics (families contiguous, each series in time order); returns samples."""
    times = range(start, end + 1, scrape_s)
    ids = [(f"node{g // per_host:03d}", g % per_host, f"GPU-{g:08x}") for g in range(gpus)]

    def busy(g: int, t: int) -> float:  # every 4th GPU idle, the others busy with a daily dip
        return 0.0 if g % 4 == 3 else 0.6 + 0.3 * ((t // 3600 + g) % 24 < 16)

    families = [
        ("gpuwise_gpu_busy_ratio", "gauge", "", lambda g, t: busy(g, t)),
        ("gpuwise_gpu_memory_used_bytes", "gauge", "", lambda g, t: (70 if busy(g, t) else 0.5) * GiB),
        ("gpuwise_gpu_memory_total_bytes", "gauge", "", lambda g, t: 80 * GiB),
        ("gpuwise_gpu_power_watts", "gauge", "", lambda g, t: 60 + 340 * busy(g, t)),
        ("gpuwise_gpu_temperature_celsius", "gauge", "", lambda g, t: 35 + 40 * busy(g, t)),
        ("gpuwise_gpu_energy_joules", "counter", "_total", lambda g, t: 1e9 + 300.0 * (t - start)),
    ]
    samples = 0
    with path.open("w") as out:
        for name, kind, suffix, value in families:
            out.write(f"# TYPE {name} {kind}\n")
            for g, (host, index, uuid) in enumerate(ids):
                labels = f'gpu="{index}",uuid="{uuid}",name="NVIDIA H100 80GB HBM3",hostname="{host}"'
                out.writelines(f"{name}{suffix}{{{labels}}} {value(g, t):.6g} {t}\n" for t in times)
                samples += len(times)
        out.write("# TYPE gpuwise_gpu_clock_event_reason gauge\n")
        for g, (host, index, uuid) in enumerate(ids):
            labels = f'gpu="{index}",uuid="{uuid}",name="NVIDIA H100 80GB HBM3",hostname="{host}"'
            for reason in REASONS:
                active = (reason == "gpu_idle" and g % 4 == 3) or (reason != "gpu_idle" and index == 0)
                out.writelines(
                    f'gpuwise_gpu_clock_event_reason{{{labels},reason="{reason}"}} {int(active)} {t}\n'
                    for t in times
                )
                samples += len(times)
        out.write("# EOF\n")
    return samples


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def prometheus_on(tsdb: Path, tmp: Path):
    port = free_port()
    (tmp / "prometheus.yml").write_text("global: {scrape_interval: 1m}\n")
    proc = subprocess.Popen(
        ["prometheus", f"--config.file={tmp / 'prometheus.yml'}", f"--storage.tsdb.path={tsdb}",
         f"--web.listen-address=127.0.0.1:{port}", "--storage.tsdb.retention.time=30d", "--log.level=warn"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            with contextlib.suppress(OSError), urllib.request.urlopen(url + "/-/ready", timeout=2) as r:
                if r.status == 200:
                    break
            if proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit("prometheus did not start")
            time.sleep(0.5)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=60)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpus", type=int, default=64)
    parser.add_argument("--days", type=float, default=7)
    parser.add_argument("--scrape-s", type=int, default=300)
    parser.add_argument("--hosts-of", type=int, default=8, help="GPUs per host")
    args = parser.parse_args()
    if not (shutil.which("prometheus") and shutil.which("promtool")):
        print("needs the prometheus and promtool binaries (Debian package prometheus)")
        print(json.dumps({"skipped": "no prometheus"}))
        return
    end = int(time.time()) // args.scrape_s * args.scrape_s - 3600  # backfill stays out of the head block
    start = end - int(args.days * 86400)
    with tempfile.TemporaryDirectory() as tmp_dir:
        tmp = Path(tmp_dir)
        t0 = time.perf_counter()
        samples = write_openmetrics(tmp / "fleet.om", args.gpus, args.hosts_of, start, end, args.scrape_s)
        written_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        subprocess.run(
            [
                "promtool",
                "tsdb",
                "create-blocks-from",
                "openmetrics",
                "-q",
                str(tmp / "fleet.om"),
                str(tmp / "tsdb"),
            ],
            check=True,
        )
        backfill_s = time.perf_counter() - t0
        figures: dict = {
            "gpus": args.gpus,
            "days": args.days,
            "scrape_s": args.scrape_s,
            "samples": samples,
            "openmetrics_mb": round((tmp / "fleet.om").stat().st_size / 1e6, 1),
            "write_s": round(written_s, 2),
            "backfill_s": round(backfill_s, 2),
        }
        print(
            f"{args.gpus} GPUs × {args.days:g} days every {args.scrape_s} s: {samples:,} samples backfilled"
        )
        with prometheus_on(tmp / "tsdb", tmp) as url:
            for step in (3600, args.scrape_s):
                t0 = time.perf_counter()
                history = load_history(url, start, end, step)
                took = time.perf_counter() - t0
                points = sum(len(g.samples) for g in history.gpus)
                assert len(history.gpus) == args.gpus, len(history.gpus)
                print(
                    f"load_history step {step:>5} s: {took:6.2f} s for {args.gpus} GPUs, {points:,} samples"
                )
                figures[f"load_history_step_{step}_s"] = round(took, 3)
                figures[f"samples_step_{step}"] = points
    print(json.dumps(figures))


if __name__ == "__main__":
    sys.exit(main())
