"""Wall and CPU time of the serving sweep: every catalog GPU × {1, 2, 4, 8} GPUs per node × every
tensor-parallel size that divides the node, at one demand (target ≤ 10 s on 2 cores).

    python benchmarks/serving_speed.py [--workload examples/serving-chat-50rps.yaml]

Prints the sweep's size (deployments, goodput searches, simulations), its time, the five cheapest
deployments that meet the SLO, and a last line of JSON with the figures.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from gpuwise.serving.evaluate import REQUESTS_SIMULATED, ReplicaSearch
from gpuwise.serving.sweep import cheapest, sweep
from gpuwise.workload import load_workload

REPO = Path(__file__).resolve().parents[1]
TARGET_S = 10.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workload", default=str(REPO / "examples" / "serving-chat-50rps.yaml"))
    args = parser.parse_args()
    workload = load_workload(args.workload)
    wall, cpu = time.perf_counter(), time.process_time()
    search = ReplicaSearch(workload)
    rows = sweep(workload, search=search)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    searches = [g for _, g, _ in search._goodput.values() if g is not None]
    simulations = sum(g.simulations for g in searches) + len(search._runs)
    best = cheapest(rows)
    print(f"workload: {args.workload} ({workload.model}, {search.rate:g} req/s)")
    print(
        f"{len(rows)} deployments, {len(search._goodput)} replica configurations, "
        f"{simulations} simulations of {REQUESTS_SIMULATED} requests"
    )
    print(f"sweep: {wall:.2f} s wall, {cpu:.2f} s CPU (target ≤ {TARGET_S:g} s)")
    ok = sorted((r for r in rows if r.meets_slo and r.monthly_usd is not None), key=lambda r: r.monthly_usd)
    for r in ok[:5]:
        where = f"{r.nodes} × {r.gpus_per_node} {r.gpu} tp {r.tp}"
        print(f"  {where}: {r.replicas} replicas, ${r.monthly_usd:,.0f}/month")
    figures = {
        "deployments": len(rows),
        "simulations": simulations,
        "wall_s": round(wall, 3),
        "cpu_s": round(cpu, 3),
        "target_s": TARGET_S,
        "cheapest": f"{best.nodes} x {best.gpus_per_node} {best.gpu} tp {best.tp}" if best else None,
    }
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
