"""Every threshold the rules use, in one place, each with where it comes from.

Change a number here and every path (live profile, trace, telemetry, prediction) follows, and so do
the views that colour the same quantities (profile, memory, plan).
"""

# input_bound: share of the step the training loop waits for the next batch.
# 5 % / 20 % are the project's contract (issue "Live profiling"); PyTorch's own
# performance guide treats any visible data wait as worth fixing with workers + pinning.
INPUT_WAIT_MODERATE_PCT = 5.0
INPUT_WAIT_HIGH_PCT = 20.0

# loader_cpu_saturated: the data-loading processes already use the machine's cores.
CPU_SATURATED_PCT = 85.0  # mean utilization over all cores while the loop runs

# sync_bound: host blocked waiting for the device (.item(), .cpu(), synchronize).
SYNC_WAIT_MODERATE_PCT = 5.0
SYNC_WAIT_HIGH_PCT = 15.0
# ... on a trace's timeline, judged by the GPU idle the blocking calls cause (trace.timeline), not by the
# host's time in them: a synchronize while the GPU runs flat out costs nothing (issue 26: 5 of 5 traces
# fired on 95-99.9 % busy GPUs). 10 % of the step is where removing it is worth a code change (>= 1.11x).
SYNC_IDLE_MODERATE_PCT = 10.0
SYNC_IDLE_HIGH_PCT = 25.0

# launch_bound: GPU mostly idle between many tiny kernels while the host is busy.
# Kernels shorter than this cost about as much to launch as to run (~5-10 us launch latency).
TINY_KERNEL_US = 10.0
TINY_KERNEL_SHARE_PCT = 50.0  # share of kernels that are tiny
LAUNCH_GPU_IDLE_PCT = 30.0  # GPU idle share that makes launches the limiter
LAUNCH_GPU_IDLE_HIGH_PCT = 50.0  # ... and idle half the time or more: launches cost more than compute
# ... and launching could plausibly fill the step: kernels per step x host cost per launched op
# (eager PyTorch dispatch + cudaLaunchKernel, ~5-20 us per op) must reach this share of the step time.
# Traces of input-bound or dependency-bound jobs also show many tiny kernels and idle GPUs.
LAUNCH_HOST_US_PER_KERNEL = 10.0
LAUNCH_STEP_SHARE_PCT = 25.0
# Kernels replayed from a CUDA/HIP graph (this share of them, or more) are launched once per graph:
# prescribing CUDA graphs or torch.compile's reduce-overhead mode would prescribe what already runs.
GRAPH_REPLAY_PCT = 50.0
# A trace whose one-off gaps (graph capture, start-up calls) take this share of the window or more shows
# start-up, not the steady state: its findings get low confidence.
START_UP_ONLY_PCT = 50.0
# low_utilization names the host time before a step's first kernel from this share of the step on.
HOST_BEFORE_FIRST_KERNEL_PCT = 5.0
# A finding another explains (trace.causes) whose gain beyond its cause is under this is demoted to low.
EXPLAINED_RESIDUAL_GAIN_X = 1.02

# no_mixed_precision: fp32 matmuls on a GPU whose tensor cores are much faster in 16-bit.
FP32_MATMUL_SHARE_PCT = 50.0  # share of matmul time (or FLOPs) run in fp32
TENSOR_CORE_SPEEDUP_MIN = 2.0  # bf16 dense peak / fp32 peak above which AMP pays off
# Largest end-to-end AMP speed-up over fp32 to expect, whatever the peak ratio: memory-bound work
# only halves its bytes and 16-bit GEMMs keep a lower share of their peak than fp32 ones. A ViT-L/16
# fine-tune on an A100 (16x peak ratio) went from 17.94 to 3.45 min with fp16 AMP: 5.2x
# (rasbt/pytorch-memory-optim logs.md@2d1ae1e, 01 vs 02); NVIDIA quotes up to 3x on V100 (8x).
AMP_SPEEDUP_CAP_X = 5.2

# pageable_copies: host->device copies from pageable (not pinned) memory.
PAGEABLE_SHARE_PCT = 50.0  # share of H2D bytes (or copies) from pageable memory
PAGEABLE_MIN_COPY_PCT = 1.0  # ... and copies take at least this share of the step
# Medium severity from this share of the step in copies (the input-wait bar: a visible stall); low below.
PAGEABLE_COPY_MODERATE_PCT = 5.0

# small_batch: lots of free VRAM while the GPU is not kept busy.
SMALL_BATCH_HEADROOM_PCT = 50.0
SMALL_BATCH_GPU_UTIL_PCT = 70.0
# ... unless the performance model says a larger batch buys less than this (a prediction that knows the
# kernels: ResNet-50 at 256 images per A100 is already compute-bound, 4x the batch predicts 1.01x).
SMALL_BATCH_MIN_PREDICTED_GAIN_PCT = 5.0

