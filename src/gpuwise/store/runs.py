"""The run store: every profiled run in one SQLite file.

Default location: ``platformdirs.user_data_dir("gpuwise")/runs.sqlite``; ``GPUWISE_STORE`` or
``--store PATH`` choose another. One row per run (per rank for distributed runs, tied by
``group_id``); the row keeps a few columns to list and filter by, and the whole run document.

The store holds rows and JSON documents, never result types: `gpuwise.profile.saved_runs` turns a
`ProfileRun` into a row and back, `gpuwise.loadtest.saved_results` and `gpuwise.tune.saved_sessions`
do the same for theirs, so this module sits below every package that saves into it.
"""

from __future__ import annotations

import json
import os
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpuwise.errors import GpuwiseError
from gpuwise.store.paths import default_store_path, utc_stamp

__all__ = ["SCHEMA_VERSION", "RunColumns", "RunRow", "RunStore", "default_store_path"]

SCHEMA_VERSION = 1
_SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    id             INTEGER PRIMARY KEY AUTOINCREMENT,
    created_at     TEXT NOT NULL,
    kind           TEXT NOT NULL,
    label          TEXT,
    command        TEXT,
    group_id       TEXT,
    rank           INTEGER,
    status         TEXT,
    exit_code      INTEGER,
    device         TEXT,
    gpu            TEXT,
    measured_steps INTEGER,
    step_time_s    REAL,
    steps_per_s    REAL,
    top_finding    TEXT,
    document       TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS runs_group ON runs(group_id);
