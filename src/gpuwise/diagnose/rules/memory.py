"""Memory rules: out-of-memory risk, growth across steps (a leak), materialized attention scores, a
dominant KV cache and bandwidth-bound decoding.

Sizes are bytes (GiB in the text); growth is a Theil-Sen slope in bytes per step, its lower 95 % bound
above zero before it is called a trend.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

from gpuwise.diagnose import thresholds as T
from gpuwise.diagnose.evidence import Evidence
from gpuwise.diagnose.finding import Finding, Gain
from gpuwise.diagnose.rules.common import confidence
from gpuwise.diagnose.statistics import theil_sen
from gpuwise.units import GiB

__all__ = [
    "decode_memory_bound",
    "kv_cache_dominant",
    "memory_growth",
    "memory_measure",
    "no_flash_attention",
    "oom_risk",
]


def _work_peak(ev: Evidence) -> tuple[int | None, int | None]:
    """(peak, capacity) in bytes of the memory the work itself used. A monitor history counts only the
    time the GPU was in use (``memory_peak_in_use_bytes``): memory held while it idles is a cost
    (idle_memory_held), not a step that can run out."""
    capacity = ev.memory.memory_capacity_bytes
    if ev.source == "telemetry" and ev.history.observed_gpu_hours is not None:
        return ev.history.memory_peak_in_use_bytes, capacity
    return ev.memory.memory_peak_bytes, capacity


# (fix, snippet) that cut a peak, by workload kind: training has activations, gradients and optimizer
# states to shrink; inference weights and the KV cache; unknown work (a monitor sample) only the neutral
# steps that hold for both.
_OOM_FIX: dict[str, tuple[str, str]] = {
    "training": (
        "Cut the peak: gradient checkpointing, a smaller micro-batch with more accumulation, 8-bit optimizer "
        "states, sharding (FSDP/ZeRO), or LoRA/QLoRA.",
        "model.gradient_checkpointing_enable()\n# or: per_device_train_batch_size //= 2; "
        "gradient_accumulation_steps *= 2",
    ),
    "inference": (
        "Cut the peak: quantize the weights (FP8/INT8/4-bit), store the KV cache in FP8, cap the context "
        "length or the batch, or split the model over GPUs (tensor parallelism).",
        "vllm serve MODEL --quantization fp8 --kv-cache-dtype fp8 --max-model-len 8192",
    ),
    "unknown": (
        "Check what holds the memory (the processes on this GPU) before the next allocation fails: a "
        "smaller batch or context, lower-precision weights, or a GPU with more memory.",
        "nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv",
    ),
}


def oom_risk(ev: Evidence) -> Finding | None:
    """Less than ``OOM_HEADROOM_PCT`` of the GPU's memory is free at the peak (critical when the peak
    exceeds it); names the predicted changes that make it fit when the planner computed them.

    Every kind, each with its own way to cut a peak (`_OOM_FIX`; serving as inference): gradient
    checkpointing means nothing to an inference server, and a monitor sample cannot tell which it is.
    A monitor history reads the in-use peak only; an idle sample carries no work peak at all."""
    peak_or_none, capacity_or_none = _work_peak(ev)
    if peak_or_none is None or not capacity_or_none:
        return None
    peak, capacity = peak_or_none, capacity_or_none
    headroom = 100.0 * (1 - peak / capacity)
    if headroom >= T.OOM_HEADROOM_PCT:
        return None
    does_not_fit = headroom < 0
    fix, snippet = _OOM_FIX["inference" if ev.kind == "serving" else ev.kind]
    limit = capacity * (1 - T.OOM_HEADROOM_PCT / 100)
    fitting = {label: b for label, b in ev.model.fit_options_bytes.items() if b <= limit}
    if fitting:  # the planner computed these by re-running the memory model on each change
        fix = (
            "What makes it fit (predicted peak): "
            + "; ".join(f"{k} ({b / GiB:.1f} GiB)" for k, b in list(fitting.items())[:4])
            + "."
        )
    elif ev.model.fit_options_bytes:
        fix = (
            "No single change tried fits this GPU ("
            + "; ".join(ev.model.fit_options_bytes)
            + "): combine them, shard over more GPUs or use a larger GPU."
        )
    return Finding(
        id="oom_risk",
        title="Does not fit in GPU memory" if does_not_fit else "Little memory headroom: out-of-memory risk",
        severity="critical" if does_not_fit else "high",
        confidence=confidence(ev),
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
            **({"fit_options_bytes": dict(ev.model.fit_options_bytes)} if ev.model.fit_options_bytes else {}),
        },
        fix=fix,
        fix_snippet=snippet,
        gain=Gain(
            "memory_bytes",
            max(0.0, peak - capacity * (1 - T.TARGET_HEADROOM_PCT / 100)),
            max(0.0, peak - capacity * 0.5),
            f"to restore {T.TARGET_HEADROOM_PCT:.0f} % headroom",
        ),
        source=ev.source,
        tools=("PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True",),
    )


def memory_measure(ev: Evidence) -> str:
    """What the memory readings count, in words for a summary (RSS is not allocated memory)."""
    measure = ev.memory.memory_measure or next(
        (n.split(":", 1)[1].strip() for n in ev.notes if n.startswith("memory_per_step_bytes:")), ""
    )
    if "RSS" in measure:
        return "Process RSS"
    if "memory_allocated" in measure or "allocated" in measure.lower():
        return "Allocated device memory" if "cuda" in measure.lower() else "Allocated memory"
    if "heap" in measure:
        return "C heap in use"
    return "Live memory"


def _trend(steps: list[int], values: list[float]) -> tuple[float, float, float] | None:
    """(bytes per step, its lower 95 % bound, fitted level at the first reading); None when flat/unknown."""
    if len(values) != len(steps) or len(values) < T.MEMORY_GROWTH_MIN_READINGS:
        return None
    per_step, per_step_low, intercept = theil_sen(steps, values)
    baseline = intercept + per_step * steps[0]
    return (per_step, per_step_low, baseline) if baseline > 0 else None


def _growth_pct(trend: tuple[float, float, float] | None, span: int) -> float:
    """Fitted growth over ``span`` steps, % of the first reading's level; 0 when not rising for sure."""
    if trend is None or trend[1] <= 0:
        return 0.0
    return 100.0 * trend[0] * (span - 1) / trend[2]


