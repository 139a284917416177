"""Configuration to paste: the recommended workload as YAML, and the same settings in the
frameworks people run (Hugging Face Trainer + PEFT, plain PyTorch, DeepSpeed, torchrun, vLLM).

Only settings the plan changed or the framework needs are written; values come from the
recommended workload, never from defaults invented here.
"""

from __future__ import annotations

import json
import re
from dataclasses import MISSING, fields
from typing import Any

from gpuwise.catalog import get_model
from gpuwise.plan.gpu_features import gpu_half_dtype
from gpuwise.plan.scaling import NODE_GPUS
from gpuwise.plan.xla_advice import xla_snippets
from gpuwise.workload import Workload

__all__ = [
    "deepspeed_json",
    "fsdp2",
    "hf_repo",
    "hf_trainer",
    "launch",
    "pytorch_loop",
    "snippets",
    "tensor_parallel_plan",
    "vllm_command",
    "workload_yaml",
]

_HF_OPTIM = {
    "adamw": "adamw_torch",
    "adamw-fused": "adamw_torch_fused",
    "adamw-8bit": "adamw_bnb_8bit",
    "paged-adamw-8bit": "paged_adamw_8bit",
    "adafactor": "adafactor",
    "sgd": "sgd",
}
_ATTN = {"flash": "flash_attention_2", "sdpa": "sdpa", "eager": "eager"}
_TORCH_DTYPE = {"bf16": "bfloat16", "fp16": "float16"}
_ZERO_STAGE = {"zero1": 1, "zero2": 2, "zero3": 3, "fsdp": 3}


def hf_repo(model_id: str) -> str:
    """The Hugging Face repo named in the catalog source ('HF org/name config.json'), else the id."""
    arch = get_model(model_id)
    match = re.search(r"\bHF ([\w.-]+/[\w.-]+)", arch.source)
    return match.group(1) if match else model_id


def workload_yaml(w: Workload, changes: dict[str, tuple[Any, Any]]) -> str:
    """The recommended workload as YAML: keys that differ from the defaults, and every changed key."""
    defaults = {f.name: f.default for f in fields(Workload) if f.default is not MISSING}
    defaults["lora_targets"], defaults["requirements"], defaults["library_versions"] = ["all-linear"], [], []
    lines = []
    for key, value in w.to_dict().items():
        if key not in changes and key != "model" and value == defaults.get(key):
            continue
        text = json.dumps(value) if isinstance(value, (list, bool)) or value is None else str(value)
        comment = f"   # was {_yaml_value(changes[key][0])}" if key in changes else ""
        lines.append(f"{key}: {text}{comment}")
    return "\n".join(lines) + "\n"


def _yaml_value(value: Any) -> str:
    if isinstance(value, tuple):
        value = list(value)
    return json.dumps(value) if isinstance(value, (list, bool)) or value is None else str(value)


def _half(w: Workload) -> str | None:
    if w.precision in {"amp-bf16", "bf16"}:
        return "bf16"
    if w.precision in {"amp-fp16", "fp16"}:
        return "fp16"
    return None


def hf_trainer(w: Workload) -> str:
    """Transformers (+ PEFT and bitsandbytes for adapters) for fine-tuning: LoRA, QLoRA, full; the label
    names PEFT only when the snippet uses it."""
    repo = hf_repo(w.model)
    lines = ["from transformers import AutoModelForCausalLM, TrainingArguments"]
    load = [f'"{repo}"', f'attn_implementation="{_ATTN[w.attention]}"']
    compute = gpu_half_dtype(w.gpu)  # QLoRA's compute dtype: fp16 where the GPU has no bf16 (T4, V100)
    if w.task == "qlora":
        _hf_quantized_load(w, compute, lines, load)
    if w.precision in {"bf16", "fp16"} or w.is_lora:
        dtype = "fp16" if w.precision == "fp16" or (w.task == "qlora" and compute == "fp16") else "bf16"
        load.append(f'torch_dtype="{_TORCH_DTYPE[dtype]}"')
    lines.append("model = AutoModelForCausalLM.from_pretrained(" + ", ".join(load) + ")")
    if w.is_lora:
        _hf_peft(w, lines)
    args = _hf_training_args(w, compute)
    lines.append('args = TrainingArguments(\n    output_dir="out",\n    ' + ",\n    ".join(args) + ",\n)")
    return "\n".join(lines) + "\n"


