"""Check gpuwise.perf against published throughput measurements.

    python benchmarks/validate_throughput.py [--data CSV [CSV ...]] [--models YAML]

    # the default: the development LLM set and the held-out set (publications added after the model
    # was frozen); the headline is leave-one-source-out

    # a second, independent set: llm-foundry's MPT training tables (33 rows)
    python benchmarks/validate_throughput.py --data benchmarks/data/llm_foundry_mpt.csv \
        --models benchmarks/data/mpt_models.yaml

    # vision transformers: eager PyTorch vs compiled, fp32 vs AMP vs bf16, A100 and RTX 3090
    python benchmarks/validate_throughput.py --data benchmarks/data/vision_reference.csv \
        --models benchmarks/data/vision_models.yaml --gpus benchmarks/data/vision_gpus.yaml

Reads rows like benchmarks/data/measured_throughput.csv (id, workload, model, gpu, num_gpus,
precision, batch_size, input_len, output_len, seq_len, parallelism, framework, metric, value,
source, notes; vision rows give the image size as input_len), turns each into a Workload,
predicts it, and prints a table of measured vs
predicted with the error. Rows the model cannot express are listed with the reason. The last
line is one JSON object: {"rows", "skipped", "median_abs_err_pct", ...}; since many rows can come
from one source, it also gives the median per source and the median weighted by source.

Nothing here is tuned per row: the row's stated configuration becomes the workload, gaps are
filled by the generic rules in `row_to_case` (stated in the output), and the model's constants
come from perf/data/efficiency.toml.
"""

from __future__ import annotations

import argparse
import csv
import json
import re
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEFAULT_DATA = REPO / "benchmarks" / "data" / "measured_throughput.csv"
# Publications added after the model was frozen (first run against it unchanged): read with the set above.
HELDOUT_DATA = REPO / "benchmarks" / "data" / "heldout_throughput.csv"
HELDOUT_MODELS = REPO / "benchmarks" / "data" / "qwen1_models.yaml"
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(REPO / "benchmarks"))

from gpuwise.catalog import get_gpu, get_model  # noqa: E402
from gpuwise.errors import GpuwiseError  # noqa: E402
from gpuwise.perf import palm_flops_per_token, peak_flops, predict  # noqa: E402
from gpuwise.workload import workload_from_mapping  # noqa: E402
from held_out import leave_one_source_out as loso_table  # noqa: E402
from held_out import print_loso  # noqa: E402

# Serving benchmarks at "maximum load" (offline throughput) keep admitting requests until the
# KV cache is full; the model caps this requested concurrency by KV memory.
OFFLINE_CONCURRENCY = 100_000
# An unstated micro-batch: well-tuned LLM training runs fill ~16k tokens per micro-batch.
DEFAULT_MICRO_TOKENS = 16_384
# An unstated pipeline schedule: Megatron guidance keeps micro-batches >= 4 x stages.
DEFAULT_MICROBATCHES_PER_STAGE = 4


class Skip(Exception):
    """A row the model cannot express; the message says why."""


@dataclass
class Case:
    row: dict
    workload: object
    compute_dtype: str | None
    metric: str
    measured: float
    assumptions: list[str]


def _int(value: str) -> int | None:
    value = (value or "").strip()
    return int(float(value)) if value else None


def _parallelism(text: str) -> dict[str, int | str]:
    """TP/PP/CP/DP/FSDP degrees from strings like 'TP8xPP16xDP128' or 'FSDP64 (FULL_SHARD)'."""
    text = text or ""
    out: dict[str, int | str] = {}
    for key in ("TP", "PP", "CP", "DP"):
        m = re.search(rf"(?<![A-Z]){key}(\d+)", text)
        if m:
            out[key.lower()] = int(m.group(1))
    m = re.search(r"FSDP(\d+)", text)
    if m:
        out["fsdp"] = int(m.group(1))
    if re.search(r"FSDP|ZeRO-?3|FULL_SHARD", text, re.I):
        out["sharding"] = "fsdp"
    return out


