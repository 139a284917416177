"""How closely `gpuwise trace` agrees with Holistic Trace Analysis (HTA) on its reference numbers.

For every trace in the reference CSV (rows of one HTA build, default
`holistictraceanalysis==0.5.0; pandas==2.3.3`), compare the temporal breakdown (idle / compute /
non-compute, % of the span from the first to the last GPU event) and the per-stream idle breakdown.

    python benchmarks/trace_agreement.py [--reference CSV] [--root DIR] [--build NAME]

The traces are other projects' files, read from the third-party data directory (--root, else
$GPUWISE_TEST_DATA, else ../shared/traces beside the checkout; tests/README.md) and checked against
tests/data/third_party.csv. Without them it prints one line saying so and exits 0.

Prints a table, then as its LAST line: {"traces": N, "max_abs_diff_pp": X}
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(REPO / "tests"))  # hta_reference.py: test support, not in the installed package

from gpuwise.trace.rank import analyze_file  # noqa: E402
from hta_reference import REFERENCE_BUILD, read_reference  # noqa: E402
from third_party import DataError, check, data_dir, missing_line  # noqa: E402

DEFAULT_REFERENCE = REPO / "tests" / "data" / "traces" / "hta_reference.csv"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reference", type=Path, default=DEFAULT_REFERENCE, help="hta_reference.csv")
    ap.add_argument(
        "--root",
        type=Path,
        default=None,
        help="directory the CSV's trace paths are relative to (default: the third-party data directory)",
    )
    ap.add_argument("--build", default=REFERENCE_BUILD, help="hta_version rows to compare against")
    args = ap.parse_args()
    if not args.reference.is_file():
        print(f"reference CSV not found: {args.reference}", file=sys.stderr)
        return 2
    root = args.root or data_dir()
    ranks, streams = read_reference(args.reference, args.build)
    if not ranks:
        print(f"no rows for build {args.build!r} in {args.reference}", file=sys.stderr)
        return 2
    try:
        missing = [m for rel in sorted(ranks) for m in check(root, rel)]
    except DataError as err:
        print(err, file=sys.stderr)
        return 2
    if missing:
        print(missing_line(root, f"trace_agreement ({len(missing)} of {len(ranks)} traces missing)"))
        return 0

    header = (
        f"{'trace':70} {'idle gw/hta':>15} {'compute gw/hta':>15} {'non-comp gw/hta':>15} "
        f"{'max Δ pp':>8} {'streams':>8}"
    )
    print(header)
    print("-" * len(header))
    worst, stream_worst_us, compared = 0.0, 0.0, 0
    for rel in sorted(ranks):
        ref = ranks[rel]
        analysis = analyze_file(root / rel)
        t = analysis.temporal
        if t is None:
            print(f"{rel[-70:]:70} gpuwise found no GPU activity (HTA: idle {ref['idle_time_pctg']} %)")
            worst = math.inf
            continue
        pairs = [
            (t.idle_pct, ref["idle_time_pctg"]),
            (t.compute_pct, ref["compute_time_pctg"]),
            (t.non_compute_pct, ref["non_compute_time_pctg"]),
        ]
        diff = max(abs(a - b) for a, b in pairs)
        worst = max(worst, diff)
        mine = {s.stream: s for s in analysis.idle_by_stream}
        stream_diff = 0.0
        for (stream, metric), value in streams.get(rel, {}).items():
            if metric.endswith("_time") and not math.isnan(value):
                category = metric[len("idle_") : -len("_time")]
                got = getattr(mine[stream], f"{category}_us") if stream in mine else math.inf
                stream_diff = max(stream_diff, abs(got - value))
        stream_worst_us = max(stream_worst_us, stream_diff)
        compared += 1
        cells = " ".join(f"{a:6.2f}/{b:6.2f}  " for a, b in pairs)
        print(f"{rel[-70:]:70} {cells} {diff:8.3f} {('Δ' + format(stream_diff, '.2f') + 'µs'):>8}")
    print("-" * len(header))
    print(
        f"{compared} traces; largest temporal difference {worst:.3f} pp (HTA rounds to 0.01); "
        f"largest per-stream idle difference {stream_worst_us:.2f} µs"
    )
    print(json.dumps({"traces": compared, "max_abs_diff_pp": round(worst, 4)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