def _hf_quantized_load(w: Workload, compute: str, lines: list[str], load: list[str]) -> None:
    """QLoRA: the BitsAndBytesConfig (4-bit NF4/FP4, or 8-bit) into `lines`, its load arguments into
    `load`; `compute` is the 16-bit dtype name ("bf16"/"fp16") the 4-bit matmuls run in."""
    lines[0] += ", BitsAndBytesConfig"
    lines.append("import torch")
    quant = "nf4" if w.precision == "nf4" else "fp4" if w.precision == "int4" else None
    sharded = w.num_gpus > 1 and w.sharding in {"fsdp", "zero3"}
    if quant:
        lines.append(
            f'bnb = BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="{quant}",\n'
            f"                         bnb_4bit_use_double_quant={w.double_quant}, "
            f"bnb_4bit_compute_dtype=torch.{_TORCH_DTYPE[compute]}"
            # FSDP shards only parameters of one dtype: pack the 4-bit weights in the 16-bit one
            + (f", bnb_4bit_quant_storage=torch.{_TORCH_DTYPE[compute]}" if sharded else "")
            + ")"
        )
    else:
        lines.append("bnb = BitsAndBytesConfig(load_in_8bit=True)")
    load.append("quantization_config=bnb")
    if w.num_gpus > 1 and not sharded:  # quantized weights load on one device: each rank on its own GPU
        lines.insert(0, "import os")
        lines.append('local_rank = int(os.environ.get("LOCAL_RANK", 0))')
        load.append('device_map={"": local_rank}')


def _hf_peft(w: Workload, lines: list[str]) -> None:
    """The PEFT imports (first) and the LoRA wrapping (last) into `lines`; QLoRA also prepares
    k-bit training."""
    lines.insert(0, "from peft import LoraConfig, get_peft_model")
    if w.task == "qlora":
        lines.insert(0, "from peft import prepare_model_for_kbit_training")
        lines.append(
            "model = prepare_model_for_kbit_training(model, "
            f"use_gradient_checkpointing={w.grad_checkpointing != 'none'})"
        )
    targets = "all-linear" if "all-linear" in w.lora_targets else list(w.lora_targets)
    lines.append(
        f"model = get_peft_model(model, LoraConfig(r={w.lora_rank}, lora_alpha={w.lora_alpha}, "
        f'target_modules={json.dumps(targets)}, task_type="CAUSAL_LM"))'
    )


def _hf_training_args(w: Workload, compute: str) -> list[str]:
    """`TrainingArguments` keyword arguments: batch, accumulation, precision, checkpointing, optimizer,
    sharding (FSDP or a DeepSpeed config)."""
    args = [f"per_device_train_batch_size={w.batch_size}", f"gradient_accumulation_steps={w.grad_accum}"]
    half = _half(w)
    if half and w.task != "qlora":
        args.append(f"{half}=True")
    elif w.task == "qlora":
        args.append(f"{compute}=True")
    if w.precision == "fp8":
        args.append("bf16=True  # FP8 matmuls via accelerate/Transformer Engine (mixed_precision='fp8')")
    if w.grad_checkpointing != "none":
        args.append("gradient_checkpointing=True")
        if w.grad_checkpointing == "full":
            args.append('gradient_checkpointing_kwargs={"use_reentrant": False}')
    args.append(f'optim="{_HF_OPTIM.get(w.optimizer, w.optimizer)}"')
    if w.is_training and w.data_parallel > 1 and w.sharding in {"fsdp", "zero3"}:
        args.append('fsdp="full_shard auto_wrap"')
    elif w.sharding in {"zero1", "zero2"}:
        args.append('deepspeed="ds_config.json"')
    return args


