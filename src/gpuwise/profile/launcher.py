"""``gpuwise profile -- COMMAND``: run the user's command unchanged, with the profiler attached.

The command runs as a child process whose PYTHONPATH starts with gpuwise's bootstrap directory;
every Python process it starts (the script, or each torchrun rank) attaches a recorder and writes
its raw record into a private directory. After the command exits this side builds one run per
process, adds cross-rank evidence, saves the runs and returns them with the command's exit code.
Ctrl-C reaches the script (same process group), which saves a partial run; gpuwise itself waits.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpuwise.diagnose import Evidence, Finding, diagnose
from gpuwise.errors import GpuwiseError
from gpuwise.profile.analysis import ProfileRun, build_run
from gpuwise.profile.phases import PHASES
from gpuwise.profile.types import PhaseShare

BOOT_DIR = Path(__file__).resolve().parent / "_boot"
PACKAGE_PARENT = Path(__file__).resolve().parents[2]  # the directory that holds the gpuwise package


@dataclass
class ProfileSession:
    command: str
    exit_code: int
    group_id: str
    runs: list[ProfileRun]
    findings: list[Finding]
    cross_rank: Evidence | None = None
    store: str | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def primary(self) -> ProfileRun | None:
        return self.runs[0] if self.runs else None

    def phases(self) -> dict[str, PhaseShare]:
        """Mean over ranks of each phase's seconds per step and share."""
        if not self.runs:
            return {}
        out = {}
        for name in PHASES:
            rows = [row for r in self.runs if (row := r.phases.get(name))]
            if rows:
                out[name] = PhaseShare(
                    sum(r.s_per_step for r in rows) / len(rows), sum(r.pct for r in rows) / len(rows)
                )
        return out

    def to_dict(self) -> dict[str, Any]:
        evidence: Any = [r.evidence.to_dict() for r in self.runs]
        if self.cross_rank is not None:
            evidence.append(self.cross_rank.to_dict())
        if len(evidence) == 1:
            evidence = evidence[0]
        primary = self.primary
        return {
            "command": self.command,
            "exit_code": self.exit_code,
            "group_id": self.group_id,
            "store": self.store,
            "run_ids": [r.run_id for r in self.runs],
            "status": primary.summary.status if primary else None,
            "device": primary.summary.device if primary else None,
            "measured_steps": primary.summary.measured_steps if primary else 0,
            "step_time_s": primary.summary.step_time_s if primary else None,
            "steps_per_s": primary.summary.steps_per_s if primary else None,
            "phases": {name: share.to_dict() for name, share in self.phases().items()},
            "findings": [f.to_dict() for f in self.findings],
            "evidence": evidence if self.runs else None,
            "runs": [r.to_dict() for r in self.runs],
            "notes": self.notes,
        }


def normalize_command(command: list[str]) -> list[str]:
    if not command:
        raise GpuwiseError(
            "give the command to profile after --, e.g.: gpuwise profile -- python train.py --epochs 1"
        )
    if command[0].endswith(".py"):
        if not Path(command[0]).is_file():
            raise GpuwiseError(f"script {command[0]} does not exist")
        return [sys.executable, *command]
    if shutil.which(command[0]) is None and not Path(command[0]).is_file():
        raise GpuwiseError(
            f"command {command[0]!r} not found "
            "(give e.g. `python train.py` or `torchrun ... train.py` after --)"
        )
    return list(command)


def _exit_code(returncode: int) -> int:
    return (
        128 - returncode if returncode < 0 else returncode
    )  # killed by signal N -> 128+N, as shells report it


def _read_records(out_dir: Path, notes: list[str]) -> list[dict[str, Any]]:
    records = []
    for path in sorted(out_dir.glob("run-*.json")):
        try:
            records.append(json.loads(path.read_text()))
        except (OSError, json.JSONDecodeError) as err:
            notes.append(f"a profiled process left an unreadable record ({path.name}: {err})")
    records.sort(
        key=lambda r: ((r.get("meta") or {}).get("rank") is None, (r.get("meta") or {}).get("rank") or 0)
    )
    return records


def cross_rank_evidence(runs: list[ProfileRun]) -> Evidence | None:
    ranked = {
        r.evidence.rank: r.evidence.step_time_s
        for r in runs
        if r.evidence.rank is not None and r.evidence.step_time_s
    }
    if len(ranked) < 2:
        return None
    return Evidence(
        source="profile",
        label="all ranks",
        rank_step_time_s=ranked,
        notes=["cross-rank: mean step time per rank"],
    )


def run_profiled(
    command: list[str],
    *,
    steps: int | None = 50,
    warmup: int = 5,
    stop: bool = False,
    interval_s: float = 0.5,
    telemetry: bool = True,
    stdout_to_stderr: bool = False,
    store: str | os.PathLike | None = None,
    save: bool = True,
) -> ProfileSession:
    argv = normalize_command(command)
    group_id = uuid.uuid4().hex[:12]
    shown = " ".join(command)
    out_dir = Path(tempfile.mkdtemp(prefix="gpuwise-profile-"))
    config = {
        "out_dir": str(out_dir),
        "steps": steps,
        "warmup": warmup,
        "stop": stop,
        "interval_s": interval_s,
        "telemetry": telemetry,
        "group_id": group_id,
        "command": shown,
    }
    env = dict(os.environ)
    env["GPUWISE_PROFILE"] = json.dumps(config)
    env["GPUWISE_PROFILE_PATH"] = str(PACKAGE_PARENT)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(BOOT_DIR), *([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])]
    )
    notes: list[str] = []
    try:
        try:
            proc = subprocess.Popen(argv, env=env, stdout=sys.stderr if stdout_to_stderr else None)
        except OSError as err:
            raise GpuwiseError(f"could not start {argv[0]!r}: {err.strerror or err}") from None
        previous_int = signal.signal(
            signal.SIGINT, lambda *_: None
        )  # the child gets Ctrl-C and saves; we wait
        previous_term = signal.signal(signal.SIGTERM, lambda *_: proc.send_signal(signal.SIGTERM))
        try:
            returncode = proc.wait()
        finally:
            signal.signal(signal.SIGINT, previous_int)
            signal.signal(signal.SIGTERM, previous_term)
        exit_code = _exit_code(returncode)
        records = _read_records(out_dir, notes)
    finally:
        shutil.rmtree(out_dir, ignore_errors=True)
    if not records:
        notes.append(
            "the command ran no training step, model forward or DataLoader batch under torch: "
            "nothing was profiled"
        )
    runs = []
    for raw in records:
        status = raw.get("status")
        if status == "running":
            raw["status"] = "incomplete"
        runs.append(build_run(raw, command=shown, exit_code=exit_code))
    cross = cross_rank_evidence(runs)
    findings = diagnose([r.evidence for r in runs] + ([cross] if cross else []))
    from gpuwise.lint.link import script_of, source_hints  # lint names the line behind a finding

    script = script_of(argv)
    notes.extend(source_hints(script, [f.id for f in findings]) if script and findings else [])
    store_path = None
    if save and runs:
        from gpuwise.profile.store import RunStore

        with RunStore.open(store) as run_store:
            for run in runs:
                run_store.save(run)
            store_path = str(run_store.path)
    return ProfileSession(shown, exit_code, group_id, runs, findings, cross, store_path, notes)