# oom_risk: less free memory than this at the peak (issue contract: < 10 % headroom).
OOM_HEADROOM_PCT = 10.0
# A batch-size or context change is sized to leave this much (the 10-20 % band users ask for).
TARGET_HEADROOM_PCT = 15.0

# throttling: NVML clock-event reasons active in this share of telemetry samples.
THROTTLE_MODERATE_PCT = 10.0
THROTTLE_HIGH_PCT = 30.0

# step_outliers: steps slower than mean + K·sigma, and what they cost.
OUTLIER_SIGMA = 3.0
# The spread is the median absolute deviation; on near-constant steps it is floored at this fraction
# of the median step, so timer jitter of a few percent never counts as an outlier.
OUTLIER_MIN_SPREAD_FRACTION = 0.02
# The median absolute deviation times this estimates σ of normally distributed steps (1 / Φ⁻¹(3/4)), so
# OUTLIER_SIGMA reads as a number of standard deviations.
MAD_TO_SIGMA = 1.4826
# Slow steps recur with a period (checkpointing, evaluation) only if at least this many share one gap.
OUTLIER_PERIOD_MIN_STEPS = 3
OUTLIER_MIN_COST_PCT = 2.0  # below this share of total time, outliers are not worth a finding
OUTLIER_MODERATE_COST_PCT = 5.0
MIN_STEPS_FOR_STATISTICS = 8
# Severity follows the predicted gain (issue 27): a HIGH throughput finding must predict at least this
# speed-up at the top of its range (a HIGH input_bound predicting 1.003x misleads), MEDIUM at least the
# second; below it the finding is LOW (a 3 % gain is within a busy machine's run-to-run noise).
MATERIAL_GAIN_X = 1.15
NOTABLE_GAIN_X = 1.03

# memory_growth: live memory rising across steps (a leak, usually a kept graph).
MEMORY_GROWTH_MIN_PCT = 5.0  # growth over the run relative to the first post-warm-up step
MEMORY_GROWTH_HIGH_PCT = 25.0
# Below the bar but rising at every reading from this growth over the window: "too short to judge a
# leak" (nanoGPT's loss_history.append(loss): +85 KB/step of heap, under 5 % in 50 steps, over it in 150).
MEMORY_GROWTH_NOTE_PCT = 0.5
# ...and judged a leak anyway when a container of the user's gained a tensor with its autograd node
# (grad_fn) on at least this share of the window's steps and has no length bound: it grows every step
# by construction (profile/kept_objects.py finds it). The loss kept with its graph, as in nanoGPT above.
MEMORY_KEPT_GRAPH_PER_STEP = 0.8
# Live-memory readings needed (a live run spaces them to bound the probe's cost), spanning at least
# MIN_STEPS_FOR_STATISTICS steps.
MEMORY_GROWTH_MIN_READINGS = 5

# comm_bound: communication not hidden behind compute.
COMM_EXPOSED_MODERATE_PCT = 15.0
COMM_EXPOSED_HIGH_PCT = 35.0

# low_utilization: the GPU computes for less than this share of the time.
LOW_UTIL_MODERATE_PCT = 60.0
LOW_UTIL_HIGH_PCT = 30.0

# straggler: a rank slower than the median rank by this much.
STRAGGLER_MODERATE_PCT = 10.0
STRAGGLER_HIGH_PCT = 25.0
# ... and, when collectives keep every rank's step time equal (synchronous data parallelism), a rank
# that spends this much less of the step in collective kernels than the other ranks (median): the
# transfer part of a collective is the same on every rank, so the gap is time the others sit waiting
# for it to arrive. Same bar as the step-time skew (the job loses that share of every step); a smaller
# gap can come from a rank's place in the ring/tree rather than from a slow rank.
STRAGGLER_COMM_GAP_PCT = 10.0
# A gain range (high / low) wider than this is not narrow enough to act on: the finding's note says so
# (a straggler whose wait is most of the step; a loader gain on a machine whose load swings).
GAIN_NARROW_X = 1.5

# --- prediction-specific rules (planner evidence; traces can fill the same fields) -----------------
# no_flash_attention: the S×S attention scores eager attention materializes, as a share of peak memory.
ATTENTION_SCORES_SHARE_PCT = 10.0
ATTENTION_SCORES_HIGH_PCT = 20.0  # high severity: a fifth of the peak is score matrices
# no_fused_optimizer: an unfused AdamW step taking this share of the training step is worth fusing
# (the fused kernel updates every parameter in one launch; PyTorch docs: usually the fastest).
OPTIMIZER_STEP_SHARE_PCT = 5.0
# kv_cache_dominant: KV cache share of peak memory above which a smaller cache dtype pays off.
KV_CACHE_DOMINANT_PCT = 40.0
# The smaller cache dtype the fix proposes (FP8, vLLM --kv-cache-dtype fp8): a cache stored in this many
# bits or fewer has nothing left to gain.
KV_CACHE_QUANTIZED_BITS = 8
# decode_memory_bound: weights stored with at least this many bits are worth quantizing for decode.
DECODE_QUANTIZE_MIN_WEIGHT_BITS = 16

