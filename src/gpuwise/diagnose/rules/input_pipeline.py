"""Input-pipeline rules: the loop waits for data, the loader's CPU is saturated, copies are pageable.

``input_bound`` reads two shares of a typical step (%): the data-loader wait (``data_wait``) and host
time before a forward that the sampled frames show is batch preparation (``host_input``). Which one
dominates picks the fix (DataLoader workers vs a prefetch thread); the measured CPU picks how many
workers fit and caps the gain.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpuwise.diagnose import thresholds as T
from gpuwise.diagnose.evidence import Evidence
from gpuwise.diagnose.finding import Finding, Gain
from gpuwise.diagnose.rules.common import confidence, on_gpu, severity_for_gain, speedup_from_saving
from gpuwise.diagnose.rules.host_frames import frames_text, function_of, gap_rows, input_fraction_low, ranked
from gpuwise.diagnose.rules.loader_advice import (
    batch_function_fix,
    bursts_favoured,
    contended,
    cpu_cap,
    cpu_saturated,
    cpu_worker_gain,
    handoff_caveat,
    input_gain_high,
    loader_snippet,
    other_runnable_tasks,
    overlap_gain,
    own_extra_cores,
    packed_room,
    suggested_workers,
    waits_on_io,
)
from gpuwise.diagnose.statistics import input_share_pct, step_spread, typical_share_pct

__all__ = ["input_bound", "loader_cpu_saturated", "pageable_copies"]


@dataclass(frozen=True)
class _InputCase:
    """How the input wait of one run reads: which wait dominates and whether the CPU is the limit.

    ``share`` is the whole input share of a typical step (%); ``workers`` the loader's num_workers as
    run (None: unknown); ``advised`` the worker count that fits the measured machine."""

    share: float
    batch_function: bool  # host-side batch preparation dominates the DataLoader wait
    cpu_bound_full: bool  # the loader already uses every core the run leaves free
    workers: int | None
    advised: int
    frames: list[dict]  # the ranked sampled frames that prepare batches before a forward


def _cpu_bound_full(ev: Evidence, batch_function: bool, workers: int | None, advised: int) -> bool:
    """More workers cannot help: the CPU is saturated, or CPU-bound loading already runs the advised
    number of workers (or more)."""
    if batch_function:
        return False
    if cpu_saturated(ev):
        return True
    return (
        not waits_on_io(ev)
        and ev.context.cpu_util_pct is not None
        and workers is not None
        and advised <= workers
    )


def _input_fix(ev: Evidence, case: _InputCase) -> tuple[str, str]:
    """(fix, snippet): overlap a hand-written batch function, make each sample cheaper, or add workers."""
    if case.batch_function:
        frames = case.frames
        where = f" ({frames[0]['frame'] or frames[0]['leaf']})" if frames else ""
        return batch_function_fix(ev, where, function_of(frames[0] if frames else None))
    if case.cpu_bound_full:
        fix = (
            "The loader already uses the cores the run leaves free: make each sample cheaper (decode/augment "
            "on the GPU, pre-process offline, cache decoded data) rather than adding workers."
        )
        snippet = (
            "# e.g. NVIDIA DALI or torchvision.io.decode_jpeg(device='cuda'); or pre-tokenize / pre-resize "
            "once and load arrays"
        )
        return fix, snippet
    why = (
        f" The CPU is only {ev.context.cpu_util_pct:.0f} % busy: the loader waits on I/O, "
        "so workers overlap it."
        if waits_on_io(ev) and ev.context.cpu_util_pct is not None
        else ""
    )
    fix = (
        f"Load batches in parallel and overlap them with compute: num_workers={case.advised}, "
        + ("pin_memory=True, " if on_gpu(ev) else "")
        + "persistent_workers=True, prefetch_factor=4."
        + why
    )
    shared = _cpu_shared_gain(ev, case)  # CPU-bound loading moves to worker processes: is it worth it?
    if shared is not None:
        fix += handoff_caveat(ev, case.share, case.advised, shared[1])
        if shared[0] < 1.0 and not on_gpu(ev):
            fix += (
                f" The cores are busy: the worker competes with the training thread's compute, and the step "
                f"can get slower ({shared[0]:.2f}x at worst); keep it if a profile with it is faster."
            )
    return fix, loader_snippet(ev, case.advised)


def _input_gain(ev: Evidence, case: _InputCase) -> tuple[float, float]:
    """(low, high) speed-up factors of the fix."""
    share, workers, advised = case.share, case.workers, case.advised
    shared = _cpu_shared_gain(ev, case)
    if shared is not None:
        return shared
    if case.batch_function or (not case.cpu_bound_full and not workers):
        # the batch overlaps the rest of the step, divided among the advised workers: the step becomes
        # the longer of the two (measured: 2 workers gave 2.31x on an 84 % I/O wait, 1.62x on 77 % CPU)
        return overlap_gain(ev, share, advised, handoff=not case.batch_function)
    if not case.cpu_bound_full and workers:
        # loading already overlaps; more workers produce batches at most advised/workers times faster
        high = min(input_gain_high(ev, share), max(1.0, advised / workers))
    else:
        high = input_gain_high(ev, share / 2)
    return 1.0 + (high - 1) * 0.5, high


def _cpu_shared_gain(ev: Evidence, case: _InputCase) -> tuple[float, float] | None:
    """The gain of moving CPU-bound loading off the training thread into ``advised`` workers on the cores
    the machine shares (`cpu_worker_gain`); None where that model does not apply (a batch function, I/O
    waits, workers already there, a saturated CPU) or the load was not measured."""
    if case.batch_function or case.cpu_bound_full or case.workers or waits_on_io(ev):
        return None
    return cpu_worker_gain(ev, case.share, case.advised)


def _input_gain_note(ev: Evidence, case: _InputCase) -> str:
    """Where the gain range comes from, and whether the idle CPU capped it."""
    others = other_runnable_tasks(ev)
    shared = _cpu_shared_gain(ev, case)
    if shared is not None and others is not None:
        busy = (
            (
                " (other processes keep the cores busy: a changing load moves the gain)"
                if contended(ev)
                else ""
            )
            + (
                "; the loading waited for a core most of its time, so the training thread, blocking on the "
                "workers instead, computes in bursts the scheduler favours: high end widened by the workers' "
                "scheduler shares"
                if bursts_favoured(ev) and on_gpu(ev)
                else ""
            )
            + (
                f"; the training thread was queued for a core {ev.loader.loader_runq_pct:.0f} % of its "
                "loading (it computes in bursts once it blocks on a worker instead): the high end starts "
                "from that measured rate, the fewest other tasks after (at most each worker's scheduler "
                "share on top of their fair share)"
                if not on_gpu(ev) and (ev.loader.loader_runq_pct or 0.0) >= T.LOADER_RUNQ_CONTENDED_PCT
                else ""
            )
        )
        wide = (
            f"; the load measured during the run ranges over {others[0]:.1f}-{others[1]:.1f} other tasks, "
            "so this range cannot be narrow: profile again on a steadier machine to size the gain"
            if shared[1] / shared[0] > T.GAIN_NARROW_X
            else ""
        )
        return (
            f"CPU-bound loading moves to {case.advised} worker process(es) sharing "
            f"{ev.context.cpu_count} cores with {others[0]:.1f}-{others[1]:.1f} other runnable tasks "
            "(measured): each task runs cores / tasks of a core, so the step becomes the longest of the "
            "compute, a worker's share of the loading, and all the work over the run's cores; the range "
            f"assumes that load holds{_packed_note(ev, case, others[1])}{busy}{wide}"
        )
    if case.batch_function:
        note = (
            f"a prefetch thread hides the batch up to the rest of the step (low); {case.advised} workers "
            "divide it first (high)"
        )
    elif not case.cpu_bound_full:
        note = (
            f"loading overlaps compute, {case.advised} workers dividing it: the step becomes the longer "
            "of the two"
        )
    else:
        note = "if loading fully overlaps compute, the wait disappears from the step"
    capped = cpu_cap(ev) is not None
    busy = (
        f"; other processes used {ev.context.other_cpu_pct:.0f} % of the CPU, so the range cannot be narrow "
        "(each worker also takes a scheduler share the run did not have: high widened by that)"
        if contended(ev) and ev.context.other_cpu_pct is not None
        else ""
    )
    return note + ("; capped by the idle CPU measured" if capped else "") + busy


def _packed_note(ev: Evidence, case: _InputCase, most: float) -> str:
    """On a CPU job whose cores others keep busy: the low end packs the run's tasks on the cores left."""
    cores = ev.context.cpu_count
    if on_gpu(ev) or not cores:
        return ""
    room = packed_room(cores, most + own_extra_cores(ev), 1 + case.advised)
    if room >= cores:
        return ""
    return (
        f"; low end: the training thread and its worker(s) wake each other and end up sharing the {room:.2g} "
        "core(s) the other tasks leave (its compute competes with their loading and both sides of each "
        "batch's hand-off), so the fix can slow the step when the cores are busy"
    )