def memory_growth(ev: Evidence) -> Finding | None:
    """Live memory rises across steps (``memory_per_step_bytes``): a Theil-Sen slope whose lower
    bound is above zero and growth of at least ``MEMORY_GROWTH_MIN_PCT`` over the measured span.

    A CPU run reads the C heap and the process RSS together (``memory_rss_per_step_bytes``): a small
    tensor kept each step grows the heap by KiB but pins the allocator's pages, so RSS grows MiB. It is
    a leak when the heap rises at every reading by at least ``MEMORY_GROWTH_NOTE_PCT`` (live
    allocations, not pages kept) and either view crosses the bar; RSS rising over a flat heap is the
    allocator keeping freed pages, not a leak.
    Training names the usual culprit (a loss kept with its autograd graph), or the container and line the
    profiler found keeping the window's tensors (``kept_objects``); inference and unknown work name what
    leaks without a backward."""
    mem = ev.memory.memory_per_step_bytes
    steps = (
        ev.memory.memory_step_index if len(ev.memory.memory_step_index) == len(mem) else list(range(len(mem)))
    )
    if len(mem) < T.MEMORY_GROWTH_MIN_READINGS:
        return None
    span = steps[-1] - steps[0] + 1  # steps the readings cover
    if span < T.MIN_STEPS_FOR_STATISTICS:
        return None
    heap = _trend(steps, mem)
    if heap is None or heap[1] <= 0:
        return None
    per_step = heap[0]
    growth_pct = _growth_pct(heap, span)
    rss = _trend(steps, ev.memory.memory_rss_per_step_bytes)
    rss_pct = _growth_pct(rss, span)
    graphs = _kept_graphs(ev, span)
    judged_by = _judged_by(growth_pct, rss_pct, graphs)
    if not judged_by:
        return _growth_too_short(ev, span, heap, rss, growth_pct)
    if judged_by == "rss" and rss is not None:
        per_step = rss[0]  # the heap rises too slowly to size the loss: RSS does
    last = mem[-1]
    steps_left = None
    if ev.memory.memory_capacity_bytes:
        steps_left = int(
            max(0, ev.memory.memory_capacity_bytes - (ev.memory.memory_peak_bytes or last)) / per_step
        )
    what = memory_measure(ev)
    both = _views_text(span, heap, rss, rss_pct, graphs if judged_by == "kept_graphs" else None)
    fix, snippet = _growth_fix(ev)
    return Finding(
        id="memory_growth",
        title="Memory grows every step (a leak)",
        severity="high"
        if max(growth_pct, rss_pct) >= T.MEMORY_GROWTH_HIGH_PCT or steps_left is not None
        else "medium",
        confidence=confidence(ev),
        category="memory",
        summary=(
            f"{what} rose {growth_pct:.1f} % over {span} steps (+{heap[0] / 2**20:.2f} MiB per step, "
            f"Theil–Sen trend; at least +{heap[1] / 2**20:.2f} MiB at 95 %){both}"
        )
        + (f"; at this rate memory runs out in ~{steps_left:,} steps." if steps_left is not None else ".")
        + _kept_text(ev),
        metrics={
            "growth_pct": round(growth_pct, 2),
            "bytes_per_step": round(heap[0]),
            "bytes_per_step_low": round(heap[1]),
            "rss_growth_pct": round(rss_pct, 2) if rss is not None else None,
            "rss_bytes_per_step": round(rss[0]) if rss is not None else None,
            "measure": what,
            "judged_by": judged_by,
            "first_bytes": mem[0],
            "last_bytes": last,
            "steps_until_oom": steps_left,
            "kept_objects": ev.memory.kept_objects or None,
        },
        fix=fix,
        fix_snippet=snippet,
        gain=Gain("memory_bytes", per_step * span * 0.5, per_step * span, "the growth seen during the run"),
        source=ev.source,
    )


