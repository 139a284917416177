"""What each training/serving stack really allocates, as a small profile of switches.

The same model and batch take different memory under different code: peft keeps LoRA adapters in
fp32 and casts each adapted layer's input to fp32 for the adapter path; LitGPT and torchtune keep
adapters in the model dtype; transformers upcasts the whole logits tensor to fp32 for the loss
while LitGPT runs the head and cross-entropy in 128-token chunks in 16-bit; peft's
``prepare_model_for_kbit_training`` casts every non-quantized parameter (embeddings, norms,
lm_head) to fp32 for QLoRA, which turns the residual stream fp32 too. ``workload.framework``
selects a profile; unknown or empty means Hugging Face transformers (+peft), the most common stack.

Sources (code read, not copied): transformers ``modeling_llama.py`` / ``loss_utils.py`` (fp32
logits, RMSNorm in fp32) and ``integrations/sdpa_attention.py`` (GQA), peft
``tuners/lora/layer.py`` (per-module dropout and ``_cast_input_dtype``) and ``utils/other.py``
(``prepare_model_for_kbit_training``), LitGPT ``lora.py`` / ``utils.chunked_cross_entropy`` /
Lightning ``BitsandbytesPrecision`` (all ``nn.Linear`` converted, weights cast to fp16 before
``quantize_4bit``), torchtune
``modules/transformer.py`` (``output(h).float()``) and ``CEWithChunkedOutputLoss``.

Library releases change what a step keeps, so a profile is resolved for the library versions in
``workload.library_versions`` (default: current releases). Two changes matter here:
- transformers 4.54 (PR #39412, July 2025) passes ``enable_gqa`` to SDPA when there is no attention
  mask, so K/V are no longer expanded to every head (still expanded for padded batches, and for head
  dims above 256 where SDPA's fused kernels lack GQA: ``integrations/sdpa_attention.py``).
- bitsandbytes 0.43.2 (PR #1270, July 2024) stopped ``MatMul4Bit`` from keeping its input
  (``ctx.tensors = (None, B)``); ``MatMul8bitLt`` still keeps it (``ctx.tensors = (CAt, subA, A)``).
  torchtune's NF4 linears (torchao ``linear_nf4``) keep only the weight too.
- torch 2.0 (March 2023) made ``zero_grad(set_to_none=True)`` the default; before, gradients stayed
  allocated (zeroed) from one step into the next step's forward and backward.
- transformers 4.36 (Dec 2023) made SDPA the default attention of its Llama/Mistral-family models
  (``attn_implementation``; BERT in 4.41): before, an "sdpa" workload really ran eager attention.
- transformers 4.37 (Jan 2024) deprecated its own ``transformers.AdamW`` as the Trainer's default
  (``optim="adamw_torch"``): before, a per-parameter loop with no group-wide ``foreach`` temporary.
- torchtune 0.3 (Sept 2024) switched its recipes' loss to ``CEWithChunkedOutputLoss`` (8 chunks).
- torchao 0.2 (May 2024, PR #196 "Perform quantization in Chunks") quantizes to NF4 in chunks of 2^20
  elements; torchao 0.1 (``dtypes/nf4tensor.py``) compared the whole weight with the 16 NF4 levels at
  once, so quantizing one matrix briefly held two (numel × 16) tensors in its dtype. torchtune builds
  its QLoRA model on the GPU and quantizes each linear there, so that spike is a load-time peak.

Two compiler/loss switches change what a step keeps, each a framework default a workload may override
(``torch_compile``, ``chunked_loss``):
- ``torch.compile`` of the blocks (torchtune compiles each layer) fuses RMSNorm and SwiGLU: a fused
  norm saves its 16-bit input instead of the fp32 copy and the normalized output, a fused SiLU·mul
  saves only its two inputs. On torchtune's Llama-3.2-3B table (``README.md`` "Optimization flags",
  packed 2 × 4096) that is 60.0 → 51.0 GiB; these two fusions account for 8.8 GiB of it.
- Chunked cross-entropy upcasts one chunk of logits to fp32 at a time (6/7 bytes per logit at the
  forward/backward peak instead of 10/12); compiled, the upcast fuses into the loss (4/5 bytes).
  The same table: 51.0 → 42.9 GiB.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from gpuwise.errors import GpuwiseError, did_you_mean
from gpuwise.workload import Workload
from gpuwise.workload.spec import Precision

__all__ = [
    "BITSANDBYTES_4BIT_DROPS_INPUT",
    "KNOWN_LIBRARIES",
    "LOGITS_16BIT_SHIFTED",
    "LOGITS_CHUNKED_16BIT",
    "LOGITS_CHUNKED_FP32",
    "LOGITS_FP32_LOSS",
    "PROFILES",
    "TORCHAO_CHUNKED_NF4",
    "TORCHTUNE_CHUNKED_CE",
    "TORCH_ZERO_GRAD_SET_TO_NONE",
    "TRANSFORMERS_SDPA_DEFAULT",
    "TRANSFORMERS_SDPA_NATIVE_GQA",
    "TRANSFORMERS_TORCH_ADAMW",
    "Profile",
    "loss_logits",
    "parse_library_versions",
    "profile_for",
    "profile_for_workload",
    "quantized_linear_keeps_input",
    "versions_current_at",
]


# (forward-peak, backward-peak) bytes per (token × vocab) for the logits and loss.
LOGITS_FP32_LOSS = (
    10.0,
    12.0,
)  # 16-bit head output, .float() copy, fp32 log_softmax; backward: saved + grad + grad_in
LOGITS_CHUNKED_16BIT = (4.0, 5.0)  # head output chunks + 16-bit log_softmax; backward per chunk
LOGITS_CHUNKED_FP32 = (6.0, 7.0)  # 16-bit chunks + fp32 log_softmax per chunk
# Model code whose loss takes the 16-bit logits as they are (Qwen v1 remote code): head output, its
# contiguous shifted copy and the 16-bit log_softmax; backward adds their three gradients to the saved output.
LOGITS_16BIT_SHIFTED = (6.0, 8.0)


@dataclass(frozen=True)
class Profile:
    """How one training framework (peft, LitGPT, torchtune, axolotl…) lays out LoRA/QLoRA memory: adapter
    dtypes, dropout copies, k-bit upcasting, what it quantizes; each field named after the code it
    reproduces."""

    name: str
    adapter_dtype_from_model: bool = False  # LitGPT/torchtune: adapters in the model dtype, not fp32
    lora_dropout: float = 0.05  # common recipe default; >0 saves a dropout output and a 1-byte mask
    lora_input_per_module: bool = True  # peft: each adapted layer makes its own dropout/cast copy
    kbit_upcast: bool = True  # peft prepare_model_for_kbit_training: non-quantized params -> fp32
    quantize_scope: str = "blocks"  # "blocks": every block linear; "lora_targets": only adapted ones
    quantize_lm_head: bool = False
    quant_fp16_staging: bool = False  # weights staged as fp16 copies while (de)quantizing
    repeat_kv_for_sdpa: bool = True  # GQA: K/V expanded to all heads before SDPA (flash-attn is native)
    native_gqa_max_head_dim: int = 1 << 30  # without expansion, only up to this head dim (larger ones expand)
    transformers_modeling: bool = (
        True  # runs transformers' modeling code (its activations, its SDPA integration)
    )
    quant_backend: str = (
        "bitsandbytes"  # bitsandbytes | torchao (torchtune NF4) | unsloth (fused LoRA kernels)
    )
    bnb_4bit_keeps_input: bool = False  # bitsandbytes < 0.43.2: MatMul4Bit kept its 16-bit input on ctx
    grads_set_to_none: bool = True  # zero_grad frees gradients between steps (torch >= 2.0 default)
    norm_fp32_saved: bool = True  # RMSNorm computes in fp32 and saves the fp32 input
    logits: tuple[float, float] = LOGITS_FP32_LOSS
    inference_logits: str = "last"  # "last": only the last position; "prompt": every prompt position
    ddp_grad_buckets: bool = True  # DDP keeps flat gradient buckets (gradient_as_bucket_view=False)
    frozen_linear_saves_input: bool = (
        False  # inputs of frozen linears stay alive (LitGPT's published LoRA peaks)
    )
    unties_embeddings: bool = False  # keeps its own lm_head even when the checkpoint ties it (LitGPT's GPT)
    fsdp_full_state_load: bool = False  # FSDP loads a full (unsharded) state dict on every rank
    loss_outlives_step: bool = False  # the training loop's `loss` (and its graph) lives into the next forward
    kv_pool_fraction: float = 0.0  # serving engines that preallocate the KV pool to this share of GPU memory
    compiled: bool = False  # torch.compile on the blocks by default (fused norms and activations)
    chunked_loss: bool = False  # chunked cross-entropy by default
    chunked_logits: tuple[float, float] = LOGITS_CHUNKED_FP32  # what its chunked loss keeps
    optimizer_foreach: bool = True  # "adamw" is torch's foreach AdamW (transformers >= 4.37's Trainer)
    sdpa_default: bool = True  # "sdpa" attention really runs SDPA (transformers >= 4.36)
    fused_lora_unsharded_only: bool = False  # fused LoRA kernels switch off under FSDP (fms accelerated-peft)
    nf4_quantize_chunked: bool = True  # torchao >= 0.2 quantizes in 2^20-element chunks (0.1: whole matrix)


PROFILES = {
    "hf": Profile("hf", repeat_kv_for_sdpa=False, native_gqa_max_head_dim=256),
    "litgpt": Profile(
        "litgpt",
        adapter_dtype_from_model=True,
        lora_input_per_module=False,
        kbit_upcast=False,
        transformers_modeling=False,
        quantize_lm_head=True,
        quant_fp16_staging=True,
        logits=LOGITS_CHUNKED_16BIT,
        chunked_loss=True,
        chunked_logits=LOGITS_CHUNKED_16BIT,  # utils.chunked_cross_entropy: 128-token chunks in 16-bit
        inference_logits="prompt",
        unties_embeddings=True,
        fsdp_full_state_load=True,
        frozen_linear_saves_input=True,
        loss_outlives_step=True,
    ),
    "torchtune": Profile(
        "torchtune",
        adapter_dtype_from_model=True,
        lora_dropout=0.0,
        kbit_upcast=False,
        transformers_modeling=False,
        quantize_scope="lora_targets",
        inference_logits="prompt",
        quant_backend="torchao",
        chunked_loss=True,  # CEWithChunkedOutputLoss in its recipes since 0.3
    ),
    # Unsloth's fused LoRA autograd functions keep the layer input X for the adapter gradients.
    "unsloth": Profile(
        "unsloth",
        kbit_upcast=False,
        repeat_kv_for_sdpa=False,
        logits=LOGITS_CHUNKED_FP32,
        chunked_loss=True,
        quant_backend="unsloth",
    ),
    # foundation-model-stack/fms-acceleration's accelerated-peft plugin: Unsloth-derived fused LoRA kernels
    # on one GPU. Under FSDP its published runs equal the plain peft baseline (a100_80gb.csv@f1895b7:
    # Mixtral QLoRA 2x2 20.40 vs 20.42 GB allocated), so sharded runs get the hf profile.
    "fms-accelerated-peft": Profile(
        "fms-accelerated-peft",
        kbit_upcast=False,
        repeat_kv_for_sdpa=False,
        logits=LOGITS_CHUNKED_FP32,
        chunked_loss=True,
        quant_backend="unsloth",
        fused_lora_unsharded_only=True,
    ),
    # AnswerDotAI/fsdp_qlora train.py: transformers modeling + peft LoRA (dropout 0.1), but its own QLoRA
    # loading (bnb Linear4bit swapped in with quant_storage = the model dtype, then model.to(torch_dtype)):
    # no prepare_model_for_kbit_training, so norms, embeddings and the residual stream stay 16-bit.
    "fsdp_qlora": Profile("fsdp_qlora", lora_dropout=0.1, kbit_upcast=False),
    # hiyouga/LLaMA-Factory: transformers modeling + peft LoRA, but its own prepare_model_for_training
    # (src/llmtuner/model/loader.py@00c7710, Dec 2023; "inspired by peft v0.2.0"), never peft's
    # prepare_model_for_kbit_training: norms are upcast only with upcast_layernorm (default off), embeddings
    # and lm_head stay in the compute dtype (a hook casts the lm_head output to fp32: the fp32 loss the hf
    # profile already has). Later releases keep this (model/utils/checkpointing.py).
    "llama-factory": Profile(
        "llama-factory", repeat_kv_for_sdpa=False, native_gqa_max_head_dim=256, kbit_upcast=False
    ),
    "megatron": Profile(
        "megatron",
        lora_dropout=0.0,
        kbit_upcast=False,
        repeat_kv_for_sdpa=False,
        ddp_grad_buckets=False,
        transformers_modeling=False,
    ),
    "torch": Profile("torch", kbit_upcast=False, ddp_grad_buckets=True, transformers_modeling=False),
    # vLLM gpu_memory_utilization default 0.9; SGLang mem_fraction_static ~0.88 on 80 GB GPUs
    # (server_args.py).
    "vllm": Profile("vllm", repeat_kv_for_sdpa=False, kv_pool_fraction=0.90, transformers_modeling=False),
    "sglang": Profile("sglang", repeat_kv_for_sdpa=False, kv_pool_fraction=0.88, transformers_modeling=False),
}

_ALIASES = {
    "": "hf",
    "hf": "hf",
    "hf-trainer": "hf",
    "hf-transformers": "hf",
    "transformers": "hf",
    "peft": "hf",
    "trl": "hf",
    "axolotl": "hf",
    "llama-factory": "llama-factory",
    "fms-acceleration": "hf",
    "fms-hf-tuning": "hf",
    "fms-accelerated-peft": "fms-accelerated-peft",
    "accelerated-peft": "fms-accelerated-peft",
    "fsdp_qlora": "fsdp_qlora",
    "fsdp-qlora": "fsdp_qlora",
    "answerai": "fsdp_qlora",
    "accelerate": "hf",
    "optimum-benchmark": "hf",
    "litgpt": "litgpt",
    "lit-gpt": "litgpt",
    "torchtune": "torchtune",
    "unsloth": "unsloth",
    "deepspeed": "megatron",
    "megatron": "megatron",
    "megatron-lm": "megatron",
    "nemo": "megatron",
    "torchtitan": "megatron",
    "lightning": "torch",
    "lightning-fabric": "torch",
    "pytorch": "torch",
    "torch": "torch",
    "vllm": "vllm",
    "tgi": "hf",
    "sglang": "sglang",
    "tensorrt-llm": "megatron",
}


# Releases that changed what a step keeps: (library, first release with the change, the release before it,
# month it shipped). Before it, the old behaviour holds.
TRANSFORMERS_SDPA_NATIVE_GQA = (
    "transformers",
    (4, 54),
    (4, 53),
    "2025-07",
)  # huggingface/transformers PR #39412
BITSANDBYTES_4BIT_DROPS_INPUT = (
    "bitsandbytes",
    (0, 43, 2),
    (0, 43, 1),
    "2024-07",
)  # PR #1270, CHANGELOG 0.43.2
TORCH_ZERO_GRAD_SET_TO_NONE = (
    "torch",
    (2, 0),
    (1, 13),
    "2023-03",
)  # PyTorch 2.0: zero_grad(set_to_none=True) default
TRANSFORMERS_SDPA_DEFAULT = ("transformers", (4, 36), (4, 35), "2023-12")  # release notes v4.36.0
TRANSFORMERS_TORCH_ADAMW = ("transformers", (4, 37), (4, 36), "2024-01")  # Trainer optim default adamw_torch
TORCHTUNE_CHUNKED_CE = ("torchtune", (0, 3), (0, 2), "2024-09")  # recipes' loss: CEWithChunkedOutputLoss
TORCHAO_CHUNKED_NF4 = ("torchao", (0, 2), (0, 1), "2024-05")  # PR #196; 0.2.0 wheel built 2024-05-20
_CHANGES = (
    TRANSFORMERS_SDPA_NATIVE_GQA,
    BITSANDBYTES_4BIT_DROPS_INPUT,
    TORCH_ZERO_GRAD_SET_TO_NONE,
    TRANSFORMERS_SDPA_DEFAULT,
    TRANSFORMERS_TORCH_ADAMW,
    TORCHTUNE_CHUNKED_CE,
    TORCHAO_CHUNKED_NF4,
)
# Libraries whose version a workload may state (those in _CHANGES change the estimate).
KNOWN_LIBRARIES = (
    "transformers",
    "bitsandbytes",
    "peft",
    "torch",
    "accelerate",
    "trl",
    "deepspeed",
    "litgpt",
    "torchtune",
    "torchao",
    "unsloth",
    "flash-attn",
    "vllm",
    "sglang",
    "megatron-core",
    "nemo",
)
_VERSION_ITEM = re.compile(
    r"^\s*([a-z][a-z0-9_.-]*?)\s*(?:==|=|@|\s)\s*v?(\d+(?:\.\d+){0,2})\s*$", re.IGNORECASE
)


def parse_library_versions(items: tuple[str, ...] | list[str]) -> dict[str, tuple[int, ...]]:
    """``("transformers==4.44", "bitsandbytes 0.42.0")`` -> ``{"transformers": (4, 44), ...}``."""
    versions: dict[str, tuple[int, ...]] = {}
    for item in items:
        match = _VERSION_ITEM.match(str(item))
        if not match:
            raise GpuwiseError(
                f"library_versions: cannot read {item!r}; write name==version, e.g. transformers==4.44"
            )
        name = match.group(1).lower().replace("_", "-")
        if name not in KNOWN_LIBRARIES:
            known = "known: " + ", ".join(KNOWN_LIBRARIES)
            raise did_you_mean("library in library_versions", name, KNOWN_LIBRARIES, hint=known)
        versions[name] = tuple(int(part) for part in match.group(2).split("."))
    return versions


def versions_current_at(year: int, month: int) -> tuple[str, ...]:
    """Library versions in use at a date: a release counts from the month after it shipped (the oldest
    pre-change release wins when several changes of one library are later than the date)."""
    when = f"{year:04d}-{month:02d}"
    oldest: dict[str, tuple[int, ...]] = {}
    for name, _, before, released in _CHANGES:
        if when <= released and (name not in oldest or before < oldest[name]):
            oldest[name] = before
    return tuple(f"{name}=={'.'.join(map(str, before))}" for name, before in oldest.items())


def _older(versions: dict[str, tuple[int, ...]], change: tuple) -> bool:
    """The stated version of the change's library predates the change (unstated: current, so no)."""
    name, first = change[0], change[1]
    have = versions.get(name)
    return have is not None and have[: len(first)] < first


