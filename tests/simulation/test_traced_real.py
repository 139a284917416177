"""The fake-tensor peak is the real peak: the same step on real CPU tensors, measured by the allocator.

Ground truth is torch.profiler's record of every CPU allocation and free. Allocations a kernel makes
and frees before it returns (oneDNN packing buffers, CPU flash-attention scratch) are dropped: they
are CPU-kernel workspaces a GPU run does not have, and no tensor ever owns them.
"""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("peft")

from torch._C._profiler import _EventType  # noqa: E402
from torch.profiler import ProfilerActivity, profile  # noqa: E402

from conftest import TINY_LLAMA_CONFIG  # noqa: E402
from gpuwise.simulation.traced_estimate import simulate  # noqa: E402
from gpuwise.units import MiB  # noqa: E402
from gpuwise.workload import workload_from_mapping  # noqa: E402

TINY = TINY_LLAMA_CONFIG
TOLERANCE_BYTES = 0.05 * MiB


def allocator_peak_delta(events_root, start_ns: int, end_ns: int) -> int:
    """Peak of live CPU bytes in [start, end] above the level at start, from profiler allocation events."""
    allocations = []

    def walk(event, dispatched_op_end):
        if event.tag == _EventType.Allocation and event.extra_fields.device.type == "cpu":
            allocations.append(
                (
                    event.start_time_ns,
                    event.extra_fields.alloc_size,
                    event.extra_fields.ptr,
                    dispatched_op_end,
                )
            )
        for child in event.children:
            # The op the tracker saw is the parent of the Python-dispatch-mode frame beneath it.
            python_mode = child.tag == _EventType.TorchOp and child.name == "PythonDispatchMode"
            walk(child, event.end_time_ns if python_mode else dispatched_op_end)

    for root in events_root:
        walk(root, None)
    allocations.sort()
    open_blocks, internal = {}, set()
    for i, (t, n, ptr, op_end) in enumerate(allocations):
        if n > 0:
            open_blocks[ptr] = (i, op_end)
        elif ptr in open_blocks:
            j, alloc_op_end = open_blocks.pop(ptr)
            if alloc_op_end is not None and t <= alloc_op_end:
                internal.update((i, j))
    live, base, peak = 0, None, 0
    for i, (t, n, _, _) in enumerate(allocations):
        if i in internal:
            continue
        if base is None and t >= start_ns:
            base = live
        live += n
        if start_ns <= t <= end_ns:
            peak = max(peak, live)
    return peak - (base or 0)


@pytest.mark.slow
@pytest.mark.parametrize(
    "settings",
    [
        {"task": "full-finetune", "precision": "fp32"},
        {"task": "full-finetune", "precision": "bf16", "grad_checkpointing": "full"},
        {"task": "full-finetune", "precision": "amp-bf16", "optimizer": "adamw-fused"},
        {"task": "lora", "precision": "bf16", "grad_checkpointing": "full"},
        {"task": "lora", "precision": "bf16", "attention": "eager"},
        {"task": "inference", "precision": "bf16", "output_len": 8},
    ],
    ids=lambda s: "-".join(str(v) for v in s.values()),
)
def test_fake_peak_matches_the_real_allocator(tmp_path, settings):
    config = tmp_path / "config.json"
    config.write_text(json.dumps(TINY))
    w = workload_from_mapping({"model": str(config), "seq": 128, "batch": 2, **settings})
    phases = ["forward", "backward", "optimizer_step"] if w.is_training else ["prefill", "decode"]

    fake = simulate(w, block_bytes=1)  # exact sizes, as the CPU allocator counts them
    fake_delta = (
        max(fake.tracker.phases[p].peak_bytes for p in phases) - fake.tracker.phases[phases[0]].start_bytes
    )

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        real = simulate(w, block_bytes=1, fake=False)
    first, last = real.tracker.phases[phases[0]], real.tracker.phases[phases[-1]]
    real_delta = allocator_peak_delta(
        prof.profiler.kineto_results.experimental_event_tree(), first.start_ns, last.end_ns
    )

    assert abs(fake_delta - real_delta) <= TOLERANCE_BYTES, (fake_delta, real_delta)
    traced_real = max(real.tracker.phases[p].peak_bytes for p in phases) - first.start_bytes
    assert abs(traced_real - fake_delta) <= 1024  # fake and real tensors live and die at the same points
