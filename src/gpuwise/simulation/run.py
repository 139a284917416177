"""Run one training step or one generation under fake tensors, phase by phase, as a GPU run would.

Training measures the *steady-state* step: optimizer state already exists (a warm-up step created
it), so the forward peak includes it, as from step 2 of a real run on. With gradient accumulation
the gradients exist during the forward too (a non-first micro-batch). Inference follows
``transformers`` ``generate``: a prefill that keeps only the last position's logits, then decode
steps that grow the KV cache; the decode measured is the last one, at the longest context.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from gpuwise.errors import GpuwiseError
from gpuwise.simulation.build import ANALYTIC_HINT, BuiltModel, call_user
from gpuwise.simulation.optim import OptimizerChoice, state_tensors
from gpuwise.simulation.tracker import MemoryTracker

__all__ = ["RunSettings", "explain_failure", "inference", "materialize", "model_inputs", "training_step"]


@dataclass(frozen=True)
class RunSettings:
    """The shapes and dtypes one simulated step runs with: batch, sequence, output and image sizes,
    parameter and autocast dtypes, accumulation."""

    batch_size: int
    seq_len: int
    output_len: int
    image_size: int
    param_dtype: torch.dtype
    autocast_dtype: torch.dtype | None  # AMP: matmuls in this dtype, parameters stay fp32
    grad_accum: int
    ddp_buckets: bool = False  # data-parallel replicas: DDP keeps flat gradient buckets next to .grad


def materialize(model: nn.Module, real: bool = False) -> tuple[list[torch.Tensor], int]:
    """Replace meta (or real) parameters and buffers by fake ones, once per tensor so ties survive.

    ``Module.to_empty`` would allocate a tied weight twice and untie it; this keeps one tensor per
    original object. Run inside FakeTensorMode (and the tracker, so the storages are counted).
    ``real=True`` allocates real CPU memory instead (tests on tiny models compare the two).
    """
    fresh: dict[int, torch.Tensor] = {}  # every new tensor, in module order
    params: dict[int, nn.Parameter] = {}
    for module in model.modules():
        for name, param in list(module._parameters.items()):
            if param is None:
                continue
            if id(param) not in params:
                data = torch.empty(param.shape, dtype=param.dtype)
                if real and data.is_floating_point():
                    data.normal_(0.0, 0.02)
                params[id(param)] = fresh[id(param)] = nn.Parameter(data, requires_grad=param.requires_grad)
            module._parameters[name] = params[id(param)]
        for name, buf in list(module._buffers.items()):
            if buf is None:
                continue
            if id(buf) not in fresh:
                fresh[id(buf)] = torch.empty(buf.shape, dtype=buf.dtype)
            module._buffers[name] = fresh[id(buf)]
    return list(fresh.values()), sum(p.numel() for p in params.values())


def _tensors_in(obj: Any, depth: int = 0) -> Iterator[torch.Tensor]:
    """Every tensor reachable from a cache object (transformers Cache classes, tuples of tuples)."""
    if isinstance(obj, torch.Tensor):
        yield obj
    elif depth > 5 or obj is None or isinstance(obj, (str, int, float, bool)):
        return
    elif isinstance(obj, (list, tuple)):
        for item in obj:
            yield from _tensors_in(item, depth + 1)
    elif isinstance(obj, dict):
        for item in obj.values():
            yield from _tensors_in(item, depth + 1)
    elif hasattr(obj, "__dict__"):
        for item in vars(obj).values():
            yield from _tensors_in(item, depth + 1)


# -- inputs -----------------------------------------------------------------------------------
def _tokens(batch: int, length: int) -> torch.Tensor:
    return torch.zeros(batch, length, dtype=torch.long)


def model_inputs(
    built: BuiltModel, s: RunSettings, training: bool, user_spec: str | None
) -> tuple[tuple, dict]:
    """(args, kwargs) for the forward; training inputs carry labels so the model computes its loss."""
    if built.input_factory is not None:
        available = {
            "batch_size": s.batch_size,
            "seq_len": s.seq_len,
            "image_size": s.image_size,
            "dtype": s.param_dtype if s.autocast_dtype is None else torch.float32,
            "device": torch.device("cpu"),
            "training": training,
        }
        value = call_user(built.input_factory, "--input-factory", user_spec or "", available)
        if isinstance(value, dict):
            return (), value
        if isinstance(value, (tuple, list)):
            return tuple(value), {}
        if isinstance(value, torch.Tensor):
            return (value,), {}
        raise GpuwiseError(
            f"--input-factory {user_spec} returned {type(value).__name__}: return a tensor, a tuple or a dict"
        )
    if built.kind == "image-classifier":
        pixels = torch.empty(s.batch_size, 3, s.image_size, s.image_size, dtype=s.param_dtype)
        kwargs: dict[str, Any] = {"pixel_values": pixels}
        if training:
            kwargs["labels"] = torch.zeros(s.batch_size, dtype=torch.long)
        return (), kwargs
    ids = _tokens(s.batch_size, s.seq_len)
    kwargs = {"input_ids": ids}
    if training:
        kwargs["labels"] = ids if built.kind == "causal-lm" else torch.zeros(s.batch_size, dtype=torch.long)
    return (), kwargs


def _loss_of(output: Any) -> torch.Tensor:
    """The scalar to backpropagate: ``.loss`` if the model computed one, else the sum of its first tensor."""
    loss = getattr(output, "loss", None)
    if isinstance(loss, torch.Tensor):
        return loss
    if isinstance(output, dict) and isinstance(output.get("loss"), torch.Tensor):
        return output["loss"]
    first = next((t for t in _tensors_in(output) if t.is_floating_point() and t.requires_grad), None)
    if first is None:
        raise GpuwiseError(
            "the model's output has no tensor that requires grad, so there is nothing to backpropagate "
            "(are all parameters frozen?)"
        )
    return first if first.dim() == 0 else first.sum()


def _autocast(s: RunSettings) -> contextlib.AbstractContextManager:
    if s.autocast_dtype is None:
        return contextlib.nullcontext()
    return torch.autocast("cpu", dtype=s.autocast_dtype)


# -- the runs ------------------------------------------------------------------------------------
def training_step(
    model: nn.Module,
    built: BuiltModel,
    s: RunSettings,
    tracker: MemoryTracker,
    choice: OptimizerChoice,
    user_spec: str | None,
) -> None:
    """One steady-state training step (forward, backward, optimizer step) under the tracker, with the
    micro-batches of gradient accumulation."""
    model.train()
    optimizer = choice.optimizer
    trainable = [p for p in model.parameters() if p.requires_grad]
    with tracker.track_phase("_warmup"):
        for p in trainable:
            p.grad = torch.empty_like(p)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        if s.grad_accum > 1:  # a non-first micro-batch: gradients from the previous ones are held
            for p in trainable:
                p.grad = torch.empty_like(p)
    _tag_optimizer_state(tracker, choice)
    tracker.tag([p.grad for p in trainable if p.grad is not None], "gradients")
    buckets = _ddp_buckets(trainable) if s.ddp_buckets else []
    tracker.tag(buckets, "gradients")

    args, kwargs = model_inputs(built, s, training=True, user_spec=user_spec)
    with tracker.track_phase("forward", attribute_modules=True):
        with _autocast(s):
            output = model(*args, **kwargs)
            loss = _loss_of(output)
        del output
    del args, kwargs
    with tracker.track_phase("backward", outside_modules="autograd (gradients of the forward)"):
        loss.backward()
        del loss
    tracker.tag([p.grad for p in trainable if p.grad is not None], "gradients")
    with tracker.track_phase("optimizer_step", outside_modules=f"{type(optimizer).__name__}.step()"):
        optimizer.step()
    _tag_optimizer_state(tracker, choice)


def _ddp_buckets(trainable: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    """DistributedDataParallel's reducer buckets: flat per-dtype copies of the gradients, allocated once
    (gradient_as_bucket_view=False, the default), alive for the whole run."""
    by_dtype: dict[torch.dtype, int] = {}
    for p in trainable:
        by_dtype[p.dtype] = by_dtype.get(p.dtype, 0) + p.numel()
    return [torch.empty(n, dtype=dtype) for dtype, n in by_dtype.items()]


def _tag_optimizer_state(tracker: MemoryTracker, choice: OptimizerChoice) -> None:
    states = state_tensors(choice.optimizer)
    if choice.paged:
        tracker.untrack(
            states
        )  # bitsandbytes pages it through CUDA unified memory, outside PyTorch's allocator
    else:
        tracker.tag(states, "optimizer_state")


def inference(
    model: nn.Module, built: BuiltModel, s: RunSettings, tracker: MemoryTracker, user_spec: str | None
) -> None:
    """One inference pass under the tracker: a forward, or for a causal LM a prefill and a decode step with
    its KV cache."""
    model.eval()
    with torch.no_grad(), _autocast(s):
        if built.kind != "causal-lm" or built.input_factory is not None:
            args, kwargs = model_inputs(built, s, training=False, user_spec=user_spec)
            with tracker.track_phase("forward", attribute_modules=True):
                output = model(*args, **kwargs)
                del output
            return
        _generate(model, s, tracker)


def _generate(model: nn.Module, s: RunSettings, tracker: MemoryTracker) -> None:
    import inspect

    keep = {"logits_to_keep": 1} if "logits_to_keep" in inspect.signature(model.forward).parameters else {}
    b = s.batch_size
    with tracker.track_phase("prefill", attribute_modules=True):
        out = model(input_ids=_tokens(b, s.seq_len), use_cache=True, **keep)
        cache = out.past_key_values
        logits = out.logits[:, -1].to(copy=True, dtype=torch.float32)  # what generate() keeps
        del out, logits
    if cache is None:
        raise GpuwiseError(
            f"{type(model).__name__} returned no KV cache (past_key_values) from a use_cache=True forward"
        )
    tracker.tag(_tensors_in(cache), "kv_cache")
    if s.output_len >= 3:
        # Bring the cache to its length before the last decode step in one chunk (not measured).
        with tracker.track_phase("_catchup"):
            out = model(input_ids=_tokens(b, s.output_len - 2), past_key_values=cache, use_cache=True, **keep)
            cache = out.past_key_values
            del out
        tracker.tag(_tensors_in(cache), "kv_cache")
    if s.output_len >= 2:
        with tracker.track_phase("decode"):
            out = model(input_ids=_tokens(b, 1), past_key_values=cache, use_cache=True, **keep)
            cache = out.past_key_values
            logits = out.logits[:, -1].to(copy=True, dtype=torch.float32)
            del out, logits
        tracker.tag(_tensors_in(cache), "kv_cache")


def explain_failure(
    err: BaseException, tracker: MemoryTracker, description: str, model: nn.Module
) -> GpuwiseError:
    """One line naming the module and op where a fake-tensor run failed."""
    from torch._subclasses.fake_tensor import (
        DataDependentOutputException,
        DynamicOutputShapeException,
        UnsupportedOperatorException,
    )

    where = tracker.module_stack[-1] if tracker.module_stack else "the model's top level"
    module = dict(model.named_modules()).get(where)
    if module is not None:
        where = f"{where} ({type(module).__name__})"
    op = str(getattr(err, "func", "") or tracker.failed_op or "")
    if isinstance(err, (DataDependentOutputException, DynamicOutputShapeException)):
        why = (
            f"runs {op}, whose result depends on tensor values (data-dependent control flow or output "
            "shape), which fake tensors do not have"
        )
    elif isinstance(err, UnsupportedOperatorException):
        why = f"runs {op}, which has no fake-tensor (meta) implementation"
    else:
        text = str(err).strip().splitlines()[0] if str(err).strip() else ""
        why = f"raised {type(err).__name__}{f' in {op}' if op else ''}: {text}"
    return GpuwiseError(f"cannot simulate {description}: {where} {why}; {ANALYTIC_HINT}")
