"""A finding's fix in the framework the run used: JAX and TensorFlow runs get JAX/TensorFlow fixes.

The rules write their fixes in PyTorch terms (DataLoader, torch.autocast, pin_memory, torch.compile). A
run whose evidence names JAX or TensorFlow (``RunContext.framework``: the producer of an XPlane or XLA
trace, or the workload's ``framework``) gets the fix from this table instead, keyed by the finding id, so
no JAX or TensorFlow user is shown a PyTorch snippet. A finding this table does not cover keeps its
one-line fix when that names no PyTorch API; otherwise the fix says what to change in words and drops the
snippet.

Sources for the fixes: JAX documentation (jax.jit and ``donate_argnums``, "Distributed arrays and automatic
parallelization" for ``jax.sharding``, ``jax.checkpoint`` policies, "GPU performance tips" for XLA
flags); TensorFlow guides "Better performance with the tf.data API" (``prefetch``, ``AUTOTUNE``,
``num_parallel_calls``), "Mixed precision" (``tf.keras.mixed_precision``), "XLA" (``jit_compile=True``),
"Distributed training with TensorFlow" (``tf.distribute``).
"""

from __future__ import annotations

from dataclasses import replace

from gpuwise.diagnose.finding import Finding, FindingId
from gpuwise.workload.ml_framework import MlFramework, ml_framework

__all__ = ["FRAMEWORK_FIXES", "in_framework"]

_JAX: dict[FindingId, tuple[str, str]] = {
    "input_bound": (
        "Feed the next batch while the device computes: a prefetching input pipeline (tf.data or grain) "
        "and device_put of the next batch ahead of the jitted step.",
        "ds = ds.prefetch(tf.data.AUTOTUNE)  # or a grain pipeline with worker_count > 0\n"
        "it = map(lambda b: jax.device_put(b, batch_sharding), ds.as_numpy_iterator())\n"
        "# flax.jax_utils.prefetch_to_device(it, 2) keeps two batches on the device",
    ),
    "loader_cpu_saturated": (
        "Give the input pipeline more host parallelism: parallel map and interleave in tf.data, or more "
        "grain workers.",
        "ds = ds.map(parse, num_parallel_calls=tf.data.AUTOTUNE).prefetch(tf.data.AUTOTUNE)",
    ),
    "sync_bound": (
        "Stop pulling values to the host each step: drop float(loss)/.item()-style reads and "
        "block_until_ready() inside the loop; log every N steps.",
        "if step % 100 == 0:\n    print(jax.device_get(loss))  # one host sync per 100 steps",
    ),
    "launch_bound": (
        "Compile the whole step with jax.jit (or scan over micro-steps) so XLA fuses the small ops into "
        "a few large kernels.",
        "@functools.partial(jax.jit, donate_argnums=(0, 1))\ndef train_step(params, opt_state, batch): ...",
    ),
    "no_mixed_precision": (
        "Compute the matmuls in bfloat16: bf16 parameters/activations (flax dtype=jnp.bfloat16, "
        "param_dtype=jnp.float32), or jax.default_matmul_precision for fp32 inputs.",
        "model = Transformer(config, dtype=jnp.bfloat16, param_dtype=jnp.float32)\n"
        "# or: jax.config.update('jax_default_matmul_precision', 'bfloat16')",
    ),
    "pageable_copies": (
        "Stage host batches once with jax.device_put (sharded) ahead of the step instead of passing numpy "
        "arrays into the jitted function each call.",
        "batch = jax.device_put(batch, batch_sharding)  # before train_step(params, opt_state, batch)",
    ),
    "small_batch": (
        "Raise the per-device batch (the step is too short to fill the device); shard the global batch "
        "over the data axis of the mesh.",
        "batch_sharding = NamedSharding(mesh, PartitionSpec('data'))",
    ),
    "oom_risk": (
        "Free memory: donate the old parameters and optimizer state to the jitted step, rematerialize "
        "activations with jax.checkpoint, shard parameters over the mesh (FSDP-style).",
        "@functools.partial(jax.jit, donate_argnums=(0, 1))\n"
        "block = jax.checkpoint(block, policy=jax.checkpoint_policies.dots_with_no_batch_dims_saveable)",
    ),
    "memory_growth": (
        "Find the arrays kept alive across steps (losses or metrics held in a Python list, a growing "
        "jit cache from changing shapes): keep shapes static and donate buffers.",
        "jax.profiler.save_device_memory_profile('mem.prof')  # inspect with pprof",
    ),
    "comm_bound": (
        "Overlap collectives with compute: shard with jax.sharding annotations so XLA schedules them, "
        "and enable the latency-hiding scheduler on GPU.",
        "XLA_FLAGS='--xla_gpu_enable_latency_hiding_scheduler=true' python train.py",
    ),
    "low_utilization": (
        "Keep the device fed: jit the whole step, donate buffers, prefetch input, and raise the batch "
        "until the step is long enough.",
        "",
    ),
    "no_flash_attention": (
        "Use a fused attention kernel: jax.nn.dot_product_attention (implementation='cudnn' on NVIDIA "
        "GPUs; the Pallas flash-attention kernel on TPU).",
        "out = jax.nn.dot_product_attention(q, k, v, is_causal=True, implementation='cudnn')",
    ),
    "no_fused_optimizer": (
        "Keep the optimizer update inside the jitted step (optax), so XLA fuses it; do not update "
        "parameters leaf by leaf in Python.",
        "updates, opt_state = tx.update(grads, opt_state, params)\n"
        "params = optax.apply_updates(params, updates)  # inside train_step",
    ),
    "step_outliers": (
        "Look for recompilation (changing shapes or static arguments) and host work between steps: "
        "log jax compilation with jax.config.update('jax_log_compiles', True).",
        "jax.config.update('jax_log_compiles', True)",
    ),
    "unexplained_host_time": (
        "Move the Python work between steps into the jitted function or off the critical path; "
        "profile the host with jax.profiler traces.",
        "",
    ),
}

