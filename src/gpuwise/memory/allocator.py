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


# A pool block is an index into the pool's arrays; a free block's key in the sorted free list is its size
# shifted past the index, so best fit is one bisect on plain ints. Ties between equal sizes go to the
# earlier-created block (a merge keeps the left block's index). The object replay before it broke ties by
# id(), a memory address, so a figure could shift with the process's heap history; creation order is what
# it computed while addresses rose with creation.
_INDEX_BITS = 24  # 16 M blocks; keys stay within two 30-bit digits for sizes under 64 GiB
_INDEX_MASK = (1 << _INDEX_BITS) - 1


class _Pool:
    """The large pool: best-fit over cached free blocks, new segments when none is large enough. Blocks live
    in parallel lists (size, neighbours, free flag) rather than objects: a qwen2.5-7b step is 4,720
    allocations and frees, an estimate replays hundreds of steps, and per-block objects and method calls
    were nearly all of its time."""

    def __init__(self) -> None:
        self.free: list[int] = []  # size << _INDEX_BITS | block, ascending
        self.size: list[int] = []
        self.prev: list[int] = []  # -1: first block of its segment
        self.next: list[int] = []  # -1: last block of its segment
        self.is_free: list[bool] = []
        self.reserved = 0

    @property
    def peak(self) -> int:
        """Segments are never returned, so the reserve only grows: its peak is its current value."""
        return self.reserved

    @classmethod
    def of_segments(cls, segments: tuple[int, ...]) -> _Pool:
        """A pool between steps: every block freed, so each segment is one free block; ``segments`` in the
        order they were mapped, which keeps every later tie broken as in the run that mapped them."""
        pool = cls()
        pool.size = list(segments)
        pool.prev = [-1] * len(segments)
        pool.next = [-1] * len(segments)
        pool.is_free = [True] * len(segments)
        pool.free = sorted(n << _INDEX_BITS | i for i, n in enumerate(segments))
        pool.reserved = sum(segments)
        return pool

    def segments(self) -> tuple[int, ...]:
        """The segment sizes in mapping order, once a step has freed every block (the pool's whole state)."""
        heads = [i for i, before in enumerate(self.prev) if before == -1]  # a merged-away block has a left
        if any(self.next[i] != -1 or not self.is_free[i] for i in heads):
            raise RuntimeError("allocator replay: a step left a block allocated")
        return tuple(self.size[i] for i in heads)

    def run(self, program: tuple[int, ...], sizes: tuple[int, ...]) -> None:
        """Replay a step's program (see ``_template``): an op ``j >= 0`` allocates ``sizes[j]`` (rounded)
        bytes, an op ``~k`` frees the program's k-th allocation. Best fit, split and merge are inlined
        with the pool's lists bound to locals: a call per operation was most of the replay's time."""
        free, size, prev, nxt, is_free = self.free, self.size, self.prev, self.next, self.is_free
        bisect_left, insort = bisect.bisect_left, bisect.insort
        bits, mask, small = _INDEX_BITS, _INDEX_MASK, SMALL_SIZE_BYTES
        if len(size) + 2 * len(program) > mask:  # an op creates at most two blocks; keys must not collide
            raise OverflowError("allocator replay: too many blocks for the free-list keys")
        held: list[int] = []
        for op in program:
            if op >= 0:  # best fit; a new segment when no cached block is large enough
                n = sizes[op]
                i = bisect_left(free, n << bits)
                if i < len(free):
                    b = free.pop(i) & mask
                else:
                    b = len(size)
                    size.append(_segment(n))
                    prev.append(-1)
                    nxt.append(-1)
                    is_free.append(True)
                    self.reserved += size[b]
                rest = size[b] - n
                if rest > small:  # split: the tail stays cached
                    tail, after = len(size), nxt[b]
                    size.append(rest)
                    prev.append(b)
                    nxt.append(after)
                    is_free.append(True)
                    if after >= 0:
                        prev[after] = tail
                    nxt[b], size[b] = tail, n
                    insort(free, rest << bits | tail)
                is_free[b] = False
                held.append(b)
                continue
            b = held[~op]  # free, merged with its free neighbours in the segment (the left one survives)
            is_free[b] = True
            left = prev[b]
            if left >= 0 and is_free[left]:
                del free[bisect_left(free, size[left] << bits | left)]
                size[left] += size[b]
                after = nxt[left] = nxt[b]
                if after >= 0:
                    prev[after] = left
                b = left
            right = nxt[b]
            if right >= 0 and is_free[right]:
                del free[bisect_left(free, size[right] << bits | right)]
                size[b] += size[right]
                after = nxt[b] = nxt[right]
                if after >= 0:
                    prev[after] = b
            insort(free, size[b] << bits | b)


