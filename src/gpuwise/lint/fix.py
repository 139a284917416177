"""--fix and --diff: apply the safe edits by exact source spans (formatting kept, no LibCST needed),
write each file atomically (temporary file + rename, mode kept), or show a unified diff."""

from __future__ import annotations

import difflib
import os
import tempfile
from collections import defaultdict
from pathlib import Path

from gpuwise.lint.types import Edit, LintResult

__all__ = ["fixed_texts", "nothing_to_fix", "unified_diff", "write_atomically"]


def fixed_texts(result: LintResult, unsafe: bool = False) -> dict[str, tuple[str, str]]:
    """path -> (old text, new text) for every file with edits (safe ones, and unsafe ones if asked);
    overlapping edits keep the first."""
    edits: dict[str, list[Edit]] = defaultdict(list)
    for violation in result.violations:
        if violation.edit is not None and (violation.edit.safe or unsafe):
            edits[violation.path].append(violation.edit)
    out: dict[str, tuple[str, str]] = {}
    for path, items in edits.items():
        try:
            old = Path(path).read_bytes().decode("utf-8")
        except (OSError, UnicodeDecodeError):  # edits are offsets into UTF-8 text; leave others alone
            continue
        bom = "\ufeff" if old.startswith("\ufeff") else ""  # the linted text had it stripped
        new, last_start = old[len(bom) :], len(old) + 1
        for edit in sorted(set(items), key=lambda e: (e.start, e.end), reverse=True):
            if edit.end > last_start:  # overlaps the edit after it
                continue
            new = new[: edit.start] + edit.text + new[edit.end :]
            last_start = edit.start
        new = bom + new
        if new != old:
            out[path] = (old, new)
    return out


def unified_diff(changes: dict[str, tuple[str, str]]) -> str:
    """`--diff`'s output: a unified diff per file from {path: (old text, new text)}; '' when empty
    (the command then prints `nothing_to_fix` on stderr, so a pipe into `patch` stays clean)."""
    chunks: list[str] = []
    for path, (old, new) in changes.items():
        chunks.extend(
            difflib.unified_diff(
                old.splitlines(keepends=True), new.splitlines(keepends=True), f"a/{path}", f"b/{path}"
            )
        )
    return "".join(chunks)


def nothing_to_fix(result: LintResult, unsafe: bool) -> str:
    """What --diff says when no edit applies: how many findings there are and why none has a fix."""
    unsafe_left = sum(v.edit is not None and not v.edit.safe for v in result.violations)
    hint = f"; {unsafe_left} unsafe fix(es) with --unsafe-fixes" if unsafe_left and not unsafe else ""
    return f"nothing to fix: {len(result.violations)} finding(s), none with an automatic fix{hint}"


def write_atomically(path: str, text: str) -> None:
    """Replace the file in one rename: a crash leaves the old file or the new one, never half of one."""
    target = Path(path)
    mode = target.stat().st_mode
    handle, temporary = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".gpuwise-fix")
    try:
        with os.fdopen(handle, "w", encoding="utf-8", newline="") as out:
            out.write(text)
        os.chmod(temporary, mode & 0o7777)
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
