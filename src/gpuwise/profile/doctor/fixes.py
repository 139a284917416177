"""Findings -> changes to the reference workload's settings, for the fixes that are safe to automate.

Only fixes that cannot change what the model computes are applied: how batches are loaded
(workers, pinning, prefetching, persistent workers, non-blocking copies) and, on a GPU, mixed
precision and TF32, which change rounding but not the model and are what the finding prescribes.
The values come from the findings (their metrics and snippets), not from this module; every other
finding is listed as a manual fix with its own advice.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from gpuwise.diagnose import Finding
from gpuwise.profile.doctor.workload import WorkloadSettings


@dataclass(frozen=True)
class AppliedFix:
    finding_id: str
    setting: str
    before: Any
    after: Any
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _from_finding(finding: Finding, metric: str, pattern: str) -> int | None:
    """A number the finding prescribes: from its metrics, else from its snippet."""
    value = finding.metrics.get(metric)
    if isinstance(value, (int, float)) and value:
        return int(value)
    match = re.search(pattern, finding.fix_snippet or "")
    return int(match.group(1)) if match else None


def plan_fixes(
    findings: list[Finding], settings: WorkloadSettings, device: str
) -> tuple[WorkloadSettings, list[AppliedFix], list[dict[str, str]]]:
    ids = {f.id for f in findings}
    applied: list[AppliedFix] = []
    manual: list[dict[str, str]] = []
    new = settings

    def change(finding_id: str, setting: str, value: Any, reason: str) -> None:
        nonlocal new
        before = getattr(new, setting)
        if before == value:
            return
        new = new.with_changes(**{setting: value})
        applied.append(AppliedFix(finding_id, setting, before, value, reason))

    for f in findings:
        if f.id == "input_bound" and "loader_cpu_saturated" not in ids:
            workers = _from_finding(f, "suggested_num_workers", r"num_workers=(\d+)")
            if not workers:
                manual.append({"finding_id": f.id, "why": "the finding names no worker count"})
                continue
            change(
                f.id,
                "num_workers",
                max(workers, new.num_workers),
                f"{f.metrics.get('input_wait_pct', 0):.0f} % of each step waited for data",
            )
            prefetch = _from_finding(f, "suggested_prefetch_factor", r"prefetch_factor=(\d+)")
            if prefetch:
                change(f.id, "prefetch_factor", prefetch, "keep batches queued ahead of the training loop")
            if "persistent_workers=True" in (f.fix_snippet or "") + f.fix:
                change(f.id, "persistent_workers", True, "no worker restart cost at each epoch")
            if "pin_memory=True" in (f.fix_snippet or "") + f.fix:
                if device == "cuda":
                    change(f.id, "pin_memory", True, "page-locked batches copy faster and asynchronously")
                    change(f.id, "non_blocking", True, "overlap the copy with compute")
                else:
                    manual.append(
                        {
                            "finding_id": f.id,
                            "why": "pin_memory=True skipped: without a GPU there is no host→device copy "
                            "to speed up",
                        }
                    )
        elif f.id == "pageable_copies" and device == "cuda":
            change(
                f.id,
                "pin_memory",
                True,
                f"{f.metrics.get('pageable_copy_pct', 0):.0f} % of copies came from pageable memory",
            )
            change(f.id, "non_blocking", True, "overlap the copy with compute")
        elif f.id == "no_mixed_precision" and device == "cuda":
            import torch

            dtype = "bfloat16" if torch.cuda.is_bf16_supported() else None
            if dtype:
                change(
                    f.id,
                    "amp_dtype",
                    dtype,
                    f"{f.metrics.get('fp32_matmul_pct', 0):.0f} % of matmul work ran in fp32",
                )
            else:
                manual.append(
                    {
                        "finding_id": f.id,
                        "why": "this GPU has no bf16; fp16 autocast needs a GradScaler, left to you",
                    }
                )
            change(f.id, "tf32", True, "TF32 tensor cores for what stays in fp32")
        else:
            manual.append({"finding_id": f.id, "why": "not safe to apply automatically: " + f.fix})
    return new, applied, manual
