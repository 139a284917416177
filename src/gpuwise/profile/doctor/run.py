"""Measure → diagnose → fix → measure again, on the reference workload, in one process."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from gpuwise.errors import GpuwiseError
from gpuwise.profile.analysis import ProfileRun
from gpuwise.profile.doctor.fixes import AppliedFix, plan_fixes
from gpuwise.profile.doctor.sizing import Sizing, size_workload
from gpuwise.profile.doctor.workload import WorkloadSettings, train

ProgressFn = Callable[[str, int, int], None]  # (stage, steps done, steps total)


@dataclass
class DoctorResult:
    device: str
    before: ProfileRun
    after: ProfileRun
    settings_before: WorkloadSettings
    settings_after: WorkloadSettings
    applied_fixes: list[AppliedFix]
    manual_fixes: list[dict[str, str]] = field(default_factory=list)
    sizing: Sizing | None = None  # None when the caller gave the settings

    @property
    def others_cpu_pct(self) -> tuple[float | None, float | None]:
        """Other processes' CPU during the before and after runs, % of the machine's cores."""
        return other_processes_cpu_pct(self.before), other_processes_cpu_pct(self.after)

    @property
    def before_steps_per_s(self) -> float:
        return self.before.steps_per_s or 0.0

    @property
    def after_steps_per_s(self) -> float:
        return self.after.steps_per_s or 0.0

    @property
    def speedup_x(self) -> float | None:
        return self.after_steps_per_s / self.before_steps_per_s if self.before_steps_per_s else None

    def to_dict(self) -> dict[str, Any]:
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
        }


def other_processes_cpu_pct(run: ProfileRun) -> float | None:
    """The whole machine's CPU use minus this run's (process and workers), as a share of the cores."""
    tel = run.summary.telemetry
    if tel is None or tel.system_cpu_pct is None or tel.process_cpu_pct is None:
        return None
    return max(0.0, tel.system_cpu_pct - tel.process_cpu_pct)


def resolve_device(device: str) -> str:
    import torch

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        raise GpuwiseError("--device cuda: no CUDA GPU is visible to torch (use --device cpu or auto)")
    if device not in {"cpu", "cuda"}:
        raise GpuwiseError(f"unknown device {device!r} (use auto, cpu or cuda)")
    return device


def _profiled_run(
    stage: str,
    settings: WorkloadSettings,
    steps: int,
    warmup: int,
    device: str,
    store: Any,
    progress: ProgressFn | None,
) -> ProfileRun:
    from gpuwise.profile.api import Profile

    total = warmup + steps

    def on_step(n: int) -> None:
        if progress is not None:
            progress(stage, n, total)

    p = Profile(
        steps=steps,
        warmup=warmup,
        label=f"doctor: {stage}",
        store=store,
        on_step=on_step,
        meta={
            "script": "gpuwise doctor",
            "command": f"gpuwise doctor ({stage})",
            "settings": settings.to_dict(),
        },
    )
    with p:
        train(settings, total, device, profiler=p)
    if p.result is None:
        raise GpuwiseError(f"the doctor's {stage} run produced no profile (see the messages above)")
    return p.result


def run_doctor(
    steps: int = 40,
    warmup: int = 3,
    device: str = "auto",
    store: Any = None,
    progress: ProgressFn | None = None,
    settings: WorkloadSettings | None = None,
) -> DoctorResult:
    if steps < 8:
        raise GpuwiseError("--steps must be at least 8 (the step statistics need them)")
    device = resolve_device(device)
    sizing = None
    if settings is None:
        sizing = size_workload(WorkloadSettings(), device)
        settings = WorkloadSettings(storage_latency_s=sizing.storage_latency_s)
    naive = settings
    before = _profiled_run("before", naive, steps, warmup, device, store, progress)
    fixed, applied, manual = plan_fixes(before.findings, naive, device)
    after = _profiled_run("after", fixed, steps, warmup, device, store, progress)
    return DoctorResult(device, before, after, naive, fixed, applied, manual, sizing)
