"""HTA's reference numbers (tests/data/traces/hta_reference.csv) for the agreement test and benchmark.

Test support, not part of the installed package: only the test and the benchmark compare against HTA.
"""

from __future__ import annotations

import csv
import math
from collections import defaultdict
from pathlib import Path

REFERENCE_BUILD = "holistictraceanalysis==0.5.0; pandas==2.3.3"  # the build that covers the most traces


def read_reference(path: Path, build: str = REFERENCE_BUILD) -> tuple[dict, dict]:
    """Rows of one HTA build: ({trace_path: {metric: value}}, {trace_path: {(stream, metric): value}})."""
    ranks: dict[str, dict[str, float]] = defaultdict(dict)
    streams: dict[str, dict[tuple[int, str], float]] = defaultdict(dict)
    with open(path, newline="") as fh:
        for row in csv.DictReader(fh):
            if row["hta_version"] != build:
                continue
            value = float(row["value"]) if row["value"] not in ("", "nan", "NaN") else math.nan
            if row["stream"]:
                streams[row["trace_path"]][(int(row["stream"]), row["metric"])] = value
            else:
                ranks[row["trace_path"]][row["metric"]] = value
    return ranks, streams