def pytorch_loop(w: Workload) -> str:
    """Plain PyTorch: autocast, optimizer, checkpointing, attention backend, accumulation."""
    lines, half = _torch_setup(w)
    loop = _torch_steps(w, half)
    if w.attention == "flash":
        lines.append(
            "# attention: torch.nn.functional.scaled_dot_product_attention picks the flash kernel for "
            "bf16/fp16 without an explicit mask"
        )
    return "\n".join(lines + loop) + "\n"


def _torch_setup(w: Workload) -> tuple[list[str], str | None]:
    """Lines before the loop (optimizer, precision, loss scaler, checkpointing) and the autocast dtype
    ("torch.bfloat16" / "torch.float16", None for none)."""
    lines = ["import torch"]
    half = {"bf16": "torch.bfloat16", "fp16": "torch.float16"}.get(_half(w) or "")
    if w.optimizer in {"adamw", "adamw-fused"}:
        fused = ", fused=True" if w.optimizer == "adamw-fused" else ""
        lines.append(f"opt = torch.optim.AdamW(model.parameters(), lr=lr{fused})")
    elif w.optimizer in {"adamw-8bit", "paged-adamw-8bit"}:
        cls = "PagedAdamW8bit" if w.optimizer.startswith("paged") else "AdamW8bit"
        lines.append(f"import bitsandbytes as bnb\nopt = bnb.optim.{cls}(model.parameters(), lr=lr)")
    if w.precision == "fp32":
        lines.append("torch.backends.cuda.matmul.allow_tf32 = True  # at least use TF32 tensor cores")
    if w.precision in {"bf16", "fp16"}:
        lines.append(
            f"model = model.to(torch.{'bfloat16' if w.precision == 'bf16' else 'float16'})  # 16-bit weights "
            "and optimizer states"
        )
    if w.precision == "fp8":
        lines.append(
            "from torchao.float8 import convert_to_float8_training\n"
            "convert_to_float8_training(model)  # FP8 matmuls in nn.Linear; or NVIDIA Transformer Engine "
            "te.Linear + te.fp8_autocast"
        )
        half = "torch.bfloat16"
    if w.precision == "amp-fp16":
        lines.append('scaler = torch.amp.GradScaler("cuda")  # fp16 needs loss scaling')
    if w.grad_checkpointing != "none" and not w.is_cv:
        lines.append(
            'model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})  # '
            "HF models; "
            "else torch.utils.checkpoint per block"
        )
    return lines, half


def _torch_steps(w: Workload, half: str | None) -> list[str]:
    """The training loop: forward (under autocast for AMP and FP8), backward, optimizer step every
    `grad_accum` micro-batches."""
    loop = [f"for i, batch in enumerate(loader):  # micro-batch {w.batch_size}"]
    scaled = f" / {w.grad_accum}" if w.grad_accum > 1 else ""
    if half and (w.precision.startswith("amp-") or w.precision == "fp8"):
        loop.append(f'    with torch.autocast("cuda", dtype={half}):')
        loop.append(f"        loss = model(**batch).loss{scaled}")
    else:
        loop.append(f"    loss = model(**batch).loss{scaled}")
    loop.append("    scaler.scale(loss).backward()" if w.precision == "amp-fp16" else "    loss.backward()")
    step = "scaler.step(opt); scaler.update()" if w.precision == "amp-fp16" else "opt.step()"
    if w.grad_accum > 1:
        loop += [
            f"    if (i + 1) % {w.grad_accum} == 0:",
            f"        {step}",
            "        opt.zero_grad(set_to_none=True)",
        ]
    else:
        loop += [f"    {step}", "    opt.zero_grad(set_to_none=True)"]
    return loop


def deepspeed_json(w: Workload) -> str:
    """A DeepSpeed ds_config.json: micro-batch, accumulation, ZeRO stage and 16-bit mode."""
    stage = _ZERO_STAGE.get(w.sharding, 0)
    config: dict[str, Any] = {
        "train_micro_batch_size_per_gpu": w.batch_size,
        "gradient_accumulation_steps": w.grad_accum,
        "zero_optimization": {"stage": stage, "overlap_comm": True, "contiguous_gradients": True},
    }
    if _half(w) == "bf16":
        config["bf16"] = {"enabled": True}
    elif _half(w) == "fp16":
        config["fp16"] = {"enabled": True}
    if stage == 3:
        config["zero_optimization"]["stage3_gather_16bit_weights_on_model_save"] = True
    return json.dumps(config, indent=2) + "\n"


