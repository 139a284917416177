"""What the input-pipeline and host-time rules advise: how many loader workers fit the measured machine,
what overlapping the batch with compute can buy, and the fix in the form the detected framework takes.

Worker counts are integers; gains are speed-up factors (1.0 = no change); shares are % of a step.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from gpuwise.diagnose import thresholds as T
from gpuwise.diagnose.evidence import Evidence
from gpuwise.diagnose.rules.common import on_gpu, speedup_from_saving

__all__ = [
    "batch_function_fix",
    "bursts_favoured",
    "contended",
    "cpu_cap",
    "cpu_saturated",
    "cpu_worker_gain",
    "detected_framework",
    "handoff_caveat",
    "handoff_s",
    "handoff_step_fraction",
    "input_gain_high",
    "loader_snippet",
    "other_runnable_tasks",
    "overlap_gain",
    "own_extra_cores",
    "packed_room",
    "suggested_workers",
    "waits_on_io",
    "wakeup_step_fraction",
]


def cpu_saturated(ev: Evidence) -> bool:
    """The run's processes already keep the cores busy: a *measured* CPU share, never a worker count
    (workers waiting on I/O sleep, so num_workers >= cores says nothing about the CPU)."""
    return ev.context.cpu_util_pct is not None and ev.context.cpu_util_pct >= T.CPU_SATURATED_PCT


def waits_on_io(ev: Evidence) -> bool:
    """The loader waits on I/O (disk, network, sleeps) rather than computing. Read from the loading
    side's own CPU demand (on a CPU or waiting for a core, % of wall: the training thread's batch loads
    with num_workers=0, the workers otherwise), which a busy machine does not lower. Without it, from
    the process tree's CPU share, and only on a machine other processes leave mostly idle (a busy one
    lowers that share while loading waits for a core, not for I/O)."""
    if ev.loader.loader_wait_cpu_pct is not None:
        return ev.loader.loader_wait_cpu_pct < T.LOADER_IO_WAIT_THREAD_CPU_PCT
    if (ev.context.other_cpu_pct or 0.0) >= T.LOADER_IO_BUSY_MACHINE_PCT:
        return False  # cannot tell on a busy machine: advise as for CPU-bound loading (fewer workers)
    return ev.context.cpu_util_pct is not None and ev.context.cpu_util_pct < T.LOADER_IO_WAIT_CPU_PCT


def suggested_workers(ev: Evidence) -> int:
    """Workers that fit the measured machine: an I/O wait needs no free core (workers sleep), a
    CPU-bound loader gets only the cores the run leaves idle (on 2 cores: 1, not 2)."""
    cores = ev.context.cpu_count or 4
    if waits_on_io(ev):
        return max(2, min(T.LOADER_MAX_WORKERS, cores - 1))
    # CPU-bound: the cores other processes leave, less what the run's compute uses beyond the training
    # thread (whose loading moves to the workers). Measured on 2 idle cores, a single-threaded run with a
    # 77 % CPU-bound wait: 1 worker 0.92x, 2 workers 1.62x; the run at 60 % of 2 cores (compute
    # on 1.2 cores) was slower with 2 workers (0.90x): floor(2 - 0.2) = 1.
    if ev.context.cpu_util_pct is None:  # not measured: leave the training thread its core
        return max(1, min(T.LOADER_MAX_WORKERS, cores - 1))
    own_cores = cores * ev.context.cpu_util_pct / 100
    spare = cores * (1 - (ev.context.other_cpu_pct or 0.0) / 100) - max(0.0, own_cores - 1)
    return max(1, min(T.LOADER_MAX_WORKERS, math.floor(spare + 1e-9)))


def cpu_cap(ev: Evidence) -> float | None:
    """The most CPU-bound work can speed up by running in parallel: the CPU other processes leave over
    what this run uses now (None when not measured, or the loader waits on I/O)."""
    if ev.context.cpu_util_pct is None or ev.context.cpu_util_pct <= 0 or waits_on_io(ev):
        return None
    if (ev.context.other_cpu_pct or 0.0) >= T.LOADER_IO_BUSY_MACHINE_PCT:
        # a contended machine shares its cores per runnable task: each worker process adds a share, so
        # the idle CPU is no cap (measured under load 14-17 on 2 cores: 1 worker gave 2.45x and 9.18x
        # where the idle-CPU cap predicted 1.0x)
        return None
    free = max(ev.context.cpu_util_pct, 100.0 - (ev.context.other_cpu_pct or 0.0))
    return max(1.0, free / ev.context.cpu_util_pct)


def contended(ev: Evidence) -> bool:
    """Other processes keep the machine's cores busy: a gain range cannot be narrow there (each added
    process takes its own scheduler share), and the advice says so."""
    return (ev.context.other_cpu_pct or 0.0) >= T.LOADER_IO_BUSY_MACHINE_PCT


def other_runnable_tasks(ev: Evidence) -> tuple[float, float] | None:
    """(fewest, most) runnable tasks of other processes while the run loaded its batches, from the
    loading side's wait for a core (a CPU-bound task sharing C cores with N others runs C / (N + 1) of
    the time it is runnable) and from the CPU other processes used (N busy cores); None when neither is
    measured. The machine's load drifts: the two readings bound it rather than one guessing it."""
    cores = ev.context.cpu_count
    if not cores:
        return None
    estimates = []
    runq = ev.loader.loader_runq_pct
    if runq is not None:
        rate = max(1.0 - runq / 100.0, 1.0 / T.LOADER_MAX_OTHER_TASKS)
        # a core always there (rate ~1) says only "fewer than C others"; a wait for one says how many
        estimates.append(cores / rate - 1.0 if runq >= T.LOADER_RUNQ_CONTENDED_PCT else 0.0)
    if ev.context.other_cpu_pct is not None:
        estimates.append(cores * ev.context.other_cpu_pct / 100.0)
    if not estimates:
        return None
    return min(estimates), max(estimates)


