"""Look-alike Kineto traces for what no public trace shows (issue 26): inference engines replaying CUDA/HIP
graphs, graph capture, a ROCm blocking copy, start-up gaps, host time before a step's first kernel, an
eager MoE decode on Blackwell, a partial rank set, kernels with negative durations.

Event layout (``ph: "X"`` complete events, ``cat`` kernel / cuda_runtime / cpu_op / user_annotation,
``args.stream`` / ``args.correlation``, ``distributedInfo``, ``deviceProperties``) follows the PyTorch
profiler's Kineto JSON; kernel and runtime API names are the ones the libraries and runtimes use (CUDA
Runtime API, HIP Runtime API, NCCL, cuBLASLt ``nvjet``, Tensile ``Cijk_``, vLLM/SGLang annotations). The
numbers are chosen, written in code here: look-alikes, not recordings. Test support (the findings
benchmark imports it too).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["SCENARIOS", "Trace", "write_scenario"]

_HOST = {"pid": 100, "tid": 100}


@dataclass
class Trace:
    """A Kineto trace under construction: times in µs; ``corr`` numbers launches and their kernels."""

    device: str = "NVIDIA H100 80GB HBM3"
    memory_bytes: int = 80 * 2**30
    rank: int | None = None
    world_size: int | None = None
    events: list[dict[str, Any]] = field(default_factory=list)
    corr: int = 0
    rocm: bool = False

    def cpu(self, name: str, ts: float, dur: float, cat: str = "cpu_op") -> None:
        """A host operator or annotation on the main thread."""
        self.events.append({"ph": "X", "cat": cat, "name": name, "ts": ts, "dur": dur, **_HOST, "args": {}})

    def runtime(self, name: str, ts: float, dur: float, corr: int | None = None) -> None:
        """A runtime API call (``cuda_runtime`` is what Kineto writes on ROCm too)."""
        args = {"correlation": corr} if corr is not None else {}
        self.events.append(
            {"ph": "X", "cat": "cuda_runtime", "name": name, "ts": ts, "dur": dur, **_HOST, "args": args}
        )

    def kernel(self, name: str, ts: float, dur: float, corr: int, stream: int = 7) -> None:
        """A kernel on the device, linked to its launch by ``corr``."""
        self.events.append(
            {
                "ph": "X",
                "cat": "kernel",
                "name": name,
                "ts": ts,
                "dur": dur,
                "pid": 0,
                "tid": stream,
                "args": {"stream": stream, "correlation": corr, "device": 0},
            }
        )

    def launch(self, name: str, ts: float, kernel_ts: float, dur: float, api: str = "") -> float:
        """cudaLaunchKernel (hipLaunchKernel on ROCm) at ``ts`` and its kernel at ``kernel_ts``; returns the
        kernel's end."""
        self.corr += 1
        self.runtime(api or ("hipLaunchKernel" if self.rocm else "cudaLaunchKernel"), ts, 4.0, self.corr)
        self.kernel(name, kernel_ts, dur, self.corr)
        return kernel_ts + dur

    def document(self) -> dict[str, Any]:
        """The JSON document."""
        doc: dict[str, Any] = {
            "schemaVersion": 1,
            "deviceProperties": [{"id": 0, "name": self.device, "totalGlobalMem": self.memory_bytes}],
            "traceEvents": sorted(self.events, key=lambda e: e["ts"]),
        }
        if self.rank is not None:
            doc["distributedInfo"] = {"backend": "nccl", "rank": self.rank, "world_size": self.world_size}
        return doc


