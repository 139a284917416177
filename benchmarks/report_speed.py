"""Time to render the largest report: `gpuwise trace` of a 128-rank job to HTML (issue #18: <= 2 s
beyond the analysis itself).

The 128 per-rank traces are synthesized from the two real ranks of hta/trace_filter (HTA's test data,
a 128-rank job sampled at ranks 0 and 1): each copy gets its own rank number, so the report has 128
ranks, a rank table of 128 rows and per-rank charts. Written under a temporary directory, deleted after.
The two source files are read from the third-party data directory (--root, else $GPUWISE_TEST_DATA,
else ../shared/traces beside the checkout; tests/README.md); without them one line says so, exit 0.

    python benchmarks/report_speed.py [--ranks 128] [--root DIR]

Prints each stage (wall seconds, and the CPU seconds of the rendering, which a loaded machine does not
inflate); LAST line: {"ranks": N, "analysis_s": A, "document_s": D, "html_s": H, "render_cpu_s": R,
"render_beyond_analysis_s": D + H, "html_bytes": B, "charts": C}
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(REPO / "tests"))  # third_party.py: where the traces are (test support)
from third_party import DataError, check, data_dir, missing_line  # noqa: E402

SOURCE = "hta/trace_filter"  # sampled_rank-0.json.gz and sampled_rank-1.json.gz
TARGET_S = 2.0


def synthesize(source: Path, folder: Path, ranks: int) -> list[Path]:
    """RANKS plain-JSON traces in FOLDER, copies of SOURCE's two ranks, each with its own rank number."""
    docs = [json.loads(gzip.decompress((source / f"sampled_rank-{r}.json.gz").read_bytes())) for r in (0, 1)]
    paths = []
    for rank in range(ranks):
        doc = docs[rank % len(docs)]
        doc["distributedInfo"] = {**doc.get("distributedInfo", {}), "rank": rank, "world_size": ranks}
        path = folder / f"rank{rank:03d}.json"
        path.write_text(json.dumps(doc))
        paths.append(path)
    return paths


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ranks", type=int, default=128)
    ap.add_argument("--root", type=Path, default=None, help="third-party traces directory (tests/README.md)")
    args = ap.parse_args()
    root = args.root or data_dir()
    try:
        missing = check(root, SOURCE)
    except DataError as err:
        print(err, file=sys.stderr)
        return 2
    if missing:
        print(missing_line(root, f"report_speed ({SOURCE} missing)"))
        return 0

    from gpuwise.report import chart_svg, html
    from gpuwise.report.document import Chart
    from gpuwise.report.trace_view import report_document
    from gpuwise.trace.analyze import analyze_traces

    chart_svg.available()  # matplotlib imported before timing: a one-off cost of any process (printed)
    with tempfile.TemporaryDirectory(prefix="gpuwise-report-speed-") as tmp:
        t0 = time.perf_counter()
        files = synthesize(root / SOURCE, Path(tmp), args.ranks)
        size = sum(p.stat().st_size for p in files)
        print(
            f"synthesized {len(files)} rank traces, {size / 1e6:,.0f} MB JSON, "
            f"in {time.perf_counter() - t0:.1f} s"
        )
        t0 = time.perf_counter()
        report = analyze_traces(files)
        analysis_s = time.perf_counter() - t0
    t0, c0 = time.perf_counter(), time.process_time()
    doc = report_document(report)
    document_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    page = html.render(doc, charts=True)
    html_s = time.perf_counter() - t0
    render_cpu_s = time.process_time() - c0
    charts = sum(isinstance(b, Chart) for b in doc.blocks)
    beyond = document_s + html_s
    print(
        f"(wall seconds; the machine's load slows them: CPU seconds of document + HTML {render_cpu_s:.2f} s)"
    )
    print(f"analysis (parse + per-rank analysis + cross-rank): {analysis_s:.2f} s")
    print(f"document (blocks from the result):                 {document_s:.3f} s")
    print(
        f"HTML with {charts} charts (matplotlib SVG):           {html_s:.2f} s, "
        f"{len(page.encode()) / 1e6:.2f} MB"
    )
    print(
        f"render beyond the analysis: {beyond:.2f} s wall, {render_cpu_s:.2f} s CPU "
        f"(target <= {TARGET_S:.0f} s; judged on CPU seconds, which the machine's load does not inflate): "
        + ("ok" if render_cpu_s <= TARGET_S else "OVER")
    )
    print(
        json.dumps(
            {
                "ranks": len(report.ranks),
                "analysis_s": round(analysis_s, 3),
                "document_s": round(document_s, 3),
                "html_s": round(html_s, 3),
                "render_cpu_s": round(render_cpu_s, 3),
                "render_beyond_analysis_s": round(beyond, 3),
                "html_bytes": len(page.encode()),
                "charts": charts,
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
