"""Are `gpuwise trace`'s findings right? Precision and recall against hand-checked expected findings.

Every real trace in the third-party data directory (tests/third_party.py: HTA's test traces incl. the AMD
one, kineto's samples, PARAM's 8-rank DLRM and its ranks 0-2 alone, the Nsight Systems export) and the
look-alike traces of tests/kineto_lookalike.py (inference engines, graph capture, a ROCm blocking copy,
start-up gaps, host time before the first kernel, an eager MoE decode, a partial rank set) are analyzed,
and each finding is judged against benchmarks/data/trace_findings_expected.csv: one row per trace and
finding, verdict ``fire`` (it must be reported, its summary saying ``must_say``) or ``absent`` (a wrong
finding once reported there), with the numbers that decide it (``evidence``, checked by hand).

A reported finding is a true positive when a ``fire`` row names it (and its summary says ``must_say``),
else a false positive (an unlisted finding counts as false: every finding must have been checked).
Recall is the share of ``fire`` rows found.

    python benchmarks/trace_findings.py [--root DIR] [--expected CSV]

Prints a table per trace family, the misses, then as its LAST line:
{"traces": N, "precision_pct": P, "recall_pct": R, "bound_ok": true}
(``bound_ok``: on every trace the idle-time findings' gains combined stay within 1 / (1 - explained share)).
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(REPO / "tests"))  # third_party.py, kineto_lookalike.py: test support

from gpuwise.trace.analyze import TraceReport, analyze_traces  # noqa: E402
from gpuwise.trace.causes import combined_gain_x, explained_share_pct  # noqa: E402
from kineto_lookalike import write_scenario  # noqa: E402
from third_party import check, data_dir, manifest, missing_line  # noqa: E402

DEFAULT_EXPECTED = REPO / "benchmarks" / "data" / "trace_findings_expected.csv"
_TRACE_SUFFIXES = (".json", ".json.gz", ".sqlite")
_NOT_TRACES = ("sarif-schema", "gpu_metrics_", "_et.json")  # schema, metrics fixtures, execution traces


def real_traces() -> dict[str, str]:
    """Every real trace of the manifest (key: its path; PARAM's DLRM ranks as one 8-rank run) -> family."""
    out: dict[str, str] = {}
    for path in manifest():
        if not path.endswith(_TRACE_SUFFIXES) or any(n in path for n in _NOT_TRACES):
            continue
        if path.startswith("param/dlrm_kineto/"):
            out["param/dlrm_kineto"] = "param"
        else:
            family = path.split("/")[0]
            out[path] = "hta-amd" if path.startswith("hta/amd_trace/") else family
    return out


def read_expected(path: Path) -> dict[str, list[dict[str, str]]]:
    """The expected rows, by trace key."""
    rows: dict[str, list[dict[str, str]]] = defaultdict(list)
    with open(path, newline="") as fh:
        for row in csv.DictReader(fh):
            rows[row["trace"]].append(row)
    return rows


def _files(key: str, root: Path, tmp: Path) -> list[Path]:
    """The files of a trace key: a look-alike written now, or third-party paths ('+'-joined, or a folder)."""
    if key.startswith("lookalike:"):
        name = key.removeprefix("lookalike:")
        return write_scenario(name, tmp / name)
    return [root / part for part in key.split("+")]


def judge(report: TraceReport, rows: list[dict[str, str]]) -> tuple[int, int, int, int, list[str]]:
    """(true positives, false positives, expected, found, problems) of one trace."""
    fire = {r["finding"]: r for r in rows if r["verdict"] == "fire"}
    tp = fp = 0
    problems = []
    reported = {f.id: f for f in report.findings}
    for fid, f in reported.items():
        row = fire.get(fid)
        if row is not None and row["must_say"].lower() in f.summary.lower():
            tp += 1
        else:
            fp += 1
            why = "listed absent" if any(r["finding"] == fid for r in rows) else "not expected"
            if row is not None:
                why = f"summary lacks {row['must_say']!r}"
            problems.append(f"false positive {fid} ({why}): {f.summary[:120]}")
    found = sum(1 for fid in fire if fid in reported)
    problems += [f"missed {fid}: {fire[fid]['evidence'][:100]}" for fid in fire if fid not in reported]
    return tp, fp, len(fire), found, problems


def _bound_ok(report: TraceReport) -> bool:
    share = explained_share_pct(report.evidence)
    if share is None:
        return combined_gain_x(report.findings) <= 1.0 + 1e-6
    return combined_gain_x(report.findings) <= 1.0 / (1.0 - share / 100.0) + 1e-6


def _select(root: Path, expected: dict[str, list[dict[str, str]]]) -> dict[str, str]:
    """The traces to run (key -> family): the manifest's real traces present, the expected rows' subsets
    of them (DLRM ranks 0-2) and the look-alikes."""
    every = real_traces()
    traces = {k: f for k, f in every.items() if not check(root, k)}
    if len(traces) < len(every):
        print(missing_line(root, f"trace_findings ({len(every) - len(traces)} real traces missing)"))
    for key, rows in expected.items():
        if key in traces:
            continue
        if key.startswith("lookalike:") or all((root / p).is_file() for p in key.split("+")):
            traces[key] = rows[0]["family"]
    return traces


def _run(
    traces: dict[str, str], expected: dict[str, list[dict[str, str]]], root: Path
) -> tuple[dict[str, list[int]], list[str], bool]:
    """Per family [traces, right, wrong, expected, found]; the problems; whether the joint bound held."""
    per: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0, 0, 0])
    problems, bound_ok = [], True
    with tempfile.TemporaryDirectory() as tmp:
        for key, family in sorted(traces.items(), key=lambda kv: (kv[1], kv[0])):
            try:
                report = analyze_traces(_files(key, root, Path(tmp)))
            except Exception as err:  # a benchmark reports, it does not stop
                problems.append(f"{key}: {err}")
                continue
            tp, fp, exp, found, issues = judge(report, expected.get(key, []))
            per[family] = [a + b for a, b in zip(per[family], (1, tp, fp, exp, found), strict=True)]
            problems += [f"{key}: {p}" for p in issues]
            if not _bound_ok(report):
                bound_ok = False
                problems.append(
                    f"{key}: combined gain {combined_gain_x(report.findings):.2f}x over the bound"
                )
    return per, problems, bound_ok