class _Sym:
    """A step's token count or sequence length left symbolic, times per-token bytes: the step's sequence of
    allocations is the same at every length, so it is recorded once per shape and only its ~15 distinct
    sizes are evaluated per length. Names multiply first (exact integers), then the factors in the order the
    step's code wrote them, so every size is the float the step itself computes."""

    __slots__ = ("factors", "names")

    def __init__(self, names: tuple[str, ...], factors: tuple[float, ...] = ()) -> None:
        self.names, self.factors = names, factors

    def __mul__(self, other: float | _Sym) -> _Sym:
        if isinstance(other, _Sym):
            if self.factors or other.factors:  # (t * b) * seq would round differently from t * seq * b
                raise ValueError("allocator replay: multiply token counts before bytes per token")
            return _Sym(self.names + other.names)
        return _Sym(self.names, (*self.factors, other))

    def key(self) -> tuple[tuple[str, ...], tuple[float, ...]]:
        return self.names, self.factors


class _Tape:
    """Records a step's allocations and frees as a program for ``_Pool.run`` (allocations as indices into
    the step's distinct symbolic sizes)."""

    def __init__(self) -> None:
        self.ops: list[int] = []
        self.sizes: dict[tuple[tuple[str, ...], tuple[float, ...]], int] = {}
        self.count = 0

    def malloc(self, nbytes: _Sym) -> int:
        self.ops.append(self.sizes.setdefault(nbytes.key(), len(self.sizes)))
        self.count += 1
        return self.count - 1

    def release(self, k: int) -> None:
        self.ops.append(~k)


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


def _layer_forward(pool: _Tape, s: StepShape, t: _Sym, seq: _Sym) -> tuple[list[int], list[int], int]:
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


def _step(pool: _Tape, s: StepShape, tokens: _Sym, seq: _Sym) -> None:
    """Allocate and free one training step's activations, logits and gradients in autograd's order
    (``tokens`` = batch x ``seq``)."""
    m, f = pool.malloc, pool.release
    inputs = [m(tokens * s.hidden_bytes)]
    saved: list[tuple[list[int], list[int]]] = []
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


SizeKey = tuple[tuple[str, ...], tuple[float, ...]]


@functools.lru_cache(maxsize=64)
def _template(shape: StepShape) -> tuple[tuple[int, ...], tuple[SizeKey, ...]]:
    """One step's allocator program at a symbolic length (``_Tape``) and its distinct sizes."""
    tape = _Tape()
    _step(tape, shape, _Sym(("tokens",)), _Sym(("seq",)))
    return tuple(tape.ops), tuple(tape.sizes)


def _program(shape: StepShape, tokens: int, seq: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The step's program and its rounded sizes at ``tokens`` (= batch x ``seq``)."""
    ops, keys = _template(shape)
    count = {"tokens": tokens, "seq": seq}
    sizes = []
    for names, factors in keys:
        nbytes: float = math.prod(count[name] for name in names)
        for factor in factors:
            nbytes = nbytes * factor
        sizes.append(_round(nbytes))
    return ops, tuple(sizes)


def _run_reserve(
    shape: StepShape,
    lengths: tuple[int, ...],
    batch: int,
    memo: dict[tuple[tuple[int, ...], int], tuple[int, ...]],
) -> int:
    """Reserved bytes after steps of ``lengths`` from an empty pool. Between steps the pool is only its
    segments (every block freed and merged), so a step's outcome is memoised on (segments, length): orders
    share their first records and their cap, and the single step at the longest length is a run's first."""
    segments: tuple[int, ...] = ()
    for length in lengths:
        key = (segments, length)
        if key not in memo:
            pool = _Pool.of_segments(segments)
            pool.run(*_program(shape, length * batch, length))
            memo[key] = pool.segments()
        segments = memo[key]
    return sum(segments)


@functools.lru_cache(maxsize=256)  # the planner re-estimates one workload under many configurations
def variable_length_factor(shape: StepShape, orders: tuple[tuple[int, ...], ...], batch: int) -> float:
    """Reserved transient of a run through each order's record lengths over that of one step at its longest,
    averaged over the orders (≥ 1)."""
    ratios: list[float] = []
    memo: dict[tuple[tuple[int, ...], int], tuple[int, ...]] = {}
    for lengths in orders:
        run = _run_reserve(shape, lengths, batch, memo)
        single = _run_reserve(shape, lengths[-1:], batch, memo)
        ratios.append(run / single if single else 1.0)
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
