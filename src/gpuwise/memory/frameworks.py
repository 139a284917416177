"""What each training/serving stack really allocates, as a small profile of switches.

The same model and batch take different memory under different code: peft keeps LoRA adapters in
fp32 and casts each adapted layer's input to fp32 for the adapter path; LitGPT and torchtune keep
adapters in the model dtype; transformers upcasts the whole logits tensor to fp32 for the loss
while LitGPT runs the head and cross-entropy in 128-token chunks in 16-bit; peft's
``prepare_model_for_kbit_training`` casts every non-quantized parameter (embeddings, norms,
lm_head) to fp32 for QLoRA, which turns the residual stream fp32 too. ``workload.framework``
selects a profile; unknown or empty means Hugging Face transformers (+peft), the most common stack.

Sources (code read, not copied): transformers ``modeling_llama.py`` / ``loss_utils.py`` (fp32
logits, ``repeat_kv`` before SDPA, RMSNorm in fp32), peft ``tuners/lora/layer.py`` (per-module
dropout and ``_cast_input_dtype``) and ``utils/other.py`` (``prepare_model_for_kbit_training``),
LitGPT ``lora.py`` / ``utils.chunked_cross_entropy`` / Lightning ``BitsandbytesPrecision`` (all
``nn.Linear`` converted, weights cast to fp16 before ``quantize_4bit``), torchtune
``modules/transformer.py`` (``output(h).float()``) and ``CEWithChunkedOutputLoss``.
"""

from __future__ import annotations

from dataclasses import dataclass

# (forward-peak, backward-peak) bytes per (token × vocab) for the logits and loss.
LOGITS_FP32_LOSS = (10.0, 12.0)  # 16-bit head output, .float() copy, fp32 log_softmax; backward: saved + grad + grad_in
LOGITS_CHUNKED_16BIT = (4.0, 5.0)  # head output chunks + 16-bit log_softmax; backward per chunk
LOGITS_CHUNKED_FP32 = (6.0, 7.0)  # 16-bit chunks + fp32 log_softmax per chunk


@dataclass(frozen=True)
class Profile:
    name: str
    adapter_dtype_from_model: bool = False  # LitGPT/torchtune: adapters in the model dtype, not fp32
    lora_dropout: float = 0.05  # common recipe default; >0 saves a dropout output and a 1-byte mask
    lora_input_per_module: bool = True  # peft: each adapted layer makes its own dropout/cast copy
    kbit_upcast: bool = True  # peft prepare_model_for_kbit_training: non-quantized params -> fp32
    quantize_scope: str = "blocks"  # "blocks": every block linear; "lora_targets": only adapted ones
    quantize_lm_head: bool = False
    quant_fp16_staging: bool = False  # weights staged as fp16 copies while (de)quantizing
    repeat_kv_for_sdpa: bool = True  # GQA: K/V expanded to all heads before SDPA (flash-attn is native)
    norm_fp32_saved: bool = True  # RMSNorm computes in fp32 and saves the fp32 input
    logits: tuple[float, float] = LOGITS_FP32_LOSS
    inference_logits: str = "last"  # "last": only the last position; "prompt": every prompt position
    ddp_grad_buckets: bool = True  # DDP keeps flat gradient buckets (gradient_as_bucket_view=False)
    frozen_linear_saves_input: bool = False  # inputs of frozen linears stay alive (LitGPT's published LoRA peaks)
    unties_embeddings: bool = False  # keeps its own lm_head even when the checkpoint ties it (LitGPT's GPT)
    fsdp_full_state_load: bool = False  # FSDP loads a full (unsharded) state dict on every rank
    loss_outlives_step: bool = False  # the training loop's `loss` (and its graph) lives into the next forward
    kv_pool_fraction: float = 0.0  # serving engines that preallocate the KV pool to this share of GPU memory


PROFILES = {
    "hf": Profile("hf"),
    "litgpt": Profile(
        "litgpt", adapter_dtype_from_model=True, lora_input_per_module=False, kbit_upcast=False,
        quantize_lm_head=True, quant_fp16_staging=True, logits=LOGITS_CHUNKED_16BIT, inference_logits="prompt",
        unties_embeddings=True, fsdp_full_state_load=True, frozen_linear_saves_input=True, loss_outlives_step=True,
    ),
    "torchtune": Profile(
        "torchtune", adapter_dtype_from_model=True, lora_dropout=0.0, kbit_upcast=False,
        quantize_scope="lora_targets", inference_logits="prompt",
    ),
    "unsloth": Profile("unsloth", kbit_upcast=False, repeat_kv_for_sdpa=False, logits=LOGITS_CHUNKED_FP32),
    "megatron": Profile("megatron", lora_dropout=0.0, kbit_upcast=False, repeat_kv_for_sdpa=False, ddp_grad_buckets=False),
    "torch": Profile("torch", kbit_upcast=False, ddp_grad_buckets=True),
    # vLLM gpu_memory_utilization default 0.9; SGLang mem_fraction_static ~0.88 on 80 GB GPUs (server_args.py).
    "vllm": Profile("vllm", repeat_kv_for_sdpa=False, kv_pool_fraction=0.90),
    "sglang": Profile("sglang", repeat_kv_for_sdpa=False, kv_pool_fraction=0.88),
}

_ALIASES = {
    "": "hf", "hf": "hf", "hf-trainer": "hf", "hf-transformers": "hf", "transformers": "hf", "peft": "hf", "trl": "hf",
    "axolotl": "hf", "llama-factory": "hf", "fms-acceleration": "hf", "fms-hf-tuning": "hf", "accelerate": "hf",
    "optimum-benchmark": "hf", "litgpt": "litgpt", "lit-gpt": "litgpt", "torchtune": "torchtune",
    "unsloth": "unsloth", "deepspeed": "megatron", "megatron": "megatron", "megatron-lm": "megatron", "nemo": "megatron",
    "torchtitan": "megatron", "lightning": "torch", "lightning-fabric": "torch", "pytorch": "torch", "torch": "torch",
    "vllm": "vllm", "tgi": "hf", "sglang": "sglang", "tensorrt-llm": "megatron",
}


def profile_for(framework: str) -> Profile:
    """The profile of ``framework`` (unknown names fall back to Hugging Face transformers)."""
    key = (framework or "").strip().lower()
    return PROFILES[_ALIASES.get(key, "hf")]
