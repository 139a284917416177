"""`gpuwise runs show` for the runs that are not profiled runs: load tests, tune sessions, bench results.

A load test is rebuilt and drawn as `gpuwise loadtest` draws it; a tune session or a bench result is
shown as the document it was saved as (`--json` prints it whole, in the shape its command printed).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from gpuwise.cli.output import emit
from gpuwise.errors import GpuwiseError

__all__ = ["EVIDENCE_KINDS", "emit_saved"]

# What `gpuwise plan --evidence` takes, for the runs that are not evidence themselves.
EVIDENCE_KINDS = (
    "`plan --evidence` takes a load test's run id, or the --json output of `gpuwise profile`, "
    "`gpuwise trace`, `gpuwise loadtest` or `gpuwise runs show ID` of a profile or tune-trial run"
)


def _scalars(document: dict[str, Any]) -> list[list[str]]:
    """The document's top-level numbers and words, as key/value rows (nested parts: see --json)."""
    rows = []
    for key, value in document.items():
        if key in ("schema_version", "kind") or isinstance(value, dict | list):
            continue
        rows.append([key, "—" if value is None else str(value)])
    return rows


def emit_saved(
    run_id: int, kind: str, text: str, as_json: bool, as_markdown: bool, html: Path | None
) -> None:
    """Print saved run ``run_id`` of ``kind`` whose stored JSON is ``text``."""
    try:
        document = json.loads(text)
    except json.JSONDecodeError as err:
        raise GpuwiseError(f"run {run_id} is corrupt (JSON error at position {err.pos}: {err.msg})") from None
    if kind == "loadtest":
        from gpuwise.loadtest.saved_results import from_dict
        from gpuwise.report import loadtest_view

        result = from_dict(document)
        result.run_id = run_id
        emit(
            result.to_dict(),
            "loadtest",
            as_json,
            as_markdown=as_markdown,
            html=html,
            document=lambda: loadtest_view.document(result),
        )
        return
    from gpuwise.report.document import Document, Paragraph, Table

    def view() -> Document:
        doc = Document(f"Run {run_id}: a saved `gpuwise {kind.split('-')[0]}` result")
        doc.add(Table(["field", "value"], _scalars(document), align="ll"))
        note = "`--json` prints the whole document."
        if kind == "tune":
            note += " Its trials are the tune-trial runs of its group (`gpuwise runs list`)."
        doc.add(Paragraph(f"{note} It is not evidence: {EVIDENCE_KINDS}.", "muted"))
        return doc

    payload = {k: v for k, v in document.items() if k not in ("schema_version", "kind")}
    emit({"run_id": run_id, **payload}, kind, as_json, as_markdown=as_markdown, html=html, document=view)