def fsdp2(w: Workload) -> str | None:
    """PyTorch FSDP2 (fully_shard per transformer block, mixed-precision policy). With TP, a 2-D device
    mesh: each block's projections split Megatron-style on the 'tp' mesh (DTensor ``parallelize_module``,
    as torchtitan does), then fully_shard on the 'dp' mesh; None when the model has no plain TP plan
    (``tensor_parallel_plan``): Megatron-LM or NeMo split those."""
    half = "torch.bfloat16" if _half(w) != "fp16" else "torch.float16"
    head = ["from torch.distributed.fsdp import fully_shard, MixedPrecisionPolicy"]
    mesh = ""
    per_block = ["    fully_shard(block{mesh}, mp_policy=mp)"]
    if w.tp > 1:
        plan = tensor_parallel_plan(w.model)
        if plan is None:
            return None
        dp = max(w.num_gpus // (w.tp * max(w.pp, 1)), 1)
        head = [
            "from torch.distributed.device_mesh import init_device_mesh",
            *head,
            "from torch.distributed.tensor.parallel import (\n"
            "    ColwiseParallel, RowwiseParallel, parallelize_module\n)",
            f'mesh = init_device_mesh("cuda", ({dp}, {w.tp}), mesh_dim_names=("dp", "tp"))  # TP in a node',
            "tp_plan = {  # Megatron-style: column-split in, row-split out, one all-reduce per pair",
            *(f'    "{name}": {style}(),' for name, style in plan.items()),
            "}",
        ]
        mesh = ', mesh=mesh["dp"]'
        per_block.insert(0, '    parallelize_module(block, mesh["tp"], tp_plan)')
    lines = [
        *head,
        f"mp = MixedPrecisionPolicy(param_dtype={half}, reduce_dtype=torch.float32)",
        "for block in model.model.layers:  # one FSDP unit per transformer block",
        *(line.format(mesh=mesh) for line in per_block),
        f"fully_shard(model{mesh}, mp_policy=mp)",
    ]
    return "\n".join(lines) + "\n"


def tensor_parallel_plan(model_id: str) -> dict[str, str] | None:
    """The DTensor TP plan of one Hugging Face decoder block (module path -> ColwiseParallel or
    RowwiseParallel), or None where a plain column/row split would be wrong: fused q/k/v projections
    (a column split cuts across heads) and MoE experts (expert parallelism, not TP, splits them).
    Hugging Face's Llama-style attention reshapes with -1 heads, so local heads work unchanged."""
    spec = get_model(model_id).spec
    if spec.kind != "decoder" or spec.fused_modules or not spec.hf_mlp.startswith("gated"):
        return None
    attn = {f"self_attn.{p}_proj": "ColwiseParallel" for p in ("q", "k", "v")}
    mlp = {"mlp.gate_proj": "ColwiseParallel", "mlp.up_proj": "ColwiseParallel"}
    return {**attn, "self_attn.o_proj": "RowwiseParallel", **mlp, "mlp.down_proj": "RowwiseParallel"}


def launch(w: Workload) -> str:
    """The torchrun line: standalone on one node, else c10d rendezvous on every node (8 GPUs each)."""
    nodes = max(1, -(-w.num_gpus // NODE_GPUS))
    per_node = min(w.num_gpus, NODE_GPUS)
    if nodes == 1:
        return f"torchrun --standalone --nproc_per_node={per_node} train.py\n"
    return (
        f"torchrun --nnodes={nodes} --nproc_per_node={per_node} --rdzv_backend=c10d "
        "--rdzv_endpoint=$HEAD_NODE:29500 train.py   # run on every node\n"
    )


def megatron_args(w: Workload) -> str:
    """Megatron-LM ``pretrain_gpt.py`` flags for a pipeline-parallel layout (FSDP2 and the Trainer have no
    pipeline stages): the TP x PP x DP split, the micro and global batch, precision, recomputation and the
    model's shape from the catalog (Megatron-LM ``megatron/training/arguments.py`` names)."""
    m = get_model(w.model)
    launch_line = launch(w).strip().replace("train.py", "pretrain_gpt.py")
    comment = ""
    if "#" in launch_line:
        launch_line, comment = (part.strip() for part in launch_line.split("#", 1))
        comment = f"# {comment}\n"
    args = [
        launch_line,
        f"--tensor-model-parallel-size {w.tp}",
        f"--pipeline-model-parallel-size {w.pp}",
        f"--micro-batch-size {w.batch_size}",
        f"--global-batch-size {w.global_batch}",
        f"--seq-length {w.seq_len}",
        f"--max-position-embeddings {max(w.seq_len, m.max_position_embeddings)}",
        f"--num-layers {m.num_layers}",
        f"--hidden-size {m.hidden_size}",
        f"--ffn-hidden-size {m.intermediate_size}",
        f"--num-attention-heads {m.num_attention_heads}",
    ]
    if m.num_kv_heads and m.num_kv_heads != m.num_attention_heads:
        args.append(f"--group-query-attention --num-query-groups {m.num_kv_heads}")
    if m.mlp_type.startswith("gated"):
        args.append("--swiglu")
    if m.norm_type == "rmsnorm":
        args.append("--normalization RMSNorm")
    args.append("--position-embedding-type rope --disable-bias-linear")
    if not m.tie_word_embeddings:
        args.append("--untie-embeddings-and-output-weights")
    if w.tp > 1:
        args.append("--sequence-parallel")
    args.append("--fp16" if _half(w) == "fp16" else "--bf16")
    if w.precision == "fp8":
        args.append("--fp8-format hybrid --transformer-impl transformer_engine")
    if w.grad_checkpointing == "full":
        args.append("--recompute-granularity full --recompute-method uniform --recompute-num-layers 1")
    elif w.grad_checkpointing == "selective":
        args.append("--recompute-granularity selective")
    if w.data_parallel > 1 and w.sharding != "none":
        args.append("--use-distributed-optimizer")
    return comment + " \\\n    ".join(args) + "\n"


def diffusers_pipeline(w: Workload) -> str | None:
    """A diffusers text-to-image run matching the plan: the pipeline in the GPU's 16-bit dtype, the
    denoiser in channels_last when the plan says so, the steps and size; None for a model whose
    architecture source names no Hugging Face repo."""
    from gpuwise.vision.architectures import vision_arch  # layer 1: geometry and its sources

    arch = vision_arch(w.model)
    match = re.search(r"\b([\w.-]+/[\w.-]+) (?:unet|transformer)/config\.json", arch.source) if arch else None
    if arch is None or match is None or not arch.is_diffusion or arch.pipeline is None:
        return None
    dtype = "float16" if _half(w) == "fp16" or w.precision == "fp16" else "bfloat16"
    denoiser = "unet" if arch.family == "unet" else "transformer"
    steps = w.denoising_steps or arch.pipeline.default_steps
    height = w.image_size or arch.image_size
    width = w.image_width or height
    lines = [
        "import torch",
        "from diffusers import DiffusionPipeline",
        f'pipe = DiffusionPipeline.from_pretrained("{match.group(1)}", torch_dtype=torch.{dtype}).to("cuda")',
    ]
    if w.channels_last:
        lines.append(f"pipe.{denoiser}.to(memory_format=torch.channels_last)")
    call = f"prompt, num_inference_steps={steps}, height={height}, width={width}"
    if w.batch_size > 1:
        call += f", num_images_per_prompt={w.batch_size}"
    lines.append(f"images = pipe({call}).images")
    return "\n".join(lines) + "\n"


def vllm_command(w: Workload) -> str:
    """A `vllm serve` command line (notes go above it: a comment would break the line continuations)."""
    args, notes = [f"vllm serve {hf_repo(w.model)}"], []
    if w.tp > 1:
        args.append(f"--tensor-parallel-size {w.tp}")
    if w.pp > 1:
        args.append(f"--pipeline-parallel-size {w.pp}")
    if w.precision == "fp8":
        args.append("--quantization fp8")
    elif w.precision == "fp4":  # memgaps: vLLM reads the scheme from an NVFP4 (ModelOpt) checkpoint
        notes.append(
            "# serve an NVFP4 checkpoint of the model (ModelOpt / llm-compressor, e.g. nvidia/*-FP4)"
        )
        args.append("--quantization modelopt_fp4")
    elif w.precision in {"int4", "nf4"}:
        notes.append("# serve an AWQ (or GPTQ: --quantization gptq) 4-bit checkpoint of the model")
        args.append("--quantization awq")
    elif w.precision == "int8":
        notes.append(
            "# 8-bit weights: FP8 weight-only on GPUs without FP8 tensor cores, or an INT8 W8A16 checkpoint"
        )
        args.append("--quantization fp8")
    if w.kv_cache_dtype in {"fp8", "int8"}:
        args.append("--kv-cache-dtype fp8")
    args.append(f"--max-model-len {w.seq_len + w.output_len}")
    args.append(f"--max-num-seqs {max(w.concurrency, w.batch_size)}")
    args.append("--gpu-memory-utilization 0.90")
    if w.task == "rag":
        args.append("--enable-prefix-caching")
    return "".join(n + "\n" for n in notes) + " \\\n    ".join(args) + "\n"


def snippets(w: Workload, changes: dict[str, tuple[Any, Any]]) -> dict[str, str]:
    """Label -> text to paste, for the recommended workload."""
    out = {"workload.yaml": workload_yaml(w, changes)}
    framework_code = xla_snippets(w)  # JAX / TensorFlow: the settings in that framework, no PyTorch
    if framework_code:
        return {**out, **framework_code}
    if w.is_training and not w.is_cv:
        split_by_megatron = w.pp > 1 or (w.tp > 1 and tensor_parallel_plan(w.model) is None)
        if split_by_megatron and w.task == "pretrain":
            # pipeline stages need a framework that schedules micro-batches through them, and fused-QKV or
            # MoE blocks a TP that knows heads and experts: no plain loop, no FSDP2 block, the Megatron-LM
            # flags of this layout instead
            out["Megatron-LM pretrain_gpt.py"] = megatron_args(w)
            return out
        if w.task in {"lora", "qlora", "full-finetune"} and w.tp == 1 and w.pp == 1:
            # the Trainer shards with FSDP/DeepSpeed but never splits a layer (no TP) or the stack (no PP):
            # a Trainer snippet for a TP plan would load the whole model per rank and OOM again
            out["Hugging Face Trainer + PEFT" if w.is_lora else "Hugging Face Trainer"] = hf_trainer(w)
        out["PyTorch loop"] = pytorch_loop(w)
        deepspeed = w.framework.strip().lower() == "deepspeed"
        if w.data_parallel > 1 and (
            w.sharding in {"zero1", "zero2", "zero3"} or (deepspeed and w.sharding == "fsdp")
        ):
            out["DeepSpeed ds_config.json"] = deepspeed_json(w)  # you run DeepSpeed: ZeRO-3 is its FSDP
        elif ((w.data_parallel > 1 and w.sharding == "fsdp") or w.tp > 1) and (code := fsdp2(w)):
            out["PyTorch FSDP2"] = code
        if w.num_gpus > 1:
            out["launch"] = launch(w)
    elif w.is_cv and w.is_training:
        out["PyTorch loop"] = (
            pytorch_loop(w)
            .replace("model(**batch).loss", "criterion(model(images), labels)")
            .replace("for i, batch in enumerate(loader)", "for i, (images, labels) in enumerate(loader)")
        )
        if w.channels_last:  # helper "vision": NHWC weights and inputs
            out["PyTorch loop"] = (
                out["PyTorch loop"]
                .replace(
                    "import torch\n", "import torch\nmodel = model.to(memory_format=torch.channels_last)\n", 1
                )
                .replace("model(images)", "model(images.to(memory_format=torch.channels_last))")
            )
        if w.num_gpus > 1:
            out["launch"] = launch(w)
    elif w.is_inference and not w.is_cv:
        out["vLLM"] = vllm_command(w)
    elif w.is_cv and (code := diffusers_pipeline(w)):
        out["diffusers"] = code
    return out