def profile_for(framework: str, library_versions: tuple[str, ...] | list[str] = ()) -> Profile:
    """The profile of ``framework`` (unknown names fall back to Hugging Face transformers) for the given
    library versions (unstated libraries: current releases)."""
    key = (framework or "").strip().lower()
    profile = PROFILES[_ALIASES.get(key, "hf")]
    versions = parse_library_versions(library_versions)
    transformers = versions.get("transformers")
    if transformers is not None and transformers[:2] < (4, 27) and "torch" not in versions:
        versions["torch"] = (1, 13)  # transformers 4.27 and torch 2.0 both shipped in March 2023
    if profile.name == "hf" and _older(versions, TRANSFORMERS_SDPA_NATIVE_GQA):
        profile = replace(profile, repeat_kv_for_sdpa=True)  # only hf runs transformers' SDPA integration
    if profile.quant_backend == "bitsandbytes" and _older(versions, BITSANDBYTES_4BIT_DROPS_INPUT):
        profile = replace(profile, bnb_4bit_keeps_input=True)
    if _older(versions, TORCH_ZERO_GRAD_SET_TO_NONE):
        profile = replace(profile, grads_set_to_none=False)
    if profile.transformers_modeling and _older(versions, TRANSFORMERS_SDPA_DEFAULT):
        profile = replace(profile, sdpa_default=False)
    if profile.transformers_modeling and _older(versions, TRANSFORMERS_TORCH_ADAMW):
        profile = replace(profile, optimizer_foreach=False)
    if profile.name == "torchtune" and _older(versions, TORCHTUNE_CHUNKED_CE):
        profile = replace(profile, chunked_loss=False)
    if profile.quant_backend == "torchao" and _older(versions, TORCHAO_CHUNKED_NF4):
        profile = replace(profile, nf4_quantize_chunked=False)
    return profile


