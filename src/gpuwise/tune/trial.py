"""One trial: the user's command in a fresh process under the profiler, with the trial's knobs.

A fresh process per trial (as DeepSpeed's autotuner launches its experiments) so that a crash, an
out-of-memory error or memory held by an exception in one trial never reaches the tuner or the next
trial. The trial stops itself after its measured steps (the profiler's ``--stop``); past its time
budget it gets SIGTERM (the profiler saves what it measured), then SIGKILL. How it ended:
``ok``; ``oom`` (torch's OutOfMemoryError or "out of memory" in its stderr, or killed by SIGKILL —
what the kernel's OOM killer sends); ``crashed`` (any other failure); ``hung`` (the budget passed
before it measured enough steps); ``interrupted`` (Ctrl-C of the tuner, forwarded); ``no_steps``
(exited without a training step the profiler could see). The tuner sets ``rejected`` (losses
outside the tolerance) and ``skipped`` (never run, with the reason).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from gpuwise.diagnose import thresholds as T
from gpuwise.errors import GpuwiseError
from gpuwise.profile.analysis import ProfileRun
from gpuwise.profile.launcher import collect_runs, exit_code_of, profiled_env
from gpuwise.tune.knobs import Knobs, label

TrialStatus = Literal["ok", "oom", "crashed", "hung", "interrupted", "no_steps", "rejected", "skipped"]
TRIAL_STATUSES: tuple[TrialStatus, ...] = (
    "ok",
    "oom",
    "crashed",
    "hung",
    "interrupted",
    "no_steps",
    "rejected",
    "skipped",
)
TrialRole = Literal["baseline", "knobs", "batch", "param", "combined", "repeat"]

OOM_MARKERS = ("OutOfMemoryError", "out of memory", "CUDA error: out of memory", "MemoryError")
STDERR_TAIL_LINES = 12
KILL_GRACE_S = 5.0  # after SIGTERM at the budget, before SIGKILL
POLL_S = 0.1


@dataclass
class TrialSpec:
    """What one trial runs: the command, the knobs the boot hook applies, the script flags it sets.

    ``batch``/``accum`` are the micro-batch and accumulation steps when the trial changes them (None: as
    written); ``losses`` is how many first losses to capture for numerics verification (0: none).
    """

    index: int
    role: TrialRole
    argv: list[str]
    knobs: Knobs = field(default_factory=dict)
    params: dict[str, str] = field(default_factory=dict)  # the script's flags this trial sets
    batch: int | None = None
    accum: int | None = None
    losses: int = 0  # first N losses to capture (numerics verification)
    repeat_of: int | None = None
    finding_id: str | None = None  # the finding whose fix the knobs are
    # samples per optimizer step of the command as written (its batch flag × accumulation), when known
    command_samples_per_step: int | None = None

    @property
    def label(self) -> str:
        """The trial's changes for display (``"batch_size=32, accum=2, tf32=True"``); ``"as written"`` for
        none.
        """
        parts = [f"{k}={v}" for k, v in self.params.items()]
        if self.accum is not None and "accum" not in self.params:
            parts.append(f"accum={self.accum}")
        if self.knobs:
            parts.append(label(self.knobs))
        return ", ".join(parts) or "as written"

    @property
    def config_key(self) -> str:
        """Trials of one configuration (a candidate and its repeats) share this key."""
        return json.dumps([self.knobs, self.params, self.accum], sort_keys=True, default=str)


@dataclass
class Trial:
    """One trial's outcome: status, wall time (s, start-up included), its profiled run if it made one."""

    spec: TrialSpec
    status: TrialStatus
    wall_s: float = 0.0
    exit_code: int | None = None
    run: ProfileRun | None = None
    losses: list[float] = field(default_factory=list)
    error: str | None = None
    stderr_tail: list[str] = field(default_factory=list)
    applied: dict[str, Any] = field(default_factory=dict)  # what the boot hook changed
    notes: list[str] = field(default_factory=list)

    @property
    def steps_per_s(self) -> float | None:
        """Measured optimizer steps per second; None unless the trial ran to the end (ok or rejected)."""
        return self.run.steps_per_s if self.run is not None and self.status in ("ok", "rejected") else None

    @property
    def samples_per_step(self) -> float | None:
        """Samples per optimizer step: batch × accumulation when known (set by the trial or given by the
        command), else what the DataLoader delivered per step; None when nothing tells.
        """
        if self.spec.batch is not None:
            return float(self.spec.batch * (self.spec.accum or 1))
        if self.spec.command_samples_per_step is not None:
            return float(self.spec.command_samples_per_step)
        loader = self.run.summary.loader if self.run is not None else None
        total = self.run.summary.total_steps if self.run is not None else 0
        if loader is None or not loader.batch_size or not loader.batches or not total:
            return None
        return loader.batch_size * loader.batches / total

    @property
    def samples_per_s(self) -> float | None:
        """Throughput in samples/s; None when steps/s or samples per step is unknown."""
        per_step = self.samples_per_step
        return self.steps_per_s * per_step if self.steps_per_s and per_step else None

    @property
    def peak_memory_bytes(self) -> int | None:
        """Peak bytes reserved by PyTorch's caching allocator in the trial; None without a profiled run."""
        return self.run.summary.memory.peak_reserved_bytes if self.run is not None else None

    def to_dict(self) -> dict[str, Any]:
        """The trial as JSON (one entry of ``trials`` in the ``gpuwise tune --json`` schema)."""
        s = self.spec
        summary = self.run.summary if self.run is not None else None
        return {
            "index": s.index,
            "role": s.role,
            "label": s.label,
            "repeat_of": s.repeat_of,
            "finding_id": s.finding_id,
            "command": " ".join(s.argv),
            "knobs": s.knobs,
            "params": s.params,
            "batch_size": s.batch,
            "grad_accum": s.accum,
            "status": self.status,
            "error": self.error,
            "exit_code": self.exit_code,
            "wall_s": round(self.wall_s, 3),
            "measured_steps": summary.measured_steps if summary else 0,
            "steps_per_s": self.steps_per_s,
            "samples_per_s": self.samples_per_s,
            "peak_memory_bytes": self.peak_memory_bytes,
            "losses": self.losses,
            "run_id": self.run.run_id if self.run is not None else None,
            "findings": [f.id for f in self.run.findings] if self.run is not None else [],
            "applied": self.applied,
            "stderr_tail": self.stderr_tail,
            "notes": self.notes,
        }