# --- shares of a step no fix can remove ---------------------------------------------------------
# A predicted saving (or a measured idle share used to cap a predicted speed-up) is capped here: the
# step never shrinks to nothing, and a 100 % share would make the speed-up infinite.
MAX_REMOVABLE_STEP_PCT = 95.0

# --- planner policy (the planner compares against these, never against its own literals) ---------
# A technique must move the goal's metric by at least this much to be recommended.
PLAN_MIN_GAIN_PCT = 2.0
# A simpler parallel strategy is kept unless a more complex one is faster by more than this.
PLAN_SIMPLER_STRATEGY_TOLERANCE_PCT = 5.0
# NVLink "recommended" / "required" when the job is predicted this much slower over PCIe.
NVLINK_RECOMMENDED_SLOWDOWN_PCT = 10.0
NVLINK_REQUIRED_SLOWDOWN_PCT = 30.0
# A lossy change (int4, LoRA, fp8) enters the recommended config only if it fits the job or gains this much.
PLAN_LOSSY_MIN_GAIN_PCT = 15.0

# A technique's impact is "no measurable change" below these (the models' own precision is coarser):
# throughput within 0.5 %, latency or cost within 0.5 %, memory within 0.05 GiB.
IMPACT_MIN_THROUGHPUT_CHANGE_X = 0.005
IMPACT_MIN_CHANGE_PCT = 0.5
IMPACT_MIN_MEMORY_GIB = 0.05

# --- views --------------------------------------------------------------------------------------
# Tools for GPUs this small (GB) or smaller: GGUF 4-bit with CPU offload (llama.cpp) rather than a
# datacenter engine; 16 GB holds an 8B model in 4-bit with a modest context.
SMALL_GPU_MEMORY_GB = 16.0

# --- gpuwise lint (static checks of training code) ------------------------------------------------
# Files larger than this are skipped with a note: hand-written training code is a few hundred KiB at
# most; multi-MiB .py files are generated (vendored data, embedded weights) and would dominate lint time.
LINT_MAX_FILE_BYTES = 5 * 2**20
# DataLoader workers the lint fix suggests when none are set: enough to overlap decoding with a GPU
# step on common 8-16 core hosts without oversubscribing (PyTorch's tuning guide: num_workers > 0 and
# pin_memory=True; the live `input_bound` rule suggests up to 8 by the measured core count).
LINT_SUGGESTED_NUM_WORKERS = 4
# --- no_mixed_precision gain (Amdahl on the measured fp32 matmul time; appended for issue 12.3) ---
# Low end: a matmul that 16-bit only speeds up by halving its bytes (memory-bound) runs ~2x faster.
AMP_MATMUL_SPEEDUP_LOW_X = 2.0
# Below this end-to-end ceiling the switch is not worth a finding (noise between runs is ~1-2 %).
AMP_MIN_GAIN_X = 1.05
# A ceiling from here up is a high-severity finding: a third of the step or more can go.
AMP_HIGH_GAIN_X = 1.5

# --- trace --compare (appended for issue 12.5) --------------------------------------------------
# Below this share of kernel time in kernels both sides ran, A and B are different workloads (the same
# model before and after a fix keeps most of its kernels; another model keeps few): nothing "resolved".
COMPARABLE_SHARED_KERNEL_PCT = 50.0
# gpuwise doctor: the fixed pipeline must be at least this much faster for the demo to have made its point
# (issue #4's target); below it the report says so in yellow instead of claiming success.
DOCTOR_TARGET_SPEEDUP_X = 2.0