def profile_for_workload(w: Workload) -> Profile:
    """The framework profile with the workload's own switches applied: its library versions, its
    ``torch_compile`` / ``chunked_loss`` choices (unset: the framework's default), and sharding
    (fms accelerated-peft's fused kernels are off under FSDP)."""
    profile = profile_for(w.framework, w.library_versions)
    sharded = w.sharding in ("fsdp", "zero3") and w.data_parallel > 1
    if profile.fused_lora_unsharded_only and sharded:
        profile = replace(PROFILES["hf"], name=f"{profile.name} (sharded: plain peft)")
    if w.torch_compile is not None:
        profile = replace(profile, compiled=w.torch_compile)
    if w.chunked_loss is not None:
        profile = replace(profile, chunked_loss=w.chunked_loss)
    return profile


def loss_logits(profile: Profile) -> tuple[float, float]:
    """(forward, backward) bytes per logit element of the head output and loss at their peaks."""
    if not profile.chunked_loss:
        return profile.logits
    return LOGITS_CHUNKED_16BIT if profile.compiled else profile.chunked_logits


def quantized_linear_keeps_input(profile: Profile, precision: Precision) -> bool:
    """Whether a frozen quantized linear keeps its input for backward (on autograd ctx, outside
    saved tensors)."""
    if profile.quant_backend == "torchao":
        return False  # torchao linear_nf4: ctx.nf4_weight only
    if profile.quant_backend == "unsloth" or precision == "int8":
        return True  # Unsloth's fused LoRA functions save X; bitsandbytes MatMul8bitLt keeps A
    return profile.bnb_4bit_keeps_input