class Interrupt:
    """Ctrl-C of the tuner: remembered, and forwarded to the running trial's process group."""

    def __init__(self) -> None:
        self.requested = False
        self.signum: int | None = None
        self.pid: int | None = None

    def __call__(self, signum: int, frame: Any) -> None:
        self.requested = True
        self.signum = self.signum or signum
        if self.pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.pid, signum)


def run_trial(
    spec: TrialSpec,
    *,
    steps: int,
    warmup: int,
    budget_s: float,
    interrupt: Interrupt,
    group_id: str,
) -> Trial:
    """Run one trial: the command in a fresh process group under the profiler, with the tune knobs passed to
    the boot hook in ``GPUWISE_TUNE``, stopped after ``steps`` measured steps or at ``budget_s`` seconds
    (SIGTERM, then SIGKILL). ``torch.compile`` trials get a longer warm-up so compilation is not measured.
    The trial's temporary directory is removed afterwards.
    """
    out_dir = Path(tempfile.mkdtemp(prefix="gpuwise-tune-"))
    shown = " ".join(spec.argv)
    if "compile" in spec.knobs:  # compilation belongs in the warm-up, not in the measured steps
        warmup = max(warmup, T.TUNE_COMPILE_WARMUP_STEPS)
    config = {
        "out_dir": str(out_dir),
        "steps": steps,
        "warmup": warmup,
        "stop": True,
        "interval_s": 0.5,
        "telemetry": True,
        "group_id": group_id,
        "command": shown,
    }
    tune = {"out_dir": str(out_dir), "knobs": spec.knobs, "losses": spec.losses}
    env = profiled_env(config, {"GPUWISE_TUNE": json.dumps(tune)})
    try:
        return _run(spec, env, out_dir, shown, budget_s, interrupt, steps)
    finally:
        shutil.rmtree(out_dir, ignore_errors=True)