"""


@dataclass(frozen=True)
class RunColumns:
    """The columns of a run row beside its kind and document: what `gpuwise runs list` shows and filters
    by. None leaves a column NULL (a load test has no rank, a bench result no step time)."""

    label: str
    command: str = ""
    status: str = "completed"
    device: str = ""
    gpu: str = ""
    measured_steps: int = 0  # steps for a profiled run; requests or trials for other kinds
    steps_per_s: float | None = None  # steps/s; req/s for a load test
    top_finding: str | None = None
    group_id: str | None = None
    rank: int | None = None
    exit_code: int | None = None
    step_time_s: float | None = None


@dataclass
class RunRow:
    """One listed run: its id, creation time (UTC text) and the columns `runs list` prints."""

    id: int
    created_at: str
    kind: str
    label: str
    command: str
    group_id: str | None
    rank: int | None
    status: str
    exit_code: int | None
    device: str
    gpu: str
    measured_steps: int
    step_time_s: float | None
    steps_per_s: float | None
    top_finding: str | None

    def to_dict(self) -> dict[str, Any]:
        """The row as the JSON `runs list --json` prints (field names as the column names)."""
        return dict(self.__dict__)


class RunStore:
    """An open run store (a SQLite connection in autocommit-per-`with` mode): use as a context manager."""

    def __init__(self, path: Path, conn: sqlite3.Connection) -> None:
        self.path = path
        self.conn = conn

    @classmethod
    def open(cls, path: str | os.PathLike | None = None, create: bool = True) -> RunStore:
        """Open (and with `create`, make) the store at `path`, else the default path; a clear
        GpuwiseError for a directory, a missing file, a newer schema or a file that is not SQLite."""
        target = Path(path).expanduser() if path else default_store_path()
        if target.is_dir():
            raise GpuwiseError(
                f"run store {target} is a directory; give a file path such as {target / 'runs.sqlite'}"
            )
        if not target.exists():
            if not create:
                raise GpuwiseError(
                    f"no run store at {target} (profile a run first: gpuwise profile -- python train.py)"
                )
            target.parent.mkdir(parents=True, exist_ok=True)
        try:
            conn = sqlite3.connect(target, timeout=30)
            conn.row_factory = sqlite3.Row
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            if version > SCHEMA_VERSION:
                raise GpuwiseError(
                    f"run store {target} was written by a newer gpuwise (schema {version}); upgrade gpuwise"
                )
            conn.executescript(_SCHEMA)
            conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            conn.commit()
        except sqlite3.DatabaseError as err:
            raise GpuwiseError(
                f"{target} is not a readable gpuwise run store ({err}); choose another file with --store"
            ) from None
        return cls(target, conn)

    def __enter__(self) -> RunStore:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        """Close the connection (the `with` block does it)."""
        self.conn.close()

    # -- writing ------------------------------------------------------------------------------------------
    def save_row(self, kind: str, columns: RunColumns, document: dict[str, Any]) -> int:
        """Insert one run row (kind 'profile', 'tune-trial', 'tune', 'loadtest', 'bench'); returns its id."""
        with self.conn:
            cur = self.conn.execute(
                "INSERT INTO runs (created_at, kind, label, command, group_id, rank, status, exit_code,"
                " device, gpu, measured_steps, step_time_s, steps_per_s, top_finding, document)"
                " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                (
                    utc_stamp(),
                    kind,
                    columns.label,
                    columns.command,
                    columns.group_id,
                    columns.rank,
                    columns.status,
                    columns.exit_code,
                    columns.device,
                    columns.gpu,
                    columns.measured_steps,
                    columns.step_time_s,
                    columns.steps_per_s,
                    columns.top_finding,
                    json.dumps(document, default=str),
                ),
            )
        if cur.lastrowid is None:  # sqlite3 sets it after every INSERT
            raise RuntimeError("the run store did not return the saved run's id")
        return int(cur.lastrowid)

    def save_document(
        self,
        kind: str,
        label: str,
        document: dict[str, Any],
        *,
        command: str = "",
        status: str = "completed",
        device: str = "",
        gpu: str = "",
        count: int = 0,
        per_s: float | None = None,
        top: str | None = None,
    ) -> int:
        """Store a result that is not a profiled run (kinds 'loadtest', 'bench', 'tune'); returns its id.
        `count` and `per_s` fill the steps columns `runs list` shows (requests, req/s for a load test)."""
        columns = RunColumns(label, command, status, device, gpu, count, per_s, top)
        return self.save_row(kind, columns, document)

    # -- reading ------------------------------------------------------------------------------------------
    def list(self, limit: int | None = 50) -> list[RunRow]:
        """The newest `limit` runs (all with None), newest first."""
        sql = "SELECT * FROM runs ORDER BY id DESC" + (" LIMIT ?" if limit else "")
        rows = self.conn.execute(sql, (limit,) if limit else ()).fetchall()
        return [RunRow(**{k: row[k] for k in RunRow.__dataclass_fields__}) for row in rows]

    def resolve(self, ref: str | int) -> int:
        """A run id from '12', 12, 'last' / 'latest', or '-2' (second newest)."""
        text = str(ref).strip().lower()
        if text in {"last", "latest"}:
            text = "-1"
        try:
            number = int(text)
        except ValueError:
            raise GpuwiseError(
                f"run id must be a number, 'last', or a negative offset like -2; got {ref!r}"
            ) from None
        if number < 0:
            row = self.conn.execute(
                "SELECT id FROM runs ORDER BY id DESC LIMIT 1 OFFSET ?", (-number - 1,)
            ).fetchone()
            if row is None:
                raise GpuwiseError(f"the run store {self.path} has fewer than {-number} runs")
            return int(row["id"])
        return number

    def load_document(self, ref: str | int, kind: str) -> tuple[int, dict[str, Any]]:
        """(id, stored JSON) of a run saved with `save_document`, checking its kind."""
        run_id = self.resolve(ref)
        row = self.conn.execute("SELECT kind, document FROM runs WHERE id = ?", (run_id,)).fetchone()
        if row is None or row["kind"] != kind:
            raise GpuwiseError(f"run {run_id} in {self.path} is not a {kind} run (see `gpuwise runs list`)")
        return run_id, json.loads(row["document"])

    def kind_and_document(self, run_id: int) -> tuple[str, str] | None:
        """(kind, document JSON text) of run `run_id`; None when there is no such run."""
        row = self.conn.execute("SELECT kind, document FROM runs WHERE id = ?", (run_id,)).fetchone()
        return None if row is None else (row["kind"], row["document"])

    def load_run_document(self, ref: str | int) -> tuple[int, dict[str, Any]]:
        """(id, document) of a profiled run ('profile' or 'tune-trial'): a clear GpuwiseError for a missing
        run, a run of another kind, or a corrupt document. `profile.saved_runs.load_run` builds the run."""
        run_id = self.resolve(ref)
        row = self.conn.execute("SELECT id, kind, document FROM runs WHERE id = ?", (run_id,)).fetchone()
        if row is None:
            span = self.conn.execute("SELECT MIN(id), MAX(id), COUNT(*) FROM runs").fetchone()
            have = f"runs {span[0]}-{span[1]}" if span[2] else "no runs yet"
            raise GpuwiseError(f"no run {run_id} in {self.path} ({have}; see `gpuwise runs list`)")
        _refuse_other_kinds(run_id, row["kind"])
        try:
            data = json.loads(row["document"])
        except json.JSONDecodeError as err:
            raise GpuwiseError(
                f"run {run_id} in {self.path} is corrupt (JSON error at position {err.pos}: {err.msg})"
            ) from None
        return int(row["id"]), data


def _refuse_other_kinds(run_id: int, kind: str) -> None:
    """Name the command that shows a stored result which is not a profiled run."""
    if kind == "loadtest":
        raise GpuwiseError(f"run {run_id} is a load test: `gpuwise loadtest --show {run_id}` prints it")
    if kind == "tune":
        raise GpuwiseError(
            f"run {run_id} is a `gpuwise tune` session; its trials are the tune-trial runs of its group"
            " (see runs list --json)"
        )
    if kind == "bench":
        raise GpuwiseError(
            f"run {run_id} is a `gpuwise bench` result, not a profiled run (see runs list --json)"
        )
