#!/usr/bin/env python
"""What FSDP1 holds at the backward peak of a LoRA run with a frozen base (issue 28, fms-acceleration rows).

Usage: python benchmarks/fsdp_lora_units.py   (~80 CPU-seconds: 2 gloo ranks on CPU, a 64-wide Llama)

Two questions about fms-acceleration's 2-GPU FSDP LoRA/QLoRA rows (HF Trainer + peft, FSDP1 FULL_SHARD,
``BACKWARD_PRE``, reentrant gradient checkpointing), answered by running FSDP1 itself:

1. Does a FlatParameter that mixes the frozen base with the LoRA weights get a gradient of the whole
   (unsharded) unit? Only under a decoder-layer-only wrap with ``use_orig_params=True``. transformers'
   Trainer (``_fsdp_qlora_plugin_updates``) and TRL install peft's ``fsdp_auto_wrap_policy``, which puts
   every trainable leaf (each ``lora_A``/``lora_B`` Linear) in its own unit: no frozen unit requires grad.
2. How many decoder-layer units are unsharded at once in the backward? Printed per depth: the current one
   and the next (prefetched or recomputed), which gpuwise's FSDP gather term already counts.

Prints one line per wrap policy and one per depth; no figure feeds the model.
"""

from __future__ import annotations

import functools
import os
import warnings

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from peft import LoraConfig, get_peft_model
from peft.utils.other import fsdp_auto_wrap_policy
from torch.distributed.fsdp import BackwardPrefetch
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
from torch.distributed.fsdp._flat_param import FlatParamHandle
from torch.distributed.fsdp.wrap import transformer_auto_wrap_policy
from transformers import LlamaConfig, LlamaForCausalLM
from transformers.models.llama.modeling_llama import LlamaDecoderLayer
from transformers.utils import logging as hf_logging

PORT = 29655
LORA_TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj"]  # the fms rows' targets


def _lora_model(layers: int):
    torch.manual_seed(0)
    config = LlamaConfig(
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=4,
        vocab_size=256,
        max_position_embeddings=64,
        use_cache=False,
    )
    model = get_peft_model(LlamaForCausalLM(config), LoraConfig(r=4, target_modules=LORA_TARGETS))
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": True})
    model.enable_input_require_grads()
    return model


def _wrap(model, policy_name: str, use_orig_params: bool):
    policy = (
        fsdp_auto_wrap_policy(model)
        if policy_name == "peft"
        else functools.partial(transformer_auto_wrap_policy, transformer_layer_cls={LlamaDecoderLayer})
    )
    return FSDP(
        model,
        auto_wrap_policy=policy,
        use_orig_params=use_orig_params,
        device_id=torch.device("cpu"),
        backward_prefetch=BackwardPrefetch.BACKWARD_PRE,
        limit_all_gathers=True,
    )


def _step(wrapped) -> None:
    ids = torch.randint(0, 256, (2, 32))
    wrapped(input_ids=ids, labels=ids).loss.backward()


def _gradients(rank: int, policy_name: str, use_orig_params: bool) -> None:
    try:
        wrapped = _wrap(_lora_model(2), policy_name, use_orig_params)
    except ValueError as err:  # FSDP1: one requires_grad per FlatParameter without use_orig_params
        if rank == 0:
            print(f"  {policy_name:5s} wrap, use_orig_params={use_orig_params}: refused ({str(err)[:70]})")
        return
    _step(wrapped)
    if rank != 0:
        return
    units = [u for u in FSDP.fsdp_modules(wrapped) if u._has_params]
    layers = [u for u in units if type(u.module).__name__ == "LlamaDecoderLayer"]
    with_grad = [u for u in layers if u._flat_param.grad is not None]
    sizes = sorted({(u._flat_param.grad.numel(), u._flat_param.numel()) for u in with_grad})
    print(
        f"  {policy_name:5s} wrap, use_orig_params={use_orig_params}: {len(units)} units, "
        f"{len(with_grad)} of {len(layers)} decoder-layer units get a gradient"
        + (f" (gradient / shard elements: {sizes})" if sizes else "")
    )


def _unsharded_layers(rank: int, layers: int) -> None:
    wrapped = _wrap(_lora_model(layers), "peft", True)
    decoder = {
        id(u._handle) for u in FSDP.fsdp_modules(wrapped) if type(u.module).__name__ == "LlamaDecoderLayer"
    }
    live: set[int] = set()
    phase, peak = ["forward"], {"forward": 0, "backward": 0}
    unshard, reshard = FlatParamHandle.unshard, FlatParamHandle.reshard

    def counting_unshard(handle):
        unshard(handle)
        if id(handle) in decoder:
            live.add(id(handle))
            peak[phase[0]] = max(peak[phase[0]], len(live))

    def counting_reshard(handle, free_unsharded_flat_param):
        reshard(handle, free_unsharded_flat_param)
        if free_unsharded_flat_param:
            live.discard(id(handle))

    FlatParamHandle.unshard, FlatParamHandle.reshard = counting_unshard, counting_reshard  # type: ignore[method-assign]
    try:
        ids = torch.randint(0, 256, (2, 32))
        loss = wrapped(input_ids=ids, labels=ids).loss
        phase[0] = "backward"
        loss.backward()
    finally:
        FlatParamHandle.unshard, FlatParamHandle.reshard = unshard, reshard  # type: ignore[method-assign]
    if rank == 0:
        print(
            f"  {layers} decoder layers: most decoder-layer units unsharded at once: "
            f"forward {peak['forward']}, backward {peak['backward']}"
        )


def _worker(rank: int, job: str, args: tuple) -> None:
    warnings.filterwarnings("ignore")
    hf_logging.set_verbosity_error()
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(PORT))
    dist.init_process_group("gloo", rank=rank, world_size=2)
    try:
        if job == "gradients":
            _gradients(rank, *args)
        else:
            _unsharded_layers(rank, *args)
    finally:
        dist.destroy_process_group()


def main() -> None:
    print("1. which FlatParameters get a gradient (frozen base + LoRA on q,k,v,o):")
    for policy_name in ("peft", "layer"):
        for use_orig_params in (False, True):
            mp.spawn(_worker, args=("gradients", (policy_name, use_orig_params)), nprocs=2)
    print("2. decoder-layer units unsharded at once (peft wrap, BACKWARD_PRE, reentrant checkpointing):")
    for layers in (4, 8):
        mp.spawn(_worker, args=("unsharded", (layers,)), nprocs=2)


if __name__ == "__main__":
    main()