def _input_summary(ev: Evidence, case: _InputCase) -> str:
    """One sentence: how much of a typical step the input takes, where, and what the device does meanwhile."""
    share, frames, workers = case.share, case.frames, case.workers
    if case.batch_function:
        what = (
            f"{share:.1f} % of a typical step prepares the next batch on the training thread before the "
            "forward" + (f" (most sampled: {frames_text(frames)})" if frames else "")
        )
    else:
        what = (
            f"{share:.1f} % of a typical step (outlier steps trimmed) is spent waiting for the next batch"
            + (f" (num_workers={workers})" if workers is not None else "")
        )
    idle = "the device idles meanwhile" if on_gpu(ev) else "the computation stalls meanwhile"
    overall = ev.steps.phase_pct("data_wait")
    typical = input_share_pct(ev)
    if overall is not None and typical is not None and abs(overall - typical) >= 1.0:
        # the phase table is the mean over every measured step: say both, so the two agree
        what += f"; {overall:.1f} % over all measured steps, as in the phase table"
    return f"{what}; {idle}."


def _rounded(pair: tuple[float, float] | None) -> list[float] | None:
    return None if pair is None else [round(pair[0], 2), round(pair[1], 2)]


def input_bound(ev: Evidence) -> Finding | None:
    """The loop waits for its next batch (DataLoader wait plus batch preparation on the training thread)
    at least ``INPUT_WAIT_MODERATE_PCT`` of a typical step: advise workers or a prefetch thread."""
    loader_share = input_share_pct(ev) or 0.0
    # host time before a forward, less what its sampled frames show is not batch preparation (logging)
    # (at the sampled share's lower bound: a dozen samples cannot make a stray one a tenth of the step)
    host_share = (typical_share_pct(ev, "host_input") or 0.0) * input_fraction_low(ev)
    share = loader_share + host_share
    if share < T.INPUT_WAIT_MODERATE_PCT or (host_share > loader_share and host_share < T.HOST_INPUT_MIN_PCT):
        return None
    workers, advised = ev.loader.loader_num_workers, suggested_workers(ev)
    batch_function = host_share > loader_share
    case = _InputCase(
        share=share,
        batch_function=batch_function,
        cpu_bound_full=_cpu_bound_full(ev, batch_function, workers, advised),
        workers=workers,
        advised=advised,
        frames=ranked([r for r in gap_rows(ev) if r["phase"] == "host_input" and r["input"]]),
    )
    fix, snippet = _input_fix(ev, case)
    low, high = _input_gain(ev, case)
    spread = step_spread(ev)
    note = _input_gain_note(ev, case)
    if spread is not None:
        low, high = low * spread[0], high * spread[1]
        note += (
            f"; widened by the measured steps' quartiles ({100 * spread[0]:.0f}-{100 * spread[1]:.0f} % of "
            "the median step): another run's typical step moves that much"
        )
    return Finding(
        id="input_bound",
        title="The training loop waits for data",
        severity=severity_for_gain("high" if share >= T.INPUT_WAIT_HIGH_PCT else "medium", high),
        confidence=confidence(ev),
        category="input",
        summary=_input_summary(ev, case),
        metrics={
            "input_wait_pct": round(share, 2),
            "data_wait_pct": round(loader_share, 2),
            "data_wait_pct_all_steps": None
            if ev.steps.phase_pct("data_wait") is None
            else round(ev.steps.phase_pct("data_wait") or 0.0, 2),
            "host_input_pct": round(host_share, 2),
            "input_source": "batch_function" if batch_function else "dataloader",
            "loader_num_workers": workers,
            "cpu_util_pct": ev.context.cpu_util_pct,
            "suggested_num_workers": None if case.cpu_bound_full else advised,
            "suggested_prefetch_factor": None if case.cpu_bound_full or batch_function else 4,
            "top_frames": [r["frame"] or r["leaf"] for r in case.frames],
            "loader_runq_pct": ev.loader.loader_runq_pct,
            "other_runnable_tasks": _rounded(other_runnable_tasks(ev)),
        },
        fix=fix,
        fix_snippet=snippet,
        gain=Gain("throughput_x", low, high, note),
        source=ev.source,
        tools=("torch.utils.data.DataLoader", "NVIDIA DALI")
        if case.cpu_bound_full
        else ("torch.utils.data.DataLoader",),
    )


