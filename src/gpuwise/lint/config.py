"""`[tool.gpuwise.lint]` in pyproject.toml: which rules run, their severity, per-path ignores.

    [tool.gpuwise.lint]
    select = ["sync_bound", "torch_load_unsafe"]   # rule ids or shared finding ids; default: all
    ignore = ["loader_no_pin_memory"]
    fail-on = "medium"
    exclude = ["legacy/*"]
    [tool.gpuwise.lint.severity]
    every_rank_saves = "high"
    [tool.gpuwise.lint.per-path-ignores]
    "notebooks/*" = ["host_sync_per_step"]

A wrong key, rule or severity is a usage error (exit 2) naming the closest valid one.
"""

from __future__ import annotations

import fnmatch
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpuwise.diagnose.finding import SEVERITIES, Severity
from gpuwise.errors import GpuwiseError, did_you_mean
from gpuwise.lint.catalog import SPECS

__all__ = [
    "KEYS",
    "LintConfig",
    "config_from_table",
    "expand",
    "find_pyproject",
    "load_config",
    "severity_of",
]

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib  # installed on Python 3.10 only

KEYS = ("select", "ignore", "severity", "per-path-ignores", "exclude", "fail-on")


@dataclass(frozen=True)
class LintConfig:
    """The rules to run and how to judge them, from [tool.gpuwise.lint] in pyproject.toml and the
    flags: selected rules, severity overrides, per-path ignores (glob -> rules), excluded globs,
    and the severity at which the exit code becomes 1."""

    select: frozenset[str] = frozenset(SPECS)
    severity: dict[str, Severity] = field(default_factory=dict)
    per_path_ignores: dict[str, frozenset[str]] = field(default_factory=dict)
    exclude: tuple[str, ...] = ()
    fail_on: Severity = "low"
    origin: str = ""  # the pyproject.toml it came from, '' for defaults
    assume_gpu: bool = False  # GPU-only rules run even if the file never names a GPU (a profile measured it)

    def enabled(self, path: str) -> frozenset[str]:
        """Rules that run on ``path`` (per-path ignores applied)."""
        rules = self.select
        for pattern, names in self.per_path_ignores.items():
            if _matches(path, pattern):
                rules = rules - names
        return rules

    def excluded(self, path: str) -> bool:
        """Does an `exclude` glob match `path`? Excluded files are not read at all."""
        return any(_matches(path, pattern) for pattern in self.exclude)


def _matches(path: str, pattern: str) -> bool:
    posix = Path(path).as_posix()
    return fnmatch.fnmatch(posix, pattern) or fnmatch.fnmatch(posix, f"*/{pattern}")


def expand(names: list[str], where: str) -> frozenset[str]:
    """Rule ids from rule ids or shared finding ids (``sync_bound`` = every rule that shares it); an
    entry may list several, comma-separated (``--select a,b``)."""
    rules: set[str] = set()
    for name in (part.strip() for entry in names for part in str(entry).split(",") if part.strip()):
        matching = {s.id for s in SPECS.values() if name in (s.id, s.finding)}
        if not matching:
            choices = [*SPECS, *{s.finding for s in SPECS.values() if s.finding}]
            raise did_you_mean("lint rule", str(name), choices, where)
        rules |= matching
    return frozenset(rules)


def severity_of(value: object, where: str) -> Severity:
    """`value` as a Severity; an unknown one raises with the closest valid name (`where`: the
    setting or flag it came from)."""
    if value not in SEVERITIES:
        raise did_you_mean("severity", str(value), SEVERITIES, where)
    return value


def find_pyproject(start: Path) -> Path | None:
    """The nearest pyproject.toml in `start` or a parent directory, None when there is none."""
    for folder in [start, *start.parents]:
        candidate = folder / "pyproject.toml"
        if candidate.is_file():
            return candidate
    return None


def load_config(pyproject: Path | None = None, start: Path | None = None) -> LintConfig:
    """The lint configuration of the nearest pyproject.toml (from ``start``, default the cwd)."""
    path = pyproject or find_pyproject((start or Path.cwd()).resolve())
    if path is None:
        return LintConfig()
    try:
        document = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as err:
        raise GpuwiseError(f"{path}: cannot read: {err}") from None
    except tomllib.TOMLDecodeError as err:
        raise GpuwiseError(f"{path}: invalid TOML: {err}") from None
    table = document.get("tool", {}).get("gpuwise", {}).get("lint")
    if table is None:
        return LintConfig()
    return config_from_table(table, f"{path} [tool.gpuwise.lint]")


def config_from_table(table: Any, where: str) -> LintConfig:
    """A LintConfig from the [tool.gpuwise.lint] table; unknown keys, rules and severities raise
    with `where` (the file) and the closest valid name."""
    if not isinstance(table, dict):
        raise GpuwiseError(f"{where}: expected a table")
    for key in table:
        if key not in KEYS:
            raise did_you_mean("key", key, KEYS, where)
    select = expand(_strings(table, "select", where), where) if "select" in table else frozenset(SPECS)
    select -= expand(_strings(table, "ignore", where), where)
    severities = table.get("severity", {})
    per_path = table.get("per-path-ignores", {})
    if not isinstance(severities, dict) or not isinstance(per_path, dict):
        raise GpuwiseError(f"{where}: 'severity' and 'per-path-ignores' are tables")
    severity: dict[str, Severity] = {}
    for name, value in severities.items():
        for rule in expand([name], where):
            severity[rule] = severity_of(value, where)
    return LintConfig(
        select=select,
        severity=severity,
        per_path_ignores={pattern: expand(_strings(per_path, pattern, where), where) for pattern in per_path},
        exclude=tuple(_strings(table, "exclude", where)),
        fail_on=severity_of(table.get("fail-on", "low"), where),
        origin=where,
    )


def _strings(table: dict[str, Any], key: str, where: str) -> list[str]:
    value = table.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise GpuwiseError(f"{where}: '{key}' must be a list of strings")
    return value
