"""The tune session: baseline → candidates from its findings and the user's knobs → the script's own
flags (batch search keeping the effective batch) → one combined trial → repeats → ranking.

Bounded by ``max_trials``; the repeats run the baseline and the best candidates interleaved (so a
change of load on the machine hits them alike) and a gain is declared only when the winner's median
beats the baseline's by ``TUNE_MIN_GAIN_X`` and its slowest repeat beats the baseline's fastest.
Ctrl-C (SIGINT) is forwarded to the running trial; the session stops and returns what it measured.
"""

from __future__ import annotations

import contextlib
import signal
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from gpuwise.diagnose import Finding
from gpuwise.diagnose import thresholds as T
from gpuwise.errors import GpuwiseError
from gpuwise.profile.launcher import normalize_command
from gpuwise.tune import candidates as cand
from gpuwise.tune import frameworks
from gpuwise.tune.knobs import Knobs, changes_numerics
from gpuwise.tune.params import BATCH, Param, ParamSpace, flag_value, param_space, with_flag
from gpuwise.tune.result import Config, Metric, TuneResult, Winner
from gpuwise.tune.simulated import SimulatedBatch
from gpuwise.tune.trial import Interrupt, Trial, TrialRole, TrialSpec, run_trial
from gpuwise.tune.verify import compare_losses

EventFn = Callable[[str, Trial | TrialSpec, int], None]  # ("start" | "done", trial or spec, planned)


@dataclass
class TuneOptions:
    """The session's settings, from the ``gpuwise tune`` options.

    ``steps``/``warmup`` are per trial (measured/unmeasured optimizer steps); ``budget_s`` is each trial's
    wall-time limit in seconds (then SIGTERM); ``repeats``: rounds of the baseline and of every candidate
    that could still win (0: none; while a contender's interval overlaps the baseline's, up to
    ``TUNE_MAX_REPEAT_ROUNDS``); ``max_trials`` bounds the whole session. ``auto`` adds candidates from
    the baseline's findings; numerics knobs run only with ``allow_numerics`` and are kept only if every loss
    is finite and the last ``loss_steps`` losses after the warm-up stay within ``loss_rtol`` (relative) of
    the baseline's by their mean, without a wider spread (`verify.compare_losses`).
    """

    steps: int = 20
    warmup: int = 3
    budget_s: float = 120.0
    repeats: int = 2  # rounds of the baseline and of every candidate that could still win (0: none)
    max_trials: int = 16
    knobs: list[tuple[str, list[Any]]] = field(default_factory=list)
    params: list[Param] = field(default_factory=list)
    accum: str | None = None
    auto: bool = True  # candidates from the baseline's findings
    allow_numerics: bool = False
    loss_rtol: float = T.TUNE_LOSS_RTOL
    loss_steps: int = T.TUNE_LOSS_STEPS
    target_gpu: str | None = None
    simulated: list[SimulatedBatch] = field(default_factory=list)  # the target's batches, simulated


class _Session:
    def __init__(self, argv: list[str], options: TuneOptions, space: ParamSpace, on_event: EventFn | None):
        self.argv = argv
        self.o = options
        self.space = space
        self.on_event = on_event
        self.trials: list[Trial] = []
        self.interrupt = Interrupt()
        self.group_id = uuid.uuid4().hex[:12]
        self.notes: list[str] = list(space.notes)
        self.planned = 1

    @property
    def stopped(self) -> bool:
        return self.interrupt.requested

    def budget_left(self) -> bool:
        if len(self.trials) >= self.o.max_trials:
            note = f"stopped at --max-trials {self.o.max_trials}"
            if note not in self.notes:
                self.notes.append(note)
            return False
        return not self.stopped

    def run(self, role: TrialRole, knobs: Knobs, params: dict[str, str], **extra: Any) -> Trial:
        argv = self.argv
        for name, value in params.items():
            argv = with_flag(argv, self._flag(name), value)
        spec = TrialSpec(len(self.trials) + 1, role, argv, dict(knobs), dict(params), **extra)
        if spec.batch is None and self.space.keeps_effective_batch:
            spec.command_samples_per_step = self.space.effective_batch
        if self.on_event:
            self.on_event("start", spec, self.planned)
        trial = run_trial(
            spec,
            steps=self.o.steps,
            warmup=self.o.warmup,
            budget_s=self.o.budget_s,
            interrupt=self.interrupt,
            group_id=self.group_id,
        )
        self.trials.append(trial)
        if self.on_event:
            self.on_event("done", trial, self.planned)
        return trial

    def skip(self, role: TrialRole, params: dict[str, str], reason: str, **extra: Any) -> None:
        spec = TrialSpec(len(self.trials) + 1, role, self.argv, {}, dict(params), **extra)
        self.trials.append(Trial(spec, "skipped", error=reason))

    def _flag(self, name: str) -> str:
        if name == "accum" and self.space.accum_flag:
            return self.space.accum_flag
        return next(p.flag for p in self.space.params if p.name == name)


