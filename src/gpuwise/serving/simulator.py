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
import operator
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
        self.eager, self.speculative_tokens = self.model.eager, self.cfg.speculative_tokens
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
            seconds = self._linear_s(stage_key) + self._decode_coef * decode_seqs * decode_ctx
            seconds += self._prefill_coef * prefill_tokens * prefill_ctx
        if k and decode_seqs:
            seconds *= 1 + k * self.draft_fraction
        return seconds * self.speed_factor

    def decode_s(self, decode_seqs: int, decode_ctx: float) -> float:
        """``iteration_s(decode_seqs, decode_ctx, 0, 0.0)``, the simulator's commonest call, without
        the prefill terms (which add exactly zero there): the same number, fewer operations."""
        k = self.speculative_tokens
        if self.eager:
            return self.iteration_s(decode_seqs, decode_ctx, 0, 0.0)
        seconds = self._linear_s(decode_seqs * (1 + k)) + self._decode_coef * decode_seqs * decode_ctx
        if k and decode_seqs:
            seconds *= 1 + k * self.draft_fraction
        return seconds * self.speed_factor

    def _linear_s(self, stage_key: int) -> float:
        """The linear layers' time for ``stage_key`` tokens over the pipeline, computed once per count."""
        lin = self._linear.get(stage_key)
        if lin is None:
            lin = self._linear[stage_key] = self._raw(stage_key / self.pp, 0, 0.0, 0, 0.0)
        return lin

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
        self.max_seqs = self.cfg.max_num_seqs
        self.decode_s = replica.decode_s
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
        """The event loop. Hot (~600 turns per run, ~1,500 runs per serving plan), so the common checks
        (an arrival due, the KV room decodes need) are inlined and decode-only turns take their own
        path; every quantity is computed by the same expression as in the helpers, so results are
        identical to the unrolled form."""
        max_events = MAX_EVENTS_PER_REQUEST * self.n
        prefill_priority = not self.cfg.chunked_prefill and not self.cfg.decode_during_prefill
        n, arrival, frag, g, cap = self.n, self.arrival, self.frag, self.g, self.cap_tokens
        waiting, prefilling, decoders = self.waiting, self.prefilling, self.decoders
        events = 0
        while events < max_events:
            events += 1
            if self.nxt < n and arrival[self.nxt] <= self.now:
                self._arrive()
            n_dec = len(decoders)
            if not n_dec and not prefilling and not waiting:
                if not self._idle_until_next_arrival():
                    break
                continue
            used = self.kv_base + n_dec * self.d_clock + self.kv_prefill + (n_dec + len(prefilling)) * frag
            if n_dec and used + n_dec * g > cap:
                n_dec, used = self._make_room()
            chunks = self._schedule_prefill(n_dec, used) if waiting or prefilling else None
            if chunks:
                # prefill-priority iteration: decodes wait (vLLM without chunked prefill)
                self._prefill_iteration(0 if prefill_priority else n_dec, chunks)
            elif n_dec:
                self._decode_iterations(n_dec, used)
            elif not self._idle_until_next_arrival():
                break  # waiting requests can never be admitted: larger than the KV cache
        self.events = events
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
        cfg, g, frag, prefilling = self.cfg, self.g, self.frag, self.prefilling
        budget = cfg.max_num_batched_tokens - n_dec * self.per_decode
        need, done = self.need_pre, self.done_pre
        free = self.cap_tokens - used - n_dec * g
        for i in prefilling:
            if budget <= 0:
                break
            c = min(need[i] - done[i], budget)
            chunks.append((i, c))
            budget -= c
            free -= c
        waiting, max_seqs, chunked = self.waiting, cfg.max_num_seqs, cfg.chunked_prefill
        while waiting and budget > 0 and n_dec + len(prefilling) < max_seqs:
            i = waiting[0]
            c = min(need[i], budget)
            if not chunked and c < need[i] and chunks:
                break  # without chunking a prompt is prefilled whole, alone if it must be
            # Admit only when the whole prompt fits with room left for every running sequence's next
            # token and (when others run) a watermark, as vLLM does: otherwise admission and
            # preemption chase each other and nothing progresses.
            active = n_dec + len(prefilling)
            if need[i] + frag + (active + 1) * g + (self.watermark if active else 0.0) > free:
                break
            waiting.popleft()
            self.admitted.append(i)
            if self.admitted_at[i] == math.inf:
                self.admitted_at[i] = self.now
            prefilling[i] = None
            chunks.append((i, c))
            budget -= c
            free -= need[i] + frag  # the whole prompt, reserved at admission
        return chunks

    def _prefill_iteration(self, n_dec: int, chunks: list[tuple[int, int]]) -> None:
        """One iteration with prefill chunks (and ``n_dec`` decodes), timed and applied."""
        ctx = (self.ctx_base + n_dec * self.d_clock) / n_dec if n_dec else 0.0
        tokens = weighted = 0  # token counts: integers, exact in any order
        total, need, done = self.prompt_total, self.need_pre, self.done_pre
        for i, c in chunks:
            tokens += c
            weighted += (total[i] - need[i] + done[i] + c) * c
        step = self.replica.iteration_s(n_dec, ctx, tokens, weighted / tokens)
        self._advance(n_dec, step)
        first = self.first
        for i, c in chunks:
            done[i] += c
            self.kv_prefill += c
            if done[i] >= need[i]:
                del self.prefilling[i]
                self.kv_prefill -= done[i]
                if first[i] == math.inf:
                    first[i] = self.now
                    self.gen[i] = 1.0  # the prefill's last step emits the first token
                self._join_decoders(i)

    def _decode_iterations(self, n_dec: int, used: float) -> None:
        """A run of identical decode-only iterations up to the next event (a completion, the KV cache
        filling, an arrival that could be admitted), timed at the run's middle context."""
        decode_s, g, d_clock, heap = self.decode_s, self.g, self.d_clock, self.heap
        ctx = (self.ctx_base + n_dec * d_clock) / n_dec
        # min()/max() spelled as comparisons (integers: the same value, no builtin call)
        jumps = math.ceil((heap[0][0] - d_clock) / g - 1e-9) if heap else 1
        room = int((self.cap_tokens - used) // (n_dec * g)) or 1
        if room < jumps:
            jumps = room
        if self.nxt < self.n and not self.waiting and n_dec + len(self.prefilling) < self.max_seqs:
            step = decode_s(n_dec, ctx)  # an arrival could be admitted: stop there
            until = math.ceil((self.arrival[self.nxt] - self.now) / step)
            if until < jumps:
                jumps = until
            if jumps > 1:
                step = decode_s(n_dec, ctx + jumps * g / 2)
            else:
                jumps = 1
        elif jumps > 1:
            step = decode_s(n_dec, ctx + jumps * g / 2)
        else:
            step, jumps = decode_s(n_dec, ctx), 1
        # _advance(n_dec, step, jumps), inlined
        elapsed = step * jumps
        self.iterations += jumps
        now = self.now = self.now + elapsed
        self.busy += elapsed
        self.batch_time += n_dec * elapsed
        d_clock = self.d_clock = d_clock + g * jumps
        if heap and heap[0][0] <= d_clock + 1e-9:
            self._finish_due(d_clock, now)

    def _advance(self, n_dec: int, step: float) -> None:
        """Move the clocks by one iteration of ``step`` seconds; decoders that reach their output
        length finish (``_decode_iterations`` does the same for a run of iterations)."""
        self.iterations += 1
        now = self.now = self.now + step
        self.busy += step
        self.batch_time += n_dec * step
        if n_dec:
            d_clock = self.d_clock = self.d_clock + self.g
            heap = self.heap
            if heap and heap[0][0] <= d_clock + 1e-9:
                self._finish_due(d_clock, now)

    def _finish_due(self, d_clock: float, now: float) -> None:
        """Decoders whose completion ``d_clock`` has come leave and finish at ``now`` (stale heap entries
        are skipped)."""
        heap, version, decoders, finish = self.heap, self.version, self.decoders, self.finish
        due = d_clock + 1e-9
        while heap and heap[0][0] <= due:
            _, i, ver = heapq.heappop(heap)
            if ver != version[i] or i not in decoders:
                continue
            self._leave_decoders(i)
            finish[i] = now
            self.completed += 1

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
            ttft_s=tuple(map(operator.sub, first, arrival)),
            queue_s=tuple(map(operator.sub, self.admitted_at, arrival)),
            tpot_s=tuple((finish[i] - first[i]) / (out[i] - 1) if out[i] > 1 else 0.0 for i in range(n)),
            e2e_s=tuple(map(operator.sub, finish, arrival)),
            duration_s=self.now,
            completed=self.completed,
            preemptions=self.preemptions,
            mean_decode_batch=self.batch_time / self.busy if self.busy else 0.0,
            cut_off=self.completed < n,
            events=self.events,
            iterations=self.iterations,
        )
