#!/usr/bin/env python
"""Precision, recall and debatable share of `gpuwise lint` per rule on look-alike projects.

Usage: python benchmarks/lint_real.py [--json] [--src OTHER_CHECKOUT/src]

``--src`` lints with another checkout's gpuwise (the figures before a change) on these same projects.

Each folder of tests/data/lint/projects is a small project written in the style of a public
repository's training code (named in each file's first line; no third-party code). Every expected
finding is labelled on its line with a comment ``# expect[rule_id]`` (or on the line before it with
``# expect-next[rule_id]``, where the formatter would split the line); a finding that a careful reader
could argue either way is labelled ``# debatable[rule_id]``; every other line is expected to be
quiet. The folder is linted as one project, as `gpuwise lint FOLDER` would.

Per rule: true (labelled and reported), false (reported, not labelled), debatable (reported,
labelled debatable), missed (labelled, not reported); precision counts debatable findings against
the rule: true / (true + false + debatable). The last line is one JSON object with the figures.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
_SRC = sys.argv[sys.argv.index("--src") + 1] if "--src" in sys.argv[:-1] else str(REPO / "src")
sys.path.insert(0, _SRC)

from gpuwise.lint import lint_paths  # noqa: E402

PROJECTS = REPO / "tests" / "data" / "lint" / "projects"
LABEL = re.compile(r"(expect|debatable)(-next)?\[([a-z0-9_]+)\]")


def labels(folder: Path) -> dict[tuple[str, int, str], str]:
    """(file name, line, rule) -> "expect" | "debatable", from the comments of the folder's files."""
    out: dict[tuple[str, int, str], str] = {}
    for path in sorted(folder.glob("*.py")):
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            comment = line.partition("#")[2] if "#" in line else ""
            for kind, next_line, rule in LABEL.findall(comment):
                out[(path.name, number + bool(next_line), rule)] = kind
    return out


def score(folder: Path) -> Counter[tuple[str, str]]:
    """(rule, outcome) counts for one project; outcome is true, false, debatable or missed."""
    expected = labels(folder)
    counts: Counter[tuple[str, str]] = Counter()
    reported = set()
    for v in lint_paths([folder]).violations:
        key = (Path(v.path).name, v.line, v.rule)
        reported.add(key)
        kind = expected.get(key)
        counts[(v.rule, "true" if kind == "expect" else "debatable" if kind == "debatable" else "false")] += 1
    for key, kind in expected.items():
        if kind == "expect" and key not in reported:
            counts[(key[2], "missed")] += 1
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print only the JSON line")
    parser.add_argument("--src", default=_SRC, help="the src folder of the gpuwise to measure")
    args = parser.parse_args()
    total: Counter[tuple[str, str]] = Counter()
    folders = sorted(p for p in PROJECTS.iterdir() if p.is_dir())
    for folder in folders:
        total += score(folder)
    rules = sorted({rule for rule, _ in total})
    rows = {}
    for rule in rules:
        t, f, d, m = (total[(rule, k)] for k in ("true", "false", "debatable", "missed"))
        reported = t + f + d
        rows[rule] = {
            "true": t,
            "false": f,
            "debatable": d,
            "missed": m,
            "precision_pct": round(100 * t / reported, 1) if reported else None,
            "recall_pct": round(100 * t / (t + m), 1) if t + m else None,
            "debatable_pct": round(100 * d / reported, 1) if reported else None,
        }
    t, f, d, m = (sum(total[(r, k)] for r in rules) for k in ("true", "false", "debatable", "missed"))
    summary = {
        "projects": len(folders),
        "findings": t + f + d,
        "true": t,
        "false": f,
        "debatable": d,
        "missed": m,
        "precision_pct": round(100 * t / max(t + f + d, 1), 1),
        "recall_pct": round(100 * t / max(t + m, 1), 1),
        "debatable_pct": round(100 * d / max(t + f + d, 1), 1),
    }
    if not args.json:
        print(
            f"{'rule':32} {'true':>5} {'false':>5} {'debat.':>6} {'missed':>6} {'prec %':>7} {'recall %':>8}"
        )
        for rule, row in rows.items():
            prec = "-" if row["precision_pct"] is None else f"{row['precision_pct']:.0f}"
            rec = "-" if row["recall_pct"] is None else f"{row['recall_pct']:.0f}"
            print(
                f"{rule:32} {row['true']:>5} {row['false']:>5} {row['debatable']:>6} {row['missed']:>6} "
                f"{prec:>7} {rec:>8}"
            )
        print(
            f"{summary['projects']} projects, {summary['findings']} findings: precision "
            f"{summary['precision_pct']} %, recall {summary['recall_pct']} %, "
            f"debatable {summary['debatable_pct']} %"
        )
    print(json.dumps({"summary": summary, "rules": rows}))


if __name__ == "__main__":
    main()