@contextlib.contextmanager
def _interrupt_handler(interrupt: Interrupt) -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {s: signal.signal(s, interrupt) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


def run_tune(command: list[str], options: TuneOptions, on_event: EventFn | None = None) -> TuneResult:
    """Run a whole tune session on ``command`` (the user's argv) and return its result.

    ``on_event`` is called at each trial's start and end (for the progress lines). Ctrl-C stops the session
    early: the result then has ``interrupted`` set and holds what was measured. Raises ``GpuwiseError`` for
    bad options (too few ``steps``, inconsistent ``--param``/``--accum``).
    """
    if options.steps < T.TUNE_MIN_MEASURED_STEPS:
        raise GpuwiseError(
            f"--steps must be at least {T.TUNE_MIN_MEASURED_STEPS} (the step statistics need them)"
        )
    argv = normalize_command(command)
    space = param_space(argv, options.params, options.accum)
    session = _Session(argv, options, space, on_event)
    t0 = time.monotonic()
    with _interrupt_handler(session.interrupt):
        _search(session)
    return _result(session, time.monotonic() - t0)


def _search(s: _Session) -> None:
    """The whole session: the baseline, one trial per knob candidate, the script's flags, the best knob
    and flag trials combined, then repeats of the leaders."""
    o = s.o
    wants_losses = o.allow_numerics or any(changes_numerics({n: v}) for n, values in o.knobs for v in values)
    losses = o.warmup + o.steps if wants_losses else 0  # the whole trial: the window is after warm-up
    s.planned = 1 + sum(len(v) for _, v in o.knobs) + sum(len(p.values) for p in s.space.params)
    baseline = s.run("baseline", {}, {}, losses=losses)
    if baseline.status == "oom" and s.space.batch is not None:
        s.notes.append("the command as written ran out of memory: only the batch search runs")
        _params(s)
        return
    if baseline.status != "ok":
        s.notes.append(
            f"the command as written did not run ({baseline.status}: {baseline.error}); nothing to tune"
        )
        return
    unique = _knob_candidates(s, baseline)
    s.planned = 1 + len(unique) + sum(len(p.values) for p in s.space.params)
    for c in unique:
        if not s.budget_left():
            return
        _knob_trial(s, c, baseline, losses)
    _params(s)
    _combined(s, baseline)
    _repeats(s)


def _knob_candidates(s: _Session, baseline: Trial) -> list[cand.Candidate]:
    """The knob settings to try, once each: from the baseline's findings (with --auto), then the user's
    --knob values; the findings whose fix needs a script change become notes."""
    run = baseline.run
    on_gpu = (run.summary.device or "cpu").startswith("cuda") if run else False
    todo = cand.from_user(s.o.knobs)
    if s.o.auto and run is not None:
        todo = cand.from_findings(run.findings, run.evidence, on_gpu, s.o.allow_numerics) + todo
    unique = {repr(sorted(c.knobs.items())): c for c in todo}
    if run is not None:
        _untried_findings(s, run.findings, {c.finding_id for c in todo})
    return list(unique.values())


def _knob_trial(s: _Session, c: cand.Candidate, baseline: Trial, losses: int) -> None:
    """One knob candidate's trial; a numerics-changing one is rejected when its losses leave the
    baseline's tolerance."""
    numerics = changes_numerics(c.knobs)
    trial = s.run("knobs", c.knobs, {}, losses=losses if numerics else 0, finding_id=c.finding_id)
    trial.notes.append(c.why)
    if numerics and trial.status == "ok":
        check = compare_losses(baseline.losses, trial.losses, s.o.loss_rtol, s.o.loss_steps, s.o.warmup)
        trial.notes.append(check.reason)
        if not check.accepted:
            trial.status, trial.error = "rejected", check.reason


def _untried_findings(s: _Session, findings: list[Finding], tried: set[str | None]) -> None:
    """The baseline's findings whose fix is a change to the script (a prefetch thread, a removed
    ``.item()``): the tuner cannot apply them, but the user should not lose them."""
    for f in findings:
        if f.id not in tried and f.severity in ("high", "medium"):
            s.notes.append(f"not tried, needs a change to the script: {f.id} ({f.title}): {f.fix}")


def _params(s: _Session) -> None:
    """The script's own flags: batch sizes ascending (a batch that ran out of memory ends the climb),
    accumulation set to keep the effective batch; then each value of the other params."""
    oom_at: int | None = None
    fits = {r.batch: r for r in s.o.simulated}
    for plan in s.space.batch_plans():
        params = {BATCH: str(plan.batch)}
        if plan.accum is not None:
            params["accum"] = str(plan.accum)
        simulated = fits.get(plan.batch)
        too_big = s.o.simulated and (simulated is None or not simulated.kept)
        if plan.skipped or oom_at is not None or too_big:
            reason = plan.skipped or (
                f"a batch of {oom_at} already ran out of memory"
                if oom_at is not None
                else f"does not leave {T.TUNE_MEMORY_MARGIN_PCT:.0f} % of {s.o.target_gpu} free (simulated)"
            )
            s.skip("batch", params, reason, batch=plan.batch, accum=plan.accum)
            continue
        if _same_as_command(s, params) or not s.budget_left():
            continue
        trial = s.run("batch", {}, params, batch=plan.batch, accum=plan.accum)
        if trial.status == "oom":
            oom_at = plan.batch
        elif trial.status == "ok":
            _memory_margin(trial)
    for p in s.space.params:
        if p.name == BATCH:
            continue
        for value in p.values:
            if _same_as_command(s, {p.name: value}) or not s.budget_left():
                continue
            s.run("param", {}, {p.name: value})


def _same_as_command(s: _Session, params: dict[str, str]) -> bool:
    return all(flag_value(s.argv, s._flag(name)) == value for name, value in params.items())


def _memory_margin(trial: Trial) -> None:
    """A batch that ran but left less than the margin of device memory free is kept out of the ranking."""
    run = trial.run
    if run is None:
        return
    peak, total = run.summary.memory.peak_reserved_bytes, run.summary.memory.capacity_bytes
    if peak and total and peak > total * (1 - T.TUNE_MEMORY_MARGIN_PCT / 100):
        trial.notes.append(
            f"near the memory limit: peak {peak / 2**30:.1f} of {total / 2**30:.1f} GiB "
            f"(keeps < {T.TUNE_MEMORY_MARGIN_PCT:.0f} % free); not kept"
        )


def _near_limit(trial: Trial) -> bool:
    return any(n.startswith("near the memory limit") for n in trial.notes)


def _metric(trials: list[Trial]) -> Metric:
    ok = [t for t in trials if t.status == "ok"]
    return "samples_per_s" if ok and all(t.samples_per_s for t in ok) else "steps_per_s"


def _combined(s: _Session, baseline: Trial) -> None:
    """The best knob trial and the best flag trial together, when each beat the baseline alone."""
    metric = _metric(s.trials)
    base = getattr(baseline, metric) or 0.0

    def best(roles: tuple[str, ...]) -> Trial | None:
        ok = [t for t in s.trials if t.spec.role in roles and t.status == "ok" and not _near_limit(t)]
        ok = [t for t in ok if (getattr(t, metric) or 0.0) > base]
        return max(ok, key=lambda t: getattr(t, metric) or 0.0, default=None)

    knobs, flags = best(("knobs",)), best(("batch", "param"))
    if knobs is None or flags is None or not s.budget_left():
        return
    spec = flags.spec
    s.run(
        "combined",
        knobs.spec.knobs,
        spec.params,
        batch=spec.batch,
        accum=spec.accum,
        finding_id=knobs.spec.finding_id,
        losses=knobs.spec.losses,
    )


def _configs(trials: list[Trial]) -> dict[str, Config]:
    configs: dict[str, Config] = {}
    for t in trials:
        if t.status == "skipped":
            continue
        key = t.spec.config_key
        if key not in configs:
            configs[key] = Config(key, t.spec.label, [])
        configs[key].trials.append(t)
    return configs


def _could_win(c: Config, metric: Metric, base: Config) -> bool:
    """A configuration still in the running: measured once and not clearly slower (a single trial proves
    nothing either way), or repeated with an interval that still overlaps the baseline's."""
    values, base_values = c.values(metric), base.values(metric)
    if not values or not base_values or any(_near_limit(t) for t in c.trials):
        return False
    if len(values) < 2 or len(base_values) < 2:
        return max(values) * T.TUNE_CLEAR_LOSS_X > min(base_values)
    if min(values) > max(base_values):  # ahead so far: repeated until a winner can be certain
        return len(values) < T.TUNE_MIN_WINNER_TRIALS or len(base_values) < T.TUNE_MIN_WINNER_TRIALS
    return min(values) <= max(base_values) and max(values) >= min(base_values)


def _outrun(c: Config, configs: list[Config], base: Config, metric: Metric) -> bool:
    """``c`` can no longer win: a certain winner (repeated, its slowest trial beating the baseline's
    fastest) also has its slowest trial beating ``c``'s fastest, so more trials of ``c`` decide nothing."""
    values = c.values(metric)
    return bool(values) and any(
        d.key != c.key
        and _certain(d, base, metric)
        and not any(_near_limit(t) for t in d.trials)
        and min(d.values(metric)) > max(values)
        for d in configs[1:]
    )


def _repeats(s: _Session) -> None:
    """Repeat, interleaved with the baseline, every configuration that could still win, round after round
    until its interval separates from the baseline's (both repeated) or the budget ends: a candidate that
    lost once by luck gets its chance, one that won once by luck is caught. The leaders go first in each
    round, and a candidate a certain winner has outrun (`_outrun`) is not repeated any more."""
    if s.o.repeats <= 0:
        return
    metric = _metric(s.trials)
    rounds = max(s.o.repeats, T.TUNE_MAX_REPEAT_ROUNDS)
    for done in range(rounds):
        configs = list(_configs(s.trials).values())
        base = configs[0]
        contenders = [
            c for c in configs[1:] if _could_win(c, metric, base) and not _outrun(c, configs, base, metric)
        ]
        if not contenders and done >= 1:
            return
        contenders.sort(key=lambda c: -(c.median(metric) or 0.0))
        s.planned = len(s.trials) + 1 + len(contenders)
        for c in [base, *contenders]:
            if not s.budget_left():
                return
            now = _configs(s.trials)  # with this round's trials: the leader may have become certain
            if c is not base and _outrun(now[c.key], list(now.values()), now[base.key], metric):
                continue
            first = c.trials[0].spec
            s.run(
                "repeat",
                first.knobs,
                first.params,
                batch=first.batch,
                accum=first.accum,
                repeat_of=first.index,
                losses=first.losses,
                finding_id=first.finding_id,
            )


# The ranking of verdicts: faster configurations first, then the baseline itself.
_VERDICT_ORDER = {
    "baseline": 1,
    "faster": 0,
    "no_gain": 2,
    "slower": 3,
    "near_memory_limit": 4,
    "rejected": 5,
    "failed": 6,
}


def _result(s: _Session, wall_s: float) -> TuneResult:
    """The session as a TuneResult: configurations judged against the baseline and ranked, the winner."""
    metric = _metric(s.trials)
    configs = list(_configs(s.trials).values())
    baseline = configs[0] if configs and configs[0].trials[0].spec.role == "baseline" else None
    base_spread = baseline.spread(metric) if baseline else None
    for c in configs:
        _judge(c, baseline, metric, baseline.median(metric) if baseline else None, base_spread)
    # among faster configurations, the certain ones first (their interval clear of the baseline's), then
    # the repeated ones: a "not certain" candidate never ranks above a certain one
    configs.sort(
        key=lambda c: (
            _VERDICT_ORDER[c.verdict],
            not _certain(c, baseline, metric),
            len(c.values(metric)) < 2,
            -(c.median(metric) or 0.0),
        )
    )
    run = next((t.run for t in s.trials if t.run is not None), None)
    framework = run.evidence.context.framework if run is not None else None
    batch_flag = s.space.batch.flag if s.space.batch is not None else None
    winner = None if s.stopped else _winner(configs, baseline, metric, framework, batch_flag)
    if winner is None and configs and configs[0].verdict == "faster" and not s.stopped:
        best = configs[0]
        s.notes.append(
            f"no winner: {best.label} was faster by its median but its interval does not clear "
            "the baseline's spread (more repeats, or a quieter machine, would decide)"
        )
    if baseline is not None:
        _determinism_note(s, baseline)
    if s.stopped:
        s.notes.append(
            f"interrupted (Ctrl-C) after {len(s.trials)} trials: the trials measured so far are kept, "
            "no winner is named from an unfinished session"
        )
    return TuneResult(
        command=" ".join(s.argv),
        device=run.summary.device if run is not None else None,
        framework=framework,
        metric=metric,
        trials=s.trials,
        configs=configs,
        baseline=baseline,
        winner=winner,
        effective_batch=s.space.effective_batch if s.space.keeps_effective_batch else None,
        interrupted=s.stopped,
        tuner_wall_s=wall_s,
        loss_rtol=s.o.loss_rtol,
        loss_steps=s.o.loss_steps,
        group_id=s.group_id,
        notes=s.notes,
        signal=s.interrupt.signum,
        target_gpu=s.o.target_gpu,
        simulated=list(s.o.simulated),
    )


def _certain(c: Config, baseline: Config | None, metric: Metric) -> bool:
    """Both measured ``TUNE_MIN_WINNER_TRIALS`` times and ``c``'s slowest trial beats the baseline's
    fastest: a gain beyond the noise."""
    if baseline is None or c is baseline:
        return False
    values, base_values = c.values(metric), baseline.values(metric)
    enough = min(len(values), len(base_values)) >= T.TUNE_MIN_WINNER_TRIALS
    return enough and min(values) > max(base_values)


def _winner(
    configs: list[Config],
    baseline: Config | None,
    metric: Metric,
    framework: str | None,
    batch_flag: str | None = None,
) -> Winner | None:
    """The first ranked configuration when it is faster than a measured baseline *and* certain (both
    repeated, its slowest trial beating the baseline's fastest); None otherwise. Its snippet is in the
    script's terms (its batch flag; no DataLoader for a script that has none)."""
    best = configs[0] if configs and configs[0].verdict == "faster" else None
    base = baseline.median(metric) if baseline else None
    if best is None or not base or not _certain(best, baseline, metric):
        return None
    spec = best.trials[0].spec
    median = best.median(metric) or 0.0
    run = next((t.run for t in best.trials if t.run is not None), None)
    uses_loader = run is None or run.summary.loader is not None
    batch = spec.batch if BATCH in spec.params else None
    return Winner(
        best,
        median / base,
        True,
        framework,
        frameworks.render(
            framework, spec.knobs, batch, spec.accum, batch_flag=batch_flag, uses_loader=uses_loader
        ),
        " ".join(spec.argv),
    )


def _judge(
    c: Config,
    baseline: Config | None,
    metric: Metric,
    base: float | None,
    base_spread: tuple[float, float] | None,
) -> None:
    """Set a configuration's verdict (and why): baseline, rejected, failed, near the memory limit, else
    faster / slower / no gain against the baseline's median by the minimum gain."""
    median = c.median(metric)
    if c is baseline:
        c.verdict = "baseline"
    elif not _judge_trouble(c, median):
        _judge_speed(c, metric, median, base, base_spread)
    checks = [n for t in c.trials for n in t.notes if "losses within" in n]
    if checks and not c.why:
        c.why = checks[0]


def _judge_trouble(c: Config, median: float | None) -> bool:
    """Rejected numerics, no measurement, or near the memory limit: set the verdict, return True."""
    if any(t.status == "rejected" for t in c.trials):
        c.verdict = "rejected"
        c.why = next(t.error or "" for t in c.trials if t.status == "rejected")
    elif median is None:
        c.verdict = "failed"
        c.why = next((f"{t.status}: {t.error}" for t in c.trials if t.status != "ok"), "no measurement")
    elif any(_near_limit(t) for t in c.trials):
        c.verdict = "near_memory_limit"
        c.why = next(n for t in c.trials for n in t.notes if n.startswith("near the memory limit"))
    else:
        return False
    return True


def _judge_speed(
    c: Config,
    metric: Metric,
    median: float | None,
    base: float | None,
    base_spread: tuple[float, float] | None,
) -> None:
    """Faster (with a doubt when its slowest repeat is inside the baseline's spread), slower or no gain."""
    if base and median is not None and median >= base * T.TUNE_MIN_GAIN_X:
        c.verdict = "faster"
        low = (c.spread(metric) or (0.0, 0.0))[0]
        if base_spread and len(c.trials) > 1 and low <= base_spread[1]:
            c.why = "its slowest repeat is within the baseline's spread: the gain is not certain"
    elif base and median is not None and median < base / T.TUNE_MIN_GAIN_X:
        c.verdict = "slower"
    else:
        c.verdict = "no_gain"


def _determinism_note(s: _Session, baseline: Config) -> None:
    """The baseline's repeats should reproduce its losses; if they do not, a numerics check compares
    noise with noise, and the report says so."""
    runs = [t.losses for t in baseline.trials if t.losses]
    if len(runs) < 2:
        return
    check = compare_losses(runs[0], runs[1], s.o.loss_rtol, s.o.loss_steps, s.o.warmup)
    if not check.accepted:
        s.notes.append(
            "the script's losses differ between two runs as written "
            f"({check.reason}): seed it (torch.manual_seed, the DataLoader's generator) "
            "for the numerics check"
        )


__all__ = ["EventFn", "TuneOptions", "run_tune"]
