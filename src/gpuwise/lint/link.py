"""Point runtime findings at the source: `gpuwise profile` measured `input_bound`; lint of the
profiled script finds the DataLoader without workers that causes it. Both use the finding id."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from gpuwise.lint.catalog import SPECS
from gpuwise.lint.config import LintConfig
from gpuwise.lint.runner import lint_paths

__all__ = ["MAX_PLACES", "script_of", "source_hints"]

MAX_PLACES = 3  # per finding: the first few places are enough to act on


def script_of(command: Iterable[str]) -> Path | None:
    """The Python script a profiled command runs (`python train.py`, `torchrun ... train.py`)."""
    for arg in command:
        if arg.endswith(".py") and Path(arg).is_file():
            return Path(arg)
    return None


def source_hints(script: Path, finding_ids: Iterable[str]) -> list[str]:
    """One line per place in ``script`` that lint ties to one of the runtime findings, e.g.
    ``input_bound — see train.py:42 (DataLoader without num_workers: ...)``."""
    wanted = set(finding_ids)
    counts: dict[str, int] = {}
    hints = []
    # The runtime measured the problem: rules that wait for GPU code need not (a CPU run is input bound too).
    for violation in lint_paths([script], LintConfig(assume_gpu=True)).violations:
        finding = SPECS[violation.rule].finding
        if finding in wanted and counts.get(finding, 0) < MAX_PLACES:
            counts[finding] = counts.get(finding, 0) + 1
            hints.append(f"{finding} — see {violation.where.rsplit(':', 1)[0]} ({violation.message})")
    return hints
