"""Evidence: the numbers the rules read, whoever measured or predicted them, grouped by where they come from.

Every figure is optional: a trace has kernel statistics but no loader settings, a live CPU run has
phases but no NVML, a prediction has memory headroom but no step-time series. A rule fires only when
the fields it needs are present. Percentages are 0-100 shares of wall time (of the step, or of the
traced span) unless the name says otherwise; times are seconds, sizes bytes.

`Evidence` holds who measured what (``source``, ``label``, ``rank``, ``device``, ``gpu``, ``notes``) and
one small typed group per kind of figure. A group that more than one source fills says which and why
in its docstring; the others belong to one source. Inside a group, a field's name is its JSON key, so
one name serves the Python code, the JSON documents and the docs.

The JSON form is flat and unchanged by the grouping: ``Evidence.to_dict()`` writes every field under
its own key in the order of `WIRE_KEYS` (plus the derived ``memory_headroom_pct`` and
``serving_error_pct``), and ``Evidence.from_dict`` reads it back. `gpuwise plan --evidence FILE` reads
any gpuwise document that carries an ``evidence`` object (or list of them, one per rank), or a bare one.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, get_args

from gpuwise.errors import GpuwiseError

if TYPE_CHECKING:  # an annotation only: the workload spec is not loaded with the diagnosis (start-up)
    from gpuwise.workload.spec import Attention

__all__ = [
    "SOURCES",
    "WIRE_KEYS",
    "WORKLOAD_KINDS",
    "Communication",
    "DeviceActivity",
    "Evidence",
    "EvidenceSource",
    "GpuHistory",
    "InputPipeline",
    "MemoryUse",
    "ModelConfig",
    "Precision",
    "RunContext",
    "ServingLoad",
    "StepTimes",
    "Telemetry",
    "WorkloadKind",
    "evidence_from_document",
    "kind_from_phases",
    "load_evidence",
]

# Who produced the evidence: a live run, a profiler trace, NVML telemetry, the models, or a load test of a
# serving endpoint (`gpuwise loadtest`).
EvidenceSource = Literal["profile", "trace", "telemetry", "prediction", "loadtest"]
SOURCES: tuple[EvidenceSource, ...] = get_args(EvidenceSource)
# What the measured or predicted work is, so a rule only gives advice that fits it: "training" (a backward
# and an optimizer step), "inference" (forward only: batch or generation), "serving" (an endpoint under
# load), "unknown" (a monitor sample, a kernel-only trace, a run saved before the field existed).
WorkloadKind = Literal["training", "inference", "serving", "unknown"]
WORKLOAD_KINDS: tuple[WorkloadKind, ...] = get_args(WorkloadKind)


def kind_from_phases(phase_s: dict[str, float]) -> WorkloadKind:
    """The work from the timed phases of a step (a live run's hooks, a prediction's model): a backward or
    an optimizer step is training (the profiler wraps torch.autograd.backward and every optimizer's
    step); forwards alone are inference; no timed phase cannot tell. Also what a saved document written
    before ``workload_kind`` existed is read as."""
    if phase_s.get("backward", 0.0) > 0 or phase_s.get("optimizer", 0.0) > 0:
        return "training"
    return "inference" if phase_s.get("forward", 0.0) > 0 else "unknown"


@dataclass
class StepTimes:
    """The training steps: how many, how long, and where the time of a mean step goes.

    Shared by the live profile (hooked phases), a trace (ProfilerStep spans and the loader's spans) and
    a prediction (the modelled step and its phases), because every step-level rule reads the same
    shares whatever measured them."""

    num_steps: int | None = None
    step_time_s: float | None = None  # mean over measured steps
    step_times_s: list[float] = field(default_factory=list)  # per measured step, in order
    phase_s: dict[str, float] = field(
        default_factory=dict
    )  # mean per step: data_wait, h2d_copy, forward, backward, optimizer, other
    # phase_s over the steps that are not outliers (trimmed), so one stall does not dilute every share.
    # None when not measured (old saved runs load it as null).
    phase_s_typical: dict[str, float] | None = None

    def phase_pct(self, name: str) -> float | None:
        """Share of the mean step spent in a phase (%); None when the step or the phase is not timed."""
        if not self.step_time_s or name not in self.phase_s:
            return None
        return 100.0 * self.phase_s[name] / self.step_time_s


@dataclass
class InputPipeline:
    """The data loader: how long the loop waits for a batch and how the loader was configured.

    Shared by the live profile (the DataLoader hooks) and a trace (the loader's spans and its iterator
    class), since both see the same loader."""

    input_wait_pct: float | None = None  # share of step time waiting for the next batch
    loader_num_workers: int | None = None
    loader_pin_memory: bool | None = None
    # the loading side's CPU demand: % of the time not spent waiting for a core that it ran on a CPU
    # (the training thread during its batch waits with num_workers=0, the worker processes otherwise).
    # Near 100 % for CPU-bound loading even on a busy machine, low for a loader waiting on I/O
    loader_wait_cpu_pct: float | None = None
    # ... and the share of its wall time it was runnable but waiting for a core (%): a CPU-bound loader
    # on a machine shared with N other runnable tasks runs at cores / (N + 1) of a core
    loader_runq_pct: float | None = None
    # a sampled batch as the loader yields it: its tensors and their bytes (what a worker process would
    # hand to the training thread per batch, one shared-memory storage per tensor)
    loader_batch_tensors: int | None = None
    loader_batch_bytes: int | None = None


@dataclass
class RunContext:
    """The machine and the script of a live run (`gpuwise profile`), so a fix fits what was measured
    (issue 11): cores and their load, the framework, the sampled host frames. Each field is None when
    not measured (traces, predictions, old saved runs).

    ``workload_kind`` is filled by every source (issue 25): the live profile from its hooked phases (a
    backward or an optimizer step: training; forward only: inference), a trace from its operators (see
    `gpuwise.trace.workload_kind`), a prediction from the workload's task (and its serving section), a load
    test always "serving", a monitor sample never ("unknown"). The engine evaluates a rule only for the
    kinds it declares (`diagnose.rules.RULES`)."""

    cpu_count: int | None = None
    cpu_util_pct: float | None = None  # mean over all cores during the loop
    other_cpu_pct: float | None = None  # other processes' CPU, share of the whole machine (busy machine)
    cpu_steal_pct: float | None = None  # hypervisor steal time, share of CPU time during the steps
    framework: str | None = None  # 'hf-trainer', 'lightning'; None: plain PyTorch or unknown
    # Sampled Python frames of the training thread in the host_input / other gaps, most sampled first:
    # {"phase", "frame" (innermost user frame, 'file:line function'), "leaf", "pct" (of that gap's samples)}
    host_frames: list[dict[str, Any]] | None = None  # None: not sampled (traces, predictions, old runs)
    workload_kind: WorkloadKind = "unknown"  # training / inference / serving; unknown: cannot tell


@dataclass
class DeviceActivity:
    """How host and device interplay: syncs, kernel launches, busy and idle shares, host-to-device copies.

    Shared: a trace measures all of it; the live profile its syncs, copies and idle share; NVML
    telemetry (live or `monitor`) and a user's prediction input give ``gpu_util_pct`` only. The
    utilization rules read one figure whichever source gave it."""

    sync_calls_per_step: float | None = None
    sync_wait_pct: float | None = None  # share of step the host is blocked on the device
    kernels_per_step: float | None = None
    tiny_kernel_pct: float | None = None  # share of kernels shorter than thresholds.TINY_KERNEL_US
    gpu_idle_pct: float | None = None  # share of time no kernel runs (trace: HTA idle)
    gpu_util_pct: float | None = None  # NVML utilization, or compute share of a trace
    host_busy_pct: float | None = None  # share of time the launching thread is busy
    h2d_copy_pct: float | None = None  # share of step spent in host->device copies
    pageable_copy_pct: float | None = None  # share of H2D bytes (or copies) from pageable memory
    # On a trace's timeline (trace.timeline), % of the steady step window (one-off gaps excluded):
    sync_idle_pct: float | None = None  # GPU idle that blocking calls cause (overlap + refill after them)
    sync_idle_call: str | None = None  # the blocking call behind the largest such idle, with its figures
    launch_idle_pct: float | None = None  # GPU idle in repeated short gaps between kernels (< 1 ms each)
    one_off_idle_pct: float | None = None  # idle in capture and start-up gaps, % of the whole window
    graph_replay_pct: float | None = None  # kernels launched by a CUDA/HIP graph launch, % of kernels
    before_first_kernel_pct: float | None = None  # host time in steps before their first kernel


@dataclass
class Precision:
    """The matmul precision as run and what the GPU's 16-bit tensor cores would give.

    Shared by the live profile (the model's dtype and autocast), a trace (kernel names) and a
    prediction (the configured precision), read by the one mixed-precision rule."""

    fp32_matmul_pct: float | None = None  # share of matmul time in fp32 (not tf32/bf16/fp16)
    amp_enabled: bool | None = None
    fp32_matmul_time_pct: float | None = None  # share of measured time in fp32 matmul/conv kernels
    tensor_core_speedup: float | None = None  # bf16 dense peak / fp32 peak of the device
    tensor_core_dtype: Literal["bf16", "fp16"] | None = None  # the 16-bit type of that peak


@dataclass
class MemoryUse:
    """Device (or process) memory: capacity, peak, and the readings at step ends.

    Shared by every source but a load test: the allocator or NVML in a live run, the trace's memory
    events, the memory model's prediction, NVML samples and `monitor` history; the memory rules and
    ``memory_headroom_pct`` read one capacity and one peak whoever measured them."""

    memory_capacity_bytes: int | None = None
    memory_peak_bytes: int | None = None  # peak reserved (or NVML used) during the run / predicted
    memory_per_step_bytes: list[float] = field(
        default_factory=list
    )  # live allocated bytes at step ends (each step, or those below)
    memory_step_index: list[int] = field(
        default_factory=list
    )  # measured step of each reading above; empty = every step in order
    memory_measure: str | None = None  # what memory_per_step_bytes counts: 'process RSS ...', 'CUDA ...'
    # the process RSS read with each reading above (a live CPU run whose readings are the C heap): freed
    # memory the allocator cannot return (kept small objects pin its pages) shows here, not in the heap
    memory_rss_per_step_bytes: list[float] = field(default_factory=list)
    # containers the loop kept the window's new tensors in (profile/kept_objects.py): names, lines, tensor
    kept_objects: list[dict[str, Any]] = field(default_factory=list)

    @property
    def memory_headroom_pct(self) -> float | None:
        """Free share of the capacity at the peak (%; negative when the peak exceeds it); None unknown."""
        if not self.memory_capacity_bytes or self.memory_peak_bytes is None:
            return None
        return 100.0 * (1 - self.memory_peak_bytes / self.memory_capacity_bytes)


@dataclass
class Telemetry:
    """NVML readings of the GPU: clock throttling, temperature, power, SM clock.

    Shared by the live profile's telemetry thread and `gpuwise monitor` (one sample, or a history),
    both NVML, read by the one throttling rule."""

    throttle_pct: dict[str, float] = field(
        default_factory=dict
    )  # reason -> % of samples active (hw_thermal, sw_power_cap, ...)
    temperature_c_max: float | None = None
    power_w_mean: float | None = None
    sm_clock_mhz_mean: float | None = None


@dataclass
class Communication:
    """Collective communication and the ranks of a distributed run.

    Shared by a trace (exposed and overlapped communication, per-rank step times across trace files),
    the live profile (per-rank collective waits, joined across ranks) and a prediction (modelled
    exposed communication): the comm and straggler rules read the same figures from each."""

    comm_exposed_pct: float | None = None  # communication not overlapped with compute, share of step/span
    comm_overlap_pct: float | None = None  # share of communication time overlapped by compute
    rank_step_time_s: dict[int, float] = field(
        default_factory=dict
    )  # rank -> mean step time (cross-rank evidence)
    rank_comm_time_s: dict[int, float] = field(
        default_factory=dict
    )  # rank -> mean per-step time in collective kernels (waiting for peers + transfer)
    # rank -> that time in each measured step, in order (live runs: steps align across ranks); None: not timed
    rank_comm_steps_s: dict[int, list[float]] | None = None
    world_size: int | None = None  # ranks the job had (distributedInfo.world_size); None: not recorded


@dataclass
class ModelConfig:
    """The model configuration as run, which a prediction knows exactly (`gpuwise plan`): weights, KV
    cache, attention implementation, optimizer, and the predicted peak of each change tried."""

    weight_bytes: int | None = None  # weights resident per GPU
    weight_bits: float | None = None  # bits per stored weight (32 fp32/AMP, 16 bf16, 8 fp8/int8, 4 nf4/int4)
    kv_cache_bytes: int | None = None  # KV cache at the memory peak (inference)
    kv_cache_bits: float | None = None
    decode_bandwidth_bound: bool | None = None  # a decode step is limited by memory bandwidth, not compute
    attention_impl: Attention | Literal[""] = ""  # "" when unknown
    attention_scores_bytes: int | None = None  # materialized S×S attention scores at the peak (0 with flash)
    optimizer_fused: bool | None = None  # AdamW with fused=True (one kernel for all parameters)
    fit_options_bytes: dict[str, float] = field(
        default_factory=dict
    )  # change -> predicted peak bytes with it
    # speed-up the performance model predicts from a larger micro-batch that still fits (up to 4x), on a
    # busy GPU; None when not predicted (measurements) or nothing larger fits
    larger_batch_speedup_x: float | None = None


@dataclass
class GpuHistory:
    """A GPU's recorded history (`gpuwise monitor report`, issue 15): what its weeks cost; and what an idle
    GPU's held memory costs (a recorded history, or one `gpuwise monitor` sample)."""

    observed_gpu_hours: float | None = None  # hours the window holds for this GPU (readable or lost)
    idle_time_pct: float | None = None  # share of those hours with busy % under MONITOR_IDLE_BUSY_PCT
    idle_usd: float | None = None  # what the idle (and lost) hours cost at the GPU's price
    busy_in_use_pct: float | None = None  # mean busy % over the hours the GPU was not idle
    # finops/right_size.py: the cheapest smaller catalog GPU that holds the peak and keeps up with the busy
    # % ("gpu": null when none does, "closest" then says how near one came); "usd_saved" over in-use hours
    smaller_gpu: dict[str, Any] | None = None
    # Memory held while the GPU is idle (busy under MONITOR_IDLE_BUSY_PCT): a monitor sample (hours None:
    # one instant) or a recorded history. The memory rules read the peak of the work (in use), so an idle
    # GPU holding memory for someone else's processes is a cost (idle_memory_held), not an OOM risk.
    memory_peak_in_use_bytes: int | None = None  # peak memory over the in-use (not idle) time; history only
    idle_memory_held_bytes: int | None = None  # most memory held while idle
    idle_memory_held_hours: float | None = None  # idle hours with at least IDLE_MEMORY_HELD_MIN_PCT held
    idle_memory_held_usd: float | None = None  # those hours at the GPU's price
    usd_per_gpu_hour: float | None = None  # the GPU's price (--usd-per-gpu-hour or catalog on-demand)
    # who holds it, most idle hours first: {"process" ('pid name'), "user", "memory_bytes",
    # "idle_gpu_hours" (None for one sample), "idle_usd"}
    idle_memory_holders: list[dict[str, Any]] | None = None


@dataclass
class GpuHealth:
    """What the GPU reports about its own health (`gpuwise monitor`: one NVML sample; a history: the lost
    hours). Counters are NVML's: volatile since the driver loaded, aggregate over the GPU's life."""

    gpu_lost: bool | None = None  # NVML_ERROR_GPU_IS_LOST now (fell off the bus)
    lost_gpu_hours: float | None = None  # history: hours the GPU could not be read
    lost_usd: float | None = None  # those hours at the GPU's price
    ecc_volatile_corrected: int | None = None
    ecc_volatile_uncorrected: int | None = None
    ecc_aggregate_corrected: int | None = None
    ecc_aggregate_uncorrected: int | None = None
    retired_pages: int | None = None  # pre-Ampere dynamic page retirement (both causes)
    remapped_rows_correctable: int | None = None  # Ampere+ row remapping
    remapped_rows_uncorrectable: int | None = None
    remap_pending: bool | None = None
    remap_failed: bool | None = None
    pcie_replays: int | None = None  # PCIe replay counter since the driver loaded
    pcie_replays_per_min: float | None = None  # its rate while the sampler watched (None: under a minute)
    xid_errors: list[int] | None = None  # XID codes NVML delivered since the sampler started


@dataclass
class ServingLoad:
    """A serving endpoint under load (`gpuwise loadtest`, issue 14.2): one load level's figures, plus what
    the serving plan adds (the SLO it holds them to, the simulator's predicted speed).

    None when not a load test: runs saved before these fields load them as null."""

    serving_run_id: int | None = None  # the load test's id in the run store
    serving_level: str | None = None  # which level: "concurrency 8", "poisson 5 req/s"
    serving_levels: int | None = None  # levels the load test ran (a sweep or a max-rate search)
    serving_offered_rate_rps: float | None = None  # the level's request rate (None: a concurrency level)
    serving_concurrency: float | None = None  # requests in flight: as set, or rate x mean e2e (Little's law)
    serving_requests: int | None = None  # requests sent in the level
    serving_requests_ok: int | None = None
    serving_errors: dict[str, int] | None = None  # kind -> count (timeout, http_status, ...)
    serving_duration_s: float | None = None
    # "ttft_p50", "tpot_p99", "itl_p90", "e2e_p50", ... -> seconds, measured at the level
    serving_latency_s: dict[str, float] | None = None
    serving_ttft_unloaded_s: float | None = None  # TTFT p50 at the load test's lightest level (if > 1 level)
    serving_request_throughput_rps: float | None = None  # successful requests / level duration
    serving_output_tokens_per_s: float | None = None
    serving_total_tokens_per_s: float | None = None
    serving_prompt_tokens_mean: float | None = None
    serving_output_tokens_mean: float | None = None
    serving_max_rate_rps: float | None = None  # highest probed rate meeting the load test's SLO (search)
    serving_max_rate_at_least: bool | None = None  # the search's highest rate still met it
    serving_model: str | None = None  # the model name the endpoint serves (/v1/models)
    serving_url: str | None = None
    # what the load test declared serves the endpoint (--predict): model, precision, gpu, num_gpus, tp, engine
    serving_declared: dict[str, Any] | None = None
    # filled by the serving plan: the SLO it holds the measurement to ("ttft_p99" -> s), and the
    # simulator's uncalibrated TPOT p50 for the same level and its measured/predicted calibration factor
    serving_slo_s: dict[str, float] | None = None
    serving_predicted_tpot_p50_s: float | None = None
    serving_predicted_ttft_unloaded_s: float | None = None  # calibrated prefill of the mean prompt, idle

    @property
    def serving_error_pct(self) -> float | None:
        """Failed share of the level's requests (%); None when no request was sent."""
        if not self.serving_requests:
            return None
        return 100.0 * (self.serving_requests - (self.serving_requests_ok or 0)) / self.serving_requests


# Evidence attribute -> its group's class, in the order they appear on Evidence.
_GROUPS: dict[str, type] = {
    "steps": StepTimes,
    "loader": InputPipeline,
    "context": RunContext,
    "activity": DeviceActivity,
    "precision": Precision,
    "memory": MemoryUse,
    "telemetry": Telemetry,
    "comm": Communication,
    "model": ModelConfig,
    "history": GpuHistory,
    "serving": ServingLoad,
    "health": GpuHealth,
}
_TOP_KEYS = ("source", "label", "rank", "device", "gpu", "notes")
# JSON key -> the Evidence group that holds it ("" for the top-level fields above).
_GROUP_OF: dict[str, str] = {key: "" for key in _TOP_KEYS} | {
    f.name: attr for attr, cls in _GROUPS.items() for f in fields(cls)
}
# The flat JSON object's keys, in the order every saved document has them (the order of the one flat
# dataclass Evidence was before the grouping); to_dict appends the two derived figures after them.
WIRE_KEYS: tuple[str, ...] = (
    "source", "label", "rank", "device", "gpu",
    "num_steps", "step_time_s", "step_times_s", "phase_s",
    "input_wait_pct", "loader_num_workers", "loader_pin_memory", "cpu_count", "cpu_util_pct",
    "loader_wait_cpu_pct",
    "sync_calls_per_step", "sync_wait_pct", "kernels_per_step", "tiny_kernel_pct", "gpu_idle_pct",
    "gpu_util_pct", "host_busy_pct",
    "fp32_matmul_pct", "amp_enabled", "fp32_matmul_time_pct", "h2d_copy_pct", "pageable_copy_pct",
    "memory_capacity_bytes", "memory_peak_bytes", "memory_per_step_bytes", "memory_step_index",
    "throttle_pct", "temperature_c_max", "power_w_mean", "sm_clock_mhz_mean",
    "comm_exposed_pct", "comm_overlap_pct", "rank_step_time_s", "rank_comm_time_s", "rank_comm_steps_s",
    "tensor_core_speedup", "tensor_core_dtype",
    "weight_bytes", "weight_bits", "kv_cache_bytes", "kv_cache_bits", "decode_bandwidth_bound",
    "attention_impl", "attention_scores_bytes", "optimizer_fused", "fit_options_bytes",
    "framework", "other_cpu_pct", "cpu_steal_pct", "memory_measure", "phase_s_typical", "host_frames",
    "observed_gpu_hours", "idle_time_pct", "idle_usd", "busy_in_use_pct", "smaller_gpu",
    "serving_run_id", "serving_level", "serving_levels", "serving_offered_rate_rps", "serving_concurrency",
    "serving_requests", "serving_requests_ok", "serving_errors", "serving_duration_s", "serving_latency_s",
    "serving_ttft_unloaded_s", "serving_request_throughput_rps", "serving_output_tokens_per_s",
    "serving_total_tokens_per_s", "serving_prompt_tokens_mean", "serving_output_tokens_mean",
    "serving_max_rate_rps", "serving_max_rate_at_least", "serving_model", "serving_url", "serving_declared",
    "serving_slo_s", "serving_predicted_tpot_p50_s", "serving_predicted_ttft_unloaded_s",
    "notes", "workload_kind", "memory_peak_in_use_bytes", "idle_memory_held_bytes", "idle_memory_held_hours",
    "idle_memory_held_usd", "usd_per_gpu_hour", "idle_memory_holders",
    "gpu_lost", "lost_gpu_hours", "lost_usd", "ecc_volatile_corrected", "ecc_volatile_uncorrected",
    "ecc_aggregate_corrected", "ecc_aggregate_uncorrected", "retired_pages", "remapped_rows_correctable",
    "remapped_rows_uncorrectable", "remap_pending", "remap_failed", "pcie_replays", "pcie_replays_per_min",
    "xid_errors",
    "sync_idle_pct", "sync_idle_call", "launch_idle_pct", "one_off_idle_pct", "graph_replay_pct",
    "before_first_kernel_pct", "world_size",
    "larger_batch_speedup_x", "loader_runq_pct", "memory_rss_per_step_bytes", "kept_objects",
    "loader_batch_tensors", "loader_batch_bytes",
)  # fmt: skip
_RANK_KEYED = ("rank_step_time_s", "rank_comm_time_s", "rank_comm_steps_s")  # int keys, str in JSON


@dataclass
class Evidence:
    """What one source measured or predicted about one run (one rank, one GPU, one load level).

    ``source`` says who (see `EvidenceSource`); ``label`` what was measured (script name, trace file,
    workload name); ``rank`` the distributed rank, when known; ``device`` 'cuda', 'cpu', 'rocm', 'http'
    ...; ``gpu`` the catalog id (or NVML name) of the GPU, when known; ``notes`` caveats on the figures
    ('<field>: what it counts'). The figures sit in the groups, each filled by the sources its docstring
    names."""

    source: EvidenceSource
    label: str = ""  # what was measured: script name, trace file, workload name
    rank: int | None = None  # distributed rank, when known
    device: str = ""  # 'cuda', 'cpu', 'rocm' ...
    gpu: str = ""  # catalog id (or NVML name) of the GPU, when known
    steps: StepTimes = field(default_factory=StepTimes)
    loader: InputPipeline = field(default_factory=InputPipeline)
    context: RunContext = field(default_factory=RunContext)
    activity: DeviceActivity = field(default_factory=DeviceActivity)
    precision: Precision = field(default_factory=Precision)
    memory: MemoryUse = field(default_factory=MemoryUse)
    telemetry: Telemetry = field(default_factory=Telemetry)
    comm: Communication = field(default_factory=Communication)
    model: ModelConfig = field(default_factory=ModelConfig)
    history: GpuHistory = field(default_factory=GpuHistory)
    serving: ServingLoad = field(default_factory=ServingLoad)
    health: GpuHealth = field(default_factory=GpuHealth)
    notes: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.source not in SOURCES:
            raise ValueError(f"unknown evidence source {self.source!r}")
        if self.context.workload_kind not in WORKLOAD_KINDS:
            raise ValueError(f"unknown workload kind {self.context.workload_kind!r}")
        if self.source == "loadtest" and self.context.workload_kind == "unknown":
            self.context.workload_kind = "serving"  # a load test of an endpoint is serving by definition

    @property
    def kind(self) -> WorkloadKind:
        """What the work is (``context.workload_kind``): the rules pick advice that fits it."""
        return self.context.workload_kind

    @classmethod
    def flat(cls, source: EvidenceSource, **values: Any) -> Evidence:
        """Build from flat JSON keys (``step_time_s=0.1, cpu_count=8``), each routed to its group; an
        unknown key raises TypeError, as a dataclass constructor would. The reader of saved documents
        and a compact form for hand-written evidence (tests, examples)."""
        top: dict[str, Any] = {}
        groups: dict[str, dict[str, Any]] = {attr: {} for attr in _GROUPS}
        for key, value in values.items():
            if key not in _GROUP_OF or key == "source":
                raise TypeError(f"Evidence has no field {key!r}")
            attr = _GROUP_OF[key]
            (groups[attr] if attr else top)[key] = value
        return cls(source, **top, **{attr: _GROUPS[attr](**kw) for attr, kw in groups.items()})

    def value(self, key: str) -> Any:
        """The figure stored under a flat JSON key (``"gpu_idle_pct"``), for code that names figures by
        key rather than by group (the planner's idle causes); KeyError for an unknown key."""
        attr = _GROUP_OF[key]
        return getattr(getattr(self, attr) if attr else self, key)

    def to_dict(self) -> dict[str, Any]:
        """The flat JSON object: every field under its own key in `WIRE_KEYS` order (rank keys as
        strings), then the derived ``memory_headroom_pct`` and ``serving_error_pct``."""
        values: dict[str, Any] = {k: v for k, v in asdict(self).items() if k not in _GROUPS}
        for attr in _GROUPS:
            values.update(asdict(getattr(self, attr)))
        data = {key: values[key] for key in WIRE_KEYS}
        for key in _RANK_KEYED:
            if data[key] is not None:
                data[key] = {str(k): v for k, v in data[key].items()}
        data["memory_headroom_pct"] = self.memory.memory_headroom_pct
        data["serving_error_pct"] = self.serving.serving_error_pct
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any], where: str = "evidence") -> Evidence:
        """Read the flat JSON object back (unknown keys, and the two derived ones, are ignored); a missing
        or unknown ``source`` is a GpuwiseError naming ``where``."""
        values = {k: v for k, v in data.items() if k in _GROUP_OF}
        if "source" not in values:
            raise GpuwiseError(f"{where}: evidence has no 'source' (one of {', '.join(SOURCES)})")
        source = values.pop("source")
        if source not in SOURCES:
            raise GpuwiseError(f"{where}: unknown evidence source {source!r} (one of {', '.join(SOURCES)})")
        if "workload_kind" not in values:  # saved before issue 25: what its phases say
            values["workload_kind"] = (
                "serving" if source == "loadtest" else kind_from_phases(values.get("phase_s") or {})
            )
        kind = values["workload_kind"]
        if kind not in WORKLOAD_KINDS:
            raise GpuwiseError(
                f"{where}: unknown workload_kind {kind!r} (one of {', '.join(WORKLOAD_KINDS)})"
            )
        for key in ("rank_step_time_s", "rank_comm_time_s"):
            if key in values:
                values[key] = {int(k): float(v) for k, v in values[key].items()}
        if values.get("rank_comm_steps_s") is not None:
            values["rank_comm_steps_s"] = {int(k): list(v) for k, v in values["rank_comm_steps_s"].items()}
        try:
            return cls.flat(source, **values)
        except TypeError as err:
            raise GpuwiseError(f"{where}: malformed evidence: {err}") from None