def _judged_by(growth_pct: float, rss_pct: float, graphs: dict[str, Any] | None) -> str:
    """Which view judges the rise a leak: "heap", "rss", "kept_graphs"; "" when none does."""
    if growth_pct >= T.MEMORY_GROWTH_MIN_PCT:
        return "heap"
    # RSS speaks for the heap only where the heap itself rises materially (a few bytes of detached
    # scalars kept a step, under a heap that grows 0.0 %, are no leak whatever RSS does meanwhile)
    if growth_pct < T.MEMORY_GROWTH_NOTE_PCT:
        return ""
    if rss_pct >= T.MEMORY_GROWTH_MIN_PCT:
        return "rss"
    # a container of the user's that gains a tensor with its autograd node nearly every step grows
    # without bound by construction, however many pages the allocator happens to pin meanwhile (RSS
    # grew 0.24 MiB a step on a quiet machine and 1 MiB on a busy one for the same kept loss)
    return "kept_graphs" if graphs is not None else ""


def _views_text(
    span: int,
    heap: tuple[float, float, float],
    rss: tuple[float, float, float] | None,
    rss_pct: float,
    graphs: dict[str, Any] | None,
) -> str:
    """The summary's clauses on the RSS view and on the kept container that judged the leak."""
    text = (
        f"; the C heap +{heap[0] / 2**10:.0f} KiB per step (live allocations) while the process RSS grows "
        f"+{rss[0] / 2**20:.2f} MiB per step ({rss_pct:.1f} %): the kept objects pin the allocator's pages"
        if rss is not None and rss_pct > 0
        else ""
    )
    if graphs is not None:  # the kept container judged the leak
        text += (
            f"; under the {T.MEMORY_GROWTH_MIN_PCT:.0f} % bar in this window, but a container gained a "
            f"tensor with its autograd node on {graphs.get('new_tensors')} of {span} steps and has no "
            "length bound: it grows every step"
        )
    return text


def _kept_graphs(ev: Evidence, span: int) -> dict[str, Any] | None:
    """The first kept container that gained tensors carrying an autograd node (``grad_fn``) on at
    least ``MEMORY_KEPT_GRAPH_PER_STEP`` of the window's steps and has no length bound; None if none."""
    for kept in ev.memory.kept_objects:
        tensor = kept.get("tensor") or {}
        if (
            tensor.get("grad_fn")
            and kept.get("maxlen") is None
            and kept.get("new_tensors", 0) >= T.MEMORY_KEPT_GRAPH_PER_STEP * span
        ):
            return kept
    return None


