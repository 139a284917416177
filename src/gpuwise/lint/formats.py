"""Machine-readable output: JSON, SARIF 2.1.0 (GitHub code scanning) and flake8-style text."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import quote

from gpuwise._version import __version__
from gpuwise.diagnose.finding import Severity
from gpuwise.lint.catalog import SPECS, SPECS_LIST
from gpuwise.lint.types import LintResult, Violation

__all__ = ["SARIF_LEVEL", "SARIF_SCHEMA", "flake8_lines", "sarif"]

SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
SARIF_LEVEL: dict[Severity, str] = {
    "critical": "error",
    "high": "error",
    "medium": "warning",
    "low": "warning",
    "info": "note",
}


def flake8_lines(result: LintResult) -> list[str]:
    """``path:line:col: rule-id message`` — what editors and CI annotators already parse."""
    lines = [f"{v.where}: {v.rule} {v.message} [{v.severity}]" for v in result.violations]
    lines += [f"{n.path}:1:1: lint-note {n.message}" for n in result.notes]
    return lines


def _uri(path: str) -> str:
    try:
        path = Path(path).resolve().relative_to(Path.cwd().resolve()).as_posix()
    except ValueError:
        path = Path(path).resolve().as_uri()
        return path
    return quote(path)


def _sarif_result(violation: Violation, index: dict[str, int]) -> dict[str, Any]:
    message = violation.message + (
        f" (cell {violation.cell}, line {violation.line})" if violation.cell else ""
    )
    location: dict[str, Any] = {"artifactLocation": {"uri": _uri(violation.path)}}
    if violation.cell is None:  # a notebook's cell lines are not lines of the .ipynb file
        location["region"] = {"startLine": violation.line, "startColumn": violation.col}
    return {
        "ruleId": violation.rule,
        "ruleIndex": index[violation.rule],
        "level": SARIF_LEVEL[violation.severity],
        "message": {"text": f"{message}. Fix: {violation.fix}"},
        "locations": [{"physicalLocation": location}],
        "properties": {"severity": violation.severity, "finding": SPECS[violation.rule].finding or None},
    }


def sarif(result: LintResult) -> dict[str, Any]:
    """A SARIF 2.1.0 log with one run; file notes become tool execution notifications."""
    index = {spec.id: i for i, spec in enumerate(SPECS_LIST)}
    rules = [
        {
            "id": spec.id,
            "name": "".join(part.title() for part in spec.id.split("_")),
            "shortDescription": {"text": spec.title},
            "fullDescription": {"text": spec.why},
            "help": {"text": f"Fix: {spec.fix['pytorch']}"},
            "defaultConfiguration": {"level": SARIF_LEVEL[spec.severity]},
            "properties": {"tags": [spec.category], "finding": spec.finding or None},
        }
        for spec in SPECS_LIST
    ]
    notifications = [
        {
            "level": "warning",
            "message": {"text": note.message},
            "locations": [{"physicalLocation": {"artifactLocation": {"uri": _uri(note.path)}}}],
        }
        for note in result.notes
    ]
    return {
        "version": "2.1.0",
        "$schema": SARIF_SCHEMA,
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "gpuwise-lint",
                        "version": __version__,
                        "rules": rules,
                    }
                },
                "invocations": [{"executionSuccessful": True, "toolExecutionNotifications": notifications}],
                "results": [_sarif_result(v, index) for v in result.violations],
            }
        ],
    }