def handoff_s(ev: Evidence) -> tuple[float, float]:
    """(training thread, worker) CPU seconds per batch of handing it from a worker process to the
    training thread, from the sampled batch's tensors and bytes (``LOADER_HANDOFF_*``,
    ``LOADER_SEND_*``: measured by benchmarks/loader_handoff.py); a batch not seen counts as 2 tensors."""
    tensors = ev.loader.loader_batch_tensors or 2
    mib = (ev.loader.loader_batch_bytes or 0) / 2**20
    main = (
        T.LOADER_HANDOFF_BASE_S + T.LOADER_HANDOFF_PER_TENSOR_S * tensors + T.LOADER_HANDOFF_PER_MIB_S * mib
    )
    send = T.LOADER_SEND_BASE_S + T.LOADER_SEND_PER_TENSOR_S * tensors + T.LOADER_SEND_PER_MIB_S * mib
    return main, send


def handoff_caveat(ev: Evidence, share: float, workers: int, high: float) -> str:
    """A sentence for the fix when each batch's hand-off from a worker process is a large part of the
    loading it moves (``LOADER_HANDOFF_HEAVY_PCT``) and ``workers`` gain at most ``high`` (below
    ``LOADER_SMALL_GAIN_X``): small batches gain little from worker processes; '' otherwise."""
    times = sorted(ev.steps.step_times_s) or ([ev.steps.step_time_s] if ev.steps.step_time_s else [])
    if not times or workers < 1 or high >= T.LOADER_SMALL_GAIN_X:
        return ""
    loading_s = times[len(times) // 2] * share / 100.0
    main, send = handoff_s(ev)
    if loading_s <= 0 or 100.0 * send / loading_s < T.LOADER_HANDOFF_HEAVY_PCT:
        return ""
    tensors = ev.loader.loader_batch_tensors or 2
    return (
        f" Each batch's hand-off from a worker process costs ~{send * 1000:.1f} ms of CPU in the worker and "
        f"~{main * 1000:.1f} ms on the training thread ({tensors} tensors, benchmarks/loader_handoff.py) "
        f"against ~{loading_s * 1000:.1f} ms of loading per batch: num_workers={workers} gains at most "
        f"{high:.2f}x here; larger batches (fewer hand-offs per sample) or more free cores gain more."
    )


def _typical_step_s(ev: Evidence) -> float:
    """The measured steps' middle value (upper median), else the mean step; 0 when none was measured."""
    times = sorted(ev.steps.step_times_s) or ([ev.steps.step_time_s] if ev.steps.step_time_s else [])
    return max(times[len(times) // 2], 0.0) if times else 0.0


def handoff_step_fraction(ev: Evidence) -> tuple[float, float]:
    """``handoff_s`` as core-seconds over the typical step measured (0, 0 without step times)."""
    step_s = _typical_step_s(ev)
    if step_s <= 0:
        return 0.0, 0.0
    main, send = handoff_s(ev)
    return main / step_s, send / step_s


def _measured_rate(ev: Evidence) -> float | None:
    """The share of the time the training thread was on a core while runnable during its batch loads
    (1 - ``loader_runq_pct``), floored as ``other_runnable_tasks`` floors it; None when not measured."""
    runq = ev.loader.loader_runq_pct
    return None if runq is None else max(1.0 - runq / 100.0, 1.0 / T.LOADER_MAX_OTHER_TASKS)


@dataclass(frozen=True)
class _Shared:
    """How the run shares the cores before and after the fix: the training thread's rate before (a
    fraction of a core), the cores, and the hand-off per batch (core-seconds over the step before)."""

    cores: int
    before: float
    handoff: float
    send: float
    room: float | None = None  # cores the run's tasks get together at most (None: all of them)
    wait: float = 0.0  # the training thread's wall waiting for worker threads to wake, over the step before


def _step_with_workers(share: float, workers: int, shared: _Shared, others: float, competing: float) -> float:
    """The step after the fix, as a fraction of the step measured. Compute K and loading L are the
    core-seconds the training thread did at its measured rate; after the fix 1 + workers tasks each run at
    cores / (others + competing) of a core (``competing``: how many of them are runnable at once), and
    together never more than the cores. The training thread adds the hand-off of each batch to its
    compute, the workers the sending side to their loading: the step is the longest of the training
    thread's work, one worker's share of the loading, and all the work over the CPU the run gets."""
    compute, loading = (1.0 - share) * shared.before, share * shared.before
    main, sent = compute + shared.handoff, loading + shared.send
    rate = min(1.0, shared.cores / (others + competing))
    room = float(shared.cores) if shared.room is None else shared.room
    together = min(room, (1 + workers) * rate)
    return max(main / rate + shared.wait, sent / (workers * rate), (main + sent) / together)


def own_extra_cores(ev: Evidence) -> float:
    """Cores the training process used beyond its training thread with num_workers=0 (torch's intra-op
    threads on a CPU job: ``cpu_util_pct`` of ``cpu_count`` less one core; 0 when not measured). A worker
    process gets no free core from them: they count as other runnable tasks."""
    cores, util = ev.context.cpu_count, ev.context.cpu_util_pct
    if not cores or util is None or (ev.loader.loader_num_workers or 0) > 0:
        return 0.0
    return max(0.0, cores * util / 100.0 - 1.0)


def packed_room(cores: int, others: float, tasks: int) -> float:
    """The cores a CPU job's ``tasks`` (training thread + workers) get together at the worst, with
    ``others`` runnable tasks elsewhere: the others hold whole cores (``ceil(others)``, once above
    ``OTHER_TASKS_NOISE``) and the training thread and a worker that wake each other end up
    sharing what is left (the scheduler wakes a task beside its waker), at least their share of one core
    shared with the others spread evenly. Measured, lightning_like --sample-cost 6 on 2 cores with ~1
    other busy task: 4.1 ms a step in-process, 6.6 ms with 1 worker (0.62x) - the compute, the loading and
    both hand-off sides one after another on one core - where a fair share of 2 cores predicted 0.88x."""
    held = math.ceil(others) if others >= T.OTHER_TASKS_NOISE else 0
    one_core = tasks / (tasks + others / cores)
    return min(float(cores), max(cores - held, one_core))


def wakeup_step_fraction(ev: Evidence, others: float) -> float:
    """The training thread's wall time per batch waiting for a worker's threads to wake and take a core
    (its queue, then one file-descriptor round trip per tensor storage: ``LOADER_WAKEUP_WAIT_S`` each
    per other task busy beyond the training thread's core, at most ``LOADER_WAKEUP_WAIT_MAX_S``), over the
    typical step (0 without step times)."""
    step_s, cores = _typical_step_s(ev), ev.context.cpu_count or 0
    if step_s <= 0 or cores < 2:
        return 0.0
    per_trip_s = min(T.LOADER_WAKEUP_WAIT_S * max(others, 0.0) / (cores - 1), T.LOADER_WAKEUP_WAIT_MAX_S)
    trips = 1 + (ev.loader.loader_batch_tensors or 2)
    return trips * per_trip_s / step_s


def cpu_worker_gain(ev: Evidence, share: float, workers: int) -> tuple[float, float] | None:
    """(low, high) speed-up from moving CPU-bound loading (``share`` % of the step, on the training
    thread) to ``workers`` processes, from the cores and the measured load: low with the most other
    tasks and all 1 + workers of the run's tasks competing for cores, high with the fewest others and only
    the bottleneck's tasks competing (the rest wait on it). Each batch's hand-off from a worker is added
    (``handoff_s``). None without a core count or a load reading (the caller falls back to the overlap
    bound)."""
    others = other_runnable_tasks(ev)
    cores = ev.context.cpu_count
    if others is None or not cores or workers < 1:
        return None
    s = min(max(share, 0.0), T.MAX_REMOVABLE_STEP_PCT) / 100.0
    handoff, send = handoff_step_fraction(ev)
    fewest = workers if s / workers >= 1.0 - s else 1
    cpu_job = not on_gpu(ev)
    if cpu_job:  # the training process's own compute threads beyond one core compete with the workers
        own = own_extra_cores(ev)
        others = (others[0] + own, others[1] + own)

    def shared(n_others: float, room: float | None = None, wait: float = 0.0, rate: float = 1.0) -> _Shared:
        # the load read as holding: the training thread ran cores / (others + 1) of a core before
        return _Shared(cores, min(1.0, cores / (n_others + 1.0), rate), handoff, send, room, wait)

    room = packed_room(cores, others[1], 1 + workers) if cpu_job else None
    wait = wakeup_step_fraction(ev, others[1]) if cpu_job else 0.0
    low = 1.0 / _step_with_workers(s, workers, shared(others[1], room, wait), others[1], 1 + workers)
    high = 1.0 / _step_with_workers(s, workers, shared(others[0]), others[0], fewest)
    rate = _measured_rate(ev) if cpu_job else None
    if rate is not None:
        # a CPU job's step before ran at the training thread's measured rate, whatever the fewest others
        # say (cpu_heavy_transform: queued 35 % of its loading, 1 worker measured 1.32-1.41x where the fair
        # share of the fewest others, 0.86 of a core, predicted at most 1.23-1.29x); never more than each
        # worker's scheduler share on top of the fair share (the two load readings can disagree tenfold)
        measured = 1.0 / _step_with_workers(s, workers, shared(others[0], rate=rate), others[0], fewest)
        high = min(max(high, measured), high * (1 + workers))
    elif bursts_favoured(ev):
        # a training thread that blocks on the workers' queue computes in bursts a crowded scheduler runs
        # at once and with warm caches, where an always-runnable one was preempted mid-step: measured at
        # load ~13 on 2 cores (lightning_like --plain, schedstat around optimizer.step): 0.86 ms CPU and
        # 3.5 ms queued per step without workers, 0.19 ms and 0.15 ms with one. The load read cannot
        # bound that: the high end takes each worker's scheduler share on top, as overlap_gain does
        high *= 1 + workers
    return min(low, high), max(low, high)


def bursts_favoured(ev: Evidence) -> bool:
    """The loading side was runnable but waiting for a core at least ``LOADER_RUNQ_WAKEUP_PCT`` of its
    wall time (schedstat): a thread that sleeps between batches then runs its work in bursts a crowded
    scheduler favours, so a gain can exceed the fair-share model (and even a sleeping loader spends
    most of its wait queued after each wake-up)."""
    runq = ev.loader.loader_runq_pct
    return runq is not None and runq >= T.LOADER_RUNQ_WAKEUP_PCT


def input_gain_high(ev: Evidence, share: float) -> float:
    """Amdahl on the wait, and never more than the idle CPU can give: a run using u of the cores
    cannot speed up by more than 1/u by doing CPU work in parallel (unless the wait is I/O)."""
    high = speedup_from_saving(share)
    cap = cpu_cap(ev)
    return high if cap is None else min(high, cap)


# The profiler's framework callbacks label their runs so when the user gives no label.
_FRAMEWORK_LABELS = {"transformers.Trainer": "hf-trainer", "lightning.Trainer": "lightning"}


def detected_framework(ev: Evidence) -> str:
    """'hf-trainer' or 'lightning' when the run used that trainer (measured, or its callback's label);
    '' for plain PyTorch or unknown."""
    return ev.context.framework or _FRAMEWORK_LABELS.get(ev.label, "")


def loader_snippet(ev: Evidence, workers: int) -> str:
    """The loader settings in the form the detected framework takes them."""
    pin = on_gpu(ev)
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


def overlap_gain(ev: Evidence, share: float, workers: int, handoff: bool = False) -> tuple[float, float]:
    """Speed-up when ``share`` % of the step overlaps the rest instead of preceding it: one prefetch
    thread hides it up to the rest of the step (the step becomes the longer of the two); ``workers``
    loader processes divide it first, and with ``handoff`` (worker processes, not a thread) the training
    thread keeps each batch's hand-off (``handoff_s``, at its measured rate). Never more than the idle CPU
    can give to CPU-bound work. When one thread already reaches the ceiling, the low end is half the
    ideal gain."""
    kept = 100.0 * handoff_step_fraction(ev)[0] / (_measured_rate(ev) or 1.0) if handoff else 0.0
    rest = max(100.0 - share, 100.0 - T.MAX_REMOVABLE_STEP_PCT) + kept
    low = 100.0 / max(rest, share)
    high = 100.0 / max(rest, share / max(1, workers))
    cap = cpu_cap(ev)
    high = high if cap is None else min(high, cap)
    if contended(ev) and (not waits_on_io(ev) or bursts_favoured(ev)):
        # each worker process also takes a scheduler share the run did not have: the whole run gets more
        # CPU, so the gain can exceed the overlap (measured 1.3x and 1.98x against 1.18x and 1.52x). A
        # loader that sleeps (I/O) gains so too where its waits were mostly for a core after each wake-up
        # (a 2 ms read per sample at load ~10 on 2 cores: 66 % of the wait runnable; 2 workers 5.7x
        # against an overlap bound of 2.4x)
        high *= 1 + max(1, workers)
    # the overlap is rarely perfect (the batch's Python holds the GIL against the step's): half of it
    return min(low, 1.0 + (high - 1.0) * 0.5 if low >= high else low), high


def batch_function_fix(ev: Evidence, where: str, function: str = "") -> tuple[str, str]:
    """Overlap a hand-written batch function with compute, in the form the framework takes."""
    if detected_framework(ev):
        return (
            "Batches are prepared on the training thread before each forward: move that work into the "
            "dataset and let the framework's loader run it in worker processes.",
            loader_snippet(ev, suggested_workers(ev)),
        )
    copy = (
        "; pin each batch and copy it with non_blocking=True so the copy overlaps compute"
        if on_gpu(ev)
        else ""
    )
    fix = (
        f"The batch is prepared on the training thread before each forward{where}: build the next batch "
        "while this step computes, on a background thread (a small prefetch queue), or wrap it in a Dataset "
        f"served by a DataLoader with num_workers={suggested_workers(ev)}{copy}."
    )
    to_device = (
        "\nx, y = x.pin_memory().to(device, non_blocking=True), y.pin_memory().to(device, non_blocking=True)"
        if on_gpu(ev)
        else ""
    )
    # the thread is stopped and joined at exit: a daemon thread still inside a torch op when the
    # interpreter shuts down aborts the process ("terminate called without an active exception", exit 134)
    snippet = (
        "import atexit, queue, threading\n"
        "def prefetch(make_batch, depth=2):\n"
        "    q, stop = queue.Queue(maxsize=depth), threading.Event()\n"
        "    def fill():\n"
        "        while not stop.is_set():\n"
        "            batch = make_batch()\n"
        "            while not stop.is_set():\n"
        "                try:\n"
        "                    q.put(batch, timeout=0.1)\n"
        "                    break\n"
        "                except queue.Full:\n"
        "                    pass\n"
        "    worker = threading.Thread(target=fill, daemon=True)\n"
        "    worker.start()\n"
        "    atexit.register(lambda: (stop.set(), worker.join()))  # no batch half-built when Python exits\n"
        "    while True:\n"
        "        yield q.get()\n"
        f"batches = prefetch(lambda: {function or 'get_batch'}(...))\n"
        "# in the loop: X, Y = next(batches)"
    )
    return fix, snippet + to_device
