"""The loss a model's own code computes: Qwen v1's remote code takes the 16-bit logits as they are."""

from __future__ import annotations

from dataclasses import replace

from gpuwise.catalog import get_model
from gpuwise.catalog.families import family_spec
from gpuwise.memory.activations import logits_bytes
from gpuwise.memory.frameworks import LOGITS_16BIT_SHIFTED, LOGITS_FP32_LOSS, profile_for
from gpuwise.memory.regime import regime_for
from gpuwise.workload import workload_from_mapping


def test_qwen_v1_remote_code_keeps_16_bit_logits_where_transformers_upcasts():
    w = workload_from_mapping({"model": "qwen2.5-7b", "task": "lora", "batch_size": 1, "seq_len": 2048})
    qwen2 = get_model("qwen2.5-7b")
    qwen1 = replace(qwen2, family="qwen")  # same shapes, Qwen v1's modeling code
    assert family_spec("qwen").loss_16bit_shifted and not family_spec("qwen2.5").loss_16bit_shifted
    profile, regime = profile_for("transformers"), regime_for(w)
    upcast = logits_bytes(qwen2, w, regime, profile, 1, 2048)
    as_written = logits_bytes(qwen1, w, regime, profile, 1, 2048)
    tokens_x_vocab = 2048 * qwen2.vocab_size
    assert upcast == (LOGITS_FP32_LOSS[0] * tokens_x_vocab, LOGITS_FP32_LOSS[1] * tokens_x_vocab)
    assert as_written == (LOGITS_16BIT_SHIFTED[0] * tokens_x_vocab, LOGITS_16BIT_SHIFTED[1] * tokens_x_vocab)
    # frameworks that bring their own loss (LitGPT's chunked 16-bit cross-entropy) are unaffected
    litgpt = profile_for("litgpt")
    assert logits_bytes(qwen1, w, regime, litgpt, 1, 2048) == logits_bytes(qwen2, w, regime, litgpt, 1, 2048)


def test_answer_ai_fsdp_qlora_keeps_its_16_bit_non_quantized_parameters():
    """Its own QLoRA loading skips peft's prepare_model_for_kbit_training (no fp32 upcast)."""
    assert profile_for("peft").kbit_upcast and not profile_for("fsdp_qlora").kbit_upcast
    assert profile_for("answerai").name == "fsdp_qlora"