# --- p11b: rules that fit the measured machine (issue 11, items 7-10) ----------------------------
# Below this process-tree CPU share (of the usable cores) while the loop waits for data, the loader is
# waiting on I/O (disk, network, sleeps), not computing: workers overlap that wait and need no free core.
# The I/O-waiting loader used 20-35 % CPU; a CPU-heavy transform keeps a core busy (>= 50 % of 2).
LOADER_IO_WAIT_CPU_PCT = 50.0
# The same, read from the loading side's own CPU demand (time on a CPU over the time not spent waiting
# for a core; the training thread's batch loads at num_workers=0, the workers otherwise): a CPU-bound
# load keeps it near 100 % whatever the machine's load, a sleep or a disk read leaves it near 0.
LOADER_IO_WAIT_THREAD_CPU_PCT = 50.0
# Other processes' CPU (% of the machine) from which a low CPU share of the run no longer says "I/O": on
# a busy machine the loader waits for a core (2 burners on 2 cores: other processes ~65-100 %).
LOADER_IO_BUSY_MACHINE_PCT = 25.0
# The training thread waiting for a core at least this share of its batch loads (%, schedstat) reads as
# other runnable tasks sharing the cores (below it, fewer tasks than cores: the waits are wake-up noise).
LOADER_RUNQ_CONTENDED_PCT = 5.0
# ... and its run rate is floored at 1 / this many tasks when the count of others is read from it.
# A loader waiting on I/O whose waits were at least this share runnable-but-queued (%, schedstat) spends
# most of them waiting for a core after each wake-up (a 2 ms read per sample at load ~10 on 2 cores: 66 %,
# 2 workers gave 5.7x against a 2.4x overlap bound; on an idle machine a few %): half the wait. A training
# thread queued that much is preempted mid-step, which one blocking on workers is not (0.86 -> 0.19 ms CPU
# per Lightning step at load ~13; 1 worker 1.8-5.0x against a fair-share bound of 1.65x): the worker gain's
# high end then widens by the workers' scheduler shares. 40, not half the wait: the same 2 ms-read loader
# under two CPU burners (benchmarks/real_scripts.py --burners 2, load ~7) was queued 46 % and 2 workers gave
# 3.76x against a 2.95x overlap bound (with profiles queued 66 % the gain was 2.4x the bound).
LOADER_RUNQ_WAKEUP_PCT = 40.0
LOADER_MAX_OTHER_TASKS = 64.0
# Other runnable tasks (busy cores' worth, `other_runnable_tasks` or other processes' CPU) from which a
# CPU job's gain counts them as holding a whole core at its low end (the worker's `packed_room`, the
# straggler's shared-cores stretch): the load drifts between runs, a machine's other tasks come and go
# (another user's build), and a reading of 0.3 busy cores is one busy core part of the time. Below it,
# wake-up noise. (ddp_tutorial_like, rank 1 +30 ms, "quiet" at load ~1: 9.4x measured against a low end
# of 11.3x without the stretch; at load ~10, with it, 6.45x in 5.38-15.5x.)
OTHER_TASKS_NOISE = 0.1
# A worker process hands each batch over in round trips the training thread waits on (its queue, then one
# file-descriptor request per tensor storage to the worker's resource-sharer thread): each wakes a worker
# thread, which waits for a core when the others are busy. Measured on the 2-core machine (a process
# computing ~1 ms between pipe round trips to a sleeping peer, benchmarks/wakeup_latency.py, three runs at
# background load ~4.7-6.6): 0.02-0.07 ms a round trip with a core idle; beside 1 CPU burner 0.13-0.96 ms
# mean (p90 up to 3.5 ms), beside 2 0.94-2.56 ms, beside 4 2.26-5.9 ms: ~0.9 ms per other busy task beyond
# the training thread's core, capped at the middle of the 4-burner runs (the third, 5.9 ms, is not yet
# folded in). (hf_no_trainer_like --tokenize-cost 3 at load ~5: 1 worker raised the training thread's data
# wait from 2.8 to 6.9 ms a step while the worker's main thread was on a CPU 6 % of that wait.)
LOADER_WAKEUP_WAIT_S = 0.9e-3
LOADER_WAKEUP_WAIT_MAX_S = 2.6e-3
# Handing a batch from a DataLoader worker process to the training thread costs CPU on both sides, which
# a num_workers=0 run never shows: the training thread reads the pipe, unpickles, and takes one
# file-descriptor round trip and mmap per tensor storage (inside DataLoader.__next__ even when the batch is
# ready); the worker collates into shared memory, its queue's feeder thread pickles and writes the pipe, and
# its resource-sharer thread answers one file-descriptor request per storage. Measured by
# benchmarks/loader_handoff.py (CPU seconds, thread_time / schedstat, so a busy machine does not stretch
# them; torch 2.13 CPU, the 2-core machine at load 10): training thread 0.93 ms for 2 tensors (16 x 128
# floats + labels), 1.26 ms for 4, 1.27 ms for 0.75 MiB, 1.49 ms for 9.2 MiB; least squares 0.37 ms + 0.30 ms
# per tensor + 0.06 ms per MiB. The worker's extra CPU over fetching in-process, summed over all its
# threads (the main thread alone misses the feeder and resource-sharer threads: ~0.6-0.8 ms of it), at
# load ~2.7: +0.66 ms (2 small tensors, the worker ahead of a 10 ms step), +1.3 ms (0.75 MiB), +2.6 ms
# (3 MiB), +5.8 ms (9.2 MiB); least squares 0.76 ms + 0.17 ms per tensor + 0.51 ms per MiB. A loader
# taken as fast as it delivers (lightning_like's samples, 16 per batch, 2 tensors): in-process 1.94 ms per
# batch; 1 worker 3.52 ms wall, its threads 3.56 ms CPU (+1.6 ms over the load); 2 workers 1.99 ms wall
# (+0.77 ms CPU each batch). A run whose batch was not seen (a trace) is costed as 2 tensors.
LOADER_HANDOFF_BASE_S = 0.37e-3
LOADER_HANDOFF_PER_TENSOR_S = 0.30e-3
LOADER_HANDOFF_PER_MIB_S = 0.06e-3
LOADER_SEND_BASE_S = 0.76e-3
LOADER_SEND_PER_TENSOR_S = 0.17e-3
LOADER_SEND_PER_MIB_S = 0.51e-3
# The hand-off eats the gain when a worker's sending side is at least this share of the loading it takes
# over (%) and the workers' predicted gain stays under LOADER_SMALL_GAIN_X: lightning_like --sample-cost 6
# (16 samples of 128 floats, 1.9 ms of loading per batch, 1.1 ms to send it) measured 1.10x bare with 1
# worker on 2 quiet cores, 1.2x with 2; the fix then says so rather than promising the wait away.
LOADER_HANDOFF_HEAVY_PCT = 25.0
LOADER_SMALL_GAIN_X = 1.25
# A CPU-bound loader gets at most this many workers (PyTorch's guides rarely go beyond 8 per GPU).
LOADER_MAX_WORKERS = 8
# memory_growth: Theil-Sen slope over steps. The leak is real when the lower confidence bound of the slope
# (pairwise slopes' quantile) is above zero and the fitted growth over the span reaches MEMORY_GROWTH_MIN_PCT.
# 1.96: the two-sided 95 % normal quantile of the Sen (1968) rank-based interval.
MEMORY_TREND_Z = 1.96
# Theil-Sen is O(n²) in pairs: a longer memory series is evenly thinned to this many readings (about 20k
# pairs, well under a millisecond) before the trend is fitted; the last reading is always kept.
MEMORY_TREND_MAX_POINTS = 200
# step_outliers: other processes using this share of the whole machine's CPU (or this much steal time)
# make slow steps the machine's, not the script's (the issue saw 93-97 % whole-machine CPU from others).
MACHINE_BUSY_OTHER_CPU_PCT = 50.0
MACHINE_BUSY_STEAL_PCT = 10.0
# step_outliers: the period is read from the major stalls only (excess at least this fraction of the
# largest excess), so timer jitter that crosses the limit between two checkpoints does not hide it.
OUTLIER_MAJOR_FRACTION = 0.5

