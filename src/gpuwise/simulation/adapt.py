"""Turn the bare model into the one a training script would run: checkpointing, LoRA, quantized base.

Everything here runs on ``meta`` before materialisation, because peft calls ``.to()`` and ``.to()``
fails on a model whose parameters are already fake ("Couldn't swap ... weight").
"""

from __future__ import annotations

import functools
from typing import Any

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

from gpuwise.errors import GpuwiseError
from gpuwise.simulation.build import ANALYTIC_HINT, BuiltModel
from gpuwise.simulation.quant import quantize_linears
from gpuwise.workload import Workload
from gpuwise.workload.spec import Checkpointing, Precision

__all__ = ["apply_checkpointing", "apply_kbit_upcast", "apply_lora", "apply_quantization", "peft_targets"]


_SELECTIVE = "gpuwise_recompute_core_attention"
_DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


def apply_checkpointing(built: BuiltModel, mode: Checkpointing) -> str:
    """Full: recompute each block in backward. Selective: recompute only the attention core (Megatron-LM's
    selective recomputation, Korthikanti et al. arXiv:2205.05198). Returns a description."""
    if mode == "none":
        return ""
    model = built.model
    if mode == "full":
        if built.is_hf and getattr(model, "supports_gradient_checkpointing", False):
            # transformers' default is non-reentrant (modeling_utils.gradient_checkpointing_enable).
            _transformers_api(model).gradient_checkpointing_enable(
                gradient_checkpointing_kwargs={"use_reentrant": False}
            )
            return "full activation checkpointing (transformers gradient_checkpointing_enable, non-reentrant)"
        blocks = _largest_module_list(model)
        if blocks is None:
            raise GpuwiseError(
                f"{built.description}: no nn.ModuleList of blocks to checkpoint; apply "
                "torch.utils.checkpoint inside your factory and use --checkpointing none"
            )
        for block in blocks:
            block.forward = functools.partial(checkpoint, block.forward, use_reentrant=False)
        return (
            f"full activation checkpointing of the {len(blocks)} blocks of the largest nn.ModuleList "
            "(non-reentrant)"
        )
    if not built.is_hf or not getattr(model, "_can_set_attn_implementation", lambda: False)():
        raise GpuwiseError(
            f"{built.description}: selective checkpointing is simulated for Hugging Face models only; "
            f"use --checkpointing full, or {ANALYTIC_HINT}"
        )
    hf_model = _transformers_api(model)
    _register_selective_attention(hf_model.config._attn_implementation)
    hf_model.set_attn_implementation(_SELECTIVE)
    return "selective recomputation of the attention core (softmax(QK^T)V) in backward"


def _transformers_api(model: nn.Module) -> Any:
    """A transformers PreTrainedModel: its methods (config, gradient checkpointing, attention
    implementation) are not on nn.Module, whose typed ``__getattr__`` would call them tensors."""
    return model


def _largest_module_list(model: nn.Module) -> nn.ModuleList | None:
    lists = [m for m in model.modules() if isinstance(m, nn.ModuleList) and len(m) > 1]
    if not lists:
        return None
    return max(lists, key=lambda ml: sum(p.numel() for p in ml.parameters()))


def _register_selective_attention(base: str) -> None:
    from transformers import AttentionInterface, AttentionMaskInterface
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

    inner = ALL_ATTENTION_FUNCTIONS[base]

    def recompute(module, query, key, value, attention_mask, **kwargs):
        def core(q, k, v, mask):
            return inner(module, q, k, v, mask, **kwargs)

        return checkpoint(core, query, key, value, attention_mask, use_reentrant=False)

    AttentionInterface.register(_SELECTIVE, recompute)
    AttentionMaskInterface.register(_SELECTIVE, ALL_MASK_ATTENTION_FUNCTIONS[base])


def apply_lora(built: BuiltModel, workload: Workload, dropout: float) -> str:
    """Wrap with peft LoRA on meta; adapters in the workload's adapter dtype (peft's default is fp32).

    ``dropout`` is the framework profile's lora_dropout (gpuwise.memory.frameworks): with it peft
    keeps a dropout output and a 1-byte mask per adapted layer."""
    from peft import LoraConfig, TaskType, get_peft_model

    targets = peft_targets(built, workload)
    dropout_note = ""
    if dropout and any(p.dim() == 3 for p in built.model.parameters()):
        # Fused MoE experts (3-D parameters in transformers 5) are adapted through peft's ParamWrapper,
        # which refuses lora_dropout.
        dropout, dropout_note = 0.0, " (fused expert parameters: peft allows no lora_dropout there)"
    task_type = {"causal-lm": TaskType.CAUSAL_LM, "seq-classifier": TaskType.SEQ_CLS}.get(built.kind)
    config = LoraConfig(
        r=workload.lora_rank,
        lora_alpha=workload.lora_alpha,
        target_modules=targets,
        lora_dropout=dropout,
        bias="none",
        task_type=task_type,
    )
    adapter_dtype = _DTYPES[workload.lora_dtype]
    try:
        with torch.device("meta"):
            model = get_peft_model(built.model, config, autocast_adapter_dtype=adapter_dtype == torch.float32)
    except ValueError as err:
        raise GpuwiseError(
            f"peft cannot add LoRA to {built.description}: {str(err).splitlines()[0]} "
            "(set lora_targets to module names, e.g. --set lora_targets=q_proj,v_proj)"
        ) from None
    for name, param in model.named_parameters():
        if "lora_" in name and param.dtype != adapter_dtype:
            param.data = param.data.to(adapter_dtype)
    built.model = model
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    shown = targets if isinstance(targets, str) else ",".join(targets)  # the model's own module names
    fused = [t for t in targets if len(_HF_ROLES.get(t, ())) > 1] if not isinstance(targets, str) else []
    extra = f" (fused {', '.join(fused)}: the whole module is adapted)" if fused else ""
    return (
        f"peft LoRA r={workload.lora_rank} on {shown}{extra}, lora_dropout={dropout:g}{dropout_note}, "
        f"adapters in {workload.lora_dtype} ({trainable:,} trainable parameters)"
    )


