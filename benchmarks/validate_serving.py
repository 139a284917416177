"""The serving simulator against published vLLM measurements (closed-loop concurrency sweeps).

    python benchmarks/validate_serving.py

A benchmark at fixed concurrency C keeps C requests in flight: simulated as every request queued
at once with ``max_num_seqs = C``, which gives the same throughput and time per output token
(TTFT differs: the client holds the queue in the benchmark, the engine in the simulation, so it is
not compared). Each row names its source; the last line is JSON with the errors.
"""

from __future__ import annotations

import json
import statistics

from gpuwise.catalog import get_gpu
from gpuwise.serving.demand import draw_requests
from gpuwise.serving.simulator import Replica, simulate
from gpuwise.workload import workload_from_mapping

MUSGRAVE = (
    "johnmusgrave.com 'vLLM throughput-latency sweep on NVIDIA A100' (vLLM 0.23.0, A100 40GB, "
    "Llama-3.1-8B-Instruct bf16, random 1024 in / 128 out, --ignore-eos): "
    "~75 output tok/s at C=1, 6.6x at C=8"
)
RAHMAN = (
    "mushfiqrahman.dev capacity-planning benchmark (vLLM, RTX 4090, Mistral-7B-Instruct-v0.3, "
    "256 in / 128 out, 300 prompts): output tok/s at max concurrency 4-48"
)
# (model, gpu, prompt, output, concurrency, published output tokens/s, source)
PUBLISHED = [
    ("llama-3.1-8b", "a100-40gb-sxm", 1024, 128, 1, 75.0, MUSGRAVE),
    ("llama-3.1-8b", "a100-40gb-sxm", 1024, 128, 8, 6.6 * 75.0, MUSGRAVE),
    ("mistral-7b-v0.1", "rtx-4090", 256, 128, 4, 210.0, RAHMAN),
    ("mistral-7b-v0.1", "rtx-4090", 256, 128, 8, 377.0, RAHMAN),
    ("mistral-7b-v0.1", "rtx-4090", 256, 128, 16, 644.0, RAHMAN),
    ("mistral-7b-v0.1", "rtx-4090", 256, 128, 32, 975.0, RAHMAN),
    ("mistral-7b-v0.1", "rtx-4090", 256, 128, 48, 1190.0, RAHMAN),
]


def predicted_output_tokens_per_s(model: str, gpu: str, prompt: int, output: int, concurrency: int) -> float:
    w = workload_from_mapping(
        {
            "model": model,
            "task": "serving",
            "gpu": gpu,
            "seq_len": prompt,
            "output_len": output,
            "serving": {"rate": 1, "max_num_seqs": concurrency},
        }
    )
    replica = Replica(w, get_gpu(gpu))
    run = simulate(replica, draw_requests(w, max(20 * concurrency, 100)), 1e6)
    return run.throughput_rps * output


def main() -> None:
    errors = []
    for model, gpu, prompt, output, c, published, _ in PUBLISHED:
        predicted = predicted_output_tokens_per_s(model, gpu, prompt, output, c)
        err = 100 * (predicted / published - 1)
        errors.append(err)
        print(
            f"{model:16} {gpu:14} {prompt:5}/{output:<4} C={c:<3} published {published:7.0f} tok/s  "
            f"predicted {predicted:7.0f}  error {err:+6.1f} %"
        )
    print("sources:")
    for source in dict.fromkeys(row[-1] for row in PUBLISHED):
        print(f"  - {source}")
    abs_err = [abs(e) for e in errors]
    print(f"median |error| {statistics.median(abs_err):.1f} %, max {max(abs_err):.1f} %")
    print(
        json.dumps(
            {
                "rows": len(errors),
                "median_abs_error_pct": round(statistics.median(abs_err), 1),
                "max_abs_error_pct": round(max(abs_err), 1),
            }
        )
    )


if __name__ == "__main__":
    main()