def _checkpointing(text: str) -> str:
    text = text.lower()
    if re.search(r"full (ac|activation checkpointing)|activation checkpointing[:]? yes|full recompute", text):
        return "full"
    if "selective" in text:
        return "selective"
    return "none"


def _attention(text: str) -> str:
    """'eager attention' in the notes (e.g. PyTorch < 2.0 models without SDPA), else SDPA."""
    return "eager" if "eager attention" in text.lower() else "sdpa"


def _optimizer(text: str) -> str | None:
    return "sgd" if re.search(r"\bsgd\b", text, re.I) else None


def _grad_accum(text: str) -> int | None:
    m = re.search(r"grad(?:ient)? accum(?:ulation)?\s*(\d+)", text, re.I)
    return int(m.group(1)) if m else None


def _lora(notes: str, kind: str = "finetune-lora") -> dict[str, object]:
    """LoRA settings a fine-tuning row states: 'LoRA r64 on q,k,v,gate,up,down' (or 'on every linear'), and
    'adapters bf16' where the adapters take the base weights' dtype (peft < 0.12 casts each adapter to its
    base layer's dtype in _move_adapter_to_device_of_base_layer; 0.12 added autocast_adapter_dtype, fp32).
    Nothing for a ``kind`` that is not a LoRA/QLoRA fine-tune."""
    out: dict[str, object] = {}
    if kind not in {"finetune-lora", "finetune-qlora"}:
        return out
    m = re.search(r"LoRA r(\d+)(?: on ([a-z_]+(?:,[a-z_]+)+))?", notes)
    if m:
        out["lora_rank"] = int(m.group(1))
        if m.group(2):
            out["lora_targets"] = [f"{name}_proj" for name in m.group(2).split(",")]
    m = re.search(r"adapters (bf16|fp16|fp32)", notes)
    if m:
        out["lora_dtype"] = m.group(1)
    return out


def _precision(value: str) -> tuple[str, str | None, str | None]:
    """Row precision -> (workload precision, forced compute dtype, KV-cache dtype)."""
    value = (value or "").strip().lower()
    if not value:
        raise Skip("precision not recorded")
    if value == "fp4":
        return "fp4", None, "fp8"  # NVFP4 (W4A4) checkpoints (ModelOpt) quantize the KV cache to fp8 too
    if value == "fp8":
        return "fp8", None, "fp8"  # FP8 checkpoints (ModelOpt, MLPerf) also quantize the KV cache
    return value, None, None


def _vision_spec(spec: dict, row: dict, diffusion: bool, notes: str, ddp: bool) -> None:
    """The workload fields of a vision row (image size in input_len, denoising steps in output_len)."""
    training = row["workload"] == "cv-training"
    spec.update(
        task="cv-train" if training else "cv-inference",
        batch_size=_int(row["batch_size"]) or 1,
        image_size=_int(row["input_len"]) or 224,
        attention=_attention(notes),
        channels_last="channels_last" in notes.lower() or "nhwc" in notes.lower(),
    )
    if diffusion:
        spec["denoising_steps"] = _int(row["output_len"])
    if training:
        spec["sharding"] = _parallelism(row["parallelism"]).get("sharding", "ddp" if ddp else "none")
        if _optimizer(notes):
            spec["optimizer"] = _optimizer(notes)
    if row["metric"] != "samples_per_s":
        raise Skip(f"vision metric {row['metric']} not predicted")