# --- planfix: fix before you buy, ranking, out-of-range inputs (issue 13, items 2, 3, 10) ---------
# Below this GPU utilization (a measured busy share, or the user's stated utilization_pct) the plan fixes
# the pipeline before it advises more hardware: the seeds' "fix before you buy" rule (~60 %), the same
# bar as the low_utilization finding.
PLAN_FIX_FIRST_UTIL_PCT = LOW_UTIL_MODERATE_PCT
# The KPI a fixed pipeline must be projected to reach before "buy/rent more" is advised: the GPU busy
# more than this share of the time and idle (waiting for data or the host) less than PLAN_KPI_IDLE_PCT.
PLAN_KPI_BUSY_PCT = 80.0
PLAN_KPI_IDLE_PCT = 5.0
# A stated utilization (nvidia-smi's GPU-Util, not a profile) counts as evidence with this confidence:
# GPU-Util is the share of time any kernel runs, an upper bound on how busy the SMs are (NVML docs).
STATED_UTILIZATION_CONFIDENCE = "medium"
# Out-of-range results worth one warning line: a per-GPU peak above this multiple of the largest catalog
# GPU (the biggest real ask, a 405B full fine-tune on one GPU, is ~25x an MI325X), or a run longer than
# this many days (ten years: no one plans a training run that long).
INPUT_ABSURD_MEMORY_X = 100.0
INPUT_ABSURD_RUN_DAYS = 3650.0

# --- ddp: a straggler in live DDP (issue 11, item 4) ---------------------------------------------------
# straggler from per-step collective waits (live runs): the rank that waits least must wait less than the
# others in at least this share of the steps. A rank that is always behind is late in ~100 % of them;
# on a loaded machine the ranks take turns being preempted and the late rank changes step to step (~50 %).
STRAGGLER_CONSISTENT_STEPS_PCT = 75.0

# --- serving: demand- and SLO-aware planning (issue 14.1) ---------------------------------------
# With no TTFT target in the SLO, goodput still requires bounded queues: p99 time to first token at or
# under this many seconds (Vidur, arXiv:2405.05465, bounds the P99 scheduling delay at 5 s when it
# searches for a deployment's capacity).
SERVING_IMPLICIT_TTFT_P99_S = 5.0
# Diagnosis of a serving configuration at the requested rate:
# prefill-bound when prefill takes at least this share of the replica's GPU time,
SERVING_PREFILL_BOUND_PCT = 50.0
# KV-capacity-bound when requests are preempted, or the decode batch reaches this share of what the
# KV cache holds,
SERVING_KV_BOUND_PCT = 90.0
# queueing when the p99 wait before the scheduler admits a request (Vidur's "scheduling delay") is at
# least this share of the p99 TTFT: requests wait for a slot more than they take to prefill.
SERVING_QUEUEING_SHARE_PCT = 50.0
# A technique is worth listing when it cuts the monthly cost or raises goodput by at least this much.
SERVING_MIN_GAIN_PCT = 5.0

