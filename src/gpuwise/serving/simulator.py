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
from gpuwise.perf.inference import StepModel
from gpuwise.perf.kv_capacity import KvCapacity, kv_capacity
from gpuwise.perf.numerics import resolve
from gpuwise.serving.demand import RequestDraws
from gpuwise.serving.engines import (
    SchedulerConfig,
    draft_cost_fraction,
    scheduler_config,
    tokens_per_decode_step,
)
from gpuwise.workload import Workload
from gpuwise.workload.serving import ServingSpec

__all__ = ["KV_WATERMARK", "MAX_EVENTS_PER_REQUEST", "Replica", "SimResult", "simulate"]


# vLLM's scheduler admits a request only if 1 % of the KV blocks stay free after it (its
# watermark_blocks default, 0.01), which keeps admissions from immediately forcing preemptions.
KV_WATERMARK = 0.01
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
        self.draft_fraction = draft_cost_fraction(arch)  # one proposed token's draft pass / a step
        # a load test's measured / predicted speed (plan --evidence): scales every iteration
        spec = workload.serving
        self.speed_factor = (spec.step_time_factor if spec else None) or 1.0
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
            seconds *= 1 + k * self.draft_fraction
        return seconds * self.speed_factor

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
        return pp * st.time_s * self.cfg.step_time_factor


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
        """The ``pct`` percentile (nearest rank) of ``metric`` (ttft, tpot, e2e) in seconds; 0 with no
        completed request."""
        values = sorted(getattr(self, f"{metric}_s"))
        if not values:
            return 0.0
        rank = min(len(values) - 1, max(0, math.ceil(pct / 100 * len(values)) - 1))
        return values[rank]

    @property
    def throughput_rps(self) -> float:
        """Completed requests per second over the simulated time."""
        return self.completed / self.duration_s if self.duration_s else 0.0


def simulate(replica: Replica, draws: RequestDraws, rate_rps: float) -> SimResult:
    """Run ``draws`` arriving at ``rate_rps`` through one replica until every request finishes or
    the event cap (``MAX_EVENTS_PER_REQUEST`` × requests) is reached."""
    return _Run(replica, draws, rate_rps).run()


