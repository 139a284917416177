"""One example per command, shown at the end of its `--help` (issue #25: an example in every command's help).

Kept in one table so a new command without an example fails tests/test_cli_contract.py, and so the
examples stay runnable: each names a file in examples/ or a catalog id.
"""

from __future__ import annotations

__all__ = ["EXAMPLES"]

# Command path -> example invocations (shown after "Examples:", one per line).
EXAMPLES: dict[str, tuple[str, ...]] = {
    "": ("gpuwise plan examples/llama-3-8b-lora.yaml", "gpuwise memory -m llama-3-8b -t lora -g rtx-4090"),
    "gpus": ("gpuwise gpus", "gpuwise gpus h100-sxm"),
    "models": ("gpuwise models", "gpuwise models llama-3-8b"),
    "memory": (
        "gpuwise memory examples/llama-3-8b-lora.yaml",
        "gpuwise memory -m llama-3-8b -b 4 --max-batch",
    ),
    "fit": ("gpuwise fit examples/llama-3-8b-lora.yaml --headroom 10",),
    "plan": (
        "gpuwise plan examples/llama-3-8b-lora.yaml",
        "gpuwise plan examples/serving-chat-50rps.yaml --json",
    ),
    "cost": (
        "gpuwise cost examples/pretrain-8xh100.yaml",
        "gpuwise cost -m llama-3-8b -g rtx-4090 --usd-per-gpu-hour 0.35",
    ),
    "profile": (
        "gpuwise profile -- python train.py --epochs 1",
        "gpuwise profile --steps 30 --stop -- python train.py",
    ),
    "doctor": ("gpuwise doctor", "gpuwise doctor --device cpu --steps 20"),
    "runs": ("gpuwise runs list", "gpuwise runs show last", "gpuwise runs compare -2 -1"),
    "runs list": ("gpuwise runs list --limit 10",),
    "runs show": ("gpuwise runs show last", "gpuwise runs show -2 --json > run.json"),
    "runs compare": ("gpuwise runs compare -2 -1",),
    "trace": ("gpuwise trace traces/", "gpuwise trace --compare before/ after/"),
    "lint": ("gpuwise lint train.py", "gpuwise lint src/ --format sarif > lint.sarif"),
    "loadtest": (
        "gpuwise loadtest http://127.0.0.1:8000 --concurrency 1,4,16",
        "gpuwise loadtest http://127.0.0.1:8000 --find-max-rate --slo ttft_p99=0.5",
    ),
    "monitor": ("gpuwise monitor live", "gpuwise monitor report --since 24h"),
    "monitor live": ("gpuwise monitor live --host", "gpuwise monitor live --record --quiet"),
    "monitor report": ("gpuwise monitor report --since 7d --usd-per-gpu-hour 2.5",),
    "exporter": ("gpuwise exporter --listen 127.0.0.1:9400",),
    "bench": ("gpuwise bench --quick", "gpuwise bench --dataset data.py:train_set --batch-size 64"),
    "tune": (
        "gpuwise tune -- python train.py",
        "gpuwise tune --param batch_size=--batch-size:16,32,64 --accum --grad-accum -- python train.py",
    ),
}
