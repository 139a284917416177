"""User-facing errors: one clear line, exit status 2, no traceback unless --debug."""

from __future__ import annotations

import difflib
from collections.abc import Iterable

__all__ = ["GpuwiseError", "did_you_mean"]


class GpuwiseError(Exception):
    """A problem with the user's input or environment that the user can fix.

    The CLI prints ``str(err)`` on one line and exits with ``exit_code``.
    """

    exit_code = 2


def did_you_mean(kind: str, name: str, choices: Iterable[str], hint: str = "") -> GpuwiseError:
    """Build the error for an unknown catalog name, with the closest matches."""
    choices = list(choices)
    close = difflib.get_close_matches(name.lower(), choices, n=3, cutoff=0.5)
    if not close:
        # Substring matches catch 'h100' -> 'h100-sxm', 'h100-pcie'.
        close = [c for c in choices if name.lower() in c][:3]
    msg = f"unknown {kind} {name!r}"
    if close:
        msg += ": did you mean " + " or ".join(repr(c) for c in close) + "?"
    if hint:
        msg += f" ({hint})"
    return GpuwiseError(msg)


class RunFailed(GpuwiseError):
    """A measurement that ran but reached no result (every request failed, the baseline never started):
    one line with the reason, exit status 1 (the input was valid; the run was not)."""

    exit_code = 1
