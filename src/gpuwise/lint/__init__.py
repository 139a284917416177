"""`gpuwise lint`: static checks of training and serving code, before a GPU-hour is spent.

Pure functions: paths + config in, a typed `LintResult` out (`lint_paths`). Rules that describe
the same problem as a runtime finding carry its id (`input_bound`, `sync_bound`, ...), so a profile
can point at the line that causes what it measured. No torch import: this is a core command.
"""

from gpuwise.lint.config import LintConfig, load_config
from gpuwise.lint.runner import lint_paths, lint_source
from gpuwise.lint.types import Edit, LintResult, Violation

__all__ = ["Edit", "LintConfig", "LintResult", "Violation", "lint_paths", "lint_source", "load_config"]