def evidence_from_document(document: Any, where: str) -> list[Evidence]:
    """Pull Evidence out of a gpuwise JSON document (profile, trace, run) or a bare evidence object."""
    if isinstance(document, list):
        return [e for i, item in enumerate(document) for e in evidence_from_document(item, f"{where}[{i}]")]
    if not isinstance(document, dict):
        raise GpuwiseError(f"{where}: expected a JSON object with an 'evidence' key")
    if "evidence" in document:
        inner = document["evidence"]
        items = inner if isinstance(inner, list) else [inner]
        if not items or any(not isinstance(item, dict) for item in items):
            raise GpuwiseError(
                f"{where}: the document's 'evidence' is empty or not an object (did the run measure any "
                "steps?)"
            )
        return [Evidence.from_dict(item, where) for item in items]
    if "source" in document:
        return [Evidence.from_dict(document, where)]
    kind = document.get("kind", "unknown")
    trials = " (a tune session's trials are tune-trial runs: `gpuwise runs list`)" if kind == "tune" else ""
    raise GpuwiseError(
        f"{where}: a {kind!r} document carries no evidence{trials}; use the --json output of "
        "`gpuwise profile`, `gpuwise trace`, `gpuwise loadtest` or `gpuwise runs show ID` of a profile or "
        "tune-trial run"
    )


def load_evidence(path: str | Path) -> list[Evidence]:
    """Read evidence from a JSON file, naming the position of a syntax error."""
    import orjson

    path = Path(path)
    if not path.is_file():
        raise GpuwiseError(f"evidence file {path} does not exist")
    raw = path.read_bytes()
    try:
        document = orjson.loads(raw)
    except orjson.JSONDecodeError as err:
        line = raw[: err.pos].count(b"\n") + 1
        raise GpuwiseError(f"{path}: invalid JSON at line {line} (byte {err.pos}): {err.msg}") from None
    return evidence_from_document(document, str(path))
