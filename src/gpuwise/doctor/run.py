"""``gpuwise doctor`` = ``gpuwise tune`` on the reference workload: size it to the machine, then let
the tuner run it as written, apply the fixes its findings name and measure again, each in a fresh
process (one implementation: the doctor is the tuner's demo, not a second loop)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from gpuwise.doctor import script
from gpuwise.doctor.sizing import Sizing, size_workload
from gpuwise.doctor.workload import WorkloadSettings
from gpuwise.errors import GpuwiseError
from gpuwise.profile.analysis import ProfileRun

if TYPE_CHECKING:  # pragma: no cover
    from gpuwise.tune.result import TuneResult
    from gpuwise.tune.search import EventFn

# Knob of the tuner -> the reference workload's setting of the same meaning
_SETTING = {
    "num_workers": "num_workers",
    "persistent_workers": "persistent_workers",
    "prefetch_factor": "prefetch_factor",
    "pin_memory": "pin_memory",
    "tf32": "tf32",
    "autocast": "amp_dtype",
}
_AMP_DTYPE = {"bf16": "bfloat16", "fp16": "float16"}
_WHY = {
    "persistent_workers": "no worker restart cost at each epoch",
    "prefetch_factor": "keep batches queued ahead of the training loop",
    "pin_memory": "page-locked batches copy faster and asynchronously",
    "tf32": "TF32 tensor cores for what stays in fp32",
    "autocast": "16-bit matmuls; the losses after warm-up were checked against the run as written",
}


@dataclass(frozen=True)
class AppliedFix:
    """One setting of the reference workload the tuner's winner changed: the value before and after, the
    finding it fixes (None when the tuner's own candidate) and why it helps.
    """

    finding_id: str | None
    setting: str
    before: Any
    after: Any
    reason: str

    def to_dict(self) -> dict[str, Any]:
        """The fix as JSON, one key per field."""
        return dict(self.__dict__)


@dataclass
class DoctorResult:
    """What ``gpuwise doctor`` shows: the reference workload as written (``before``) and with the winner's
    settings (``after``), the fixes applied, the findings left for a human (``manual_fixes``: finding id
    and why), and the tune session behind it.
    """

    device: str
    before: ProfileRun
    after: ProfileRun
    settings_before: WorkloadSettings
    settings_after: WorkloadSettings
    applied_fixes: list[AppliedFix]
    manual_fixes: list[dict[str, str]] = field(default_factory=list)
    sizing: Sizing | None = None  # None when the caller gave the settings
    tune: TuneResult | None = None

    @property
    def others_cpu_pct(self) -> tuple[float | None, float | None]:
        """Other processes' CPU during the before and after runs, % of the machine's cores."""
        return other_processes_cpu_pct(self.before), other_processes_cpu_pct(self.after)

    def _median(self, run: ProfileRun) -> float:
        """The median over the configuration's repeats when the tuner repeated it, else the run's."""
        if self.tune is not None:
            for config in self.tune.configs:
                if any(t.run is run for t in config.trials):
                    return config.median("steps_per_s") or 0.0
        return run.steps_per_s or 0.0

    @property
    def before_steps_per_s(self) -> float:
        """Optimizer steps/s as written: the median over the tuner's repeats when it repeated the run."""
        return self._median(self.before)

    @property
    def after_steps_per_s(self) -> float:
        """Optimizer steps/s with the fixes: the median over the tuner's repeats when it repeated the run."""
        return self._median(self.after)

    @property
    def speedup_x(self) -> float | None:
        """After over before (1.0 = no change); None when the run as written measured 0 steps/s."""
        return self.after_steps_per_s / self.before_steps_per_s if self.before_steps_per_s else None

    def to_dict(self) -> dict[str, Any]:
        """The result as JSON (the ``gpuwise doctor --json`` schema)."""
        return {
            "device": self.device,
            "before_steps_per_s": self.before_steps_per_s,
            "after_steps_per_s": self.after_steps_per_s,
            "speedup_x": self.speedup_x,
            "applied_fixes": [f.to_dict() for f in self.applied_fixes],
            "manual_fixes": self.manual_fixes,
            "settings_before": self.settings_before.to_dict(),
            "settings_after": self.settings_after.to_dict(),
            "sizing": self.sizing.to_dict() if self.sizing is not None else None,
            "others_cpu_pct": dict(zip(("before", "after"), self.others_cpu_pct, strict=True)),
            "phases": {name: share.to_dict() for name, share in self.before.phases.items()},
            "phases_after": {name: share.to_dict() for name, share in self.after.phases.items()},
            "findings": [f.to_dict() for f in self.before.findings],
            "findings_after": [f.to_dict() for f in self.after.findings],
            "evidence": self.before.evidence.to_dict(),
            "before": self.before.to_dict(),
            "after": self.after.to_dict(),
            "trials": [t.to_dict() for t in self.tune.trials] if self.tune is not None else [],
        }


def other_processes_cpu_pct(run: ProfileRun) -> float | None:
    """The whole machine's CPU use minus this run's (process and workers), as a share of the cores."""
    tel = run.summary.telemetry
    if tel is None or tel.system_cpu_pct is None or tel.process_cpu_pct is None:
        return None
    return max(0.0, tel.system_cpu_pct - tel.process_cpu_pct)


def resolve_device(device: str) -> str:
    """``auto`` → ``cuda`` when torch sees a CUDA GPU, else ``cpu``; ``cpu``/``cuda`` as given.

    Raises ``GpuwiseError`` for ``cuda`` without a visible GPU and for any other name.
    """
    import torch

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        raise GpuwiseError("--device cuda: no CUDA GPU is visible to torch (use --device cpu or auto)")
    if device not in {"cpu", "cuda"}:
        raise GpuwiseError(f"unknown device {device!r} (use auto, cpu or cuda)")
    return device


def run_doctor(
    steps: int = 40,
    warmup: int = 3,
    device: str = "auto",
    store: Any = None,
    progress: EventFn | None = None,
    settings: WorkloadSettings | None = None,
    repeats: int = 1,
) -> DoctorResult:
    """``store=False``: nothing saved; ``None``: the default run store."""
    from gpuwise.tune.search import TuneOptions, run_tune

    if steps < 8:
        raise GpuwiseError("--steps must be at least 8 (the step statistics need them)")
    device = resolve_device(device)
    sizing = None
    if settings is None:
        sizing = size_workload(WorkloadSettings(), device)
        settings = WorkloadSettings(storage_latency_s=sizing.storage_latency_s)
    # bound the script itself too: the profiler's --stop ends it, this only if the profiler could not
    command = script.command(settings, device, (warmup + steps) * 4 + 20)
    options = TuneOptions(steps=steps, warmup=warmup, repeats=repeats, allow_numerics=device == "cuda")
    result = run_tune(command, options, on_event=progress)
    if store is not False and result.trials:
        from gpuwise.tune.saved_sessions import save_tune

        result.store = save_tune(result, store, label="doctor")
    return doctor_result(result, settings, device, sizing)


def doctor_result(
    result: TuneResult, settings: WorkloadSettings, device: str, sizing: Sizing | None
) -> DoctorResult:
    """The tuner's result in the doctor's terms: the run as written, the winner's run, the settings."""
    base = result.trials[0]
    if base.run is None or base.status != "ok":
        raise GpuwiseError(f"the doctor's reference workload did not run ({base.status}: {base.error})")
    winner = result.winner.config.trials[0] if result.winner is not None else base
    after_run = winner.run or base.run
    applied: list[AppliedFix] = []
    new = settings
    first_note = winner.notes[0] if winner.notes else "measured faster by the tuner"
    for knob, value in winner.spec.knobs.items():
        name = _SETTING.get(knob)
        if name is None:
            continue
        after = _AMP_DTYPE.get(value, value) if knob == "autocast" else value
        before = getattr(new, name)
        new = new.with_changes(**{name: after})
        if knob == "pin_memory" and value:
            new = new.with_changes(non_blocking=True)  # the workload copies asynchronously when pinned
        applied.append(AppliedFix(winner.spec.finding_id, name, before, after, _WHY.get(knob, first_note)))
    fixed = {f.finding_id for f in applied}
    manual = [
        {"finding_id": f.id, "why": "not applied automatically: " + f.fix}
        for f in base.run.findings
        if f.id not in fixed
    ]
    return DoctorResult(device, base.run, after_run, settings, new, applied, manual, sizing, result)


__all__ = [
    "AppliedFix",
    "DoctorResult",
    "doctor_result",
    "other_processes_cpu_pct",
    "resolve_device",
    "run_doctor",
]