def _decode_graph_replay(engine: str) -> list[Trace]:
    """vLLM/SGLang decode on an H100: each step replays one CUDA graph (tiny kernels, GPU 97 % busy), then
    the sampler's result is copied back with a cudaStreamSynchronize that waits while the GPU still runs."""
    t = Trace()
    marker = "execute_model" if engine == "vllm" else "forward_decode"
    ts = 1_000.0
    for step in range(20):
        t.cpu(f"ProfilerStep#{step}", ts, 2_000.0, "user_annotation")
        t.cpu(marker, ts + 5, 1_990.0, "user_annotation")
        t.corr += 1
        t.runtime("cudaGraphLaunch", ts + 10, 15.0, t.corr)
        k = ts + 40
        for i in range(240):  # 8 µs kernels back to back: fused norms, decode attention, GEMMs
            name = "nvjet_tst_128x64_64x4_1x2_h_bz_TNT" if i % 3 else "flash_fwd_splitkv_kernel"
            t.kernel(name, k, 8.0, t.corr)
            k += 8.0
        t.runtime("cudaStreamSynchronize", ts + 30, k - ts - 30 + 2, None)
        t.runtime("cudaMemcpyAsync", k + 3, 6.0, None)
        ts += 2_000.0
    return [t]


def _hip_graph_capture() -> list[Trace]:
    """ROCm inference on an MI300X: a 546 ms capture (hipStreamBeginCapture, hundreds of
    hipStreamGetCaptureInfo, hipGraphInstantiate) before replaying the graph (hipGraphLaunch) per step."""
    t = Trace(device="AMD Instinct MI300X", memory_bytes=192 * 2**30, rocm=True)
    t.launch("Cijk_Ailk_Bljk_BBS_BH_MT128x128x64_MI16x16x1", 0.0, 10.0, 200.0)
    t.runtime("hipStreamBeginCapture", 300.0, 20.0)
    for i in range(400):
        t.runtime("hipStreamGetCaptureInfo", 400.0 + i * 1_000, 2.0)
        t.runtime("hipLaunchKernel", 402.0 + i * 1_000, 5.0)
    t.runtime("hipStreamEndCapture", 400_500.0, 40.0)
    t.runtime("hipGraphInstantiate", 400_600.0, 146_000.0)
    ts = 546_700.0
    for _ in range(30):
        t.corr += 1
        t.runtime("hipGraphLaunch", ts, 20.0, t.corr)
        k = ts + 30
        for i in range(400):
            t.kernel(
                "Cijk_Ailk_Bljk_BBS_BH_MT64x64x32" if i % 2 else "triton_poi_fused_add_mul_0", k, 5.0, t.corr
            )
            k += 5.2
        ts = k + 10
    return [t]


def _rocm_blocking_copy() -> list[Trace]:
    """ROCm inference on an MI300X: each step's result comes back through one blocking hipMemcpyWithStream
    of 480 ms while the GPU idles; the kernels take 110 ms."""
    t = Trace(device="AMD Instinct MI300X", memory_bytes=192 * 2**30, rocm=True)
    ts = 1_000.0
    for step in range(3):
        t.cpu(f"ProfilerStep#{step}", ts, 600_000.0, "user_annotation")
        t.cpu("aten::linear", ts + 20, 100.0)
        k = ts + 50
        for _ in range(100):
            k = t.launch("Cijk_Alik_Bljk_HHS_BH_MT256x128x64_MI32x32x8", k - 20, k, 1_100.0) + 2
        t.runtime("hipMemcpyWithStream", k + 5, 480_000.0)
        ts += 600_000.0
    return [t]


def _startup_gaps() -> list[Trace]:
    """An H100 trace that begins with start-up: the first cudaLaunchKernel takes 1,565 ms (module loading)
    and a cudaEventCreate 720 ms (context), then short busy steps."""
    t = Trace()
    t.launch(
        "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>", 0.0, 10.0, 5.0
    )
    t.runtime("cudaEventCreate", 20.0, 720_000.0)
    t.corr += 1
    t.runtime("cudaLaunchKernel", 720_100.0, 1_565_000.0, t.corr)
    t.kernel("ampere_sgemm_128x64_tn", 2_285_200.0, 50.0, t.corr)
    ts = 2_286_000.0
    for _ in range(10):
        k = ts
        for _ in range(200):
            k = t.launch("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64", k - 15, k, 40.0) + 1.0
        ts = k + 5.0
    return [t]