def loader_cpu_saturated(ev: Evidence) -> Finding | None:
    """The loop waits for data while the measured CPU is already saturated: more workers cannot help,
    only cheaper samples or more cores (reads the input share, ``cpu_util_pct``, ``cpu_count``)."""
    share = input_share_pct(ev)
    if share is None or share < T.INPUT_WAIT_MODERATE_PCT or not cpu_saturated(ev):
        return None
    assert ev.context.cpu_util_pct is not None
    shared = "" if on_gpu(ev) else " (on a CPU-only run the model's computation shares those cores)"
    return Finding(
        id="loader_cpu_saturated",
        title="The CPU cannot prepare batches faster: more workers will not help",
        severity="medium",
        confidence="high",
        category="input",
        summary=f"Data loading waits {share:.1f} % of the step while the CPU is "
        f"{ev.context.cpu_util_pct:.0f} % busy"
        + (f" on {ev.context.cpu_count} cores" if ev.context.cpu_count else "")
        + shared
        + ".",
        metrics={
            "input_wait_pct": round(share, 2),
            "cpu_util_pct": ev.context.cpu_util_pct,
            "cpu_count": ev.context.cpu_count,
            "loader_num_workers": ev.loader.loader_num_workers,
        },
        fix=(
            "Make each sample cheaper: move decoding/augmentation to the GPU, pre-process the dataset once, "
            "or use a machine with more CPU cores per GPU."
        ),
        fix_snippet=(
            "# GPU decode + augment: nvidia.dali.fn.decoders.image(..., device='mixed'), or cache "
            "pre-processed tensors to disk"
        ),
        gain=Gain("throughput_x", 1.0, speedup_from_saving(share), "bounded by the input wait share"),
        source=ev.source,
        tools=("NVIDIA DALI", "torchvision.io.decode_jpeg(device='cuda')"),
    )


