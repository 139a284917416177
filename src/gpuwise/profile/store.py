"""The run store: every profiled run in one SQLite file.

Default location: ``platformdirs.user_data_dir("gpuwise")/runs.sqlite``; ``GPUWISE_STORE`` or
``--store PATH`` choose another. One row per run (per rank for distributed runs, tied by
``group_id``); the row keeps a few columns to list and filter by, and the whole run document.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpuwise.errors import GpuwiseError

if TYPE_CHECKING:  # pragma: no cover
    from gpuwise.profile.analysis import ProfileRun

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


def default_store_path() -> Path:
    env = os.environ.get("GPUWISE_STORE")
    if env:
        return Path(env).expanduser()
    import platformdirs

    return Path(platformdirs.user_data_dir("gpuwise")) / "runs.sqlite"


@dataclass
class RunRow:
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
        return dict(self.__dict__)


class RunStore:
    def __init__(self, path: Path, conn: sqlite3.Connection) -> None:
        self.path = path
        self.conn = conn

    @classmethod
    def open(cls, path: str | os.PathLike | None = None, create: bool = True) -> RunStore:
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
        self.conn.close()

    # -- writing ------------------------------------------------------------------------------------------
    def save(self, run: ProfileRun, kind: str = "profile") -> int:
        """Store a ProfileRun; returns its id (also set on the run)."""
        doc = run.to_dict()
        doc.pop("run_id", None)
        s = run.summary
        top = run.findings[0].id if run.findings else None
        created = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        with self.conn:
            cur = self.conn.execute(
                "INSERT INTO runs (created_at, kind, label, command, group_id, rank, status, exit_code,"
                " device, gpu, measured_steps, step_time_s, steps_per_s, top_finding, document)"
                " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                (
                    created,
                    kind,
                    s.label,
                    s.command or "",
                    s.group_id,
                    s.rank,
                    s.status or "",
                    s.exit_code,
                    s.device or "",
                    s.gpu_name or "",
                    s.measured_steps,
                    s.step_time_s,
                    s.steps_per_s,
                    top,
                    json.dumps(doc, default=str),
                ),
            )
        if cur.lastrowid is None:  # sqlite3 sets it after every INSERT
            raise RuntimeError("the run store did not return the saved run's id")
        run.run_id = int(cur.lastrowid)
        return run.run_id

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
        created = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        with self.conn:
            cur = self.conn.execute(
                "INSERT INTO runs (created_at, kind, label, command, status, device, gpu, measured_steps,"
                " steps_per_s, top_finding, document) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                (
                    created,
                    kind,
                    label,
                    command,
                    status,
                    device,
                    gpu,
                    count,
                    per_s,
                    top,
                    json.dumps(document, default=str),
                ),
            )
        return int(cur.lastrowid or 0)

    # -- reading ------------------------------------------------------------------------------------------
    def list(self, limit: int | None = 50) -> list[RunRow]:
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

    def load(self, ref: str | int):
        from gpuwise.profile.analysis import ProfileRun

        run_id = self.resolve(ref)
        row = self.conn.execute("SELECT id, kind, document FROM runs WHERE id = ?", (run_id,)).fetchone()
        if row is None:
            span = self.conn.execute("SELECT MIN(id), MAX(id), COUNT(*) FROM runs").fetchone()
            have = f"runs {span[0]}-{span[1]}" if span[2] else "no runs yet"
            raise GpuwiseError(f"no run {run_id} in {self.path} ({have}; see `gpuwise runs list`)")
        if row["kind"] == "loadtest":
            raise GpuwiseError(f"run {run_id} is a load test: `gpuwise loadtest --show {run_id}` prints it")
        if row["kind"] == "tune":
            raise GpuwiseError(
                f"run {run_id} is a `gpuwise tune` session; its trials are the tune-trial runs of its group"
                " (see runs list --json)"
            )
        if row["kind"] == "bench":
            raise GpuwiseError(
                f"run {run_id} is a `gpuwise bench` result, not a profiled run (see runs list --json)"
            )
        try:
            data = json.loads(row["document"])
        except json.JSONDecodeError as err:
            raise GpuwiseError(
                f"run {run_id} in {self.path} is corrupt (JSON error at position {err.pos}: {err.msg})"
            ) from None
        run = ProfileRun.from_dict(data)
        run.run_id = int(row["id"])
        return run
