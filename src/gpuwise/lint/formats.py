"""Machine-readable output: JSON, SARIF 2.1.0 (GitHub code scanning) and flake8-style text."""

from __future__ import annotations

import hashlib
from collections import Counter
from pathlib import Path
from typing import Any
from urllib.parse import quote

from gpuwise._version import __version__
from gpuwise.diagnose.finding import Severity
from gpuwise.lint.catalog import SECURITY_SEVERITY, SPECS, SPECS_LIST, RuleSpec, docs_url
from gpuwise.lint.types import LintResult, Violation

__all__ = ["SARIF_LEVEL", "SARIF_SCHEMA", "fingerprint", "flake8_lines", "sarif"]

SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
SARIF_LEVEL: dict[Severity, str] = {
    "critical": "error",
    "high": "error",
    "medium": "warning",
    "low": "note",
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


def fingerprint(violation: Violation, occurrence: int) -> str:
    """A line-number-free identity of a finding: rule, file, the stripped source line and which
    occurrence of that (rule, file, line text) it is. Code scanning keeps one alert across edits that
    move the line (``partialFingerprints``)."""
    key = "\0".join((violation.rule, _uri(violation.path), " ".join(violation.code.split()), str(occurrence)))
    return hashlib.sha256(key.encode()).hexdigest()[:32]


def _sarif_result(violation: Violation, index: dict[str, int], occurrence: int) -> dict[str, Any]:
    message = violation.message + (
        f" (cell {violation.cell}, line {violation.line})" if violation.cell else ""
    )
    location: dict[str, Any] = {"artifactLocation": {"uri": _uri(violation.path)}}
    if violation.file_line:  # a notebook cell's line, placed on its line of the .ipynb JSON
        region: dict[str, Any] = {"startLine": violation.file_line}
        if violation.cell is None:
            region["startColumn"] = violation.col
        if violation.code:
            region["snippet"] = {"text": violation.code}
        location["region"] = region
    return {
        "ruleId": violation.rule,
        "ruleIndex": index[violation.rule],
        "level": SARIF_LEVEL[violation.severity],
        "message": {"text": f"{message}. Fix: {violation.fix}"},
        "locations": [{"physicalLocation": location}],
        "partialFingerprints": {"gpuwiseFindingHash/v1": fingerprint(violation, occurrence)},
        "properties": {"severity": violation.severity, "finding": SPECS[violation.rule].finding or None},
    }


def _sarif_rule(spec: RuleSpec) -> dict[str, Any]:
    """One ``reportingDescriptor``: description, why and fix as Markdown help, a link to the rule's
    docs section, default level, tags (and security-severity for security rules)."""
    finding = f"\n\nRuntime finding: `{spec.finding}`." if spec.finding else ""
    properties: dict[str, Any] = {"tags": [spec.category], "finding": spec.finding or None}
    if spec.id in SECURITY_SEVERITY:
        properties["security-severity"] = SECURITY_SEVERITY[spec.id]
    uri = spec.docs_uri
    rule: dict[str, Any] = {
        "id": spec.id,
        "name": "".join(part.title() for part in spec.id.split("_")),
        "shortDescription": {"text": spec.title},
        "fullDescription": {"text": spec.why},
        "help": {
            "text": f"{spec.why} Fix: {spec.fix['pytorch']}",
            "markdown": f"**Why.** {spec.why}\n\n**Fix.** {spec.fix['pytorch']}{finding}"
            + (f"\n\n[Rule reference]({uri})" if uri else ""),
        },
        "defaultConfiguration": {"level": SARIF_LEVEL[spec.severity]},
        "properties": properties,
    }
    if uri:
        rule["helpUri"] = uri
    return rule


def sarif(result: LintResult) -> dict[str, Any]:
    """A SARIF 2.1.0 log with one run; file notes become tool execution notifications."""
    index = {spec.id: i for i, spec in enumerate(SPECS_LIST)}
    rules = [_sarif_rule(spec) for spec in SPECS_LIST]
    seen: Counter[tuple[str, str, str]] = Counter()
    results = []
    for violation in result.violations:
        key = (violation.rule, violation.path, " ".join(violation.code.split()))
        results.append(_sarif_result(violation, index, seen[key]))
        seen[key] += 1
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
                        **({"informationUri": url} if (url := docs_url()) else {}),
                        "rules": rules,
                    }
                },
                "invocations": [{"executionSuccessful": True, "toolExecutionNotifications": notifications}],
                "results": results,
            }
        ],
    }
