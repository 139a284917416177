"""Reserved memory of a variable-length run: a replay of the CUDA caching allocator.

When a run's batches are neither packed nor padded to ``seq_len`` (each step runs at its own longest
sample), ``torch.cuda.max_memory_reserved`` over the run is not one step's reserve. The caching allocator
keeps every freed block cached; a step longer than any before it asks for tensors larger than every cached
block, and blocks of different segments never merge, so it maps new segments while the earlier, shorter
steps' segments stay reserved (PyTorch ``c10/cuda/CUDACachingAllocator.cpp``; zdevito, pytorch PR #96995:
"OOMs that happen the first time we see a new largest input and would otherwise have to allocate new
segments"; the PyTorch DevLog "When does fragmentation occur in the CUDA caching allocator?", 2026: small
then large allocations fragment, "blocks in different segments can never merge"). Steps no longer than an
earlier one are served from the cache, so only the *record* lengths of the run matter: in a random order
the r-th longest of N samples is a record with probability 1/r: about ln(N) records.

This module replays the allocator's large pool (request rounding to 512 B; segments of 20 MiB for requests
under 10 MiB, else the request rounded up to 2 MiB; best fit; a block split when over 1 MiB would remain;
freed blocks merged with free neighbours of the same segment) over one decoder step's tensor sequence at
each record length of random orders of the run's samples (a log-normal with the dataset's mean and
standard deviation), and returns the mean ratio of the run's reserved transient to one step's at its
longest length. The step's tensors are the estimate's own: what each layer keeps for backward comes from
the block walk of ``gpuwise.memory.activations`` (so eager attention's scores, which grow with the square of
the length, and a run without checkpointing keep what autograd keeps), the head and loss from its logits
sizes. It carries no fitted constant: every size is the allocator's or the model's.
"""

from __future__ import annotations

import bisect
import functools
import math
import random
from dataclasses import dataclass
from statistics import NormalDist
from typing import Literal

from gpuwise.catalog import ModelArch
from gpuwise.memory.activations import logits_bytes, output_vocab, saved_per_token
from gpuwise.memory.frameworks import profile_for_workload
from gpuwise.memory.regime import regime_for
from gpuwise.units import GiB, MiB
from gpuwise.workload import Workload

__all__ = [
    "DEFAULT_SAMPLES",
    "STEP_COMPONENTS",
    "OverLength",
    "StepShape",
    "record_lengths",
    "step_shape",
    "variable_length_factor",
    "variable_length_reserved",
]

OverLength = Literal["truncate", "drop"]
# Samples of a run whose length the workload does not give (neither run_samples nor train_tokens): an
# assumption the note states; 1,000 is the sampled run of ms-swift's memory benchmark
# (scripts/benchmark/test_memory_time/run_single.py, train_dataset_sample). Records grow as ln(samples).
DEFAULT_SAMPLES = 1000
# Orders averaged (fixed: the same workload always gets the same figure). The reserve of one order scatters
# widely (standard deviation about 0.2x the mean for a 2,048-token cap): the mean is the expected figure, not
# a bound. Measured convergence (benchmarks/validate_memory.py over four disjoint sets of 64 or 128 orders):
# all-rows p90 15.62-15.79 %, the ms-swift rows' factors within about +-2 % of their 256-order means.
ORDERS = 64

# c10/cuda/CUDACachingAllocator.cpp (torch 2.1-2.5): kMinBlockSize, kSmallSize, kLargeBuffer,
# kMinLargeAlloc, kRoundLarge.
MIN_BLOCK_BYTES = 512
SMALL_SIZE_BYTES = 1 * MiB
LARGE_BUFFER_BYTES = 20 * MiB
MIN_LARGE_ALLOC_BYTES = 10 * MiB
ROUND_LARGE_BYTES = 2 * MiB