def _run(
    spec: TrialSpec,
    env: dict[str, str],
    out_dir: Path,
    shown: str,
    budget_s: float,
    interrupt: Interrupt,
    steps: int,
) -> Trial:
    stdout, stderr = out_dir / "stdout.txt", out_dir / "stderr.txt"
    t0 = time.monotonic()
    with open(stdout, "wb") as out, open(stderr, "wb") as err:
        try:
            # its own process group: the terminal's Ctrl-C reaches the tuner only, which forwards it
            proc = subprocess.Popen(
                spec.argv, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=err, preexec_fn=os.setpgrp
            )
        except OSError as exc:
            raise GpuwiseError(f"could not start {spec.argv[0]!r}: {exc.strerror or exc}") from None
        interrupt.pid = proc.pid
        timed_out, stopping, asked_at = False, False, None
        try:
            while proc.poll() is None:
                now = time.monotonic()
                if interrupt.requested and asked_at is None:
                    asked_at = now
                if not stopping and now - t0 > budget_s:
                    timed_out = stopping = True
                    _stop(proc)
                elif not stopping and asked_at is not None and now - asked_at > KILL_GRACE_S:
                    stopping = True  # a script that ignores SIGINT (started with it ignored) is stopped
                    _stop(proc)
                time.sleep(POLL_S)
        finally:
            interrupt.pid = None
    wall_s = time.monotonic() - t0
    code = exit_code_of(proc.returncode)
    notes: list[str] = []
    forwarded = "SIGINT" if interrupt.requested else ("SIGTERM" if timed_out else None)
    runs = collect_runs(out_dir, shown, code, forwarded, notes)
    text = stderr.read_text(errors="replace")
    trial = Trial(
        spec,
        "ok",
        wall_s=wall_s,
        exit_code=code,
        run=runs[0] if runs else None,
        losses=_losses(out_dir),
        stderr_tail=[line for line in text.splitlines() if line.strip()][-STDERR_TAIL_LINES:],
        applied=_applied(out_dir),
        notes=[n for n in notes if "nothing was profiled" not in n],
    )
    _settle(trial, text, timed_out, interrupt.requested, budget_s, steps)
    return trial


def _stop(proc: subprocess.Popen) -> None:
    """SIGTERM (the profiler writes its record), then SIGKILL after a grace period."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(KILL_GRACE_S)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def _settle(
    trial: Trial, stderr: str, timed_out: bool, interrupted: bool, budget_s: float, steps: int
) -> None:
    measured = trial.run.summary.measured_steps if trial.run is not None else 0
    code = trial.exit_code or 0
    if interrupted:
        trial.status, trial.error = "interrupted", "Ctrl-C: the tuner stopped"
    elif timed_out:
        if measured >= min(steps, T.TUNE_MIN_MEASURED_STEPS):
            trial.notes.append(f"stopped at the {budget_s:.0f} s budget after {measured} measured steps")
        else:
            trial.status = "hung"
            trial.error = f"no result within the {budget_s:.0f} s budget ({measured} steps measured): killed"
    elif any(marker in stderr for marker in OOM_MARKERS) or code == 128 + signal.SIGKILL:
        trial.status = "oom"
        trial.error = _last_error(trial.stderr_tail) or "killed by SIGKILL (the kernel's OOM killer?)"
    elif code:
        trial.status = "crashed"
        trial.error = _last_error(trial.stderr_tail) or f"exited with code {code}"
    elif measured == 0:
        trial.status = "no_steps"
        trial.error = "no training step measured (see the profiler's notes)"


def _last_error(tail: list[str]) -> str | None:
    """The exception line of a traceback (the last line that names an error), else the last line."""
    for line in reversed(tail):
        if "Error" in line or "Exception" in line:
            return line.strip()
    return tail[-1].strip() if tail else None


def _losses(out_dir: Path) -> list[float]:
    """The first process's captured losses (torchrun: the lowest pid, usually rank 0's)."""
    files = sorted(out_dir.glob("losses-*.txt"), key=lambda p: int(p.stem.split("-")[1]))
    if not files:
        return []
    values = []
    for line in files[0].read_text().splitlines():
        with contextlib.suppress(ValueError):
            values.append(float(line))
    return values


def _applied(out_dir: Path) -> dict[str, Any]:
    for path in sorted(out_dir.glob("tune-*.json")):
        with contextlib.suppress(OSError, json.JSONDecodeError):
            data = json.loads(path.read_text())
            if data.get("loaders") or data.get("iterable_skipped") or data.get("errors"):
                return dict(data)
    return {}


__all__ = ["Interrupt", "Trial", "TrialRole", "TrialSpec", "TrialStatus", "run_trial"]
