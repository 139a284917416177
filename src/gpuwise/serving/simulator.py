"""Discrete-event simulation of one replica of a continuous-batching engine.

Design after microsoft/vidur (an iteration-level simulator of vLLM-class schedulers): requests
arrive, a scheduler forms each iteration's batch (decodes first, then prefill chunks up to the
token budget), the iteration takes the perf model's step time for that batch
(``gpuwise.perf.inference.StepModel.step``), and KV blocks bound what is admitted; when they run
out the newest request is preempted and recomputed later (vLLM's default). Written for speed:
runs of decode-only iterations between two events (an arrival that can be admitted, a
completion, the KV cache filling up) are advanced in one jump, timed at their middle context,
so a simulation costs a few events per request rather than one per generated token.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from dataclasses import dataclass

from gpuwise.catalog import GPU, get_model
from gpuwise.memory.kv_cache import KvCapacity, kv_capacity
from gpuwise.perf.inference import StepModel
from gpuwise.perf.numerics import resolve
from gpuwise.serving.demand import RequestDraws
from gpuwise.serving.engines import (
    DRAFT_COST_FRACTION,
    SchedulerConfig,
    scheduler_config,
    tokens_per_decode_step,
)
from gpuwise.workload import Workload
from gpuwise.workload.serving import ServingSpec

MAX_EVENTS_PER_REQUEST = 50  # loop turns per simulated request before the run is cut off (overload)


class Replica:
    """One model replica (tp × pp GPUs): step times for any batch, memoized, and its KV capacity."""

    def __init__(self, workload: Workload, gpu: GPU) -> None:
        arch = get_model(workload.model)
        num = resolve(workload, gpu)
        self.workload, self.gpu = workload, gpu
        self.model = StepModel(workload, gpu, arch, num)
        self.capacity: KvCapacity = kv_capacity(workload, gpu, arch, num)
        self.cfg: SchedulerConfig = scheduler_config(workload.serving or ServingSpec())
        self.pp = workload.pp
        self.hit_rate = workload.serving.prefix_hit_rate if workload.serving else 0.0
        self.tokens_per_step = tokens_per_decode_step(self.cfg)
        self._linear: dict[int, float] = {}
        ctx, tokens = 4096.0, 1024
        self._decode_coef = (self._raw(1, 1, ctx, 0, 0.0) - self._raw(1, 0, 0.0, 0, 0.0)) / ctx
        self._prefill_coef = (self._raw(tokens, 0, 0.0, tokens, ctx) - self._raw(tokens, 0, 0.0, 0, 0.0)) / (
            tokens * ctx
        )

    def iteration_s(
        self, decode_seqs: int, decode_ctx: float, prefill_tokens: int, prefill_ctx: float
    ) -> float:
        """Wall time of one engine iteration (all pipeline stages), from ``StepModel.step``.

        For serving engines the step is exactly: linear layers (a function of the batch's tokens),
        plus decode attention ∝ sequences × context, plus prefill attention ∝ tokens × context
        (each roofline term picks the same side of its max for every size). So the linear part is
        cached per token count and the two attention coefficients are read from ``step`` once;
        eager frameworks (whose attention terms are not proportional) call ``step`` every time.
        """
        k, pp = self.cfg.speculative_tokens, self.pp
        stage_key = decode_seqs * (1 + k) + prefill_tokens * pp  # pp × the tokens one stage's matmuls take
        if self.model.eager:
            seconds = self._raw(stage_key / pp, decode_seqs, decode_ctx, prefill_tokens, prefill_ctx)
        else:
            lin = self._linear.get(stage_key)
            if lin is None:
                lin = self._linear[stage_key] = self._raw(stage_key / pp, 0, 0.0, 0, 0.0)
            seconds = lin + self._decode_coef * decode_seqs * decode_ctx
            seconds += self._prefill_coef * prefill_tokens * prefill_ctx
        if k and decode_seqs:
            seconds *= 1 + k * DRAFT_COST_FRACTION
        return seconds

    def _raw(
        self,
        stage_linear: float,
        decode_seqs: int,
        decode_ctx: float,
        prefill_tokens: int,
        prefill_ctx: float,
    ) -> float:
        """Through all pp stages: decodes split into pp micro-batches (one per stage in flight),
        a prefill chunk crossing every stage whole (as perf.inference's TTFT does)."""
        pp = self.pp
        st = self.model.step(
            stage_linear,
            decode_seqs=decode_seqs / pp,
            decode_context=decode_ctx,
            prefill_tokens=prefill_tokens,
            prefill_context=prefill_ctx,
        )
        return pp * (st.time_s + (self.cfg.step_overhead_factor - 1) * st.overhead_s)


@dataclass(frozen=True)
class SimResult:
    """Per-request latencies of one simulated run (seconds; ``inf`` for requests never finished)."""

    rate_rps: float
    ttft_s: tuple[float, ...]
    tpot_s: tuple[float, ...]
    e2e_s: tuple[float, ...]
    duration_s: float
    completed: int
    preemptions: int
    mean_decode_batch: float
    cut_off: bool  # stopped at the event cap (the replica was overloaded)
    queue_s: tuple[float, ...] = ()  # arrival to first admission (the scheduling delay)
    events: int = 0  # scheduler decisions simulated
    iterations: int = 0  # engine iterations they stand for

    def percentile(self, metric: str, pct: float) -> float:
        values = sorted(getattr(self, f"{metric}_s"))
        if not values:
            return 0.0
        rank = min(len(values) - 1, max(0, math.ceil(pct / 100 * len(values)) - 1))
        return values[rank]

    @property
    def throughput_rps(self) -> float:
        return self.completed / self.duration_s if self.duration_s else 0.0


def simulate(replica: Replica, draws: RequestDraws, rate_rps: float) -> SimResult:
    """Run ``draws`` arriving at ``rate_rps`` through one replica until every request finishes or
    the event cap (``MAX_EVENTS_PER_REQUEST`` × requests) is reached."""
    cfg, cap = replica.cfg, replica.capacity
    n = len(draws.prompts)
    arrival: list[float] = []
    t = 0.0
    for gap in draws.gaps:
        t += gap / rate_rps
        arrival.append(t)
    hit = replica.hit_rate
    prompt_total = draws.prompts
    prompt_new = [max(1, math.ceil(p * (1 - hit))) for p in prompt_total]
    out = draws.outputs
    need_pre = list(prompt_new)  # tokens to (re)compute before decoding
    done_pre = [0] * n
    gen = [0.0] * n  # tokens generated so far (at the time of joining the decoders)
    d_join = [0.0] * n
    version = [0] * n
    first = [math.inf] * n
    admitted_at = [math.inf] * n  # first time the scheduler took the request (queueing ends)
    finish = [math.inf] * n
    cap_tokens = cap.tokens
    frag = cap.block_size / 2  # half a block wasted per sequence on average
    g = replica.tokens_per_step
    budget_total = cfg.max_num_batched_tokens
    max_seqs = cfg.max_num_seqs

    waiting: deque[int] = deque()
    prefilling: dict[int, None] = {}
    decoders: dict[int, None] = {}
    admitted: list[int] = []  # admission order, for preempting the newest (stale entries skipped)
    heap: list[tuple[float, int, int]] = []
    d_clock = 0.0  # tokens each decoder has generated since the start (all decoders advance together)
    ctx_base = 0.0  # Σ (prompt_total + gen − d_join) over decoders: their contexts sum to base + n·D
    kv_base = 0.0  # Σ (prompt_new + gen − d_join) over decoders: private KV tokens
    kv_prefill = 0  # KV tokens held by requests still prefilling
    now = 0.0
    nxt = 0
    events = 0
    max_events = MAX_EVENTS_PER_REQUEST * n
    preemptions = 0
    iterations = 0
    batch_time = 0.0
    busy = 0.0
    completed = 0

    def join_decoders(i: int) -> None:
        nonlocal ctx_base, kv_base, completed
        if gen[i] >= out[i]:
            finish[i] = now
            completed += 1
            return
        decoders[i] = None
        d_join[i] = d_clock
        ctx_base += prompt_total[i] + gen[i] - d_clock
        kv_base += prompt_new[i] + gen[i] - d_clock
        version[i] += 1
        heapq.heappush(heap, (d_clock + (out[i] - gen[i]) / g, i, version[i]))

    def leave_decoders(i: int) -> None:
        nonlocal ctx_base, kv_base
        del decoders[i]
        gen[i] += d_clock - d_join[i]
        ctx_base -= prompt_total[i] + gen[i] - d_clock
        kv_base -= prompt_new[i] + gen[i] - d_clock
        version[i] += 1

    def preempt_newest() -> bool:
        nonlocal kv_prefill, preemptions
        while admitted:
            i = admitted.pop()
            if i in decoders:
                leave_decoders(i)
            elif i in prefilling:
                del prefilling[i]
                kv_prefill -= done_pre[i]
            else:
                continue
            need_pre[i] = prompt_new[i] + int(gen[i])  # recompute prompt and generated tokens
            done_pre[i] = 0
            waiting.appendleft(i)
            preemptions += 1
            return True
        return False

    while events < max_events:
        events += 1
        while nxt < n and arrival[nxt] <= now:
            waiting.append(nxt)
            nxt += 1
        if not decoders and not prefilling and not waiting:
            if nxt >= n:
                break
            now = arrival[nxt]
            continue
        n_dec = len(decoders)
        # Decodes need room to grow this iteration: preempt the newest requests until they have it.
        used = kv_base + n_dec * d_clock + kv_prefill + (n_dec + len(prefilling)) * frag
        while n_dec and used + n_dec * g > cap_tokens and preempt_newest():
            n_dec = len(decoders)
            used = kv_base + n_dec * d_clock + kv_prefill + (n_dec + len(prefilling)) * frag
        budget = budget_total - n_dec * (1 + cfg.speculative_tokens)
        chunks: list[tuple[int, int]] = []
        if cfg.chunked_prefill or not n_dec or waiting or prefilling:
            for i in prefilling:
                if budget <= 0:
                    break
                c = min(need_pre[i] - done_pre[i], budget)
                chunks.append((i, c))
                budget -= c
            free = (
                cap_tokens - used - n_dec * g - (budget_total - n_dec * (1 + cfg.speculative_tokens) - budget)
            )
            while waiting and budget > 0 and n_dec + len(prefilling) < max_seqs:
                i = waiting[0]
                c = min(need_pre[i], budget)
                if not cfg.chunked_prefill and c < need_pre[i] and chunks:
                    break  # without chunking a prompt is prefilled whole, alone if it must be
                if c + frag > free:
                    break
                waiting.popleft()
                admitted.append(i)
                if admitted_at[i] == math.inf:
                    admitted_at[i] = now
                prefilling[i] = None
                chunks.append((i, c))
                budget -= c
                free -= c + frag
        if not cfg.chunked_prefill and chunks:
            n_dec = 0  # prefill-priority iteration: decodes wait (vLLM without chunked prefill)
        if not chunks and not n_dec:
            if nxt >= n:
                break  # waiting requests can never be admitted: larger than the KV cache
            now = arrival[nxt]
            continue
        ctx = (ctx_base + n_dec * d_clock) / n_dec if n_dec else 0.0
        if chunks:
            pre_tokens = sum(c for _, c in chunks)
            pre_ctx = (
                sum((prompt_total[i] - need_pre[i] + done_pre[i] + c) * c for i, c in chunks) / pre_tokens
            )
            step = replica.iteration_s(n_dec, ctx, pre_tokens, pre_ctx)
            jumps = 1
        else:
            step = replica.iteration_s(n_dec, ctx, 0, 0.0)
            jumps = math.ceil((heap[0][0] - d_clock) / g - 1e-9) if heap else 1
            room = cap_tokens - used
            jumps = min(jumps, int(room // (n_dec * g)) or 1)
            admissible = n_dec + len(prefilling) < max_seqs and not waiting
            if admissible and nxt < n:
                jumps = min(jumps, max(1, math.ceil((arrival[nxt] - now) / step)))
            jumps = max(1, jumps)
            if jumps > 1:
                step = replica.iteration_s(n_dec, ctx + jumps * g / 2, 0, 0.0)
        elapsed = step * jumps
        iterations += jumps
        now += elapsed
        busy += elapsed
        batch_time += n_dec * elapsed
        if n_dec:
            d_clock += g * jumps
            while heap and heap[0][0] <= d_clock + 1e-9:
                _, i, ver = heapq.heappop(heap)
                if ver != version[i] or i not in decoders:
                    continue
                leave_decoders(i)
                finish[i] = now
                completed += 1
        for i, c in chunks:
            done_pre[i] += c
            kv_prefill += c
            if done_pre[i] >= need_pre[i]:
                del prefilling[i]
                kv_prefill -= done_pre[i]
                if first[i] == math.inf:
                    first[i] = now
                    gen[i] = 1.0
                join_decoders(i)

    cut_off = completed < n
    ttft = tuple(first[i] - arrival[i] for i in range(n))
    e2e = tuple(finish[i] - arrival[i] for i in range(n))
    tpot = tuple((finish[i] - first[i]) / (out[i] - 1) if out[i] > 1 else 0.0 for i in range(n))
    return SimResult(
        rate_rps=rate_rps,
        ttft_s=ttft,
        queue_s=tuple(admitted_at[i] - arrival[i] for i in range(n)),
        tpot_s=tpot,
        e2e_s=e2e,
        duration_s=now,
        completed=completed,
        preemptions=preemptions,
        mean_decode_batch=batch_time / busy if busy else 0.0,
        cut_off=cut_off,
        events=events,
        iterations=iterations,
    )