def _round(n: float) -> int:
    return max(MIN_BLOCK_BYTES, -(-int(n) // MIN_BLOCK_BYTES) * MIN_BLOCK_BYTES)


def _segment(n: int) -> int:
    if n <= SMALL_SIZE_BYTES:
        return 2 * MiB
    if n < MIN_LARGE_ALLOC_BYTES:
        return LARGE_BUFFER_BYTES
    return -(-n // ROUND_LARGE_BYTES) * ROUND_LARGE_BYTES


class _Block:
    __slots__ = ("free", "next", "prev", "size")

    def __init__(self, size: int) -> None:
        self.size, self.free = size, True
        self.prev: _Block | None = None
        self.next: _Block | None = None


class _Pool:
    """The large pool: best-fit over cached free blocks, new segments when none is large enough."""

    def __init__(self) -> None:
        self.free: list[tuple[int, int, _Block]] = []
        self.reserved = self.peak = 0

    def _add(self, b: _Block) -> None:
        bisect.insort(self.free, (b.size, id(b), b))

    def _remove(self, b: _Block) -> None:
        self.free.pop(bisect.bisect_left(self.free, (b.size, id(b), b)))

    def malloc(self, nbytes: float) -> _Block:
        n = _round(nbytes)
        i = bisect.bisect_left(self.free, (n, 0))
        if i < len(self.free):
            b = self.free.pop(i)[2]
        else:
            size = _segment(n)
            b = _Block(size)
            self.reserved += size
            self.peak = max(self.peak, self.reserved)
        if b.size - n > SMALL_SIZE_BYTES:  # split: the tail stays cached
            tail = _Block(b.size - n)
            tail.prev, tail.next = b, b.next
            if b.next:
                b.next.prev = tail
            b.next, b.size = tail, n
            self._add(tail)
        b.free = False
        return b

    def release(self, b: _Block) -> None:
        b.free = True
        if b.prev is not None and b.prev.free:
            self._remove(b.prev)
            b = self._join(b.prev, b)
        if b.next is not None and b.next.free:
            self._remove(b.next)
            b = self._join(b, b.next)
        self._add(b)

    @staticmethod
    def _join(left: _Block, right: _Block) -> _Block:
        """Merge ``right`` into its neighbour ``left`` (same segment); returns ``left``."""
        left.size += right.size
        left.next = right.next
        if right.next:
            right.next.prev = left
        return left


@dataclass(frozen=True)
class StepShape:
    """One decoder step's tensor sizes per token (bytes): hidden, attention projections, MLP, the tensors one
    layer keeps for backward (its attention half and MLP half per token, the eager attention scores per token
    and per token of the sequence; gpuwise.memory.activations.saved_per_token), the head and loss
    (forward tensors, backward gradients), layer count and whether layers are recomputed."""

    hidden_bytes: float
    qkv_bytes: float
    attn_out_bytes: float
    mlp_bytes: float
    saved_attention: tuple[float, ...]
    saved_mlp: tuple[float, ...]
    saved_scores: tuple[float, ...]
    logits_fwd_bytes: tuple[float, ...]
    logits_bwd_bytes: tuple[float, ...]
    layers: int
    recompute: bool


def _layer_forward(pool: _Pool, s: StepShape, t: int, seq: int) -> tuple[list[_Block], list[_Block], _Block]:
    """One layer's forward: its kept tensors (attention half with the scores, MLP half) and its output; the
    norm outputs, projections' outputs and the residual sum are freed as autograd frees them."""
    m, f = pool.malloc, pool.release
    n1 = m(t * s.hidden_bytes)
    attn = [m(t * b) for b in s.saved_attention] + [m(t * seq * b) for b in s.saved_scores]
    f(n1)
    p = m(t * s.hidden_bytes)
    mid = m(t * s.hidden_bytes)
    f(p)
    n2 = m(t * s.hidden_bytes)
    mlp = [m(t * b) for b in s.saved_mlp]
    prod = m(t * s.mlp_bytes)
    f(n2)
    d = m(t * s.hidden_bytes)
    f(prod)
    out = m(t * s.hidden_bytes)
    f(d)
    f(mid)
    return attn, mlp, out


def _step(pool: _Pool, s: StepShape, tokens: int, seq: int) -> None:
    """Allocate and free one training step's activations, logits and gradients in autograd's order
    (``tokens`` = batch x ``seq``)."""
    m, f = pool.malloc, pool.release
    inputs = [m(tokens * s.hidden_bytes)]
    saved: list[tuple[list[_Block], list[_Block]]] = []
    for _ in range(s.layers):
        attn, mlp, out = _layer_forward(pool, s, tokens, seq)
        inputs.append(out)
        if s.recompute:
            for b in attn + mlp:
                f(b)
        else:
            saved.append((attn, mlp))
    head = [m(tokens * s.hidden_bytes)] + [m(tokens * b) for b in s.logits_fwd_bytes]
    for b in head[2:]:
        f(b)
    grads = [m(tokens * b) for b in s.logits_bwd_bytes]
    f(head[1])
    for b in grads[:-1]:
        f(b)
    grad = m(tokens * s.hidden_bytes)
    f(grads[-1])
    f(head[0])
    for layer in reversed(range(s.layers)):
        if s.recompute:
            attn, mlp, out = _layer_forward(pool, s, tokens, seq)
            f(out)
        else:
            attn, mlp = saved.pop()
        dm, dg, du = m(tokens * s.mlp_bytes), m(tokens * s.mlp_bytes), m(tokens * s.mlp_bytes)
        f(dm)
        for b in mlp:
            f(b)
        dx2 = m(tokens * s.hidden_bytes)
        for b in (dg, du):
            f(b)
        f(grad)
        d_o, dq = m(tokens * s.attn_out_bytes), m(tokens * s.qkv_bytes)
        d_scores = [m(tokens * seq * b) for b in s.saved_scores]
        for b in d_scores:
            f(b)
        f(d_o)
        da = m(tokens * s.hidden_bytes)
        f(dq)
        for b in attn:
            f(b)
        grad = m(tokens * s.hidden_bytes)
        for b in (da, dx2, inputs[layer + 1]):
            f(b)
    f(grad)
    f(inputs[0])


def _halton(index: int, base: int) -> float:
    """The ``index``-th point (from 1) of the van der Corput sequence in ``base``: evenly spread in (0, 1)."""
    point, scale = 0.0, 1.0
    while index > 0:
        scale /= base
        point += scale * (index % base)
        index //= base
    return point


# Bases of the quasi-random coordinates of the top records' (quantile, position) pairs: the three longest
# records set most of the reserve, so their draws are spread evenly over the orders (a Halton sequence)
# instead of left to chance; later records draw from the order's seeded generator.
HALTON_BASES = (2, 3, 5, 7, 11, 13)


def record_lengths(
    mean: float,
    std: float,
    cap: int,
    samples: float,
    batch: int = 1,
    over_length: OverLength = "truncate",
    seed: int = 0,
) -> list[int]:
    """The record-setting step lengths (tokens per sample, ascending) of one random order of ``samples``
    samples from a log-normal of the given mean and standard deviation, batched ``batch`` at a time and
    padded to each batch's longest; samples over ``cap`` are cut to it (``truncate``) or left out
    (``drop``). Drawn from the top down, record by record: the longest step is the maximum of all steps, at a
    uniform position; the record before it is the maximum of the steps before that position (all below it),
    and so on, so a run of any length costs its ~ln(steps) records. ``seed`` picks the order: the point of a
    Halton sequence for the three longest records, the seed of a generator for the rest."""
    rng = random.Random(seed)
    sigma = math.sqrt(math.log(1.0 + (std / mean) ** 2)) if std > 0 else 1e-6
    mu = math.log(mean) - sigma * sigma / 2
    nd = NormalDist()
    below = nd.cdf((math.log(cap) - mu) / sigma)  # share of samples within the cap
    kept = below if over_length == "drop" else 1.0
    count = max(1, round(samples * kept / batch))  # steps at or before the record being drawn
    draws = iter([_halton(seed + 1, base) for base in HALTON_BASES])
    lengths: list[int] = []
    top = 1.0  # quantile of the record above among the step maxima
    while count >= 1:
        top *= next(draws, rng.random()) ** (1.0 / count)  # the maximum of `count` steps below the last
        q = top ** (1.0 / batch) * kept  # ... among single samples
        if q >= below:
            lengths.append(cap)
        else:
            lengths.append(max(1, round(math.exp(mu + sigma * nd.inv_cdf(max(q, 1e-12))))))
        count = math.floor(next(draws, rng.random()) * count)  # steps before it: a uniform position
    return sorted(set(lengths))


@functools.lru_cache(maxsize=256)  # the planner re-estimates one workload under many configurations
def variable_length_factor(shape: StepShape, orders: tuple[tuple[int, ...], ...], batch: int) -> float:
    """Reserved transient of a run through each order's record lengths over that of one step at its longest,
    averaged over the orders (≥ 1)."""
    ratios: list[float] = []
    single_peak: dict[int, int] = {}
    for lengths in orders:
        run = _Pool()
        for length in lengths:
            _step(run, shape, length * batch, length)
        if lengths[-1] not in single_peak:
            single = _Pool()
            _step(single, shape, lengths[-1] * batch, lengths[-1])
            single_peak[lengths[-1]] = single.peak
        ratios.append(run.peak / single_peak[lengths[-1]] if single_peak[lengths[-1]] else 1.0)
    return max(1.0, sum(ratios) / len(ratios))


# Per-step tensors that scale with tokens; the rest of a training step's memory lasts across steps.
STEP_COMPONENTS = ("activations", "logits_loss", "temporaries", "kv_cache")


def step_shape(arch: ModelArch, w: Workload) -> StepShape:
    """A decoder step's tensors per token: 16-bit activations (fp32 when the workload computes in fp32), what
    each layer keeps (the estimate's own block walk), and the head and loss the estimate sizes (its forward
    and backward peaks per logit: the head output, then the rest of the forward peak as two tensors; in
    backward, the loss gradients and the head output's gradient)."""
    regime = regime_for(w)
    profile = profile_for_workload(w)
    act = 4.0 if w.precision == "fp32" else 2.0
    experts = max(arch.experts_per_token, 1) if arch.is_moe else 1
    kept = saved_per_token(arch, w, regime, profile)
    fwd, bwd = logits_bytes(arch, w, regime, profile, 1, 1)
    head = act * output_vocab(arch) / w.tp
    rest = max(fwd - head, 0.0)
    return StepShape(
        hidden_bytes=act * arch.hidden_size,
        qkv_bytes=act * (arch.q_dim + 2 * arch.kv_dim),
        attn_out_bytes=act * arch.q_dim,
        mlp_bytes=act * arch.intermediate_size * experts,
        saved_attention=kept.attention,
        saved_mlp=kept.mlp,
        saved_scores=kept.scores,
        logits_fwd_bytes=(head, rest / 2, rest / 2),
        logits_bwd_bytes=(max(bwd - 2 * head, 0.0), head),
        layers=arch.num_layers,
        recompute=w.grad_checkpointing != "none",
    )


def variable_length_reserved(
    arch: ModelArch, w: Workload, reserved_bytes: float, step_bytes: float, limit_bytes: float
) -> tuple[float, str]:
    """Peak reserved bytes of a variable-length run (``w.sample_tokens_mean`` set) and the note saying so:
    the per-step part of one step's reserve at ``seq_len`` (``step_bytes``) scaled by the replayed
    allocator's record-length factor, never above ``limit_bytes`` (a failed cudaMalloc frees the cached
    segments and retries, so reserved memory stops at the device)."""
    mean = w.sample_tokens_mean or float(w.seq_len)
    if reserved_bytes >= limit_bytes:  # one step already fills the device: nothing more can be reserved
        return reserved_bytes, "variable-length run: one step at seq_len already reserves the whole device"
    samples = w.run_samples or (w.train_tokens * w.epochs / mean if w.train_tokens else 0.0)
    assumed = "" if samples else f" (run length not given: {DEFAULT_SAMPLES:,} samples assumed)"
    orders = tuple(
        tuple(
            record_lengths(
                mean,
                w.sample_tokens_std,
                w.seq_len,
                samples or DEFAULT_SAMPLES,
                w.batch_size,
                w.over_length,
                seed,
            )
        )
        for seed in range(ORDERS)
    )
    factor = variable_length_factor(step_shape(arch, w), orders, w.batch_size)
    lengths = orders[0]
    extra = (factor - 1.0) * step_bytes
    new = max(reserved_bytes, min(reserved_bytes + extra, limit_bytes))
    note = (
        f"variable-length run (samples {mean:,.0f} ± {w.sample_tokens_std:,.0f} tokens, {w.over_length} over "
        f"{w.seq_len:,}){assumed}: the caching allocator keeps the segments of each earlier record length "
        f"(one random order: {', '.join(f'{n:,}' for n in lengths)} tokens), on average {factor:.2f}x one "
        "step's reserve: "
        f"+{(new - reserved_bytes) / GiB:.2f} GiB reserved (expandable_segments:True avoids most of it)"
    )
    return new, note
