"""Failures inside gpuwise's own code, kept out of the user's program: counted, each kind reported once."""

from __future__ import annotations

import sys
import traceback
from typing import Any

MAX_CONTAINED_ERRORS = 50  # after this many, profiling switches itself off for the rest of the run


class ContainedErrors:
    """The errors caught in gpuwise's own code during a run: one entry per (where, exception type), with a
    count and the last lines of its traceback; the first of each kind is printed on stderr.
    """

    def __init__(self) -> None:
        self.by_kind: dict[tuple[str, str], dict[str, Any]] = {}
        self.count = 0

    def add(self, where: str, exc: BaseException) -> int:
        """Count the error (printing the first of its kind); returns the errors counted so far."""
        self.count += 1
        key = (where, type(exc).__name__)
        if key not in self.by_kind:
            tb = traceback.format_exception(type(exc), exc, exc.__traceback__)
            self.by_kind[key] = {
                "where": where,
                "error": f"{type(exc).__name__}: {exc}",
                "count": 0,
                "traceback": "".join(tb[-3:]),
            }
            print(
                f"gpuwise: internal error in its {where} (contained; your program continues, this part of "
                f"the profile may be incomplete): {type(exc).__name__}: {exc}",
                file=sys.stderr,
            )
        self.by_kind[key]["count"] += 1
        return self.count

    def to_list(self) -> list[dict[str, Any]]:
        """The entries as JSON-able dicts (the record's ``hook_errors``)."""
        return [dict(v) for v in self.by_kind.values()]


__all__ = ["MAX_CONTAINED_ERRORS", "ContainedErrors"]
