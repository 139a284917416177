"""What the linter reports: violations (rule, place, message, optional safe edit) and per-file notes."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gpuwise.diagnose.finding import SEVERITIES, Severity
from gpuwise.lint.context import Framework

__all__ = ["Edit", "LintResult", "Note", "Violation"]


@dataclass(frozen=True)
class Edit:
    """Replace source[start:end] (character offsets into the file's text) with ``text``."""

    start: int
    end: int
    text: str
    safe: bool = True  # False: may change behaviour (applied only with --unsafe-fixes)


@dataclass(frozen=True)
class Violation:
    """One finding of `gpuwise lint`: the rule, where (path, 1-based line and column, notebook
    cell), the message, its severity, the source line, and the edit --fix would apply."""

    rule: str  # stable rule id, e.g. "loader_no_workers"
    path: str
    line: int  # 1-based; inside a notebook, the line within the cell
    col: int  # 1-based
    message: str
    severity: Severity
    cell: int | None = None  # notebook code cell (1-based), None for .py files
    edit: Edit | None = None  # a safe fix, applied by --fix
    code: str = ""  # the source line, stripped
    framework: Framework = "pytorch"  # the fix is given in this framework's terms
    file_line: int | None = None  # line in the file on disk (a notebook's .ipynb JSON), when known

    @property
    def severity_rank(self) -> int:
        """0 for critical ... 4 for info: sorts and compares severities."""
        return SEVERITIES.index(self.severity)

    @property
    def where(self) -> str:
        """path:line:col, or path:cell_N:line:col inside a notebook (the nbQA convention)."""
        cell = f"cell_{self.cell}:" if self.cell is not None else ""
        return f"{self.path}:{cell}{self.line}:{self.col}"

    @property
    def fix(self) -> str:
        """How to fix it, in the terms of the framework the file uses."""
        from gpuwise.lint.catalog import SPECS

        return SPECS[self.rule].fix_for(self.framework)

    def to_dict(self) -> dict[str, Any]:
        """One entry of the JSON document's `violations` (docs/json-schema.md)."""
        from gpuwise.lint.catalog import SPECS

        spec = SPECS[self.rule]
        return {
            "rule": self.rule,
            "finding": spec.finding or None,
            "severity": self.severity,
            "confidence": spec.confidence,
            "category": spec.category,
            "path": self.path,
            "cell": self.cell,
            "line": self.line,
            "col": self.col,
            "message": self.message,
            "code": self.code,
            "why": spec.why,
            "fix": self.fix,
            "framework": self.framework,
            "fixable": "safe" if self.edit and self.edit.safe else "unsafe" if self.edit else None,
        }


@dataclass(frozen=True)
class Note:
    """A file that could not be (fully) linted, and why: one line for the user."""

    path: str
    message: str


@dataclass
class LintResult:
    """Everything one `gpuwise lint` run found: violations in file and line order, notes on files
    that could not be checked, how many files were checked and how many edits --fix applied."""

    violations: list[Violation] = field(default_factory=list)
    notes: list[Note] = field(default_factory=list)
    files: int = 0  # files parsed and checked
    fixed: int = 0  # edits applied by --fix

    def at_or_above(self, severity: Severity) -> list[Violation]:
        """Violations with `severity` or worse: any of them makes the exit code 1 (--fail-on)."""
        limit = SEVERITIES.index(severity)
        return [v for v in self.violations if v.severity_rank <= limit]

    def to_dict(self) -> dict[str, Any]:
        """The JSON document's body for `gpuwise lint --json`."""
        return {
            "files": self.files,
            "violations": [v.to_dict() for v in self.violations],
            "notes": [{"path": n.path, "message": n.message} for n in self.notes],
            "fixed": self.fixed,
        }