def _pct(num: int, den: int) -> str:
    return f"{100 * num / den:.1f} %" if den else "-"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", type=Path, default=None, help="third-party data directory")
    ap.add_argument("--expected", type=Path, default=DEFAULT_EXPECTED, help="expected findings CSV")
    args = ap.parse_args()
    root = args.root or data_dir()
    expected = read_expected(args.expected)
    traces = _select(root, expected)
    per, problems, bound_ok = _run(traces, expected, root)
    print(
        f"{'family':<10} {'traces':>6} {'reported':>8} {'right':>6} {'wrong':>6} {'expected':>8} "
        f"{'found':>6} {'precision':>9} {'recall':>7}"
    )
    totals = [0, 0, 0, 0, 0]
    for family, (n, tp, fp, exp, found) in sorted(per.items()):
        totals = [a + b for a, b in zip(totals, (n, tp, fp, exp, found), strict=True)]
        print(
            f"{family:<10} {n:>6} {tp + fp:>8} {tp:>6} {fp:>6} {exp:>8} {found:>6} "
            f"{_pct(tp, tp + fp):>9} {_pct(found, exp):>7}"
        )
    n, tp, fp, exp, found = totals
    unknown = [k for k in expected if k not in traces and not k.startswith("lookalike:")]
    for line in problems + [f"expected rows for a trace not present: {k}" for k in unknown]:
        print(line)
    precision = 100.0 * tp / (tp + fp) if tp + fp else 100.0
    recall = 100.0 * found / exp if exp else 100.0
    print(
        json.dumps(
            {
                "traces": n,
                "precision_pct": round(precision, 1),
                "recall_pct": round(recall, 1),
                "bound_ok": bound_ok,
            }
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
