"""The plan in JAX or TensorFlow terms: the recommended settings as code, the tools, and the edits those
frameworks can make.

A workload with ``framework: jax`` (flax, maxtext, ...) or ``framework: tensorflow`` (keras) gets its
configuration as a JAX step (``jax.jit`` with ``donate_argnums``, ``jax.sharding`` mesh and
``NamedSharding``, ``jax.checkpoint`` policies, optax) or a Keras/TensorFlow setup
(``tf.keras.mixed_precision`` policy, ``jit_compile=True``, ``tf.data`` ``prefetch(AUTOTUNE)``,
``tf.distribute``), never a PyTorch snippet; techniques only PyTorch libraries provide (fused AdamW,
bitsandbytes 8-bit optimizers, QLoRA/NF4, DeepSpeed ZeRO-1/2 and offload, torch.compile, Liger) are not
proposed to them.

Sources: JAX docs (jax.jit ``donate_argnums``; "Distributed arrays and automatic parallelization";
``jax.checkpoint`` policies; "GPU performance tips" XLA flags), optax docs (``MultiSteps``,
``masked``), TensorFlow guides ("Mixed precision", "XLA", "Better performance with the tf.data API",
"Distributed training").
"""

from __future__ import annotations

from typing import Any

from gpuwise.catalog import get_gpu
from gpuwise.diagnose import Finding
from gpuwise.plan.types import Technique, ToolAdvice
from gpuwise.workload import Workload
from gpuwise.workload.ml_framework import MlFramework, ml_framework

__all__ = ["expressible", "xla_snippets", "xla_tools"]

# Workload settings only PyTorch libraries provide: key -> values a JAX/TensorFlow run cannot take.
_PYTORCH_ONLY: dict[str, frozenset[Any]] = {
    "optimizer": frozenset({"adamw-fused", "adamw-8bit", "paged-adamw-8bit"}),  # torch fused / bitsandbytes
    "task": frozenset({"qlora"}),  # bitsandbytes NF4
    "precision": frozenset({"nf4", "int4"}),  # bitsandbytes / torchao weight formats
    "sharding": frozenset({"zero1", "zero2"}),  # DeepSpeed stages (jax.sharding shards fully: fsdp)
    "offload": frozenset({"optimizer", "params"}),  # ZeRO-Offload / Infinity
    "torch_compile": frozenset({True}),
    "chunked_loss": frozenset({True}),  # Liger kernels
    "channels_last": frozenset({True}),  # torch.channels_last
}


def expressible(framework: str, changes: dict[str, Any]) -> bool:
    """True when a workload of ``framework`` can take every change (PyTorch: always)."""
    if ml_framework(framework) == "pytorch":
        return True
    return not any(value in _PYTORCH_ONLY.get(key, frozenset()) for key, value in changes.items())


def _mesh_lines(w: Workload) -> list[str]:
    dp, tp = w.data_parallel, w.tp
    lines = [
        "from jax.sharding import NamedSharding, PartitionSpec as P",
        f'mesh = jax.make_mesh(({dp}, {tp}), ("data", "model"))  # {w.num_gpus} device(s): data x model',
        'batch_sharding = NamedSharding(mesh, P("data"))  # the global batch split over the data axis',
    ]
    if w.sharding in {"fsdp", "zero3"} and dp > 1:
        lines.append(
            'param_sharding = NamedSharding(mesh, P("data"))  # FSDP: parameters and optimizer state '
            "sharded over the data axis (apply per leaf with jax.device_put)"
        )
    if tp > 1:
        lines.append('# tensor parallel: annotate weight matrices with P(None, "model") / P("model", None)')
    return lines


def _jax_precision(w: Workload) -> list[str]:
    if w.precision in {"bf16", "amp-bf16", "fp8"}:
        master = "jnp.float32" if w.precision.startswith("amp") else "jnp.bfloat16"
        return [f"model = Model(config, dtype=jnp.bfloat16, param_dtype={master})  # flax: bf16 compute"]
    if w.precision in {"fp16", "amp-fp16"}:
        return ["model = Model(config, dtype=jnp.float16)  # fp16 compute (TPUs: use bfloat16)"]
    return [
        "jax.config.update('jax_default_matmul_precision', 'bfloat16')  # fp32 inputs, bf16 MXU/TC passes"
    ]


def jax_step(w: Workload) -> str:
    """A JAX/optax training step (or jitted forward for inference) with the plan's settings."""
    lines = ["import functools, jax, jax.numpy as jnp, optax", *_mesh_lines(w), *_jax_precision(w)]
    if w.is_training:
        if w.grad_checkpointing != "none":
            policy = (
                "nothing_saveable" if w.grad_checkpointing == "full" else "dots_with_no_batch_dims_saveable"
            )
            lines.append(f"block = jax.checkpoint(block, policy=jax.checkpoint_policies.{policy})  # remat")
        opt = "optax.adafactor(lr)" if w.optimizer == "adafactor" else "optax.adamw(lr)"
        if w.optimizer == "sgd":
            opt = "optax.sgd(lr)"
        if w.is_lora:
            opt = f"optax.masked({opt}, lora_mask)  # train only the rank-{w.lora_rank} adapters"
        if w.grad_accum > 1:
            opt = f"optax.MultiSteps({opt}, every_k_schedule={w.grad_accum})"
        lines += [
            f"tx = {opt}",
            "@functools.partial(jax.jit, donate_argnums=(0, 1))  # reuse params/opt_state buffers in place",
            "def train_step(params, opt_state, batch):",
            "    loss, grads = jax.value_and_grad(loss_fn)(params, batch)",
            "    updates, opt_state = tx.update(grads, opt_state, params)",
            "    return optax.apply_updates(params, updates), opt_state, loss",
            f"# micro-batch {w.batch_size} per device; feed with jax.device_put(batch, batch_sharding)",
        ]
    else:
        lines += [
            "@functools.partial(jax.jit, donate_argnums=(1,))  # the KV cache is updated in place",
            "def decode_step(params, cache, tokens): ...",
            f"# batch {w.batch_size}, context {w.seq_len} + {w.output_len}; on TPU: JetStream or vLLM TPU",
        ]
    platform = get_gpu(w.gpu).platform
    if platform == "cuda":
        lines.append(
            "# XLA_FLAGS='--xla_gpu_enable_latency_hiding_scheduler=true' overlaps collectives with compute"
        )
    return "\n".join(lines) + "\n"


