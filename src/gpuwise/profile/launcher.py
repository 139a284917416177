"""``gpuwise profile -- COMMAND``: run the user's command unchanged, with the profiler attached.

The command runs as a child process whose PYTHONPATH starts with gpuwise's bootstrap directory;
every Python process it starts (the script, or each torchrun rank) attaches a recorder and writes
its raw record into a private directory. After the command exits this side builds one run per
process, adds cross-rank evidence, saves the runs and returns them with the command's exit code.
The command runs in its own process group: SIGINT, SIGTERM and SIGHUP sent to gpuwise (a terminal's
Ctrl-C or a scheduler's ``kill -INT PID``) are forwarded to that group once, and the run is saved as
interrupted. The store is checked before the command starts; if it fails at the end, the runs are
written to a JSON file beside it instead of being lost.
"""

from __future__ import annotations

import contextlib
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
from gpuwise.profile.rank_spread import cross_rank_evidence
from gpuwise.profile.types import PhaseShare

BOOT_DIR = Path(__file__).resolve().parent / "_boot"
PACKAGE_PARENT = Path(__file__).resolve().parents[2]  # the directory that holds the gpuwise package


@dataclass
class ProfileSession:
    """One ``gpuwise profile`` run: the command and its exit code, one ``ProfileRun`` per rank, the findings
    over all ranks (cross-rank evidence included), the run-store path once saved, and notes for the user.
    """

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
        """The first rank's run (the one summarized at the top); None when no run was recorded."""
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
        """The session as JSON (the ``gpuwise profile --json`` schema): the primary run's figures, the mean
        phases over ranks, every run, and the evidence (a list when there are several).
        """
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
            "step_boundary": primary.summary.step_boundary if primary else None,
            "step_time_s": primary.summary.step_time_s if primary else None,
            "steps_per_s": primary.summary.steps_per_s if primary else None,
            "phases": {name: share.to_dict() for name, share in self.phases().items()},
            "findings": [f.to_dict() for f in self.findings],
            "evidence": evidence if self.runs else None,
            "runs": [r.to_dict() for r in self.runs],
            "notes": self.notes,
        }


def normalize_command(command: list[str]) -> list[str]:
    """The argv to run: a ``.py`` script is run with this interpreter; anything else must exist (on PATH or as
    a file). Raises ``GpuwiseError`` for an empty command or a missing script or program.
    """
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


def exit_code_of(returncode: int) -> int:
    """A subprocess return code as a shell reports it: killed by signal N (``-N``) → 128 + N."""
    return (
        128 - returncode if returncode < 0 else returncode
    )  # killed by signal N -> 128+N, as shells report it


FORWARDED_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def _read_exit_codes(out_dir: Path) -> dict[int, int]:
    """pid -> exit code of each torchrun rank, as the agent saw it (child.py writes these)."""
    codes = {}
    for path in out_dir.glob("exit-*.json"):
        try:
            row = json.loads(path.read_text())
            codes[int(row["pid"])] = exit_code_of(int(row["returncode"]))
        except (OSError, ValueError, KeyError, TypeError):
            continue
    return codes


def settle_status(raw: dict[str, Any], exit_code: int | None, forwarded: str | None) -> None:
    """Make a record's status agree with how its process ended. Exit code non-zero: a stop signal
    gpuwise forwarded -> ``interrupted``; a ``completed`` record of a process killed by a signal
    (128+N) -> ``interrupted``; any other non-zero exit -> ``error`` (a flushed ``incomplete`` record
    of a killed process stays so). A record without steps is left for ``build_run`` (``no_steps``)."""
    status = raw.get("status")
    if status == "running":
        status = raw["status"] = "incomplete"
    if not exit_code or status not in ("completed", "incomplete", None):
        return
    if forwarded is not None:
        raw["status"], raw["error"] = "interrupted", raw.get("error") or f"{forwarded} forwarded by gpuwise"
    elif exit_code >= 128:
        if status == "completed":
            raw["status"] = "interrupted"
        raw["error"] = raw.get("error") or _killed_by(
            exit_code - 128, raw, window_saved=status == "completed"
        )
    else:
        if raw.get("steps"):
            raw["status"] = "error"
        raw["error"] = raw.get("error") or f"the process exited with code {exit_code}"


# A torch.distributed rank that aborts at interpreter exit: a gloo worker thread frees a finished collective's
# tensors while the interpreter shuts down, takes the GIL and is ended inside a C++ destructor ("terminate
# called without an active exception"; gdb: ProcessGroupGloo::runLoop -> ~AsyncBarrierWork ->
# ~AsyncAllreduceWork -> decref_pyobject -> take_gil -> PyThread_exit_thread). PyTorch's own race: 3 of 59
# unprofiled torchrun runs of benchmarks/real_scripts/ddp_like.py under load (1.5-9) ended so, 4 of 88
# profiled.
EXIT_ABORT_RACE = (
    "; under torch.distributed this is usually PyTorch's process-group shutdown race at interpreter exit "
    "(pytorch/pytorch#190489), which unprofiled runs hit too: the measured window is complete"
)