def row_to_case(row: dict) -> Case:
    """Build the workload a published row describes (raises Skip when it cannot)."""
    metric, kind = row["metric"], row["workload"]
    try:
        arch = get_model(row["model"])
        get_gpu(row["gpu"])
    except GpuwiseError as err:
        raise Skip(str(err)) from None
    if arch.mlp_type == "diffusion-unet" and not (_int(row["input_len"]) and _int(row["output_len"])):
        raise Skip("diffusion U-Net: denoising steps (output_len) and resolution (input_len) not in the row")
    if metric == "time_to_train_min":
        raise Skip("time to train: the dataset's token count is not in the row")
    n = _int(row["num_gpus"]) or 1
    par = _parallelism(row["parallelism"])
    tp, pp, cp = int(par.get("tp", 1)), int(par.get("pp", 1)), int(par.get("cp", 1))
    notes = f"{row['parallelism']} {row['notes']}"
    assumptions: list[str] = []
    precision, compute_dtype, kv = _precision(row["precision"])
    spec: dict = {
        "model": row["model"],
        "gpu": row["gpu"],
        "num_gpus": n,
        "tp": tp,
        "pp": pp,
        "context_parallel": cp,
        "precision": precision,
        "framework": row["framework"],
    }
    if kv:
        spec["kv_cache_dtype"] = kv
    batch = _int(row["batch_size"])
    seq = _int(row["seq_len"])
    inp, out = _int(row["input_len"]), _int(row["output_len"])

    if kind in {"cv-training", "cv-inference"}:
        _vision_spec(spec, row, arch.mlp_type == "diffusion-unet", notes, ddp=n > tp * pp)
    elif kind in {"training", "finetune-lora", "finetune-qlora"}:
        if not seq:
            raise Skip("training row without a sequence length")
        spec["task"] = {"finetune-lora": "lora", "finetune-qlora": "qlora"}.get(kind, "pretrain")
        spec.update(_lora(notes, kind))
        if kind == "finetune-lora" and precision == "fp8":
            assumptions.append("LoRA rank/targets not stated: gpuwise defaults (r16, all-linear)")
        spec["seq_len"] = seq
        spec["sharding"] = par.get("sharding", "ddp" if n > tp * pp else "none")
        spec["grad_checkpointing"] = _checkpointing(notes)
        accum = _grad_accum(notes)
        if pp > 1:
            # Pipeline runs use micro-batches of 1 sequence; the local batch is the micro-batch count.
            micro = batch or DEFAULT_MICROBATCHES_PER_STAGE * pp
            if not batch:
                assumptions.append(f"micro-batches not stated: {micro} (= 4 x pp)")
            spec["batch_size"], spec["grad_accum"] = 1, micro
        else:
            if not batch:
                batch = max(1, DEFAULT_MICRO_TOKENS // seq)
                assumptions.append(f"micro-batch not stated: {batch} x {seq} tokens")
            spec["batch_size"], spec["grad_accum"] = batch, accum or 1
        if metric not in {"tokens_per_s_per_gpu", "mfu"}:
            raise Skip(f"training metric {metric} not predicted")
    elif kind == "prefill":
        if not inp:
            raise Skip("prefill row without a prompt length")
        spec.update(task="inference", seq_len=inp, output_len=1, batch_size=batch or 1)
        if metric != "ttft_ms":
            raise Skip(f"prefill metric {metric} not predicted")
    elif kind == "decode":
        spec.update(task="inference", seq_len=inp or seq or 1, output_len=out or 128, batch_size=batch or 1)
        if metric not in {"output_tokens_per_s", "ms_per_token"}:
            raise Skip(f"decode metric {metric} not predicted")
    elif kind in {"inference-offline", "inference-server"}:
        if not arch.is_transformer:
            if metric != "samples_per_s":
                raise Skip(f"{metric} for a conv net")
            spec.update(task="cv-inference", batch_size=batch or 64)
            if arch.mlp_type == "diffusion-unet":
                spec.update(image_size=_int(row["input_len"]), denoising_steps=_int(row["output_len"]))
            if not batch:
                assumptions.append("offline conv-net batch not stated: 64 images")
        else:
            if not inp or not out:
                raise Skip("input/output lengths are a dataset distribution, not per-row values")
            if kind == "inference-server":
                raise Skip("server scenario: latency constraints and arrival process not modelled")
            static = (
                row["framework"] or ""
            ).lower() == "fastertransformer" or "static batching" in notes.lower()
            if static:
                spec.update(task="inference", batch_size=batch or 1, seq_len=inp, output_len=out)
            else:
                spec.update(
                    task="serving", batch_size=1, concurrency=OFFLINE_CONCURRENCY, seq_len=inp, output_len=out
                )
            if metric not in {"output_tokens_per_s", "samples_per_s"}:
                raise Skip(f"offline metric {metric} not predicted")
    else:
        raise Skip(f"workload kind {kind!r} not modelled")
    try:
        workload = workload_from_mapping(spec)
    except GpuwiseError as err:
        raise Skip(f"not expressible as a workload: {err}") from None
    return Case(row, workload, compute_dtype, metric, float(row["value"]), assumptions)


def predicted_value(case: Case) -> float:
    """The prediction in the row's metric."""
    p = predict(case.workload, compute_dtype=case.compute_dtype)
    w, metric = case.workload, case.metric
    if p.inference is None and metric == "samples_per_s":
        return p.samples_per_s
    if metric == "tokens_per_s_per_gpu":
        return p.tokens_per_s_per_gpu
    if metric == "mfu":
        # Published MFU uses the PaLM convention (6·P + 12·L·d·s per token) against the bf16 peak.
        arch = get_model(w.model)
        gpu = get_gpu(w.gpu)
        dtype = "fp16" if "fp16" in w.precision else "bf16"
        return p.tokens_per_s_per_gpu * palm_flops_per_token(arch, w.seq_len) / peak_flops(gpu, dtype)
    i = p.inference
    if metric == "ttft_ms":
        return i.ttft_s * 1000
    if metric == "ms_per_token":
        return i.tpot_s * 1000
    if metric == "output_tokens_per_s":
        if case.row["workload"] == "decode":
            return 1.0 / i.tpot_s
        return p.tokens_per_s
    if metric == "samples_per_s":
        return i.requests_per_s
    raise Skip(f"metric {metric} not predicted")


# Why the rows the model misses most are off, from reading each row's source (benchmarks/data/README.md).
BLACKWELL_FP4 = (
    "Blackwell FP4 serving: the FP4 GEMMs run at the measured NVFP4 kernel curve (vLLM PR #20646, B200, one "
    "8B shape, efficiency.toml [fp4_gemm_sm100]); larger 70B GEMMs run relatively better than that shape at "
    "decode M (rows below the measurement), 405B TP4 steps spend more outside the GEMMs than modelled (above)"
)
KNOWN_CAUSES = {
    "thr-DB-static-a100-40gb-sxm-4-bs1": "Databricks blog, TP4 static batch 1 (FasterTransformer): 1.7 vs "
    "0.9 requests/s on one GPU, 1.9x for 4x the bandwidth; the PCIe all-reduces its TTFT rows imply are "
    "modelled, the rest of FasterTransformer's TP decode overhead is not stated",
    "thr-DB-ttft-llama2-70b-4": "Databricks blog, TP4 prefill: its TP4/TP8 pair implies ~36 GB/s all-reduce "
    "bus bandwidth, above the model's PCIe Gen4 figure (0.75 x 32 GB/s): a faster path (2-GPU NVLink "
    "bridges of the PCIe A100?) is not stated",
    "thr-VLLM-1": "vLLM v0.5.3 light load: the post says CPU scheduling dominated (GPU busy 38 %)",
    "thr-TT-8b-128-FSDP": "torchtitan without torch.compile at 128 GPUs: eager elementwise kernels and FSDP "
    "all-gathers on 128 ranks; the perf model does not yet use the workload's torch_compile switch",
}


# Held-out rows the model misses most, by class (docs/validation.md, "Throughput: LoRA settings ...").
QWEN_FLOOR = (
    "Qwen README LoRA (HF Trainer + peft + checkpointing, bs 1): the 1.8B rows stay at 1.0-1.1 s/it from 256 "
    "to 1,024 tokens, a ~125 ms floor per micro-step the host model (90 eager kernels a layer) does not reach"
)
QWEN_ZERO3 = (
    "Qwen README 72B LoRA, ZeRO-3 on 4 A100s: 17.6 s/it at 256 tokens is 2.2 s a micro-step, ~2.4x the "
    "model's NVLink gathers of the 144 GB of bf16 weights (0.9 s): DeepSpeed's gathers run below the "
    "NCCL bus rate"
)
AD_3090_BS1 = (
    "2x RTX 3090 FSDP LoRA at batch 1: each micro-step gathers the 13.5 GB of bf16 weights over the rig's "
    "'slow PCIe lanes' (width not stated; 5-6 s a step implies ~2.7 GB/s)"
)
AD_ADA_70B = (
    "70B QLoRA FSDP over PCIe on RTX 6000 Ada, 'fastest possible combination of settings' not stated "
    "(accumulation to an effective batch of 32 assumed)"
)


def reason(row: dict) -> str:
    if row["id"] in KNOWN_CAUSES:
        return KNOWN_CAUSES[row["id"]]
    if row["id"].startswith("thr-QW-72b-") and int(row["seq_len"] or 0) <= 1024:
        return QWEN_ZERO3
    if row["id"].startswith("thr-QW-") and int(row["seq_len"] or 0) <= 1024:
        return QWEN_FLOOR
    if row["id"].startswith("thr-AD-3090-7b-lora-bs1-"):
        return AD_3090_BS1
    if row["id"].startswith("thr-AD-rtx-6000-ada-"):
        return AD_ADA_70B
    if row["precision"] == "fp4" and row["gpu"] in {"b200", "gb200"}:
        return BLACKWELL_FP4
    return row.get("quality", "")


def group_medians(results: list) -> dict:
    """Median signed error of the row groups the issue tracks: Blackwell FP4 serving, TP>1 prefill."""
    groups: dict[str, list[float]] = {"fp4_serving": [], "tp_prefill": []}
    for row, case, _, err in results:
        if row["precision"] == "fp4":
            groups["fp4_serving"].append(err)
        if case.workload.tp > 1 and row["workload"] == "prefill":
            groups["tp_prefill"].append(err)
    return {k: round(statistics.median(v), 1) for k, v in groups.items() if v}


def source_key(source: str) -> str:
    head = source.split()[0].rstrip(",")
    if head.startswith("mlcommons/"):
        return "mlcommons"
    return {"LLaMA": "Llama papers", "Llama": "Llama papers"}.get(head, head)


def leave_one_source_out(results: list, held_out: set[str]) -> dict[str, dict]:
    """Per publication: |error| median/p90 on its own rows and on every other publication's rows."""
    errors: dict[str, list[float]] = {}
    for row, _, _, err in results:
        errors.setdefault(source_key(row["source"]), []).append(abs(err))
    return loso_table(errors, held_out, digits=1)


def read_rows(paths: list[Path]) -> tuple[list[dict], set[str]]:
    """Rows of every CSV, and the source keys of the held-out files (heldout_*.csv)."""
    rows: list[dict] = []
    held_out: set[str] = set()
    for path in paths:
        with path.open(newline="", encoding="utf-8") as fh:
            part = list(csv.DictReader(fh))
        if path.name.startswith("heldout"):
            held_out |= {source_key(r["source"]) for r in part}
        rows += part
    return rows, held_out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--data",
        type=Path,
        nargs="+",
        default=[DEFAULT_DATA, HELDOUT_DATA],
        help="CSVs of published measurements (default: the development and held-out LLM sets)",
    )
    parser.add_argument(
        "--models",
        type=Path,
        default=HELDOUT_MODELS,
        help="extra model catalog (YAML/TOML) the rows refer to (default: %(default)s)",
    )
    parser.add_argument("--gpus", type=Path, help="extra GPU catalog (YAML/TOML) the rows refer to")
    args = parser.parse_args(argv)
    import os

    for path, env, module in ((args.models, "GPUWISE_MODELS", "models"), (args.gpus, "GPUWISE_GPUS", "gpus")):
        if path is None:
            continue
        if not path.is_file():
            print(f"validate_throughput: {path} does not exist", file=sys.stderr)
            return 2
        import importlib

        os.environ[env] = str(path.resolve())
        importlib.import_module(f"gpuwise.catalog.{module}").clear_cache()
    missing = [path for path in args.data if not path.is_file()]
    if missing:
        print(f"validate_throughput: {missing[0]} does not exist", file=sys.stderr)
        return 2
    rows, held_out = read_rows(args.data)

    from rich.console import Console
    from rich.table import Table

    console = Console(highlight=False, soft_wrap=False, width=160)
    results, skipped = [], []
    for row in rows:
        try:
            case = row_to_case(row)
            pred = predicted_value(case)
        except Skip as why:
            skipped.append((row["id"], str(why)))
            continue
        err = 100.0 * (pred - case.measured) / case.measured
        results.append((row, case, pred, err))

    names = ", ".join(path.name for path in args.data)
    table = Table(title=f"gpuwise.perf vs published measurements ({names})", header_style="bold")
    for col in ("row", "metric", "measured", "predicted", "error %", "assumed"):
        table.add_column(col, justify="right" if col in {"measured", "predicted", "error %"} else "left")
    for row, case, pred, err in results:
        colour = "green" if abs(err) <= 25 else ("yellow" if abs(err) <= 50 else "red")
        table.add_row(
            row["id"],
            case.metric,
            f"{case.measured:,.4g}",
            f"{pred:,.4g}",
            f"[{colour}]{err:+.0f}[/{colour}]",
            "; ".join(case.assumptions),
        )
    console.print(table)

    if skipped:
        skip_table = Table(title="Rows not modelled", header_style="bold")
        skip_table.add_column("row")
        skip_table.add_column("why")
        for rid, why in skipped:
            skip_table.add_row(rid, why)
        console.print(skip_table)

    abs_errs = [abs(err) for *_, err in results]
    by_source: dict[str, list[float]] = {}
    for row, _, _, err in results:
        by_source.setdefault(source_key(row["source"]), []).append(abs(err))
    per_source = {k: round(statistics.median(v), 1) for k, v in sorted(by_source.items())}
    src_table = Table(title="Median |error| per source", header_style="bold")
    for col in ("source", "rows", "median |error| %"):
        src_table.add_column(col, justify="left" if col == "source" else "right")
    for key, errs in sorted(by_source.items(), key=lambda kv: -len(kv[1])):
        src_table.add_row(key, str(len(errs)), f"{statistics.median(errs):.1f}")
    console.print(src_table)

    print("\nworst 10 rows and why:")
    for row, _, _, err in sorted(results, key=lambda r: -abs(r[3]))[:10]:
        print(f"  {row['id']} ({row['quality']}, {err:+.0f} %): {reason(row)}")

    loso = leave_one_source_out(results, held_out)
    print_loso(loso)
    rest_medians = [
        v["without_median_abs_err_pct"] for v in loso.values() if v["without_median_abs_err_pct"] is not None
    ]
    rest_p90s = [
        v["without_p90_abs_err_pct"] for v in loso.values() if v["without_p90_abs_err_pct"] is not None
    ]
    weighted = _weighted_median([(e, 1.0 / len(v)) for v in by_source.values() for e in v])
    summary = {
        "rows": len(results),
        "skipped": len(skipped),
        "median_abs_err_pct": round(statistics.median(abs_errs), 1) if abs_errs else None,
        "source_weighted_median_abs_err_pct": round(weighted, 1) if abs_errs else None,
        "median_of_source_medians_pct": round(statistics.median(per_source.values()), 1)
        if per_source
        else None,
        "within_25_pct": sum(e <= 25 for e in abs_errs),
        "median_signed_err_pct_by_group": group_medians(results),
        "per_source": per_source,
        "leave_one_source_out": {
            "sources": len(loso),
            "median_abs_err_pct_range": [min(rest_medians), max(rest_medians)] if rest_medians else None,
            "p90_abs_err_pct_range": [min(rest_p90s), max(rest_p90s)] if rest_p90s else None,
            "per_source": loso,
        },
    }
    print(json.dumps(summary))
    return 0


def _weighted_median(pairs: list[tuple[float, float]]) -> float:
    """Median where each row counts 1/(rows from its source): every source weighs the same."""
    if not pairs:
        return float("nan")
    pairs.sort()
    half = sum(w for _, w in pairs) / 2
    acc = 0.0
    for value, weight in pairs:
        acc += weight
        if acc >= half:
            return value
    return pairs[-1][0]


if __name__ == "__main__":
    sys.exit(main())