_TF: dict[FindingId, tuple[str, str]] = {
    "input_bound": (
        "Overlap input with compute in tf.data: parallel map, cache where it fits, and prefetch with "
        "AUTOTUNE.",
        "ds = ds.map(parse, num_parallel_calls=tf.data.AUTOTUNE).cache().prefetch(tf.data.AUTOTUNE)",
    ),
    "loader_cpu_saturated": (
        "Give tf.data more host parallelism (parallel map and interleave) or move decoding off the "
        "critical path (tf.data service).",
        "ds = ds.interleave(load, num_parallel_calls=tf.data.AUTOTUNE, deterministic=False)",
    ),
    "sync_bound": (
        "Stop reading tensors back each step (.numpy(), float(loss)); let model.fit run several steps "
        "per call.",
        "model.compile(optimizer, loss, steps_per_execution=32)",
    ),
    "launch_bound": (
        "Compile the step with XLA and run several steps per call: jit_compile=True and steps_per_execution.",
        "model.compile(optimizer, loss, jit_compile=True, steps_per_execution=32)",
    ),
    "no_mixed_precision": (
        "Use a mixed-precision policy: bfloat16 compute with float32 variables.",
        "tf.keras.mixed_precision.set_global_policy('mixed_bfloat16')",
    ),
    "pageable_copies": (
        "Prefetch batches to the device inside tf.data so copies overlap the step.",
        "ds = ds.apply(tf.data.experimental.prefetch_to_device('/gpu:0'))",
    ),
    "small_batch": (
        "Raise the per-replica batch (the step is too short to fill the device); batch the dataset with "
        "the global batch size under the distribution strategy.",
        "ds = ds.batch(per_replica_batch * strategy.num_replicas_in_sync)",
    ),
    "oom_risk": (
        "Free memory: mixed_bfloat16 activations, a smaller per-replica batch, or recompute blocks with "
        "tf.recompute_grad.",
        "tf.keras.mixed_precision.set_global_policy('mixed_bfloat16')",
    ),
    "memory_growth": (
        "Find tensors kept alive across steps (metrics appended to Python lists, retracing tf.function "
        "from changing shapes): give tf.function an input_signature.",
        "",
    ),
    "comm_bound": (
        "Overlap gradient all-reduce with compute: a larger per-replica batch, and XLA compilation "
        "(jit_compile=True) so collectives are scheduled with the step.",
        "",
    ),
    "low_utilization": (
        "Keep the device fed: XLA-compile the step (jit_compile=True), prefetch with tf.data.AUTOTUNE "
        "and raise the batch.",
        "",
    ),
    "no_flash_attention": (
        "Use a fused attention layer: keras.layers.MultiHeadAttention under XLA (jit_compile=True) "
        "fuses the softmax; Keras 3 ops.dot_product_attention(flash_attention=True) on supported GPUs.",
        "",
    ),
    "no_fused_optimizer": (
        "XLA-compile the training step (jit_compile=True) so the optimizer update is fused.",
        "model.compile(optimizer, loss, jit_compile=True)",
    ),
    "step_outliers": (
        "Look for tf.function retracing (changing shapes) and host work between steps; set an "
        "input_signature and check the profiler's Input Pipeline page.",
        "",
    ),
    "unexplained_host_time": (
        "Move Python work into tf.function-compiled steps or off the critical path.",
        "",
    ),
}

FRAMEWORK_FIXES: dict[MlFramework, dict[FindingId, tuple[str, str]]] = {"jax": _JAX, "tensorflow": _TF}
"""framework -> finding id -> (fix, fix_snippet) in that framework's terms."""

_PYTORCH_WORDS = ("torch", "dataloader", "pin_memory", "num_workers", "cuda graph", "autocast", "peft")


def in_framework(finding: Finding, framework: str | None) -> Finding:
    """``finding`` with its fix in ``framework``'s terms (unchanged for PyTorch or an unknown framework).

    A JAX/TensorFlow fix from the table when there is one; otherwise the rule's fix without its snippet
    if either names a PyTorch API, with a clause saying so."""
    ml = ml_framework(framework or "")
    if ml == "pytorch":
        return finding
    tools = tuple(t for t in finding.tools if not any(w in t.lower() for w in _PYTORCH_WORDS))
    finding = replace(finding, tools=tools)  # torch.utils.data.DataLoader is no tool for a JAX run
    listed = FRAMEWORK_FIXES[ml].get(finding.id)
    if listed is not None:
        return replace(finding, fix=listed[0], fix_snippet=listed[1])
    text = f"{finding.fix} {finding.fix_snippet}".lower()
    if any(word in text for word in _PYTORCH_WORDS):
        name = "JAX" if ml == "jax" else "TensorFlow"
        return replace(
            finding,
            fix=f"{finding.title}: the rule's fix is written for PyTorch; apply its {name} equivalent.",
            fix_snippet="",
        )
    return finding