def _killed_by(number: int, raw: dict[str, Any], window_saved: bool) -> str:
    """The error of a process killed by signal NUMBER; a distributed rank's SIGABRT after its window was
    saved says what it usually is, so nobody blames the profiler for PyTorch's exit race."""
    text = f"killed by {_signal_name(number)}"
    distributed = (raw.get("meta") or {}).get("world_size") is not None
    if number == signal.SIGABRT and window_saved and distributed:
        return text + " after its measured window was saved" + EXIT_ABORT_RACE
    return text


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def _appended_steps(path: Path) -> list[dict[str, Any]]:
    """The steps a killed process appended, one JSON line each; a line cut by the kill is dropped."""
    steps = []
    for line in path.read_text().splitlines():
        try:
            steps.append(json.loads(line))
        except json.JSONDecodeError:
            break
    return steps


def _read_records(out_dir: Path, notes: list[str]) -> list[dict[str, Any]]:
    records = []
    for path in sorted(out_dir.glob("run-*.json")):
        try:
            record = json.loads(path.read_text())
            if record.get("steps_file"):
                record["steps"] = _appended_steps(out_dir / record.pop("steps_file"))
            records.append(record)
        except (OSError, json.JSONDecodeError) as err:
            notes.append(f"a profiled process left an unreadable record ({path.name}: {err})")
    records.sort(
        key=lambda r: ((r.get("meta") or {}).get("rank") is None, (r.get("meta") or {}).get("rank") or 0)
    )
    return records


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
    """Run ``command`` with the profiler attached to every Python process it starts (every torchrun rank),
    then diagnose and save the runs.

    ``steps``/``warmup`` set the measured window per process (None: until it ends); ``stop`` ends the
    script after the window; ``interval_s`` is the telemetry period (s). Signals received are forwarded to
    the command's process group. ``save=False`` skips the run store. Raises ``GpuwiseError`` for a bad
    command or store.
    """
    argv = normalize_command(command)
    if save:
        check_store(store)
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
    env = profiled_env(config)
    notes: list[str] = []
    try:
        returncode, forwarded = _run_child(argv, env, stdout_to_stderr)
        exit_code = exit_code_of(returncode)
        runs = collect_runs(out_dir, shown, exit_code, forwarded, notes)
    finally:
        shutil.rmtree(out_dir, ignore_errors=True)
    if forwarded:
        notes.append(f"gpuwise received {forwarded} and forwarded it to the command's process group")
    stepless = [r.summary.label for r in runs if r.summary.status == "no_steps"]
    if stepless:
        notes.append(
            f"NO STEPS MEASURED in {', '.join(stepless)}: no step time, no finding (see the run's notes)"
        )
    cross = cross_rank_evidence(runs)
    findings = _group_pace_first(diagnose([r.evidence for r in runs] + ([cross] if cross else [])))
    from gpuwise.lint.link import script_of, source_hints  # lint names the line behind a finding

    script = script_of(argv)
    notes.extend(source_hints(script, [f.id for f in findings]) if script and findings else [])
    store_path = _save_runs(runs, store, group_id, notes) if save and runs else None
    return ProfileSession(shown, exit_code, group_id, runs, findings, cross, store_path, notes)


def _group_pace_first(findings: list[Finding]) -> list[Finding]:
    """A straggler sets the whole group's pace, so it comes first among findings of its severity: the
    late rank's own host time or input wait (a sleep in its ``_run_batch``) is its cause, seen from that
    rank alone, and its Amdahl gain on one rank's step is not the group's."""
    return sorted(findings, key=lambda f: (f.severity_rank, f.id != "straggler"))


