"""`# gpuwise: ignore[rule-id, ...]` on a line (bare `# gpuwise: ignore` = every rule), and
`# gpuwise: ignore-file[...]` anywhere in a file. A finding id (`sync_bound`) names every rule
that shares it."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

__all__ = ["ALL", "Suppressions"]

_COMMENT = re.compile(r"#\s*gpuwise:\s*ignore(-file)?(?:\[([^\]]*)\])?")
ALL = "*"


@dataclass
class Suppressions:
    """The ``# gpuwise: ignore[...]`` comments of one file (rule ids per line) and the
    ``# gpuwise: ignore-file[...]`` ones (rule ids suppressed in the whole file)."""

    lines: dict[int, set[str]] = field(default_factory=dict)
    whole_file: set[str] = field(default_factory=set)

    @classmethod
    def parse(cls, text: str) -> Suppressions:
        """Read the suppression comments of `text` (a bare ignore suppresses every rule)."""
        found = cls()
        if "gpuwise:" not in text:
            return found
        for number, line in enumerate(text.splitlines(), start=1):
            if "gpuwise:" not in line:
                continue
            for match in _COMMENT.finditer(line):
                names = {n.strip() for n in (match.group(2) or ALL).split(",") if n.strip()} or {ALL}
                target = found.whole_file if match.group(1) else found.lines.setdefault(number, set())
                target.update(names)
        return found

    def hides(self, lines: range, names: set[str]) -> bool:
        """Whether a finding spanning ``lines`` with rule/finding ids ``names`` is suppressed."""
        if self.whole_file & (names | {ALL}):
            return True
        return any(self.lines.get(line, set()) & (names | {ALL}) for line in lines)