def pageable_copies(ev: Evidence) -> Finding | None:
    """Host-to-device copies read pageable memory (``pageable_copy_pct`` of H2D bytes) and take a visible
    share of the step (``h2d_copy_pct``): pinned memory copies faster and overlaps compute."""
    share, copy_pct = ev.activity.pageable_copy_pct, ev.activity.h2d_copy_pct
    if share is None or share < T.PAGEABLE_SHARE_PCT:
        return None
    if copy_pct is not None and copy_pct < T.PAGEABLE_MIN_COPY_PCT:
        return None
    return Finding(
        id="pageable_copies",
        title="Host-to-device copies come from pageable memory",
        severity="medium" if (copy_pct or 0) >= T.PAGEABLE_COPY_MODERATE_PCT else "low",
        confidence=confidence(ev),
        category="input",
        summary=f"{share:.0f} % of host-to-device copies read pageable memory"
        + (f", taking {copy_pct:.1f} % of the step" if copy_pct is not None else "")
        + "; they cannot overlap with compute and run at a fraction of PCIe speed.",
        metrics={"pageable_copy_pct": round(share, 2), "h2d_copy_pct": copy_pct},
        fix="Pin host memory and copy asynchronously.",
        fix_snippet='DataLoader(..., pin_memory=True)\nx = x.to("cuda", non_blocking=True)',
        gain=Gain(
            "step_time_pct",
            0.0,
            round((copy_pct or 0) * 0.5, 2),
            "pinned copies run ~2× faster and overlap with compute",
        ),
        source=ev.source,
    )
