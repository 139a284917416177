"""The rules: each reads Evidence and returns a Finding or None. Thresholds come from `thresholds`.

A rule fires only on the fields it needs; it states how sure it is (measured directly:
high; derived or predicted: medium/low) and what the fix should buy, as a range.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable
from itertools import pairwise

from gpuwise.diagnose import thresholds as T
from gpuwise.diagnose.evidence import Evidence
from gpuwise.diagnose.finding import Confidence, Finding, Gain
from gpuwise.units import GiB

Rule = Callable[[Evidence], "Finding | None"]
RULES: list[Rule] = []
_MAD_TO_SIGMA = 1.4826  # median absolute deviation × this estimates σ of normally distributed steps


def rule(func: Rule) -> Rule:
    RULES.append(func)
    return func


def _confidence(ev: Evidence) -> Confidence:
    return "low" if ev.source == "prediction" else "high"


def _speedup_from_saving(saving_pct: float) -> float:
    """Removing saving_pct of the step time speeds the step up by this factor."""
    return 1.0 / (1.0 - min(saving_pct, T.MAX_REMOVABLE_STEP_PCT) / 100.0)


def input_share_pct(ev: Evidence) -> float | None:
    """The data-wait share of a typical step: trimmed phases when measured (one 800 ms stall must not
    dilute it below a threshold), else the measured share."""
    typical = ev.phase_s_typical or {}
    if "data_wait" in typical and sum(typical.values()) > 0:
        return 100.0 * typical["data_wait"] / sum(typical.values())
    if ev.input_wait_pct is not None:
        return ev.input_wait_pct
    return ev.phase_pct("data_wait")


def cpu_saturated(ev: Evidence) -> bool:
    """The run's processes already keep the cores busy: a *measured* CPU share, never a worker count
    (workers waiting on I/O sleep, so num_workers >= cores says nothing about the CPU)."""
    return ev.cpu_util_pct is not None and ev.cpu_util_pct >= T.CPU_SATURATED_PCT


def _waits_on_io(ev: Evidence) -> bool:
    """The loader waits on I/O (disk, network, sleeps) rather than computing. Best read from the training
    thread's CPU during its own batch loads (num_workers=0); else from the process tree's CPU share, which
    a loaded machine or a 2-core box blurs (one busy thread is only 50 % of 2 cores)."""
    if ev.loader_wait_cpu_pct is not None:
        return ev.loader_wait_cpu_pct < T.LOADER_IO_WAIT_THREAD_CPU_PCT
    return ev.cpu_util_pct is not None and ev.cpu_util_pct < T.LOADER_IO_WAIT_CPU_PCT


def _on_gpu(ev: Evidence) -> bool:
    """A CPU-only run has no device to idle, nothing to pin; traces and predictions are GPU runs."""
    return ev.device != "cpu"


def suggested_workers(ev: Evidence) -> int:
    """Workers that fit the measured machine: an I/O wait needs no free core (workers sleep), a
    CPU-bound loader gets only the cores the run leaves idle (on 2 cores: 1, not 2)."""
    cores = ev.cpu_count or 4
    if _waits_on_io(ev):
        return max(2, min(T.LOADER_MAX_WORKERS, cores - 1))
    # CPU-bound: the cores other processes leave, less what the run's compute uses beyond the training
    # thread (whose loading moves to the workers). Measured on 2 idle cores, a single-threaded run with a
    # 77 % CPU-bound wait: 1 worker 0.92x, 2 workers 1.62x; the issue's run at 60 % of 2 cores (compute
    # on 1.2 cores) was slower with 2 workers (0.90x): floor(2 - 0.2) = 1.
    if ev.cpu_util_pct is None:  # not measured: leave the training thread its core
        return max(1, min(T.LOADER_MAX_WORKERS, cores - 1))
    own_cores = cores * ev.cpu_util_pct / 100
    spare = cores * (1 - (ev.other_cpu_pct or 0.0) / 100) - max(0.0, own_cores - 1)
    return max(1, min(T.LOADER_MAX_WORKERS, math.floor(spare + 1e-9)))


def _cpu_cap(ev: Evidence) -> float | None:
    """The most CPU-bound work can speed up by running in parallel: the CPU other processes leave over
    what this run uses now (None when not measured, or the loader waits on I/O)."""
    if ev.cpu_util_pct is None or ev.cpu_util_pct <= 0 or _waits_on_io(ev):
        return None
    free = max(ev.cpu_util_pct, 100.0 - (ev.other_cpu_pct or 0.0))
    return max(1.0, free / ev.cpu_util_pct)


def _input_gain_high(ev: Evidence, share: float) -> float:
    """Amdahl on the wait, and never more than the idle CPU can give: a run using u of the cores
    cannot speed up by more than 1/u by doing CPU work in parallel (unless the wait is I/O)."""
    high = _speedup_from_saving(share)
    cap = _cpu_cap(ev)
    return high if cap is None else min(high, cap)


# The profiler's framework callbacks label their runs so when the user gives no label.
_FRAMEWORK_LABELS = {"transformers.Trainer": "hf-trainer", "lightning.Trainer": "lightning"}


def detected_framework(ev: Evidence) -> str:
    return ev.framework or _FRAMEWORK_LABELS.get(ev.label, "")


def _loader_snippet(ev: Evidence, workers: int) -> str:
    """The loader settings in the form the detected framework takes them."""
    pin = _on_gpu(ev)
    framework = detected_framework(ev)
    if framework == "hf-trainer":
        return (
            f"TrainingArguments(..., dataloader_num_workers={workers}, "
            + ("dataloader_pin_memory=True, " if pin else "dataloader_pin_memory=False, ")
            + "dataloader_persistent_workers=True, dataloader_prefetch_factor=4)"
        )
    args = f"num_workers={workers}, " + ("pin_memory=True, " if pin else "") + "persistent_workers=True"
    if framework == "lightning":
        return (
            "# in your LightningDataModule\n"
            "def train_dataloader(self):\n"
            f"    return DataLoader(self.train_set, batch_size=..., {args}, prefetch_factor=4)"
        )
    return f"DataLoader(dataset, batch_size=..., {args},\n           prefetch_factor=4)" + (
        "\n# and in the loop: batch = batch.to(device, non_blocking=True)" if pin else ""
    )


def typical_share_pct(ev: Evidence, phase: str) -> float | None:
    """A phase's share of a typical step: trimmed phases when measured, else the mean step's."""
    typical = ev.phase_s_typical or {}
    if phase in typical and sum(typical.values()) > 0:
        return 100.0 * typical[phase] / sum(typical.values())
    return ev.phase_pct(phase)


def _gap_rows(ev: Evidence) -> list[dict]:
    """The sampled frames of the host gaps, each with ``step_pct`` (its gap's share of a typical step
    times its share of that gap's samples) and ``input`` (it looks like batch preparation)."""
    shares = {phase: typical_share_pct(ev, phase) or 0.0 for phase in ("host_input", "other")}
    return [
        {
            **r,
            "step_pct": shares.get(r.get("phase", ""), 0.0) * r.get("pct", 0.0) / 100,
            "input": _looks_like_input(r),
        }
        for r in ev.host_frames or []
        if r.get("phase") in shares
    ]


def _input_fraction(ev: Evidence) -> float:
    """Of the host time before a forward, the sampled part that prepares batches (1 when nothing was
    sampled: the position alone says batch preparation)."""
    rows = [r for r in _gap_rows(ev) if r["phase"] == "host_input"]
    sampled = sum(r["pct"] for r in rows)
    return sum(r["pct"] for r in rows if r["input"]) / sampled if sampled else 1.0


def _ranked(rows: list[dict], limit: int = 3) -> list[dict]:
    """Most time first, rows with a user frame before those without one; stray samples (below
    ``FRAME_MIN_STEP_PCT`` of the step) are left out after the first."""
    ranked = sorted(rows, key=lambda r: (not r.get("frame"), -r["step_pct"]))
    return [r for i, r in enumerate(ranked[:limit]) if i == 0 or r["step_pct"] >= T.FRAME_MIN_STEP_PCT]


def _frames_text(rows: list[dict]) -> str:
    return "; ".join(
        f"{r['frame'] or r['leaf']} (~{r['step_pct']:.0f} % of the step)"
        + (f" in {r['leaf']}" if r["frame"] and r["leaf"] != r["frame"] else "")
        for r in rows
    )


def _overlap_gain(ev: Evidence, share: float, workers: int) -> tuple[float, float]:
    """Speed-up when ``share`` % of the step overlaps the rest instead of preceding it: one prefetch
    thread hides it up to the rest of the step (the step becomes the longer of the two); ``workers``
    loader processes divide it first. Never more than the idle CPU can give to CPU-bound work. When
    one thread already reaches the ceiling, the low end is half the ideal gain."""
    rest = max(100.0 - share, 100.0 - T.MAX_REMOVABLE_STEP_PCT)
    low = 100.0 / max(rest, share)
    high = 100.0 / max(rest, share / max(1, workers))
    cap = _cpu_cap(ev)
    high = high if cap is None else min(high, cap)
    # the overlap is rarely perfect (the batch's Python holds the GIL against the step's): half of it
    return min(low, 1.0 + (high - 1.0) * 0.5 if low >= high else low), high


def _function_of(row: dict | None) -> str:
    """'train.py:42 get_batch' -> 'get_batch' ('' when nothing was sampled)."""
    where = (row or {}).get("frame") or (row or {}).get("leaf") or ""
    return where.rsplit(" ", 1)[-1] if " " in where else ""


def _looks_like_input(row: dict | None) -> bool:
    """Batch preparation by its function's name (get_batch, load_sample, collate, ...) or its library."""
    name = _function_of(row).lower()
    leaf = ((row or {}).get("leaf") or "").lower()
    return any(word in name for word in T.INPUT_FUNCTION_WORDS) or leaf.startswith(T.INPUT_LIBRARY_FILES)


def _batch_function_fix(ev: Evidence, where: str, function: str = "") -> tuple[str, str]:
    """Overlap a hand-written batch function with compute, in the form the framework takes."""
    if detected_framework(ev):
        return (
            "Batches are prepared on the training thread before each forward: move that work into the "
            "dataset and let the framework's loader run it in worker processes.",
            _loader_snippet(ev, suggested_workers(ev)),
        )
    copy = (
        "; pin each batch and copy it with non_blocking=True so the copy overlaps compute"
        if _on_gpu(ev)
        else ""
    )
    fix = (
        f"The batch is prepared on the training thread before each forward{where}: build the next batch "
        "while this step computes, on a background thread (a small prefetch queue), or wrap it in a Dataset "
        f"served by a DataLoader with num_workers={suggested_workers(ev)}{copy}."
    )
    to_device = (
        "\nx, y = x.pin_memory().to(device, non_blocking=True), y.pin_memory().to(device, non_blocking=True)"
        if _on_gpu(ev)
        else ""
    )
    snippet = (
        "import queue, threading\n"
        "def prefetch(make_batch, depth=2):\n"
        "    q = queue.Queue(maxsize=depth)\n"
        "    def fill():\n"
        "        while True:\n"
        "            q.put(make_batch())\n"
        "    threading.Thread(target=fill, daemon=True).start()\n"
        "    while True:\n"
        "        yield q.get()\n"
        f"batches = prefetch(lambda: {function or 'get_batch'}(...))\n"
        "# in the loop: X, Y = next(batches)"
    )
    return fix, snippet + to_device


@rule
def input_bound(ev: Evidence) -> Finding | None:
    loader_share = input_share_pct(ev) or 0.0
    # host time before a forward, less what its sampled frames show is not batch preparation (logging)
    host_share = (typical_share_pct(ev, "host_input") or 0.0) * _input_fraction(ev)
    share = loader_share + host_share
    if share < T.INPUT_WAIT_MODERATE_PCT or (host_share > loader_share and host_share < T.HOST_INPUT_MIN_PCT):
        return None
    workers = ev.loader_num_workers
    advised = suggested_workers(ev)
    suggested: int | None = advised
    batch_function = host_share > loader_share
    cpu_bound_full = not batch_function and (
        cpu_saturated(ev)
        or (
            not _waits_on_io(ev)
            and ev.cpu_util_pct is not None
            and workers is not None
            and advised <= workers
        )
    )
    frames = _ranked([r for r in _gap_rows(ev) if r["phase"] == "host_input" and r["input"]])
    if batch_function:
        where = f" ({frames[0]['frame'] or frames[0]['leaf']})" if frames else ""
        fix, snippet = _batch_function_fix(ev, where, _function_of(frames[0] if frames else None))
    elif cpu_bound_full:
        suggested = None
        fix = (
            "The loader already uses the cores the run leaves free: make each sample cheaper (decode/augment "
            "on the GPU, pre-process offline, cache decoded data) rather than adding workers."
        )
        snippet = (
            "# e.g. NVIDIA DALI or torchvision.io.decode_jpeg(device='cuda'); or pre-tokenize / pre-resize "
            "once and load arrays"
        )
    else:
        why = (
            f" The CPU is only {ev.cpu_util_pct:.0f} % busy: the loader waits on I/O, so workers overlap it."
            if _waits_on_io(ev) and ev.cpu_util_pct is not None
            else ""
        )
        fix = (
            f"Load batches in parallel and overlap them with compute: num_workers={advised}, "
            + ("pin_memory=True, " if _on_gpu(ev) else "")
            + "persistent_workers=True, prefetch_factor=4."
            + why
        )
        snippet = _loader_snippet(ev, advised)
    if batch_function or (not cpu_bound_full and not workers):
        # the batch overlaps the rest of the step, divided among the advised workers: the step becomes
        # the longer of the two (measured: 2 workers gave 2.31x on an 84 % I/O wait, 1.62x on 77 % CPU)
        low, high = _overlap_gain(ev, share, advised)
    elif not cpu_bound_full and workers:
        # loading already overlaps; more workers produce batches at most advised/workers times faster
        high = min(_input_gain_high(ev, share), max(1.0, advised / workers))
        low = 1.0 + (high - 1) * 0.5
    else:
        high = _input_gain_high(ev, share / 2)
        low = 1.0 + (high - 1) * 0.5
    idle = "the device idles meanwhile" if _on_gpu(ev) else "the computation stalls meanwhile"
    what = (
        f"{share:.1f} % of a typical step prepares the next batch on the training thread before the forward"
        + (f" (most sampled: {_frames_text(frames)})" if frames else "")
        if batch_function
        else f"{share:.1f} % of a typical step (outlier steps trimmed) is spent waiting for the next batch"
        + (f" (num_workers={workers})" if workers is not None else "")
    )
    return Finding(
        id="input_bound",
        title="The training loop waits for data",
        severity="high" if share >= T.INPUT_WAIT_HIGH_PCT else "medium",
        confidence=_confidence(ev),
        category="input",
        summary=f"{what}; {idle}.",
        metrics={
            "input_wait_pct": round(share, 2),
            "data_wait_pct": round(loader_share, 2),
            "host_input_pct": round(host_share, 2),
            "input_source": "batch_function" if batch_function else "dataloader",
            "loader_num_workers": workers,
            "cpu_util_pct": ev.cpu_util_pct,
            "suggested_num_workers": suggested,
            "suggested_prefetch_factor": None if cpu_bound_full or batch_function else 4,
            "top_frames": [r["frame"] or r["leaf"] for r in frames],
        },
        fix=fix,
        fix_snippet=snippet,
        gain=Gain(
            "throughput_x",
            low,
            high,
            (
                f"a prefetch thread hides the batch up to the rest of the step (low); {advised} workers "
                "divide it first (high)"
                if batch_function
                else f"loading overlaps compute, {advised} workers dividing it: the step becomes the longer "
                "of the two"
                if not cpu_bound_full
                else "if loading fully overlaps compute, the wait disappears from the step"
            )
            + (
                "; capped by the idle CPU measured"
                if ev.cpu_util_pct is not None and not _waits_on_io(ev)
                else ""
            ),
        ),
        source=ev.source,
        tools=("torch.utils.data.DataLoader", "NVIDIA DALI")
        if cpu_bound_full
        else ("torch.utils.data.DataLoader",),
    )


@rule
def loader_cpu_saturated(ev: Evidence) -> Finding | None:
    share = input_share_pct(ev)
    if share is None or share < T.INPUT_WAIT_MODERATE_PCT or not cpu_saturated(ev):
        return None
    assert ev.cpu_util_pct is not None
    shared = "" if _on_gpu(ev) else " (on a CPU-only run the model's computation shares those cores)"
    return Finding(
        id="loader_cpu_saturated",
        title="The CPU cannot prepare batches faster: more workers will not help",
        severity="medium",
        confidence="high",
        category="input",
        summary=f"Data loading waits {share:.1f} % of the step while the CPU is {ev.cpu_util_pct:.0f} % busy"
        + (f" on {ev.cpu_count} cores" if ev.cpu_count else "")
        + shared
        + ".",
        metrics={
            "input_wait_pct": round(share, 2),
            "cpu_util_pct": ev.cpu_util_pct,
            "cpu_count": ev.cpu_count,
            "loader_num_workers": ev.loader_num_workers,
        },
        fix=(
            "Make each sample cheaper: move decoding/augmentation to the GPU, pre-process the dataset once, "
            "or use a machine with more CPU cores per GPU."
        ),
        fix_snippet=(
            "# GPU decode + augment: nvidia.dali.fn.decoders.image(..., device='mixed'), or cache "
            "pre-processed tensors to disk"
        ),
        gain=Gain("throughput_x", 1.0, _speedup_from_saving(share), "bounded by the input wait share"),
        source=ev.source,
        tools=("NVIDIA DALI", "torchvision.io.decode_jpeg(device='cuda')"),
    )


@rule
def unexplained_host_time(ev: Evidence) -> Finding | None:
    """Host time outside every hooked phase that is not batch preparation before a forward: loss
    bookkeeping, logging, a batch fetched between forward and backward. Named by the training thread's
    sampled frames."""
    other = typical_share_pct(ev, "other")
    if other is None:
        return None
    # with the host time before a forward that its sampled frames show is not batch preparation
    share = other + (typical_share_pct(ev, "host_input") or 0.0) * (1.0 - _input_fraction(ev))
    if share < T.OTHER_HOST_TIME_PCT:
        return None
    frames = _ranked([r for r in _gap_rows(ev) if r["phase"] == "other" or not r["input"]])
    input_like = bool(frames) and _looks_like_input(frames[0])
    named = (
        f"; most sampled: {_frames_text(frames)}"
        if frames
        else "; no Python frame was sampled there (profile with the telemetry thread on to name it)"
    )
    if input_like:
        where = f" ({frames[0]['frame'] or frames[0]['leaf']})"
        fix, snippet = _batch_function_fix(ev, where, _function_of(frames[0]))
        fix = fix.replace("before each forward", "between the step's phases")
    else:
        fix = (
            "Look at the lines named: work that need not run every step (logging, metrics, evaluation, "
            "host copies of tensors) can run every N steps or off the training thread."
        )
        snippet = "if step % log_every == 0:\n    log(loss.item())  # not on every step"
    if input_like:
        low, high = _overlap_gain(ev, share, suggested_workers(ev))
    else:  # work that can leave the step entirely (logged every N steps): Amdahl on its share
        low, high = 1.0, _speedup_from_saving(share)
    return Finding(
        id="unexplained_host_time",
        title="Host work outside forward, backward and the optimizer takes much of the step",
        severity="high" if share >= T.OTHER_HOST_TIME_HIGH_PCT else "medium",
        confidence="medium" if frames else "low",
        category="input" if input_like else "host",
        summary=f"{share:.1f} % of each step runs on the host outside forward, backward, the optimizer and "
        f"data loading{named}.",
        metrics={
            "other_pct": round(share, 2),
            "top_frames": [r["frame"] or r["leaf"] for r in frames],
            "frame_step_pcts": [round(r["step_pct"], 1) for r in frames],
            "looks_like_input": input_like,
        },
        fix=fix,
        fix_snippet=snippet,
        gain=Gain(
            "throughput_x",
            round(low, 3),
            round(high, 3),
            "bounded by the measured share of that host work"
            + ("; overlapped with the rest of the step" if input_like else "; if it leaves the step"),
        ),
        source=ev.source,
    )


@rule
def sync_bound(ev: Evidence) -> Finding | None:
    share = ev.sync_wait_pct
    if share is None or share < T.SYNC_WAIT_MODERATE_PCT:
        return None
    calls = ev.sync_calls_per_step
    return Finding(
        id="sync_bound",
        title="The host blocks on the GPU every step",
        severity="high" if share >= T.SYNC_WAIT_HIGH_PCT else "medium",
        confidence=_confidence(ev),
        category="host",
        summary=f"The host waits for the device {share:.1f} % of the step"
        + (
            f" in {calls:.1f} synchronizing calls per step (.item(), .cpu(), torch.cuda.synchronize)"
            if calls
            else ""
        )
        + ", so kernels cannot be queued ahead.",
        metrics={"sync_wait_pct": round(share, 2), "sync_calls_per_step": calls},
        fix=(
            "Keep values on the device and read them rarely: accumulate the loss as a tensor and call "
            ".item() every N steps."
        ),
        fix_snippet=(
            "running_loss += loss.detach()          # no sync\n"
            "if step % log_every == 0:\n"
            "    print((running_loss / log_every).item()); running_loss.zero_()"
        ),
        gain=Gain(
            "throughput_x",
            1.0,
            _speedup_from_saving(share * 0.8),
            "most of the blocked time overlaps once the queue fills",
        ),
        source=ev.source,
    )


@rule
def launch_bound(ev: Evidence) -> Finding | None:
    tiny, idle = ev.tiny_kernel_pct, ev.gpu_idle_pct
    if tiny is None or idle is None or tiny < T.TINY_KERNEL_SHARE_PCT or idle < T.LAUNCH_GPU_IDLE_PCT:
        return None
    # Idle time spent waiting for data is the input pipeline's, not the launches'.
    if idle - (input_share_pct(ev) or 0.0) < T.LAUNCH_GPU_IDLE_PCT:
        return None
    # Launch-bound means launching the step's kernels takes about as long as the step itself.
    if ev.kernels_per_step and ev.step_time_s:
        launch_share = 100.0 * ev.kernels_per_step * T.LAUNCH_HOST_US_PER_KERNEL / (ev.step_time_s * 1e6)
        if launch_share < T.LAUNCH_STEP_SHARE_PCT:
            return None
    return Finding(
        id="launch_bound",
        title="Many tiny kernels: the GPU waits for the CPU to launch work",
        severity="high" if idle >= T.LAUNCH_GPU_IDLE_HIGH_PCT else "medium",
        confidence=_confidence(ev),
        category="host",
        summary=(
            f"{tiny:.0f} % of kernels run under {T.TINY_KERNEL_US:.0f} µs and the GPU is idle {idle:.0f} % "
            "of the time"
        )
        + (f" ({ev.kernels_per_step:.0f} kernels per step)" if ev.kernels_per_step else "")
        + ": launch overhead, not compute, sets the pace.",
        metrics={
            "tiny_kernel_pct": round(tiny, 2),
            "gpu_idle_pct": round(idle, 2),
            "kernels_per_step": ev.kernels_per_step,
            "host_busy_pct": ev.host_busy_pct,
        },
        fix=(
            "Fuse kernels and cut launches: torch.compile (mode='reduce-overhead' uses CUDA graphs), fused "
            "optimizers, a larger batch."
        ),
        fix_snippet=(
            'model = torch.compile(model, mode="reduce-overhead")\noptimizer = torch.optim.AdamW(params, '
            "lr=lr, fused=True)"
        ),
        gain=Gain(
            "throughput_x",
            1.2,
            _speedup_from_saving(idle * 0.7),
            "typical torch.compile gains on launch-bound models",
        ),
        source=ev.source,
        tools=("torch.compile", "CUDA graphs"),
    )


def _amp_prescription(dtype: str | None) -> tuple[str, str]:
    """(fix, snippet) for what the GPU supports: bf16 autocast, or fp16 with loss scaling (V100, T4)."""
    if dtype == "fp16":
        return (
            "Train with fp16 autocast and a GradScaler (this GPU has no bf16 or TF32 tensor cores).",
            "scaler = torch.cuda.amp.GradScaler()\n"
            'with torch.autocast(device_type="cuda", dtype=torch.float16):\n'
            "    loss = model(batch)\n"
            "scaler.scale(loss).backward(); scaler.step(optimizer); scaler.update()",
        )
    return (
        "Train with bf16 autocast (or at least allow TF32 matmuls).",
        "torch.backends.cuda.matmul.allow_tf32 = True\n"
        'with torch.autocast(device_type="cuda", dtype=torch.bfloat16):\n'
        "    loss = model(batch)",
    )


@rule
def no_mixed_precision(ev: Evidence) -> Finding | None:
    share, speedup = ev.fp32_matmul_pct, ev.tensor_core_speedup
    if share is None or share < T.FP32_MATMUL_SHARE_PCT or ev.amp_enabled:
        return None
    if speedup is None or speedup < T.TENSOR_CORE_SPEEDUP_MIN:
        return None
    # Amdahl: only the fp32 matmul time can shrink. A trace measures it; other sources bound it by
    # the busy share times the fp32 share of matmul work.
    time_pct = ev.fp32_matmul_time_pct
    if time_pct is None:
        if ev.source == "trace":
            return None
        busy = 100.0 - ev.gpu_idle_pct if ev.gpu_idle_pct is not None else ev.gpu_util_pct
        time_pct = (100.0 if busy is None else busy) * share / 100
    realistic = min(speedup, T.AMP_SPEEDUP_CAP_X)  # matmuls rarely reach the full peak ratio
    high = _speedup_from_saving(time_pct * (1 - 1 / realistic))
    low = _speedup_from_saving(time_pct * (1 - 1 / min(realistic, T.AMP_MATMUL_SPEEDUP_LOW_X)))
    if high < T.AMP_MIN_GAIN_X:
        return None
    dtype = ev.tensor_core_dtype or "16-bit"
    fix, snippet = _amp_prescription(ev.tensor_core_dtype)
    return Finding(
        id="no_mixed_precision",
        title="Matmuls run in fp32 on a GPU built for 16-bit",
        severity="high" if high >= T.AMP_HIGH_GAIN_X else "medium",
        confidence=_confidence(ev),
        category="compute",
        summary=(
            f"{share:.0f} % of matmul work runs in fp32, {time_pct:.1f} % of the "
            f"{'predicted' if ev.source == 'prediction' else 'measured'} time; "
            f"this GPU's {dtype} tensor cores are {speedup:.0f}× faster at peak."
        ),
        metrics={
            "fp32_matmul_pct": round(share, 2),
            "fp32_matmul_time_pct": round(time_pct, 2),
            "tensor_core_speedup": round(speedup, 2),
        },
        fix=fix,
        fix_snippet=snippet,
        gain=Gain(
            "throughput_x",
            low,
            high,
            f"Amdahl on the fp32 matmul share of time, the matmuls "
            f"{min(realistic, T.AMP_MATMUL_SPEEDUP_LOW_X):g}-{realistic:g}× faster "
            f"(capped at the {T.AMP_SPEEDUP_CAP_X:g}× measured end to end)",
        ),
        source=ev.source,
        tools=("torch.autocast",),
    )


@rule
def pageable_copies(ev: Evidence) -> Finding | None:
    share, copy_pct = ev.pageable_copy_pct, ev.h2d_copy_pct
    if share is None or share < T.PAGEABLE_SHARE_PCT:
        return None
    if copy_pct is not None and copy_pct < T.PAGEABLE_MIN_COPY_PCT:
        return None
    return Finding(
        id="pageable_copies",
        title="Host-to-device copies come from pageable memory",
        severity="medium" if (copy_pct or 0) >= T.PAGEABLE_COPY_MODERATE_PCT else "low",
        confidence=_confidence(ev),
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


@rule
def small_batch(ev: Evidence) -> Finding | None:
    headroom = ev.memory_headroom_pct
    util = ev.gpu_util_pct
    if util is None and ev.gpu_idle_pct is not None:
        util = 100.0 - ev.gpu_idle_pct
    if headroom is None or util is None:
        return None
    if headroom < T.SMALL_BATCH_HEADROOM_PCT or util >= T.SMALL_BATCH_GPU_UTIL_PCT:
        return None
    used = ev.memory_peak_bytes or 0
    capacity = ev.memory_capacity_bytes or 0
    target = capacity * (1 - T.TARGET_HEADROOM_PCT / 100)
    factor = max(1.0, target / used) if used else 1.0
    return Finding(
        id="small_batch",
        title="The batch is too small to keep the GPU busy",
        severity="medium",
        confidence=_confidence(ev),
        category="compute",
        summary=f"The GPU is {util:.0f} % utilized with {headroom:.0f} % of its memory free "
        f"({used / GiB:.1f} of {capacity / GiB:.1f} GiB used).",
        metrics={
            "gpu_util_pct": round(util, 2),
            "memory_headroom_pct": round(headroom, 2),
            "memory_peak_bytes": used,
            "memory_capacity_bytes": capacity,
            "batch_scale_possible": round(factor, 2),
        },
        fix=(
            f"Raise the per-GPU batch (memory allows up to ~{factor:.1f}× if activations dominate) and "
            "divide gradient accumulation by the same factor to keep the effective batch."
        ),
        fix_snippet=(
            "# e.g. per_device_train_batch_size *= 2; gradient_accumulation_steps //= 2  (same global batch)"
        ),
        gain=Gain(
            "throughput_x",
            1.1,
            min(2.0, 100.0 / max(util, 1.0)),
            "bounded by the idle share; larger batches also amortize launches",
        ),
        source=ev.source,
    )


@rule
def oom_risk(ev: Evidence) -> Finding | None:
    headroom = ev.memory_headroom_pct
    if headroom is None or headroom >= T.OOM_HEADROOM_PCT:
        return None
    peak, capacity = ev.memory_peak_bytes or 0, ev.memory_capacity_bytes or 0
    does_not_fit = headroom < 0
    fix = (
        "Cut the peak: gradient checkpointing, a smaller micro-batch with more accumulation, 8-bit optimizer "
        "states, sharding (FSDP/ZeRO), or LoRA/QLoRA."
    )
    limit = capacity * (1 - T.OOM_HEADROOM_PCT / 100)
    fitting = {label: b for label, b in ev.fit_options_bytes.items() if b <= limit}
    if fitting:  # the planner computed these by re-running the memory model on each change
        fix = (
            "What makes it fit (predicted peak): "
            + "; ".join(f"{k} ({b / GiB:.1f} GiB)" for k, b in list(fitting.items())[:4])
            + "."
        )
    elif ev.fit_options_bytes:
        fix = (
            "No single change tried fits this GPU ("
            + "; ".join(ev.fit_options_bytes)
            + "): combine them, shard over more GPUs or use a larger GPU."
        )
    return Finding(
        id="oom_risk",
        title="Does not fit in GPU memory" if does_not_fit else "Little memory headroom: out-of-memory risk",
        severity="critical" if does_not_fit else "high",
        confidence=_confidence(ev),
        category="memory",
        summary=f"Peak memory {peak / GiB:.1f} GiB of {capacity / GiB:.1f} GiB ({headroom:.1f} % headroom); "
        + (
            "it will fail with CUDA out of memory."
            if does_not_fit
            else "fragmentation or a longer sequence can tip it over."
        ),
        metrics={
            "memory_peak_bytes": peak,
            "memory_capacity_bytes": capacity,
            "memory_headroom_pct": round(headroom, 2),
            **({"fit_options_bytes": dict(ev.fit_options_bytes)} if ev.fit_options_bytes else {}),
        },
        fix=fix,
        fix_snippet=(
            "model.gradient_checkpointing_enable()\n# or: per_device_train_batch_size //= 2; "
            "gradient_accumulation_steps *= 2"
        ),
        gain=Gain(
            "memory_bytes",
            max(0.0, peak - capacity * (1 - T.TARGET_HEADROOM_PCT / 100)),
            max(0.0, peak - capacity * 0.5),
            f"to restore {T.TARGET_HEADROOM_PCT:.0f} % headroom",
        ),
        source=ev.source,
        tools=("PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True",),
    )


@rule
def throttling(ev: Evidence) -> Finding | None:
    relevant = {k: v for k, v in ev.throttle_pct.items() if any(s in k for s in ("thermal", "power"))}
    if not relevant:
        return None
    reason, share = max(relevant.items(), key=lambda kv: kv[1])
    if share < T.THROTTLE_MODERATE_PCT:
        return None
    thermal = "thermal" in reason
    return Finding(
        id="throttling",
        title="The GPU slows its clocks (" + ("thermal" if thermal else "power") + " limit)",
        severity="high" if share >= T.THROTTLE_HIGH_PCT else "medium",
        confidence="high",
        category="hardware",
        summary=f"NVML reports {reason} clock throttling in {share:.0f} % of samples"
        + (f"; max temperature {ev.temperature_c_max:.0f} °C" if ev.temperature_c_max is not None else "")
        + (f", mean SM clock {ev.sm_clock_mhz_mean:.0f} MHz" if ev.sm_clock_mhz_mean is not None else "")
        + ".",
        metrics={
            "throttle_pct": dict(ev.throttle_pct),
            "temperature_c_max": ev.temperature_c_max,
            "power_w_mean": ev.power_w_mean,
            "sm_clock_mhz_mean": ev.sm_clock_mhz_mean,
        },
        fix=(
            "Check cooling and airflow (thermal) or the power limit (`nvidia-smi -q -d POWER`); on cloud "
            "instances report the node."
        ),
        fix_snippet="nvidia-smi -q -d PERFORMANCE,TEMPERATURE,POWER",
        gain=Gain(
            "throughput_x", 1.0, 1.0 + share / 100 * 0.3, "clock recovery; depends on how far clocks drop"
        ),
        source=ev.source,
        tools=("nvidia-smi", "DCGM"),
    )


def _outlier_period(indices: list[int]) -> int | None:
    if len(indices) < T.OUTLIER_PERIOD_MIN_STEPS:
        return None
    gaps = {b - a for a, b in pairwise(indices)}
    period = gaps.pop() if len(gaps) == 1 else None
    return period if period and period > 1 else None  # back-to-back slow steps are a burst, not a period


def machine_busy(ev: Evidence) -> str | None:
    """Why the machine, not the script, may have slowed steps: other processes' CPU or steal time."""
    if ev.other_cpu_pct is not None and ev.other_cpu_pct >= T.MACHINE_BUSY_OTHER_CPU_PCT:
        return f"other processes used {ev.other_cpu_pct:.0f} % of the machine's CPU"
    if ev.cpu_steal_pct is not None and ev.cpu_steal_pct >= T.MACHINE_BUSY_STEAL_PCT:
        return f"the hypervisor took {ev.cpu_steal_pct:.0f} % of CPU time (steal)"
    return None


def outlier_limit_s(times: list[float]) -> float:
    """Steps slower than this are outliers. Judged against the typical step, median and a robust spread,
    so the outliers do not hide themselves; identical typical steps give MAD 0 and the floor applies
    (the standard deviation would let the outliers themselves raise the bar)."""
    median = statistics.median(times)
    mad = statistics.median(abs(t - median) for t in times) * _MAD_TO_SIGMA
    return median + T.OUTLIER_SIGMA * max(mad, T.OUTLIER_MIN_SPREAD_FRACTION * median)


@rule
def step_outliers(ev: Evidence) -> Finding | None:
    times = ev.step_times_s
    if len(times) < T.MIN_STEPS_FOR_STATISTICS:
        return None
    median = statistics.median(times)
    limit = outlier_limit_s(times)
    outliers = [i for i, t in enumerate(times) if t > limit]
    if not outliers:
        return None
    excess = sum(times[i] - median for i in outliers)
    cost_pct = 100.0 * excess / sum(times)
    if cost_pct < T.OUTLIER_MIN_COST_PCT:
        return None
    largest = max(times[i] - median for i in outliers)
    period = _outlier_period([i for i in outliers if times[i] - median >= T.OUTLIER_MAJOR_FRACTION * largest])
    busy = machine_busy(ev)
    head = (
        f"{len(outliers)} of {len(times)} steps exceed the typical {median * 1000:.1f} ms by more than "
        f"{T.OUTLIER_SIGMA:.0f}σ (slowest {max(times) * 1000:.1f} ms), costing {cost_pct:.1f} % of the run"
    )
    confidence: Confidence
    if period:
        # A fixed period is the script's own (checkpointing, evaluation); a busy machine only blurs it.
        cause = (
            f"; they recur every {period} steps (checkpointing, evaluation, logging or garbage collection?)"
        )
        confidence = "medium" if busy else _confidence(ev)
    elif busy:
        cause = f" while {busy}: the machine was busy, so these stalls are likely not the script's"
        confidence = "low"
    else:
        cause = " at no fixed period (garbage collection, a slow file system or another process?)"
        confidence = "low" if ev.source == "prediction" else "medium"
    script_fix = "Find what runs on those steps: move checkpoint saving/evaluation off the critical path " + (
        "(async checkpointing), avoid periodic host syncs, and call gc.freeze() after setup."
    )
    machine_only = busy is not None and not period
    return Finding(
        id="step_outliers",
        title="Some steps are much slower than the rest"
        + (" (the machine was busy)" if machine_only else ""),
        severity="low" if machine_only or cost_pct < T.OUTLIER_MODERATE_COST_PCT else "medium",
        confidence=confidence,
        category="host",
        summary=head + cause + ("." if not busy or machine_only else f"; {busy}."),
        metrics={
            "outlier_steps": outliers[:50],
            "typical_step_s": round(median, 6),
            "slowest_step_s": round(max(times), 6),
            "outlier_cost_pct": round(cost_pct, 2),
            "period_steps": period,
            "machine_busy": busy,
            "other_cpu_pct": ev.other_cpu_pct,
            "cpu_steal_pct": ev.cpu_steal_pct,
        },
        fix=(
            "Re-measure on a quiet machine (or with the job's cores reserved) before changing the script."
            if machine_only
            else script_fix
        ),
        fix_snippet=""
        if machine_only
        else (
            "import gc; gc.freeze()  # after model and data setup\n# "
            "torch.distributed.checkpoint.async_save(...) for checkpoints"
        ),
        gain=Gain(
            "step_time_pct", round(cost_pct * 0.5, 2), round(cost_pct, 2), "the excess time of the slow steps"
        ),
        source=ev.source,
    )


_TREND_MAX_POINTS = 200  # Theil-Sen is O(n²) in pairs: evenly thin longer series (20k pairs at most)


def theil_sen(steps: list[int], values: list[float]) -> tuple[float, float, float]:
    """(slope, lower bound of its two-sided confidence interval, intercept) over (step, value) points.

    The median of pairwise slopes ignores a few wild readings (a GC pass, a cache warming up) that
    make a least-squares slope or a "most deltas rise" count unreliable; the bound is Sen's (1968)
    rank interval, so a slope whose lower bound is above zero is a trend, not noise."""
    if len(steps) > _TREND_MAX_POINTS:
        stride = len(steps) / _TREND_MAX_POINTS
        picks = sorted({int(i * stride) for i in range(_TREND_MAX_POINTS)} | {len(steps) - 1})
        steps, values = [steps[i] for i in picks], [values[i] for i in picks]
    n = len(steps)
    slopes = sorted(
        (values[j] - values[i]) / (steps[j] - steps[i])
        for i in range(n)
        for j in range(i + 1, n)
        if steps[j] != steps[i]
    )
    slope = statistics.median(slopes)
    spread = T.MEMORY_TREND_Z * math.sqrt(n * (n - 1) * (2 * n + 5) / 18)
    low_index = max(0, min(len(slopes) - 1, math.floor((len(slopes) - spread) / 2)))
    intercept = statistics.median(v - slope * x for x, v in zip(steps, values, strict=True))
    return slope, slopes[low_index], intercept


def memory_measure(ev: Evidence) -> str:
    """What the memory readings count, in words for a summary (RSS is not allocated memory)."""
    measure = ev.memory_measure or next(
        (n.split(":", 1)[1].strip() for n in ev.notes if n.startswith("memory_per_step_bytes:")), ""
    )
    if "RSS" in measure:
        return "Process RSS"
    if "memory_allocated" in measure or "allocated" in measure.lower():
        return "Allocated device memory" if "cuda" in measure.lower() else "Allocated memory"
    if "heap" in measure:
        return "C heap in use"
    return "Live memory"


@rule
def memory_growth(ev: Evidence) -> Finding | None:
    mem = ev.memory_per_step_bytes
    steps = ev.memory_step_index if len(ev.memory_step_index) == len(mem) else list(range(len(mem)))
    if len(mem) < T.MEMORY_GROWTH_MIN_READINGS:
        return None
    span = steps[-1] - steps[0] + 1  # steps the readings cover
    if span < T.MIN_STEPS_FOR_STATISTICS:
        return None
    per_step, per_step_low, intercept = theil_sen(steps, mem)
    baseline = intercept + per_step * steps[0]  # the fitted level at the first reading
    if baseline <= 0 or per_step_low <= 0:
        return None
    growth_pct = 100.0 * per_step * (span - 1) / baseline
    if growth_pct < T.MEMORY_GROWTH_MIN_PCT:
        return None
    last = mem[-1]
    steps_left = None
    if ev.memory_capacity_bytes:
        steps_left = int(max(0, ev.memory_capacity_bytes - (ev.memory_peak_bytes or last)) / per_step)
    what = memory_measure(ev)
    return Finding(
        id="memory_growth",
        title="Memory grows every step (a leak)",
        severity="high" if growth_pct >= T.MEMORY_GROWTH_HIGH_PCT or steps_left is not None else "medium",
        confidence=_confidence(ev),
        category="memory",
        summary=(
            f"{what} rose {growth_pct:.1f} % over {span} steps (+{per_step / 2**20:.2f} MiB per step, "
            f"Theil–Sen trend; at least +{per_step_low / 2**20:.2f} MiB at 95 %)"
        )
        + (f"; at this rate memory runs out in ~{steps_left:,} steps." if steps_left is not None else "."),
        metrics={
            "growth_pct": round(growth_pct, 2),
            "bytes_per_step": round(per_step),
            "bytes_per_step_low": round(per_step_low),
            "measure": what,
            "first_bytes": mem[0],
            "last_bytes": last,
            "steps_until_oom": steps_left,
        },
        fix=(
            "Something keeps tensors (often the autograd graph) alive across steps: store loss.item() or "
            "loss.detach(), not loss."
        ),
        fix_snippet="losses.append(loss.detach())   # not losses.append(loss)\n# or: total += loss.item()",
        gain=Gain("memory_bytes", per_step * span * 0.5, per_step * span, "the growth seen during the run"),
        source=ev.source,
    )


@rule
def comm_bound(ev: Evidence) -> Finding | None:
    share = ev.comm_exposed_pct
    if share is None or share < T.COMM_EXPOSED_MODERATE_PCT:
        return None
    return Finding(
        id="comm_bound",
        title="Communication is not hidden behind compute",
        severity="high" if share >= T.COMM_EXPOSED_HIGH_PCT else "medium",
        confidence=_confidence(ev),
        category="communication",
        summary=f"{share:.0f} % of the step is collective communication with no compute running"
        + (
            f" ({ev.comm_overlap_pct:.0f} % of communication overlaps compute)"
            if ev.comm_overlap_pct is not None
            else ""
        )
        + ".",
        metrics={"comm_exposed_pct": round(share, 2), "comm_overlap_pct": ev.comm_overlap_pct},
        fix="Overlap and reduce communication: gradient accumulation with no_sync, larger DDP buckets, FSDP "
        "prefetch; "
        "keep tensor parallelism inside an NVLink domain.",
        fix_snippet=(
            "with model.no_sync():            # skip all-reduce on accumulation micro-steps\n"
            "    loss.backward()\n"
            "DDP(model, bucket_cap_mb=100, gradient_as_bucket_view=True)\n"
            "FSDP(model, forward_prefetch=True, backward_prefetch=BackwardPrefetch.BACKWARD_PRE)"
        ),
        gain=Gain(
            "throughput_x",
            1.0 + share / 200,
            _speedup_from_saving(share * 0.7),
            "exposed communication overlapped or removed",
        ),
        source=ev.source,
        tools=("NCCL", "torch.distributed"),
    )


@rule
def low_utilization(ev: Evidence) -> Finding | None:
    util = ev.gpu_util_pct
    if util is None and ev.gpu_idle_pct is not None:
        util = 100.0 - ev.gpu_idle_pct
    if util is None or util >= T.LOW_UTIL_MODERATE_PCT:
        return None
    return Finding(
        id="low_utilization",
        title="The GPU is idle much of the time",
        severity="high" if util < T.LOW_UTIL_HIGH_PCT else "medium",
        confidence=_confidence(ev),
        category="compute",
        summary=f"The GPU computes {util:.0f} % of the time; the other findings say where the rest goes.",
        metrics={"gpu_util_pct": round(util, 2), "gpu_idle_pct": ev.gpu_idle_pct},
        fix=(
            "Fix the causes listed with it (input, host syncs, launches, communication); if none is listed, "
            "profile with `gpuwise profile`."
        ),
        gain=Gain(
            "throughput_x",
            1.0,
            min(3.0, 100.0 / max(util, 1.0) * 0.8),
            "recovering idle time, rarely all of it",
        ),
        source=ev.source,
    )


@rule
def straggler(ev: Evidence) -> Finding | None:
    ranks = ev.rank_step_time_s
    if len(ranks) < 2:
        return None
    median = statistics.median(ranks.values())
    slow_rank, slow = max(ranks.items(), key=lambda kv: kv[1])
    if median <= 0:
        return None
    skew_pct = 100.0 * (slow - median) / median
    comm = ev.rank_comm_time_s
    if len(comm) >= 2 and max(comm.values()) > 0:
        # Collectives pace synchronous ranks alike: step times then differ by where each rank's profile
        # window began (PARAM DLRM: the rank that enters first waits longest and looks slowest). Who
        # waits least inside the collectives is the rank the others wait for.
        by_wait = _straggler_by_comm_wait(ev, median, skew_pct, slow_rank)
        others = [v for r, v in comm.items() if r != slow_rank]
        if by_wait is not None or (
            slow_rank in comm and others and comm[slow_rank] > statistics.median(others)
        ):
            return by_wait  # the longest step is mostly waiting in collectives: not the straggler
    if skew_pct < T.STRAGGLER_MODERATE_PCT:
        return None
    return Finding(
        id="straggler",
        title=f"Rank {slow_rank} is a straggler",
        severity="high" if skew_pct >= T.STRAGGLER_HIGH_PCT else "medium",
        confidence=_confidence(ev),
        category="distributed",
        summary=f"Rank {slow_rank} takes {slow * 1000:.1f} ms per step vs a median of {median * 1000:.1f} ms "
        f"(+{skew_pct:.0f} %); "
        "every other rank waits for it at each collective.",
        metrics={
            "straggler_rank": slow_rank,
            "rank_step_time_s": {str(k): v for k, v in ranks.items()},
            "skew_pct": round(skew_pct, 2),
        },
        fix=(
            "Check that rank's node: input shard size, data loader, thermal/power throttling, a slower GPU "
            "or link."
        ),
        fix_snippet="nvidia-smi -q -d PERFORMANCE   # on the straggler's node",
        gain=Gain("throughput_x", 1.0, 1.0 + skew_pct / 100, "all ranks run at the median pace"),
        source=ev.source,
    )


def _straggler_context(step_s: float, skew_pct: float, slow_rank: int, late: int) -> str:
    if skew_pct < T.STRAGGLER_MODERATE_PCT:
        return (
            f"Step times are equal ({step_s * 1000:.3g} ms, within {skew_pct:.1f} %): "
            "collectives synchronize the ranks. "
        )
    if slow_rank == late:
        return f"Rank {late} also has the longest step (+{skew_pct:.0f} % vs the median). "
    return (
        f"Rank {slow_rank}'s step looks {skew_pct:.0f} % longer than the median, but that is waiting: "
        "it sits longer in collectives than the others (profile windows that start apart make "
        "synchronized steps look unequal). "
    )


def _straggler_by_comm_wait(ev: Evidence, step_s: float, skew_pct: float, slow_rank: int) -> Finding | None:
    """Synchronous training hides a straggler's step time (collectives make every rank's step equal):
    the late rank shows up instead as the one that waits least inside each collective."""
    comm = ev.rank_comm_time_s
    late = min(comm, key=comm.__getitem__)
    others = statistics.median(v for r, v in comm.items() if r != late)
    gap_s = others - comm[late]
    consistent = _steps_late(ev, late)
    if consistent is not None:
        gap_s, late_pct = consistent
        if late_pct < T.STRAGGLER_CONSISTENT_STEPS_PCT:
            return None  # late in some steps only: the machine's noise, not a rank that is always behind
    gap_pct = 100.0 * gap_s / step_s
    if gap_pct < T.STRAGGLER_COMM_GAP_PCT:
        return None
    busy = machine_busy(ev)
    return Finding(
        id="straggler",
        title=f"Rank {late} is likely a straggler: the other ranks wait for it",
        severity="high" if gap_pct >= T.STRAGGLER_HIGH_PCT else "medium",
        confidence="low" if busy else "medium",  # inferred from who waits, not from its own step time
        category="distributed",
        summary=_straggler_context(step_s, skew_pct, slow_rank, late)
        + f"Rank {late} spends {comm[late] * 1000:.3g} ms per step in collectives vs {others * 1000:.3g} ms "
        f"on the other {len(comm) - 1} rank(s): it arrives last, and the others wait about "
        f"{gap_s * 1000:.3g} ms per step for it ({gap_pct:.0f} % of the step)"
        + (f", in {consistent[1]:.0f} % of the steps." if consistent is not None else ".")
        + (
            f" Meanwhile {busy}: a rank the machine gives less CPU lags the same way; check again on a "
            "quiet machine."
            if busy
            else ""
        ),
        metrics={
            "straggler_rank": late,
            "rank_step_time_s": {str(k): v for k, v in ev.rank_step_time_s.items()},
            "rank_comm_time_s": {str(k): v for k, v in comm.items()},
            "comm_wait_gap_s": gap_s,
            "comm_wait_gap_pct": round(gap_pct, 2),
            "late_steps_pct": None if consistent is None else round(consistent[1], 1),
            "skew_pct": round(skew_pct, 2),
        },
        fix=f"Find what rank {late} does more of before each collective: a larger input shard or slower "
        "loader, "
        "extra work on that rank (logging, checkpointing, evaluation), throttling or a slower GPU on its "
        "node.",
        fix_snippet="nvidia-smi -q -d PERFORMANCE   # on the straggler's node",
        gain=Gain(
            "throughput_x",
            1.0,
            _speedup_from_saving(100.0 * max(gap_s, others) / step_s),
            "at most, the others stop waiting in collectives: each step shrinks by their wait",
        ),
        source=ev.source,
    )


def _steps_late(ev: Evidence, late: int) -> tuple[float, float] | None:
    """From per-step waits (live runs): the median per-step gap between the other ranks' wait and the
    late rank's, and the share of steps in which the late rank waited less. None without the series."""
    series = ev.rank_comm_steps_s
    if not series or set(series) != set(ev.rank_comm_time_s):
        return None
    n = min(len(v) for v in series.values())
    if n < T.MIN_STEPS_FOR_STATISTICS:
        return None
    gaps = [
        statistics.median(w[i] for r, w in series.items() if r != late) - series[late][i] for i in range(n)
    ]
    return statistics.median(gaps), 100.0 * sum(g > 0 for g in gaps) / n


@rule
def no_flash_attention(ev: Evidence) -> Finding | None:
    scores, peak = ev.attention_scores_bytes, ev.memory_peak_bytes
    if not scores or not peak or ev.attention_impl == "flash":
        return None
    share = 100.0 * scores / peak
    if share < T.ATTENTION_SCORES_SHARE_PCT:
        return None
    return Finding(
        id="no_flash_attention",
        title="Attention materializes the full score matrix",
        severity="high" if share >= T.ATTENTION_SCORES_HIGH_PCT else "medium",
        confidence=_confidence(ev),
        category="memory",
        summary=(
            f"{ev.attention_impl or 'This'} attention keeps S×S scores: {scores / GiB:.1f} GiB, {share:.0f} "
            "% of the peak."
        ),
        metrics={
            "attention_scores_bytes": scores,
            "attention_scores_share_pct": round(share, 2),
            "attention_impl": ev.attention_impl,
        },
        fix=(
            "Use FlashAttention (or PyTorch SDPA's flash backend): exact attention in memory linear in the "
            "sequence length."
        ),
        fix_snippet=(
            'AutoModelForCausalLM.from_pretrained(..., attn_implementation="flash_attention_2")  # or "sdpa"'
        ),
        gain=Gain(
            "memory_bytes",
            scores * 0.9,
            float(scores),
            "the score matrices no longer exist; fewer HBM reads too",
        ),
        source=ev.source,
        tools=("FlashAttention",),
    )


@rule
def no_fused_optimizer(ev: Evidence) -> Finding | None:
    share = ev.phase_pct("optimizer")
    if ev.optimizer_fused is not False or share is None or share < T.OPTIMIZER_STEP_SHARE_PCT:
        return None
    return Finding(
        id="no_fused_optimizer",
        title="The optimizer step runs unfused",
        severity="low",
        confidence=_confidence(ev),
        category="compute",
        summary=(
            f"The AdamW update takes {share:.0f} % of the step with one kernel per parameter group "
            "(fused=False)."
        ),
        metrics={"optimizer_step_pct": round(share, 2)},
        fix="Use the fused AdamW kernel: same math, one launch for all parameters.",
        fix_snippet=(
            "torch.optim.AdamW(model.parameters(), lr=..., fused=True)\n# Hugging Face: "
            'TrainingArguments(optim="adamw_torch_fused")'
        ),
        gain=Gain(
            "step_time_pct",
            0.0,
            round(share / 2, 2),
            "at most half of the optimizer phase; the update stays bandwidth-bound",
        ),
        source=ev.source,
    )


@rule
def kv_cache_dominant(ev: Evidence) -> Finding | None:
    kv, peak, bits = ev.kv_cache_bytes, ev.memory_peak_bytes, ev.kv_cache_bits
    if not kv or not peak or bits is None or bits <= T.KV_CACHE_QUANTIZED_BITS:
        return None
    share = 100.0 * kv / peak
    if share < T.KV_CACHE_DOMINANT_PCT:
        return None
    saved = kv * (1 - T.KV_CACHE_QUANTIZED_BITS / bits)
    return Finding(
        id="kv_cache_dominant",
        title="The KV cache dominates memory",
        severity="medium",
        confidence=_confidence(ev),
        category="memory",
        summary=f"The KV cache holds {kv / GiB:.1f} GiB, {share:.0f} % of the peak, in {bits:.0f}-bit.",
        metrics={"kv_cache_bytes": kv, "kv_cache_share_pct": round(share, 2), "kv_cache_bits": bits},
        fix="Store the KV cache in FP8: twice the context or concurrency in the same memory.",
        fix_snippet="vllm serve MODEL --kv-cache-dtype fp8",
        gain=Gain("memory_bytes", saved, saved, f"{bits:.0f}-bit -> 8-bit cache"),
        source=ev.source,
        tools=("vLLM", "TensorRT-LLM"),
    )


@rule
def decode_memory_bound(ev: Evidence) -> Finding | None:
    if not ev.decode_bandwidth_bound or not ev.weight_bytes:
        return None
    weights, kv = float(ev.weight_bytes), float(ev.kv_cache_bytes or 0)
    bits = ev.weight_bits or 16
    quantize = bits >= T.DECODE_QUANTIZE_MIN_WEIGHT_BITS
    # Each decode step reads every weight once plus the cache: halving weight bytes speeds it by this much.
    speedup = (weights + kv) / (weights / 2 + kv) if quantize else 1.0
    return Finding(
        id="decode_memory_bound",
        title="Token generation is limited by memory bandwidth",
        severity="medium",
        confidence=_confidence(ev),
        category="memory",
        summary=f"Each generated token reads {weights / GiB:.1f} GiB of {bits:g}-bit weights"
        + (f" and {kv / GiB:.1f} GiB of KV cache" if kv else "")
        + " from memory; the tensor cores mostly wait.",
        metrics={"weight_bytes": int(weights), "weight_bits": bits, "kv_cache_bytes": int(kv)},
        fix=("Quantize weights to FP8/INT8 (half the bytes per token) and " if quantize else "")
        + "serve more requests per batch: each weight read then serves every sequence in the batch.",
        fix_snippet="vllm serve MODEL --quantization fp8 --max-num-seqs 64"
        if quantize
        else "vllm serve MODEL --max-num-seqs 64",
        gain=Gain("throughput_x", 1.0, round(speedup, 3), "per-token latency from halving weight bytes")
        if quantize
        else None,
        source=ev.source,
        tools=("vLLM", "TensorRT-LLM"),
    )


# --- recorded history (gpuwise monitor report): what a GPU's weeks cost, not how one step runs ------------
def _history_hours(ev: Evidence, floor: float) -> float | None:
    hours = ev.observed_gpu_hours
    return hours if hours is not None and hours >= floor else None


@rule
def idle_gpu_hours(ev: Evidence) -> Finding | None:
    hours = _history_hours(ev, T.FINOPS_MIN_GPU_HOURS)
    idle = ev.idle_time_pct
    if hours is None or idle is None or idle < T.FINOPS_IDLE_MODERATE_PCT:
        return None
    idle_h = hours * idle / 100
    cost = f" (${ev.idle_usd:,.2f})" if ev.idle_usd is not None else ""
    return Finding(
        id="idle_gpu_hours",
        title="GPUs held idle: the cost of waste",
        severity="high" if idle >= T.FINOPS_IDLE_HIGH_PCT else "medium",
        confidence="high",
        category="hardware",
        summary=f"Idle (busy < {T.MONITOR_IDLE_BUSY_PCT:.0f} %) {idle:.0f} % of {hours:,.1f} GPU-hours: "
        f"{idle_h:,.1f} GPU-hours paid for nothing{cost}.",
        metrics={
            "observed_gpu_hours": round(hours, 3),
            "idle_time_pct": round(idle, 2),
            "idle_gpu_hours": round(idle_h, 3),
            "idle_usd": None if ev.idle_usd is None else round(ev.idle_usd, 2),
        },
        fix=(
            "Release GPUs between jobs; run data preparation and evaluation as separate stages on CPUs or "
            "cheaper GPUs; share a lightly used GPU (MIG on A100/H100, MPS or time-slicing) or move to a "
            "smaller instance."
        ),
        fix_snippet="nvidia-smi mig -cgi 19,19,19 -C   # e.g. three 1g slices on an A100 (MIG-capable GPUs)",
        gain=Gain("cost_pct", idle / 2, idle, "the idle share of the GPU bill, if the hours are released"),
        source=ev.source,
        tools=("MIG", "MPS", "Kubernetes GPU time-slicing"),
    )


@rule
def chronic_low_busy(ev: Evidence) -> Finding | None:
    hours = _history_hours(ev, T.FINOPS_CHRONIC_MIN_GPU_HOURS)
    busy = ev.busy_in_use_pct
    if hours is None or busy is None or busy >= T.FINOPS_CHRONIC_BUSY_PCT:
        return None
    return Finding(
        id="chronic_low_busy",
        title="Chronically low busy % while in use: fix the pipeline before buying more GPUs",
        severity="high" if busy < T.LOW_UTIL_MODERATE_PCT else "medium",
        confidence="medium",  # busy % is an upper bound on how hard the SMs work (NVML utilization.gpu)
        category="compute",
        summary=f"While in use over {hours:,.0f} GPU-hours the GPU ran a kernel only {busy:.0f} % of the "
        "time "
        f"(KPI {T.FINOPS_CHRONIC_BUSY_PCT:.0f} %): more GPUs would idle the same way.",
        metrics={"busy_in_use_pct": round(busy, 2), "observed_gpu_hours": round(hours, 3)},
        fix=(
            "Profile a typical job (`gpuwise profile -- python train.py`) and fix input, host syncs and "
            "launch overheads first; add hardware only once busy % passes the KPI."
        ),
        gain=Gain(
            "throughput_x", 1.0, min(3.0, T.FINOPS_CHRONIC_BUSY_PCT / max(busy, 1.0)), "up to the busy KPI"
        ),
        source=ev.source,
        tools=("gpuwise profile", "gpuwise doctor"),
    )


@rule
def oversized_gpu(ev: Evidence) -> Finding | None:
    hours = _history_hours(ev, T.FINOPS_MIN_GPU_HOURS)
    headroom, fit = ev.memory_headroom_pct, ev.smaller_gpu
    if hours is None or headroom is None or fit is None or headroom <= T.FINOPS_OVERSIZED_HEADROOM_PCT:
        return None
    peak = (ev.memory_peak_bytes or 0) / GiB
    busy, kpi = float(fit["busy_in_use_pct"]), float(fit["busy_kpi_pct"])
    current = float(fit["current_usd_per_gpu_hour"])
    seen = f"Peak memory {peak:.1f} GiB ({headroom:.0f} % free at the peak), busy {busy:.0f} % while in use"
    metrics = {"memory_peak_bytes": ev.memory_peak_bytes, "memory_headroom_pct": round(headroom, 2)}
    title = (
        f"Memory headroom always above {T.FINOPS_OVERSIZED_HEADROOM_PCT:.0f} %: right-size or fill the GPU"
    )
    if fit["gpu"]:
        to, usd_h, saved = fit["gpu_name"], float(fit["usd_per_gpu_hour"]), float(fit["usd_saved"])
        return Finding(
            id="oversized_gpu",
            title=title,
            severity="medium",
            confidence="medium",  # from catalog peaks: `gpuwise plan --gpu ID` predicts the real speed
            category="hardware",
            summary=f"{seen}. The {to} ({fit['memory_bytes'] / GiB:.1f} GiB, ${usd_h:.2f}/h vs "
            f"${current:.2f}/h) holds it with {T.TARGET_HEADROOM_PCT:.0f} % to spare and would be "
            f"~{fit['projected_busy_pct']:.0f} % busy (by its {fit['limited_by']}; KPI {kpi:.0f} %): "
            f"${saved:,.2f} less over the {fit['in_use_gpu_hours']:,.1f} in-use GPU-hours.",
            metrics={**metrics, "smaller_gpu": dict(fit), "usd_saved": round(saved, 2)},
            fix=f"Move this work to the {to} (check its speed with `gpuwise plan --gpu {fit['gpu']}`).",
            gain=Gain(
                "cost_pct",
                0.0,
                100.0 * (1 - usd_h / current) if current > 0 else 0.0,
                "the price difference over the in-use hours",
            ),
            source=ev.source,
        )
    closest = fit.get("closest")
    why = (
        f"the closest, the {closest['gpu_name']}, would be ~{closest['projected_busy_pct']:.0f} % busy "
        f"(by its {closest['limited_by']}; KPI {kpi:.0f} %)"
        if closest
        else f"none holds {fit['memory_needed_bytes'] / GiB:.1f} GiB ({T.TARGET_HEADROOM_PCT:.0f} % to spare)"
    )
    free = ((ev.memory_capacity_bytes or 0) - (ev.memory_peak_bytes or 0)) / GiB
    return Finding(
        id="oversized_gpu",
        title=title,
        severity="low",
        confidence="medium",
        category="hardware",
        summary=f"{seen}; no cheaper, smaller catalog GPU keeps up: {why}.",
        metrics={
            **metrics,
            "smaller_gpu": dict(fit),
            "usd_saved": 0.0,
            "memory_free_at_peak_bytes": int(free * GiB),
        },
        fix=f"Keep it and fill it: {free:.1f} GiB free at the peak and {100 - busy:.0f} % of the in-use time "
        "without a kernel leave room for a second job or replica (MPS"
        + (", or MIG slices)." if fit.get("mig_slices") else ")."),
        source=ev.source,
    )