# --- serving evidence: a load test feeds the serving plan (issue 14.2) -------------------------------
# The plan scales the simulator's step time by measured / predicted TPOT p50 of the load test, within these
# bounds: outside them the measurement describes another deployment (GPU, model, engine) rather than a
# slower or faster one, so the factor is clamped, said so, and the calibration's confidence is low.
SERVING_CALIBRATION_BOUNDS = (0.25, 4.0)
# Beyond these the plan refuses the load test: a TPOT 10x off the prediction is not a slower stack but
# another deployment (a different model size, GPU class, quantization or a CPU server), and a factor that
# large would rewrite every figure of the plan (issue 27).
SERVING_CALIBRATION_REFUSE = (0.1, 10.0)
# The measured max rate and the calibrated simulation's for the same SLO agree within this ratio (the
# simulator's error at concurrency >= 32 is within 20 %, benchmarks/validate_serving.py; a Poisson search's
# 95 % interval adds about as much): farther apart, the single TPOT factor does not explain the endpoint's
# capacity and the calibration's confidence is low.
SERVING_MAX_RATE_AGREE_RATIO = 1.5
# A served model name that states a size ("…-70B-…") matches the workload's model when its parameter count
# is within this fraction of the catalog's.
SERVING_MODEL_SIZE_TOLERANCE = 0.25
# serving_speed_gap: measured TPOT p50 differs from the prediction by at least this much. The simulator's
# median error against published vLLM sweeps is 5 %, its largest 18 % (docs/serving.md): below 20 % the gap
# is within what the model already misses by.
SERVING_SPEED_GAP_PCT = 20.0
# A load level calibrates with medium confidence from this many successful requests up (vLLM's benchmark
# default is 1,000 prompts; gpuwise loadtest's 200): fewer, and p50 moves with a few requests.
SERVING_CALIBRATION_MIN_REQUESTS = 50
# serving_errors: failed requests at or above this share of those sent (the load test's own SLO verdict
# allows 1 %, loadtest.metrics.MAX_ERROR_FRACTION); high severity from the second figure up. An errorful
# level also calibrates with low confidence.
SERVING_ERROR_PCT = 1.0
SERVING_ERROR_HIGH_PCT = 5.0
# A missed TTFT target is queueing when the TTFT p50 at the level is at least this multiple of the TTFT
# with no queue (the load test's lightest level, else the calibrated prefill of the mean prompt): waiting
# for a slot then takes longer than the prefill itself. Below it, the prefill is what is slow.
SERVING_QUEUEING_TTFT_X = 2.0
# ... or when the endpoint completes less than this share of the offered rate (the queue grows).
SERVING_KEEPS_UP_PCT = 90.0

# --- p11data: host time outside every phase (issue 11, item 3) ----------------------------------------
# input_bound from host_input alone (a batch built on the training thread before the forward) needs at
# least this share: host_input also holds zero_grad and the loop's own Python (~1 % of a 10 ms step).
HOST_INPUT_MIN_PCT = 10.0
# unexplained_host_time: the "other" share (host time outside every phase, not before a forward) from
# which the finding names where it goes. Logging and loss bookkeeping are a few % of a real step; the
# issue's nanoGPT case with get_batch between forward and backward put 26.7 % there.
OTHER_HOST_TIME_PCT = 15.0
OTHER_HOST_TIME_HIGH_PCT = 30.0
# A sampled host frame is read as input preparation when its innermost frame is in one of these files
# (numpy's memmap and loaders, torch's fetch/collate, datasets' arrow tables), never by a function's name.
INPUT_LIBRARY_FILES = ("memmap.py", "npyio.py", "_fetch.py", "collate.py", "arrow_dataset.py")
# A sampled frame is named only from this share of the step up (a few stray samples say nothing).
FRAME_MIN_STEP_PCT = 1.0
# input_bound reads the sampled batch-preparation share at its Wilson lower bound with this z (one-sided
# 95 %): 2 stray samples of 10 read 6.9 % (not 20 %), 10 of 10 still read 79 %, 30 of 30 read 92 %.
SAMPLED_SHARE_Z = 1.645

# --- monitor: live KPIs of `gpuwise monitor` (issue 15) ------------------------------------------------
# The seeds' KPIs: a GPU busy (NVML utilization.gpu, time a kernel ran) more than this share of the time,
# the same bar the plan holds a fixed pipeline to.
MONITOR_BUSY_KPI_PCT = PLAN_KPI_BUSY_PCT
# Below this busy share a sample counts the GPU as idle (its $/h is "spent idle"): the seeds' idle < 5 %.
MONITOR_IDLE_BUSY_PCT = PLAN_KPI_IDLE_PCT
# Memory headroom KPI band: under 10 % risks OOM (the oom_risk rule's bar), over 20 % while busy is
# memory paid for and unused (the seeds' "memory headroom 10-20 %").
MONITOR_HEADROOM_LOW_PCT = OOM_HEADROOM_PCT
MONITOR_HEADROOM_HIGH_PCT = 20.0