def _kept_text(ev: Evidence) -> str:
    """' <container> kept N new tensors ... at file:line (`text`)' for the first container found."""
    if not ev.memory.kept_objects:
        return ""
    kept = ev.memory.kept_objects[0]
    t = kept.get("tensor") or {}
    name = (kept.get("names") or [f"a {kept.get('container', 'container')}"])[0]
    grad = f", grad_fn={t['grad_fn']}" if t.get("grad_fn") else ""
    where = kept.get("lines") or []
    line = f" by {where[0]['text']!r} ({Path(where[0]['file']).name}:{where[0]['line']})" if where else ""
    return (
        f" {name} gained {kept.get('new_tensors')} tensors in the window "
        f"({'x'.join(map(str, t.get('shape') or [])) or '0-dim'} {t.get('dtype', '')}{grad}){line}."
    )


def _growth_fix(ev: Evidence) -> tuple[str, str]:
    """(fix, snippet): for the kept object when the profiler found it, else the usual culprits by kind."""
    kept = ev.memory.kept_objects[0] if ev.memory.kept_objects else None
    if kept is not None and ev.kind == "training":
        t = kept.get("tensor") or {}
        name = (kept.get("names") or ["the container"])[0]
        line = (kept.get("lines") or [{}])[0]
        text = line.get("text", "").split("#")[0].strip()
        scalar = not t.get("shape") and t.get("grad_fn")
        # a 0-dim tensor with a grad_fn is a loss: keep its value; anything larger: a detached copy
        call = ".item()" if scalar else ".detach().cpu()"
        arg = re.search(r"\((\w+)\)\s*$", text)
        fixed = (
            text.replace(f"({arg.group(1)})", f"({arg.group(1)}{call})") if arg else f"{name}.append(x{call})"
        )
        where = f" at {Path(line['file']).name}:{line['line']}" if line.get("file") else ""
        what = "the loss tensor (0-dim, with its autograd node)" if scalar else "tensors"
        return (
            f"{name} keeps {what} every step{where}: keep {'its value' if scalar else 'a detached copy'} "
            f"instead ({fixed}).",
            f"{fixed}   # was: {text}" if text else fixed,
        )
    if ev.kind == "training":
        return (
            "Something keeps tensors (often the autograd graph) alive across steps: store loss.item() or "
            "loss.detach(), not loss.",
            "losses.append(loss.detach())   # not losses.append(loss)\n# or: total += loss.item()",
        )
    return (
        "Something keeps tensors alive across steps: outputs or a cache appended every step; keep "
        "host copies (.cpu(), .item()) or bound the cache, and run without autograd.",
        "with torch.inference_mode():\n    out = model(batch)\nresults.append(out.cpu())",
    )


def _growth_too_short(
    ev: Evidence,
    span: int,
    heap: tuple[float, float, float],
    rss: tuple[float, float, float] | None,
    growth_pct: float,
) -> Finding | None:
    """Memory rose at every reading (the heap trend's lower bound is above zero) but the window is too
    short for either view to reach ``MEMORY_GROWTH_MIN_PCT``: a leak of a small tensor a step cannot be
    told from a cache filling up. Say so, with the window that would judge it (the sooner of the heap's
    and RSS's), rather than stay quiet. None when the heap rate is below ``MEMORY_GROWTH_NOTE_PCT``."""
    if growth_pct < T.MEMORY_GROWTH_NOTE_PCT:
        return None
    per_step, per_step_low, baseline = heap
    needed = math.ceil(T.MEMORY_GROWTH_MIN_PCT / 100.0 * baseline / per_step) + 1
    if rss is not None and rss[1] > 0:
        needed = min(needed, math.ceil(T.MEMORY_GROWTH_MIN_PCT / 100.0 * rss[2] / rss[0]) + 1)
    what = memory_measure(ev)
    return Finding(
        id="memory_growth",
        title="Memory rose every step: too short to judge a leak",
        severity="low",
        confidence="low",
        category="memory",
        summary=(
            f"{what} rose {growth_pct:.1f} % over {span} steps (+{per_step / 2**10:.0f} KiB per step, "
            f"at least +{per_step_low / 2**10:.0f} KiB at 95 %): too short to judge a leak at the "
            f"{T.MEMORY_GROWTH_MIN_PCT:.0f} % bar, which this rate reaches after ~{needed} steps."
            + _kept_text(ev)
        ),
        metrics={
            "growth_pct": round(growth_pct, 2),
            "bytes_per_step": round(per_step),
            "bytes_per_step_low": round(per_step_low),
            "rss_bytes_per_step": round(rss[0]) if rss is not None else None,
            "measure": what,
            "steps_needed": needed,
            "verdict": "too_short",
        },
        fix=f"Profile a longer window (gpuwise profile --steps {needed} ...) to tell a leak from a cache "
        "filling up; a list that keeps each step's loss tensor (losses.append(loss)) grows like this.",
        fix_snippet=f"gpuwise profile --steps {needed} -- python train.py",
        gain=None,
        source=ev.source,
    )