def _video_host_first() -> list[Trace]:
    """A video model's training step on an H100 (one step traced): 225 ms of frame decoding in the data
    loader before the step's first kernel, then 157 ms of forward and backward kernels in the 382 ms."""
    t = Trace()
    ts = 1_000.0
    t.cpu("ProfilerStep#0", ts, 382_000.0, "user_annotation")
    t.cpu("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", ts + 10, 224_000.0)
    k = ts + 225_000
    for i in range(157):
        name = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n" if i % 2 else "void at::native::conv3d_bwd_kernel"
        k = t.launch(name, k - 10, k, 999.0) + 1.0
    t.cpu("autograd::engine::evaluate_function: ConvolutionBackward0", ts + 300_000, 50_000.0)
    return [t]


def _blackwell_moe_eager() -> list[Trace]:
    """Eager MoE decode on a B200: 400 tiny kernels per 8 ms step (grouped ``bmm_`` expert GEMMs, router
    top-k, ``multimem_all_reduce``) with 14 µs launch gaps between them: launch-bound."""
    t = Trace(device="NVIDIA B200", memory_bytes=180 * 2**30)
    names = (
        "bmm_E2m1E2m1_Fp32_t128x64x256_s3_et64x64_m256x64x32_cga1x1x1_16dp256b_TN",
        "topk_gating_softmax",
        "multimem_all_reduce_kernel",
    )
    ts = 1_000.0
    for step in range(10):
        t.cpu(f"ProfilerStep#{step}", ts, 8_000.0, "user_annotation")
        k = ts + 10
        for i in range(400):
            t.cpu("aten::mm", k - 12, 10.0)
            k = t.launch(names[i % 3], k - 8, k, 6.0) + 14.0
        ts += 8_000.0
    return [t]


def _dlrm_partial() -> list[Trace]:
    """Ranks 0-2 of an 8-rank DLRM: each step's all-to-all waits for the slowest rank traced (rank 2);
    the trace has no rank 3-7, so the real straggler may be missing."""
    out = []
    for rank in range(3):
        t = Trace(rank=rank, world_size=8)
        ts = 1_000.0
        for step in range(5):
            t.cpu(f"ProfilerStep#{step}", ts, 10_000.0, "user_annotation")
            t.cpu("autograd::engine::evaluate_function: EmbeddingBackward0", ts + 100, 50.0)
            compute_end = ts + 3_000 + rank * 1_500  # rank 2 computes longest, arrives last
            k = ts + 200
            while k < compute_end:
                k = t.launch("ampere_sgemm_64x64_nn", k - 10, k, 300.0) + 2.0
            t.launch(
                "ncclDevKernel_SendRecv(ncclDevComm*, unsigned long, ncclWork*)", k, k + 5, ts + 9_000 - k
            )
            ts += 10_000.0
        out.append(t)
    return out


def _negative_durations() -> list[Trace]:
    """A trace whose clock went backwards: every kernel's duration is negative."""
    t = Trace()
    ts = 1_000.0
    for step in range(3):
        t.cpu(f"ProfilerStep#{step}", ts, 5_000.0, "user_annotation")
        for i in range(50):
            t.launch("ampere_sgemm_128x64_tn", ts + 10 + i * 90, ts + 20 + i * 90, -80.0)
        ts += 5_000.0
    return [t]


# name -> (builder, what a correct analysis reports: {finding id: "fire" | "absent"})
SCENARIOS: dict[str, Callable[[], list[Trace]]] = {
    "vllm_decode_graph_replay": lambda: _decode_graph_replay("vllm"),
    "sglang_decode_graph_replay": lambda: _decode_graph_replay("sglang"),
    "hip_graph_capture": _hip_graph_capture,
    "rocm_blocking_copy_480ms": _rocm_blocking_copy,
    "startup_gaps": _startup_gaps,
    "video_host_before_first_kernel": _video_host_first,
    "blackwell_moe_eager_decode": _blackwell_moe_eager,
    "dlrm_ranks_0_2_of_8": _dlrm_partial,
    "negative_kernel_durations": _negative_durations,
}


def write_scenario(name: str, directory: Path) -> list[Path]:
    """Write scenario ``name``'s trace files (one per rank) into ``directory``; returns their paths."""
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for i, trace in enumerate(SCENARIOS[name]()):
        path = directory / f"{name}.rank{i}.pt.trace.json"
        path.write_text(json.dumps(trace.document()))
        paths.append(path)
    return paths