# -- bench (issue #16) --
# The CPU matmul band is per core family, with its source, in bench/data/cpu_uarch.csv (issue #30).
# Host DRAM has no datasheet peak visible from Linux; a STREAM copy per core used is plausible between
# these GB/s: one DDR4-1600 channel shared by 12 cores gives ~1, the fastest per-core STREAM figures
# published (Apple M-series, Sapphire Rapids) are ~30-40.
BENCH_DRAM_GB_PER_S_PER_CORE = (0.5, 50.0)

# --- finops: `gpuwise monitor report` over a recorded history (issue 15) ---------------------------------
# History rules read at least this many GPU-hours: an hour holds a few stage changes of a real job, so an
# idle share over it is a habit, not a moment (the live view already shows moments).
FINOPS_MIN_GPU_HOURS = 1.0
# idle_gpu_hours: GPUs idle (busy < MONITOR_IDLE_BUSY_PCT) this share of the hours held: that share of
# their price buys nothing. Medium from a tenth, high from half (the GPU is mostly a reservation).
FINOPS_IDLE_MODERATE_PCT = 10.0
FINOPS_IDLE_HIGH_PCT = 50.0
# chronic_low_busy: busy under the monitor KPI while in use, over at least a day of GPU-hours (a daily
# cycle of jobs, not one slow run): fix the pipeline before adding hardware (the plan's fix-first bar).
FINOPS_CHRONIC_MIN_GPU_HOURS = 24.0
FINOPS_CHRONIC_BUSY_PCT = MONITOR_BUSY_KPI_PCT
# oversized_gpu: memory headroom above this share for the whole window (at its peak) - the issue's
# "headroom always > 50 %" - and a cheaper catalog GPU holds that peak with TARGET_HEADROOM_PCT to spare.
FINOPS_OVERSIZED_HEADROOM_PCT = 50.0
# idle_memory_held (issue 25): an idle GPU whose used memory is at least this share of its total is held by
# processes that keep it from being released (or shared). A CUDA context alone (with PyTorch's kernels
# loaded) holds a few hundred MiB, under 5 % of any data-centre GPU's 16+ GiB, so 5 % means tensors are
# held, not just an initialised process.
IDLE_MEMORY_HELD_MIN_PCT = 5.0
# A recorded history flags it once the held idle time reaches FINOPS_MIN_GPU_HOURS' tenth (6 min: longer
# than an evaluation pause between jobs), high from FINOPS_IDLE_HIGH_PCT of the observed hours.
IDLE_MEMORY_HELD_MIN_HOURS = 0.1
# Processes named in its summary (the rest are counted; every holder is in the finding's metrics).
IDLE_MEMORY_NAMED = 3

# --- GPU health (issue 30: `gpuwise monitor`'s health rules, diagnose/rules/health.py) ----------------
# Uncorrected ECC errors: any since the driver loaded is critical (a process may have read corrupted
# data; NVIDIA's XID 48/94/95), any over the GPU's life is high (the memory has failed before).
ECC_VOLATILE_UNCORRECTED_MAX = 0
ECC_AGGREGATE_UNCORRECTED_MAX = 0
# A storm of corrected (single-bit) errors since the driver loaded: a cell degrading before it fails.
# gpuwise's bar (NVIDIA publishes none; its driver raises XID 92 "high single-bit ECC error rate" on its
# own): a few corrected errors are normal on HBM, a thousand since boot are not.
ECC_CORRECTED_STORM = 1000
# PCIe replays: DCGM's health watch flags more than 8 replays a minute ("the maximum recommended by RM",
# DCGM gpu hardware limits header, DCGM_LIMIT_MAX_PCIREPLAY_RATE). With no rate yet (one sample), an
# hour's worth at that rate since the driver loaded.
PCIE_REPLAYS_PER_MIN_MAX = 8.0
PCIE_REPLAYS_SINCE_BOOT_MAX = int(PCIE_REPLAYS_PER_MIN_MAX * 60)
# Retired pages (pre-Ampere): DCGM's limits - 15 is its soft limit, 63 its hard limit, past which the GPU
# is due for replacement (DCGM_LIMIT_MAX_RETIRED_PAGES_SOFT_LIMIT / DCGM_LIMIT_MAX_RETIRED_PAGES).
RETIRED_PAGES_SOFT = 15
RETIRED_PAGES_MAX = 63
# XID codes and what they mean (NVIDIA's XID catalog, docs.nvidia.com/deploy/xid-errors): the hardware
# ones make gpu_xid_errors high, the rest (an application's fault: 13, 31, 43, 45) medium.
XID_HARDWARE: dict[int, str] = {
    48: "double-bit ECC error",
    63: "page retired / row remapped",
    64: "page retirement or row remap failed",
    74: "NVLink error",
    79: "fallen off the bus",
    92: "high single-bit ECC error rate",
    94: "contained ECC error",
    95: "uncontained ECC error",
    119: "GSP timeout",
    120: "GSP error",
}