# Leaf names of Hugging Face linear layers -> the block roles they implement (a fused module
# implements several).
_HF_ROLES = {
    "q_proj": {"q"},
    "k_proj": {"k"},
    "v_proj": {"v"},
    "o_proj": {"o"},
    "out_proj": {"o"},
    "dense": {"o"},
    "query": {"q"},
    "key": {"k"},
    "value": {"v"},
    "qkv_proj": {"q", "k", "v"},
    "query_key_value": {"q", "k", "v"},
    "c_attn": {"q", "k", "v"},
    "Wqkv": {"q", "k", "v"},
    "W_pack": {"q", "k", "v"},
    "gate_proj": {"gate"},
    "up_proj": {"up"},
    "down_proj": {"down"},
    "gate_up_proj": {"gate", "up"},
    "fc1": {"up"},
    "fc2": {"down"},
    "dense_h_to_4h": {"up"},
    "dense_4h_to_h": {"down"},
    "c_fc": {"up"},
    "w1": {"gate"},
    "w3": {"up"},
    "w2": {"down"},
    "lm_head": {"lm_head"},
}


def _is_linear(module: nn.Module) -> bool:
    return isinstance(module, nn.Linear) or type(module).__name__ == "Conv1D"  # transformers' GPT-2 Conv1D


def peft_targets(built: BuiltModel, workload: Workload) -> str | list[str]:
    """peft ``target_modules`` for the workload's LoRA targets.

    Module names of the model are used as given; gpuwise's short names (q, v, mlp, attn, ...) are
    mapped to the model's own modules (q_proj, or a fused qkv_proj / query_key_value that holds q).
    """
    requested = list(workload.lora_targets)
    if requested in (["all-linear"], ["all"]):
        if built.is_hf:
            return "all-linear"  # peft's own rule: every linear layer but the output head
        return sorted({n.rsplit(".", 1)[-1] for n, m in built.model.named_modules() if type(m) is nn.Linear})
    leaves = {n.rsplit(".", 1)[-1] for n, m in built.model.named_modules() if _is_linear(m)}
    if set(requested) <= leaves:
        return requested
    from gpuwise.catalog import get_model
    from gpuwise.memory.shapes import resolve_targets

    roles = (
        set(resolve_targets(get_model(workload.model), tuple(requested)))
        if not built.input_factory
        else set()
    )
    chosen = sorted(leaf for leaf in leaves if _HF_ROLES.get(leaf, set()) & roles)
    missing = roles - set().union(*(_HF_ROLES.get(leaf, set()) for leaf in chosen)) if chosen else roles
    if not chosen or missing:
        raise GpuwiseError(
            f"LoRA targets {','.join(requested)} do not name linear layers of {built.description}; "
            f"its linear layers are named {', '.join(sorted(leaves)) or 'nothing'}"
        )
    return chosen


def apply_kbit_upcast(built: BuiltModel) -> str:
    """What peft's ``prepare_model_for_kbit_training`` does before LoRA is added (peft utils/other.py):
    every 16-bit parameter that is not a quantized weight becomes fp32 (embeddings, norms, lm_head)."""
    upcast = 0
    for name, param in built.model.named_parameters():
        if "lora_" not in name and param.dtype in (torch.float16, torch.bfloat16):
            param.data = param.data.to(torch.float32)
            upcast += param.numel()
    return (
        f"peft prepare_model_for_kbit_training: {upcast:,} non-quantized parameters upcast to fp32, "
        "training under bf16 autocast (the Hugging Face QLoRA recipe)"
    )


def apply_quantization(
    built: BuiltModel, precision: Precision, double_quant: bool, compute_dtype: torch.dtype
) -> str:
    """Quantize the base linear layers as bitsandbytes would (transformers leaves the output head alone)."""
    skip: set[int] = set()
    if built.is_hf:
        model = _transformers_api(built.model)
        head = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
        if head is not None:
            skip.add(id(head))
        for name, module in built.model.named_modules():
            if name.rsplit(".", 1)[-1] in ("classifier", "score", "lm_head"):
                skip.add(id(module))
                for sub in module.modules():
                    skip.add(id(sub))
    count = quantize_linears(built.model, precision, double_quant, compute_dtype, skip)
    if count == 0:
        raise GpuwiseError(f"{built.description} has no nn.Linear layers to quantize to {precision}")
    dq = " with double quantization" if double_quant else ""
    return (
        f"{precision} base weights{dq} in {count} linear layers accounted analytically "
        "(bitsandbytes cannot run here: storage sizes and its dequantize-per-matmul pattern are reproduced)"
    )