class _Run:
    """The state of one simulated run: per-request arrays, the scheduler's queues, the clocks.

    All decoders advance together, so a decoder's progress is ``d_clock − d_join[i]`` and the sums
    the step time and KV accounting need (contexts, private KV tokens) are kept as running bases:
    Σ over decoders = base + n_decoders · d_clock.
    """

    def __init__(self, replica: Replica, draws: RequestDraws, rate_rps: float) -> None:
        self.replica, self.cfg, self.rate_rps = replica, replica.cfg, rate_rps
        n = self.n = len(draws.prompts)
        self.arrival: list[float] = []
        t = 0.0
        for gap in draws.gaps:
            t += gap / rate_rps
            self.arrival.append(t)
        self.prompt_total = draws.prompts
        self.prompt_new = [max(1, math.ceil(p * (1 - replica.hit_rate))) for p in draws.prompts]
        self.out = draws.outputs
        self.need_pre = list(self.prompt_new)  # tokens to (re)compute before decoding
        self.done_pre = [0] * n
        self.gen = [0.0] * n  # tokens generated (as of joining the decoders)
        self.d_join = [0.0] * n
        self.version = [0] * n  # invalidates a request's stale completion-heap entries
        self.first = [math.inf] * n
        self.admitted_at = [math.inf] * n  # first admission (queueing ends)
        self.finish = [math.inf] * n
        self.cap_tokens = replica.capacity.tokens
        self.frag = replica.capacity.block_size / 2  # half a block wasted per sequence on average
        self.watermark = KV_WATERMARK * self.cap_tokens
        self.g = replica.tokens_per_step
        self.per_decode = 1 + self.cfg.speculative_tokens  # tokens a decoding sequence puts in a batch
        self.waiting: deque[int] = deque()
        self.prefilling: dict[int, None] = {}
        self.decoders: dict[int, None] = {}
        self.admitted: list[int] = []  # admission order, to preempt the newest (stale entries skipped)
        self.heap: list[tuple[float, int, int]] = []  # (d_clock at completion, request, version)
        self.d_clock = 0.0
        self.ctx_base = 0.0  # Σ (prompt_total + gen − d_join) over decoders
        self.kv_base = 0.0  # Σ (prompt_new + gen − d_join) over decoders: their private KV tokens
        self.kv_prefill = 0  # KV tokens held by requests still prefilling
        self.now = 0.0
        self.nxt = 0  # next request to arrive
        self.events = self.iterations = self.preemptions = self.completed = 0
        self.batch_time = self.busy = 0.0

    # --- the loop -------------------------------------------------------------------------------

    def run(self) -> SimResult:
        max_events = MAX_EVENTS_PER_REQUEST * self.n
        arrive, make_room, schedule_prefill = self._arrive, self._make_room, self._schedule_prefill
        iteration, advance = self._iteration, self._advance
        prefill_priority = not self.cfg.chunked_prefill and not self.cfg.decode_during_prefill
        while self.events < max_events:
            self.events += 1
            arrive()
            if not self.decoders and not self.prefilling and not self.waiting:
                if not self._idle_until_next_arrival():
                    break
                continue
            n_dec, used = make_room()
            chunks = schedule_prefill(n_dec, used)
            if prefill_priority and chunks:
                n_dec = 0  # prefill-priority iteration: decodes wait (vLLM without chunked prefill)
            if not chunks and not n_dec:
                if not self._idle_until_next_arrival():
                    break  # waiting requests can never be admitted: larger than the KV cache
                continue
            step, jumps = iteration(n_dec, used, chunks)
            advance(n_dec, step, jumps, chunks)
        return self._result()

    def _arrive(self) -> None:
        nxt, n, arrival, now = self.nxt, self.n, self.arrival, self.now
        while nxt < n and arrival[nxt] <= now:
            self.waiting.append(nxt)
            nxt += 1
        self.nxt = nxt

    def _idle_until_next_arrival(self) -> bool:
        if self.nxt >= self.n:
            return False
        self.now = self.arrival[self.nxt]
        return True

    def _kv_used(self, n_dec: int) -> float:
        return (
            self.kv_base + n_dec * self.d_clock + self.kv_prefill + (n_dec + len(self.prefilling)) * self.frag
        )

    def _make_room(self) -> tuple[int, float]:
        """Decodes need room to grow this iteration: preempt the newest requests until they have it."""
        n_dec = len(self.decoders)
        used = self._kv_used(n_dec)
        while n_dec and used + n_dec * self.g > self.cap_tokens and self._preempt_newest():
            n_dec = len(self.decoders)
            used = self._kv_used(n_dec)
        return n_dec, used

    def _schedule_prefill(self, n_dec: int, used: float) -> list[tuple[int, int]]:
        """Prefill chunks for this iteration: running prefills first, then admissions (FCFS)."""
        chunks: list[tuple[int, int]] = []
        if not self.waiting and not self.prefilling:
            return chunks  # nothing to prefill (most iterations: decode only)
        cfg = self.cfg
        budget = cfg.max_num_batched_tokens - n_dec * self.per_decode
        need, done = self.need_pre, self.done_pre
        free = self.cap_tokens - used - n_dec * self.g
        for i in self.prefilling:
            if budget <= 0:
                break
            c = min(need[i] - done[i], budget)
            chunks.append((i, c))
            budget -= c
            free -= c
        waiting = self.waiting
        while waiting and budget > 0 and n_dec + len(self.prefilling) < cfg.max_num_seqs:
            i = waiting[0]
            c = min(need[i], budget)
            if not cfg.chunked_prefill and c < need[i] and chunks:
                break  # without chunking a prompt is prefilled whole, alone if it must be
            # Admit only when the whole prompt fits with room left for every running sequence's next
            # token and (when others run) a watermark, as vLLM does: otherwise admission and
            # preemption chase each other and nothing progresses.
            active = n_dec + len(self.prefilling)
            if need[i] + self.frag + (active + 1) * self.g + (self.watermark if active else 0.0) > free:
                break
            waiting.popleft()
            self.admitted.append(i)
            if self.admitted_at[i] == math.inf:
                self.admitted_at[i] = self.now
            self.prefilling[i] = None
            chunks.append((i, c))
            budget -= c
            free -= need[i] + self.frag  # the whole prompt, reserved at admission
        return chunks

    def _iteration(self, n_dec: int, used: float, chunks: list[tuple[int, int]]) -> tuple[float, int]:
        """The step time and how many identical decode-only iterations run before the next event."""
        replica, g = self.replica, self.g
        ctx = (self.ctx_base + n_dec * self.d_clock) / n_dec if n_dec else 0.0
        if chunks:
            tokens = weighted = 0  # token counts: integers, exact in any order
            total, need, done = self.prompt_total, self.need_pre, self.done_pre
            for i, c in chunks:
                tokens += c
                weighted += (total[i] - need[i] + done[i] + c) * c
            return replica.iteration_s(n_dec, ctx, tokens, weighted / tokens), 1
        heap = self.heap
        jumps = math.ceil((heap[0][0] - self.d_clock) / g - 1e-9) if heap else 1
        jumps = min(jumps, int((self.cap_tokens - used) // (n_dec * g)) or 1)
        if self.nxt < self.n and not self.waiting and n_dec + len(self.prefilling) < self.cfg.max_num_seqs:
            step = replica.iteration_s(n_dec, ctx, 0, 0.0)  # an arrival could be admitted: stop there
            jumps = min(jumps, max(1, math.ceil((self.arrival[self.nxt] - self.now) / step)))
            if jumps <= 1:
                return step, 1
        if jumps > 1:  # timed at the run's middle context
            return replica.iteration_s(n_dec, ctx + jumps * g / 2, 0, 0.0), jumps
        return replica.iteration_s(n_dec, ctx, 0, 0.0), 1

    def _advance(self, n_dec: int, step: float, jumps: int, chunks: list[tuple[int, int]]) -> None:
        elapsed = step * jumps
        self.iterations += jumps
        now = self.now = self.now + elapsed
        self.busy += elapsed
        self.batch_time += n_dec * elapsed
        if n_dec:
            d_clock = self.d_clock = self.d_clock + self.g * jumps
            heap, version, decoders, finish = self.heap, self.version, self.decoders, self.finish
            while heap and heap[0][0] <= d_clock + 1e-9:
                _, i, ver = heapq.heappop(heap)
                if ver != version[i] or i not in decoders:
                    continue
                self._leave_decoders(i)
                finish[i] = now
                self.completed += 1
        done, first = self.done_pre, self.first
        for i, c in chunks:
            done[i] += c
            self.kv_prefill += c
            if done[i] >= self.need_pre[i]:
                del self.prefilling[i]
                self.kv_prefill -= done[i]
                if first[i] == math.inf:
                    first[i] = now
                    self.gen[i] = 1.0  # the prefill's last step emits the first token
                self._join_decoders(i)

    # --- requests moving between the queues -----------------------------------------------------

    def _join_decoders(self, i: int) -> None:
        gen_i, d, out_i = self.gen[i], self.d_clock, self.out[i]
        if gen_i >= out_i:
            self.finish[i] = self.now
            self.completed += 1
            return
        self.decoders[i] = None
        self.d_join[i] = d
        self.ctx_base += self.prompt_total[i] + gen_i - d
        self.kv_base += self.prompt_new[i] + gen_i - d
        version = self.version[i] = self.version[i] + 1
        heapq.heappush(self.heap, (d + (out_i - gen_i) / self.g, i, version))

    def _leave_decoders(self, i: int) -> None:
        del self.decoders[i]
        gen, d = self.gen, self.d_clock
        gen[i] += d - self.d_join[i]
        self.ctx_base -= self.prompt_total[i] + gen[i] - d
        self.kv_base -= self.prompt_new[i] + gen[i] - d
        self.version[i] += 1

    def _preempt_newest(self) -> bool:
        """Free the newest running request's KV; it waits first in line and recomputes (vLLM's default)."""
        while self.admitted:
            i = self.admitted.pop()
            if i in self.decoders:
                self._leave_decoders(i)
            elif i in self.prefilling:
                del self.prefilling[i]
                self.kv_prefill -= self.done_pre[i]
            else:
                continue
            self.need_pre[i] = self.prompt_new[i] + int(self.gen[i])  # prompt and generated tokens
            self.done_pre[i] = 0
            self.waiting.appendleft(i)
            self.preemptions += 1
            return True
        return False

    def _result(self) -> SimResult:
        n, arrival, first, finish, out = self.n, self.arrival, self.first, self.finish, self.out
        return SimResult(
            rate_rps=self.rate_rps,
            ttft_s=tuple(first[i] - arrival[i] for i in range(n)),
            queue_s=tuple(self.admitted_at[i] - arrival[i] for i in range(n)),
            tpot_s=tuple((finish[i] - first[i]) / (out[i] - 1) if out[i] > 1 else 0.0 for i in range(n)),
            e2e_s=tuple(finish[i] - arrival[i] for i in range(n)),
            duration_s=self.now,
            completed=self.completed,
            preemptions=self.preemptions,
            mean_decode_batch=self.batch_time / self.busy if self.busy else 0.0,
            cut_off=self.completed < n,
            events=self.events,
            iterations=self.iterations,
        )
