"""The serving simulator against published vLLM measurements (closed-loop concurrency sweeps).

    python benchmarks/validate_serving.py

A benchmark at fixed concurrency C keeps C requests in flight: simulated as every request queued
at once with ``max_num_seqs = C``, which gives the same throughput and time per output token
(TTFT differs: the client holds the queue in the benchmark, the engine in the simulation, so it is
not compared). Each row names its source; the last line is JSON with the errors.

The error is reported by concurrency band (1-7, 8-31, >= 32 in flight). A second table replays the
saturation rows of benchmarks/data/measured_throughput.csv (NVIDIA TensorRT-LLM perf-overview: trtllm-bench,
infinite request rate) on the simulator configured as trtllm-bench runs them (FP8 KV, 95 % of free
memory for KV, trtllm-bench's own max batch of 64-4096 from that cache), with errors by max batch.
"""

from __future__ import annotations

import csv
import json
import math
import statistics
from pathlib import Path

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


REPO = Path(__file__).resolve().parents[1]
BANDS = ((1, 7, "1-7"), (8, 31, "8-31"), (32, 10**9, ">=32"))


def predicted_output_tokens_per_s(
    model: str, gpu: str, prompt: int, output: int, concurrency: int | None, **extra: object
) -> float:
    """Output tokens/s of ``concurrency`` requests kept in flight (None: the engine's own max batch)."""
    serving: dict[str, object] = {"rate": 1, **({"max_num_seqs": concurrency} if concurrency else {})}
    serving.update(extra.pop("serving", {}))  # type: ignore[call-overload]
    w = workload_from_mapping(
        {"model": model, "task": "serving", "gpu": gpu, "seq_len": prompt, "output_len": output,
         "serving": serving, **extra}
    )  # fmt: skip
    replica = Replica(w, get_gpu(gpu))
    run = simulate(replica, draw_requests(w, max(20 * (concurrency or 30), 100)), 1e6)
    return run.throughput_rps * output


def _band(c: int) -> str:
    return next(name for low, high, name in BANDS if low <= c <= high)


def saturation_rows() -> list[dict[str, str]]:
    """The trtllm-bench offline (maximum load) rows of the repository's measured throughput table."""
    path = REPO / "benchmarks" / "data" / "measured_throughput.csv"
    with path.open(newline="") as f:
        return [
            r for r in csv.DictReader(f) if r["id"].startswith("thr-TRT-") and r["gpu"] in SATURATION_GPUS
        ]


SATURATION_GPUS = {"h100-sxm", "h200-sxm"}  # the GPUs whose TensorRT-LLM rows the catalog prices at fp8


def trtllm_bench_batch(kv_tokens: int, prompt: int, output: int, pp: int = 1) -> tuple[int, int]:
    """trtllm-bench's own max batch size and max num tokens for a dataset of ``prompt``/``output`` tokens,
    from the requests the KV cache holds (tensorrt_llm/bench/build/tuning.py ``calc_engine_setting`` and
    ``finetune_setting``): requests capped at 4096, rounded up (64-256: to 32, to 1024: to 128, else 256);
    tokens = batch x (1 + ISL/OSL) capped at 32768, rounded up (min 2048)."""
    raw_bs = min(kv_tokens / (prompt + output), 4096) / pp
    step = 32 if raw_bs < 256 else 128 if raw_bs < 1024 else 256
    batch = max(64, step * math.ceil(raw_bs / step))
    raw_token = min(raw_bs * (1 + prompt / output), 32768)
    step = 256 if raw_token < 4096 else 512 if raw_token < 8192 else 1024
    return batch, max(2048, step * math.ceil(raw_token / step))


def saturation_prediction(row: dict[str, str]) -> tuple[float, int]:
    """Output tokens/s of one trtllm-bench row simulated as it was run: the ModelOpt FP8 checkpoint's FP8
    KV cache (``kv_cache_quant_algo: FP8`` in its hf_quant_config.json, which trtllm-bench reads), 95 % of
    free memory for KV (the perf-overview's ``kv_cache_free_gpu_mem_fraction 0.95``) and the max batch and
    tokens trtllm-bench derives from that cache (`trtllm_bench_batch`). Returns tokens/s and that batch."""
    n, p, o = int(row["num_gpus"]), int(row["input_len"]), int(row["output_len"])
    serving: dict[str, object] = {"engine": "tensorrt-llm", "gpu_memory_utilization": 0.95}
    extra: dict[str, object] = {
        "num_gpus": n,
        "tp": n,
        "precision": row["precision"],
        "kv_cache_dtype": "fp8",
    }
    probe = workload_from_mapping(
        {"model": row["model"], "task": "serving", "gpu": row["gpu"], "seq_len": p, "output_len": o,
         "serving": {"rate": 1, **serving}, **extra}
    )  # fmt: skip
    batch, tokens = trtllm_bench_batch(Replica(probe, get_gpu(row["gpu"])).capacity.tokens, p, o)
    serving["max_num_batched_tokens"] = tokens
    return predicted_output_tokens_per_s(
        row["model"], row["gpu"], p, o, batch, serving=serving, **extra
    ), batch