def no_flash_attention(ev: Evidence) -> Finding | None:
    """Attention materializes S×S scores (``attention_scores_bytes``) that take at least
    ``ATTENTION_SCORES_SHARE_PCT`` of the peak: flash attention keeps memory linear in the sequence."""
    scores, peak = ev.model.attention_scores_bytes, ev.memory.memory_peak_bytes
    if not scores or not peak or ev.model.attention_impl == "flash":
        return None
    share = 100.0 * scores / peak
    if share < T.ATTENTION_SCORES_SHARE_PCT:
        return None
    return Finding(
        id="no_flash_attention",
        title="Attention materializes the full score matrix",
        severity="high" if share >= T.ATTENTION_SCORES_HIGH_PCT else "medium",
        confidence=confidence(ev),
        category="memory",
        summary=(
            f"{ev.model.attention_impl or 'This'} attention keeps S×S scores: {scores / GiB:.1f} GiB, "
            f"{share:.0f} % of the peak."
        ),
        metrics={
            "attention_scores_bytes": scores,
            "attention_scores_share_pct": round(share, 2),
            "attention_impl": ev.model.attention_impl,
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


def kv_cache_dominant(ev: Evidence) -> Finding | None:
    """The KV cache holds ``KV_CACHE_DOMINANT_PCT`` of the peak or more in more than 8-bit: FP8 halves it."""
    kv, peak, bits = ev.model.kv_cache_bytes, ev.memory.memory_peak_bytes, ev.model.kv_cache_bits
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
        confidence=confidence(ev),
        category="memory",
        summary=f"The KV cache holds {kv / GiB:.1f} GiB, {share:.0f} % of the peak, in {bits:.0f}-bit.",
        metrics={"kv_cache_bytes": kv, "kv_cache_share_pct": round(share, 2), "kv_cache_bits": bits},
        fix="Store the KV cache in FP8: twice the context or concurrency in the same memory.",
        fix_snippet="vllm serve MODEL --kv-cache-dtype fp8",
        gain=Gain("memory_bytes", saved, saved, f"{bits:.0f}-bit -> 8-bit cache"),
        source=ev.source,
        tools=("vLLM", "TensorRT-LLM"),
    )


def decode_memory_bound(ev: Evidence) -> Finding | None:
    """A decode step is limited by memory bandwidth (``decode_bandwidth_bound``): fewer weight bytes
    per token and larger batches raise tokens per second."""
    if not ev.model.decode_bandwidth_bound or not ev.model.weight_bytes:
        return None
    weights, kv = float(ev.model.weight_bytes), float(ev.model.kv_cache_bytes or 0)
    bits = ev.model.weight_bits or 16
    quantize = bits >= T.DECODE_QUANTIZE_MIN_WEIGHT_BITS
    # Each decode step reads every weight once plus the cache: halving weight bytes speeds it by this much.
    speedup = (weights + kv) / (weights / 2 + kv) if quantize else 1.0
    return Finding(
        id="decode_memory_bound",
        title="Token generation is limited by memory bandwidth",
        severity="medium",
        confidence=confidence(ev),
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