# --- gpuwise tune (issue 16) -----------------------------------------------------------------------
# A trial stopped at its time budget still counts when it measured at least this many steps (the step
# statistics' floor); with fewer it is recorded as hung.
TUNE_MIN_MEASURED_STEPS = 5
# Numerics knobs (autocast, channels_last): every loss of the trial finite, and the mean of its last
# TUNE_LOSS_STEPS losses after warm-up (the measured steps) within this relative distance of the baseline's
# (spread at most twice the baseline's; tune/verify.py). 10: half the default 20 measured steps.
# 2 %: bf16 keeps 8 bits of mantissa (relative rounding
# 2^-8 = 0.4 % per op) and mixed-precision training matches fp32 loss curves closely (Micikevicius et al.
# 2018, "Mixed Precision Training", ICLR); a bug (overflow without a scaler, a broken layout) moves them
# far more.
TUNE_LOSS_RTOL = 0.02
TUNE_LOSS_STEPS = 10
# A loader waiting on I/O (sleeps, network reads) needs no free core per worker: the tuner also tries this
# multiple of the finding's worker count, up to TUNE_MAX_IO_WORKERS (PyTorch's guides rarely exceed 16).
TUNE_IO_WORKERS_X = 2
TUNE_MAX_IO_WORKERS = 16
# The largest batch kept is the largest whose measured peak leaves this share of device memory free, not the
# last one that ran: the caching allocator's fragmentation and steps the trial did not see (evaluation, a
# longer sequence, a checkpoint) need room (Lightning's BatchSizeFinder and accelerate's
# find_executable_batch_size keep the last success, which can fail later). The oom_risk rule's bar: a kept
# batch is one that rule would not flag.
TUNE_MEMORY_MARGIN_PCT = OOM_HEADROOM_PCT
# A configuration wins only if its median beats the baseline's by this much and its slowest repeat beats
# the baseline's fastest (run-to-run noise on a shared machine is a few %).
TUNE_MIN_GAIN_X = 1.03
# Candidates that could still win are repeated, interleaved with the baseline, for up to this many rounds
# (issue 27: a candidate run once was 0.56x in one session and the 1.47x "winner" in another, truly 1.00x).
TUNE_MAX_REPEAT_ROUNDS = 4
# A winner needs this many trials of its own and of the baseline, every one of its beating every one of
# the baseline's: with exchangeable noise, 2 against 2 separate by chance 1 time in 6 (tune_gain.py
# --no-gain named a no-op "winner" in 1 of 7 sessions so), 4 against 4 1 time in 70.
TUNE_MIN_WINNER_TRIALS = 4
# A candidate measured once is out of the running only when it is this many times slower than the
# baseline's fastest trial (a busy machine moves single trials by tens of %: 0.56x once, truly 1.00x).
TUNE_CLEAR_LOSS_X = 2.0
# A trial with the compile knob warms up at least this many steps: torch.compile compiles forward and
# backward in the first steps (and again if a guard fails once), which must not land in the measured window
# (measured here: 2 warm-up steps left compilation in the window, 8 vs 424 steps/s once warm).
TUNE_COMPILE_WARMUP_STEPS = 5

# Trace timeline (trace/timeline.py): which idle gaps are launch gaps, one-off start-up, graph capture.
# A gap this short between kernels is the host not queueing the next one in time (a kernel launch costs
# 5-20 µs of host time: CUDA C++ Best Practices Guide, "Kernel launch overhead"); longer ones are host work.
TIMELINE_LAUNCH_GAP_MAX_US = 1_000.0
# A single runtime call this long is start-up (module loading, context creation, JIT), not steady state.
TIMELINE_ONE_OFF_CALL_US = 100_000.0
# ... when it leaves the GPU idle this long (a long call the GPU works through is steady state: a full queue).
TIMELINE_ONE_OFF_GAP_US = 50_000.0
# Capture-status queries PyTorch makes on every allocation (cudaStreamIsCapturing): a capture only when
# this many fall in one gap of a millisecond or more (kernels launched under capture do not run) in a
# trace that captures or replays a graph at all.
TIMELINE_CAPTURE_MIN_QUERIES = 10
# Outlier ranks of a many-rank trace (trace/rank_distribution.py): modified z-score above this
# (Iglewicz & Hoaglin 1993, the recommended cut).
RANK_MODIFIED_Z_OUTLIER = 3.5

# Every constant above (the names are the public interface: rules, views and the planner import them).
__all__ = [name for name in dir() if name.isupper()]