SATURATION_BANDS = ((32, 255, "64-255"), (256, 1023, "256-1023"), (1024, 10**9, ">=1024"))


def saturation_report() -> tuple[list[float], dict[str, list[float]]]:
    """Error of the simulator against every saturation row (printed), as a list of %, and by max batch."""
    errors: list[float] = []
    by_batch: dict[str, list[float]] = {name: [] for _, _, name in SATURATION_BANDS}
    print("saturation (trtllm-bench, infinite rate; engine tensorrt-llm as trtllm-bench configures it):")
    for r in saturation_rows():
        predicted, batch = saturation_prediction(r)
        err = 100 * (predicted / float(r["value"]) - 1)
        errors.append(err)
        by_batch[next(n for lo, hi, n in SATURATION_BANDS if lo <= batch <= hi)].append(err)
        print(
            f"  {r['id']:46} batch {batch:5} published {float(r['value']):7.0f}  predicted {predicted:7.0f}  "
            f"{err:+6.1f} %"
        )
    print(f"  source: {saturation_rows()[0]['source']}" if errors else "  (no rows)")
    for name, band in by_batch.items():
        if band:
            print(
                f"  max batch {name:8}: {len(band)} rows, median {statistics.median(band):+.1f} %, "
                f"max |error| {max(abs(e) for e in band):.1f} %, within 20 %: "
                f"{sum(abs(e) <= 20 for e in band)}/{len(band)}"
            )
    return errors, by_batch


def main() -> None:
    by_band: dict[str, list[float]] = {name: [] for _, _, name in BANDS}
    for model, gpu, prompt, output, c, published, _ in PUBLISHED:
        predicted = predicted_output_tokens_per_s(model, gpu, prompt, output, c)
        err = 100 * (predicted / published - 1)
        by_band[_band(c)].append(err)
        print(
            f"{model:16} {gpu:14} {prompt:5}/{output:<4} C={c:<3} published {published:7.0f} tok/s  "
            f"predicted {predicted:7.0f}  error {err:+6.1f} %"
        )
    print("sources:")
    for source in dict.fromkeys(row[-1] for row in PUBLISHED):
        print(f"  - {source}")
    errors = [e for band in by_band.values() for e in band]
    abs_err = [abs(e) for e in errors]
    print(f"median |error| {statistics.median(abs_err):.1f} %, max {max(abs_err):.1f} %")
    bands = {}
    for name, band in by_band.items():
        worst = max((abs(e) for e in band), default=None)
        bands[name] = {"rows": len(band), "max_abs_error_pct": None if worst is None else round(worst, 1)}
        print(
            f"concurrency {name:5}: {len(band)} rows, max |error| "
            + ("—" if worst is None else f"{worst:.1f} %")
        )
    saturation, saturation_bands = saturation_report()
    sat_abs = [abs(e) for e in saturation]
    print(
        json.dumps(
            {
                "rows": len(errors),
                "median_abs_error_pct": round(statistics.median(abs_err), 1),
                "max_abs_error_pct": round(max(abs_err), 1),
                "bands": bands,
                "saturation_rows": len(saturation),
                "saturation_median_error_pct": round(statistics.median(saturation), 1)
                if saturation
                else None,
                "saturation_max_abs_error_pct": round(max(sat_abs), 1) if sat_abs else None,
                "saturation_within_20_pct": sum(e <= 20 for e in sat_abs),
                "saturation_bands": {
                    name: {
                        "rows": len(band),
                        "median_error_pct": round(statistics.median(band), 1),
                        "max_abs_error_pct": round(max(abs(e) for e in band), 1),
                    }
                    for name, band in saturation_bands.items()
                    if band
                },
            }
        )
    )


if __name__ == "__main__":
    main()