def keras_setup(w: Workload) -> str:
    """A TensorFlow/Keras setup with the plan's settings."""
    platform = get_gpu(w.gpu).platform
    lines = ["import tensorflow as tf"]
    if w.precision in {"bf16", "amp-bf16", "fp8"}:
        lines.append("tf.keras.mixed_precision.set_global_policy('mixed_bfloat16')")
    elif w.precision in {"fp16", "amp-fp16"}:
        lines.append("tf.keras.mixed_precision.set_global_policy('mixed_float16')  # loss scaling built in")
    if platform == "tpu":
        lines += [
            "resolver = tf.distribute.cluster_resolver.TPUClusterResolver()",
            "tf.tpu.experimental.initialize_tpu_system(resolver)",
            "strategy = tf.distribute.TPUStrategy(resolver)",
        ]
    elif w.num_gpus > 1:
        lines.append("strategy = tf.distribute.MirroredStrategy()  # one replica per GPU")
    else:
        lines.append("strategy = tf.distribute.get_strategy()")
    global_batch = w.batch_size * w.data_parallel
    lines += [
        "ds = ds.map(parse, num_parallel_calls=tf.data.AUTOTUNE)",
        f"ds = ds.batch({global_batch}).prefetch(tf.data.AUTOTUNE)  # global batch over the replicas",
        "with strategy.scope():",
        "    model = build_model()",
    ]
    if w.is_training:
        accum = f", gradient_accumulation_steps={w.grad_accum}" if w.grad_accum > 1 else ""
        lines.append(
            f"    model.compile(optimizer=tf.keras.optimizers.AdamW(lr{accum}), loss=loss, "
            "jit_compile=True, steps_per_execution=32)"
        )
        if w.grad_checkpointing != "none":
            lines.append("# recompute blocks in the backward: wrap them with tf.recompute_grad")
    else:
        lines.append("    serve = tf.function(model, jit_compile=True)  # XLA-compiled forward")
    return "\n".join(lines) + "\n"


def xla_snippets(w: Workload) -> dict[str, str]:
    """Label -> code for a JAX or TensorFlow workload ({} for PyTorch)."""
    ml = ml_framework(w.framework)
    if ml == "jax":
        return {"JAX (jax.jit + jax.sharding + optax)": jax_step(w)}
    if ml == "tensorflow":
        return {"TensorFlow / Keras": keras_setup(w)}
    return {}


_TOOLS: dict[MlFramework, list[tuple[str, str, str, str]]] = {
    "jax": [
        (
            "jax.jit",
            "jax.jit",
            "Compile the whole step; donate_argnums reuses parameter and optimizer buffers.",
            "JAX docs: jax.jit, buffer donation",
        ),
        (
            "jax.sharding",
            "jax.sharding (Mesh, NamedSharding)",
            "Data, FSDP and tensor parallelism as sharding annotations; XLA inserts the collectives.",
            "JAX docs: Distributed arrays and automatic parallelization",
        ),
        (
            "optax",
            "optax",
            "Optimizers and gradient accumulation (optax.MultiSteps) inside the jitted step.",
            "optax documentation",
        ),
        (
            "jax.profiler",
            "jax.profiler / XProf",
            "Trace the real loop (jax.profiler.trace) and read it with `gpuwise trace DIR`.",
            "JAX docs: Profiling computation",
        ),
    ],
    "tensorflow": [
        (
            "tf.data",
            "tf.data",
            "Parallel map and prefetch(tf.data.AUTOTUNE) keep the device fed.",
            "TensorFlow guide: Better performance with the tf.data API",
        ),
        (
            "xla",
            "XLA (jit_compile=True)",
            "Fuses the step's ops; steps_per_execution cuts host round trips.",
            "TensorFlow guide: XLA",
        ),
        (
            "keras-mixed-precision",
            "tf.keras.mixed_precision",
            "mixed_bfloat16 policy: bf16 compute with float32 variables.",
            "TensorFlow guide: Mixed precision",
        ),
        (
            "tf.profiler",
            "tf.profiler / TensorBoard Profile",
            "Trace the real loop and read it with `gpuwise trace DIR`.",
            "TensorFlow guide: Profiler",
        ),
    ],
}


def xla_tools(config: Workload, techniques: list[Technique], findings: list[Finding]) -> list[ToolAdvice]:
    """The framework's own tools, each with why it serves this plan (its recommended techniques and
    findings named where they apply)."""
    ml = ml_framework(config.framework)
    chosen = [t.title for t in techniques if t.verdict == "recommended"][:3]
    found = [f.title for f in findings][:2]
    context = "; ".join(
        part
        for part in (
            f"for: {', '.join(chosen)}" if chosen else "",
            f"findings: {', '.join(found)}" if found else "",
        )
        if part
    )
    return [
        ToolAdvice(tid, name, does + (f" ({context})" if context and i == 0 else ""), does, source)
        for i, (tid, name, does, source) in enumerate(_TOOLS.get(ml, []))
    ]