def profiled_env(config: dict[str, Any], extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a profiled command: the config, and the bootstrap first on PYTHONPATH."""
    env = dict(os.environ)
    env["GPUWISE_PROFILE"] = json.dumps(config)
    env["GPUWISE_PROFILE_PATH"] = str(PACKAGE_PARENT)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(BOOT_DIR), *([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])]
    )
    env.update(extra or {})
    return env


def collect_runs(
    out_dir: Path, shown: str, exit_code: int, forwarded: str | None, notes: list[str]
) -> list[ProfileRun]:
    """One run per record the command's processes left in ``out_dir``, with the status settled by how
    each process ended."""
    records = _read_records(out_dir, notes)
    rank_codes = _read_exit_codes(out_dir)
    if not records:
        failure = _startup_failure(out_dir)
        if failure:
            notes.append(
                f"the script failed before any training step (exit code {exit_code}): {failure}; "
                "nothing was profiled"
            )
        else:
            notes.append(
                "the command ran no training step, model forward or DataLoader batch under torch: "
                "nothing was profiled"
            )
    runs = []
    for raw in records:
        pid = (raw.get("meta") or {}).get("pid")
        # a torchrun rank's own exit code, when the agent saw it
        code = rank_codes.get(pid, exit_code) if isinstance(pid, int) else exit_code
        settle_status(raw, code, forwarded)
        runs.append(build_run(raw, command=shown, exit_code=code))
    return runs


def _startup_failure(out_dir: Path) -> str | None:
    """The last line of the traceback of a process that failed before torch did anything (child.py)."""
    for path in sorted(out_dir.glob("failed-*.json")):
        try:
            return str(json.loads(path.read_text())["error"])
        except (OSError, ValueError, KeyError, TypeError):
            continue
    return None


def check_store(store: str | os.PathLike | None) -> None:
    """Fail before the command runs, not after: a bad ``--store`` would otherwise cost the whole run."""
    from gpuwise.store.runs import RunStore

    with RunStore.open(store):
        pass


def _run_child(argv: list[str], env: dict[str, str], stdout_to_stderr: bool) -> tuple[int, str | None]:
    """Run the command in its own process group and wait; SIGINT/SIGTERM/SIGHUP received meanwhile
    go to that group. With the terminal handed to that group, a Ctrl-C reaches it once, directly."""
    try:
        # its own group (setpgrp: Popen's process_group needs Python 3.11); gpuwise has no threads yet
        proc = subprocess.Popen(
            argv, env=env, stdout=sys.stderr if stdout_to_stderr else None, preexec_fn=os.setpgrp
        )
    except OSError as err:
        raise GpuwiseError(f"could not start {argv[0]!r}: {err.strerror or err}") from None
    terminal = _hand_terminal_to(proc.pid)
    forwarded: list[str] = []

    def forward(signum, frame) -> None:
        forwarded.append(signal.Signals(signum).name)
        with contextlib.suppress(ProcessLookupError):  # the command has just ended
            os.killpg(proc.pid, signum)

    previous = {signum: signal.signal(signum, forward) for signum in FORWARDED_SIGNALS}
    try:
        returncode = proc.wait()
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        _take_terminal_back(terminal)
    return returncode, (forwarded[0] if forwarded else None)


def _hand_terminal_to(pgid: int) -> int | None:
    """When gpuwise runs in a terminal's foreground, the command's group takes it (so the script can
    read the terminal, e.g. pdb, and Ctrl-C reaches it directly). Returns the terminal's fd."""
    try:
        fd = sys.stdin.fileno()
        if not os.isatty(fd) or os.tcgetpgrp(fd) != os.getpgrp():
            return None
        os.tcsetpgrp(fd, pgid)
        return fd
    except (OSError, ValueError, AttributeError):
        return None


def _take_terminal_back(fd: int | None) -> None:
    if fd is None:
        return
    previous = signal.signal(signal.SIGTTOU, signal.SIG_IGN)  # a background group may not take it
    try:
        os.tcsetpgrp(fd, os.getpgrp())
    except OSError:
        pass
    finally:
        signal.signal(signal.SIGTTOU, previous)


def _save_runs(runs: list[ProfileRun], store: str | os.PathLike | None, group_id: str, notes: list[str]):
    """Save in the run store; if it fails now (it was checked before the run), write the runs to a
    JSON file beside it, so a finished run is never lost. Returns where the runs went."""
    import sqlite3

    from gpuwise.profile.saved_runs import save_run
    from gpuwise.store.runs import RunStore, default_store_path

    try:
        with RunStore.open(store) as run_store:
            for run in runs:
                save_run(run_store, run)
            return str(run_store.path)
    except (GpuwiseError, sqlite3.Error, OSError) as err:
        reason = str(err)
    target = Path(store).expanduser() if store else default_store_path()
    document = json.dumps([run.to_dict() for run in runs], indent=1, default=str)
    for folder in (target.parent, Path.cwd(), Path(tempfile.gettempdir())):
        fallback = folder / f"gpuwise-run-{group_id}.json"
        try:
            fallback.write_text(document)
        except OSError:
            continue
        message = f"the run store failed ({reason}); the runs were written to {fallback} instead"
        notes.append(message)
        print(f"gpuwise: {message}", file=sys.stderr)
        return str(fallback)
    notes.append(f"the run store failed ({reason}) and no JSON file could be written: the run is not saved")
    return None


__all__ = [
    "ProfileSession",
    "check_store",
    "collect_runs",
    "exit_code_of",
    "normalize_command",
    "profiled_env",
    "run_profiled",
    "settle_status",
]
