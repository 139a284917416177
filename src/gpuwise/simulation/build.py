"""Build the model to simulate on the ``meta`` device: no weights are downloaded or allocated.

Three sources: a catalog architecture (turned into a transformers config class), a local Hugging
Face ``config.json``, or a user factory ``pkg.module:function`` (or ``path/to/file.py:function``)
that returns an ``nn.Module``. transformers is imported only here, on the traced path.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import inspect
import sys
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from gpuwise.catalog import ModelArch, get_model
from gpuwise.errors import GpuwiseError
from gpuwise.workload.spec import Attention

__all__ = [
    "ANALYTIC_HINT",
    "BuiltModel",
    "build_from_catalog",
    "build_from_config_file",
    "build_from_factory",
    "call_user",
    "catalog_config_kwargs",
    "default_dtype",
    "load_callable",
    "resolve_model",
]


ANALYTIC_HINT = "run `gpuwise memory` without --traced for the analytic estimate"


def _llama_like(a: ModelArch) -> dict[str, Any]:
    return {
        "hidden_size": a.hidden_size,
        "intermediate_size": a.intermediate_size,
        "num_hidden_layers": a.num_layers,
        "num_attention_heads": a.num_attention_heads,
        "num_key_value_heads": a.num_kv_heads,
        "head_dim": a.head_dim,
        "vocab_size": a.vocab_size,
        "max_position_embeddings": a.max_position_embeddings or 4096,
        "tie_word_embeddings": a.tie_word_embeddings,
    }


def _gpt2_like(a: ModelArch) -> dict[str, Any]:
    return {
        "n_embd": a.hidden_size,
        "n_layer": a.num_layers,
        "n_head": a.num_attention_heads,
        "n_inner": a.intermediate_size,
        "n_positions": a.max_position_embeddings or 2048,
        "vocab_size": a.vocab_size,
        "tie_word_embeddings": a.tie_word_embeddings,
    }


def _mixtral(a: ModelArch) -> dict[str, Any]:
    return {**_llama_like(a), "num_local_experts": a.num_experts, "num_experts_per_tok": a.experts_per_token}


def _phi3(a: ModelArch) -> dict[str, Any]:
    return {k: v for k, v in _llama_like(a).items() if k != "head_dim"}


def _gptj(a: ModelArch) -> dict[str, Any]:
    return {**_gpt2_like(a), "rotary_dim": 64}


def _phi(a: ModelArch) -> dict[str, Any]:
    return {**_phi3(a), "max_position_embeddings": a.max_position_embeddings or 2048}


def _falcon(a: ModelArch) -> dict[str, Any]:
    return {
        "hidden_size": a.hidden_size,
        "num_hidden_layers": a.num_layers,
        "num_attention_heads": a.num_attention_heads,
        "num_kv_heads": a.num_kv_heads,
        "new_decoder_architecture": a.num_kv_heads > 1,
        "multi_query": a.num_kv_heads == 1,
        "parallel_attn": True,
        "bias": False,
        "ffn_hidden_size": a.intermediate_size,
        "vocab_size": a.vocab_size,
        "tie_word_embeddings": a.tie_word_embeddings,
    }


def _gpt_neox(a: ModelArch) -> dict[str, Any]:
    return {
        "hidden_size": a.hidden_size,
        "num_hidden_layers": a.num_layers,
        "num_attention_heads": a.num_attention_heads,
        "intermediate_size": a.intermediate_size,
        "vocab_size": a.vocab_size,
        "max_position_embeddings": a.max_position_embeddings or 4096,
        "rotary_pct": 0.25,
        "tie_word_embeddings": a.tie_word_embeddings,
    }


def _mpt(a: ModelArch) -> dict[str, Any]:
    return {
        "d_model": a.hidden_size,
        "n_heads": a.num_attention_heads,
        "n_layers": a.num_layers,
        "expansion_ratio": max(1, a.intermediate_size // a.hidden_size),
        "max_seq_len": a.max_position_embeddings or 2048,
        "vocab_size": a.vocab_size,
        "no_bias": True,
    }


def _bert(a: ModelArch) -> dict[str, Any]:
    return {
        "hidden_size": a.hidden_size,
        "num_hidden_layers": a.num_layers,
        "num_attention_heads": a.num_attention_heads,
        "intermediate_size": a.intermediate_size,
        "vocab_size": a.vocab_size,
        "max_position_embeddings": a.max_position_embeddings or 512,
    }


def _vit(a: ModelArch) -> dict[str, Any]:
    return {
        "hidden_size": a.hidden_size,
        "num_hidden_layers": a.num_layers,
        "num_attention_heads": a.num_attention_heads,
        "intermediate_size": a.intermediate_size,
        "patch_size": 16,
        "num_labels": 1000,
    }


def _resnet(a: ModelArch) -> dict[str, Any]:
    return {"num_labels": 1000}  # ResNetConfig's defaults are ResNet-50


# transformers model_type -> how the catalog columns map onto that config class. Which model_type
# rebuilds a family is the family's ``builds_as`` (gpuwise.catalog.families).
_CONFIG_KWARGS: dict[str, Callable[[ModelArch], dict[str, Any]]] = {
    "llama": _llama_like,
    "mistral": _llama_like,
    "mixtral": _mixtral,
    "qwen2": _llama_like,
    "qwen3": _llama_like,
    "phi3": _phi3,
    "gemma": _llama_like,
    "gpt2": _gpt2_like,
    "gptj": _gptj,
    "phi": _phi,
    "falcon": _falcon,
    "gpt_neox": _gpt_neox,
    "mpt": _mpt,
    "bert": _bert,
    "vit": _vit,
    "resnet": _resnet,
}


def catalog_config_kwargs(a: ModelArch) -> tuple[str, dict[str, Any]]:
    """(model_type, config kwargs) reproducing a catalog architecture with transformers' config classes."""
    model_type = a.spec.builds_as
    if model_type is None and a.mlp_type == "gated_silu" and a.is_transformer:
        model_type = "llama"  # user catalog entries of an unknown family: a Llama-shaped decoder
    if model_type is None:
        raise GpuwiseError(
            f"{a.id} ({a.family}, {a.mlp_type}) has no transformers config class to build it from: pass "
            f"--model-factory pkg.module:function returning the nn.Module, or {ANALYTIC_HINT}"
        )
    return model_type, _CONFIG_KWARGS[model_type](a)


@dataclass
class BuiltModel:
    """A model on ``meta`` plus what the runner needs to feed it."""

    model: nn.Module
    kind: str  # "causal-lm" | "seq-classifier" | "image-classifier" | "custom"
    description: str
    input_factory: Callable[..., Any] | None = None
    is_hf: bool = False


@contextlib.contextmanager
def default_dtype(dtype: torch.dtype) -> Iterator[None]:
    """transformers' plain constructors ignore a config dtype: set the default around construction."""
    previous = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        yield
    finally:
        torch.set_default_dtype(previous)


def _hf_kind(config: Any, task_is_cv: bool) -> str:
    model_type = getattr(config, "model_type", "")
    if task_is_cv or model_type in ("vit", "resnet", "convnext", "swin", "deit", "beit", "dinov2"):
        return "image-classifier"
    if model_type in ("bert", "roberta", "deberta", "deberta-v2", "distilbert", "electra", "xlm-roberta"):
        return "seq-classifier"
    return "causal-lm"


def _hf_build(
    config: Any, kind: str, dtype: torch.dtype, attention: Attention, description: str
) -> BuiltModel:
    import transformers

    auto = {
        "causal-lm": transformers.AutoModelForCausalLM,
        "seq-classifier": transformers.AutoModelForSequenceClassification,
        "image-classifier": transformers.AutoModelForImageClassification,
    }[kind]
    # flash-attention-2 is a CUDA library; SDPA dispatches to a flash kernel on the GPU with the same memory.
    attn = {"eager": "eager"}.get(attention, "sdpa")
    with torch.device("meta"), default_dtype(dtype):
        try:
            model = auto.from_config(config, dtype=dtype, attn_implementation=attn)
        except ValueError as err:
            if "does not support" not in str(err) or attn == "eager":
                raise GpuwiseError(
                    f"transformers cannot build {description}: {str(err).splitlines()[0]}"
                ) from None
            model = auto.from_config(config, dtype=dtype, attn_implementation="eager")
    return BuiltModel(model, kind, description, is_hf=True)


def build_from_catalog(
    arch: ModelArch, dtype: torch.dtype, attention: Attention, task_is_cv: bool, image_size: int
) -> BuiltModel:
    """A catalog architecture on the meta device through its transformers config class (``builds_as`` of
    its family), in ``dtype`` with the workload's attention."""
    from transformers import AutoConfig

    model_type, kwargs = catalog_config_kwargs(arch)
    if model_type == "vit":
        kwargs["image_size"] = image_size
    config = AutoConfig.for_model(model_type, **kwargs)
    return _hf_build(
        config,
        _hf_kind(config, task_is_cv),
        dtype,
        attention,
        f"{arch.id} (catalog architecture as transformers {type(config).__name__}, no weights)",
    )


def build_from_config_file(
    path: Path, dtype: torch.dtype, attention: Attention, task_is_cv: bool
) -> BuiltModel:
    """The model of a local Hugging Face ``config.json`` on the meta device, in ``dtype`` with the
    workload's attention."""
    from transformers import AutoConfig

    try:
        config = AutoConfig.from_pretrained(str(path))
    except (ValueError, KeyError, OSError) as err:
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise GpuwiseError(
            f"{path}: transformers cannot read this config ({first}); for custom architectures pass "
            f"--model-factory pkg.module:function, or {ANALYTIC_HINT}"
        ) from None
    return _hf_build(
        config,
        _hf_kind(config, task_is_cv),
        dtype,
        attention,
        f"{path} (transformers {type(config).__name__}, no weights)",
    )


def resolve_model(workload_model: str) -> tuple[ModelArch, Path | None]:
    """A catalog entry, or the config.json a path points to (get_model validates both)."""
    arch = get_model(workload_model)
    if arch.origin != "catalog" and Path(arch.origin).name.endswith(".json"):
        return arch, Path(arch.origin)
    return arch, None


# -- user factories ----------------------------------------------------------------------------
def load_callable(spec: str, option: str) -> Callable[..., Any]:
    """Import ``pkg.module:function`` or ``path/to/file.py:function``; failures name the module."""
    module_name, sep, attr = spec.rpartition(":")
    if not sep or not module_name or not attr:
        raise GpuwiseError(
            f"{option} {spec!r} must look like package.module:function or path/to/file.py:function"
        )
    try:
        if module_name.endswith(".py") or "/" in module_name:
            path = Path(module_name).expanduser()
            if not path.is_file():
                raise GpuwiseError(f"{option} {spec!r}: file {path} does not exist")
            module_spec = importlib.util.spec_from_file_location(path.stem, path)
            if module_spec is None or module_spec.loader is None:
                raise GpuwiseError(f"{option} {spec!r}: cannot load {path} as a Python module")
            module = importlib.util.module_from_spec(module_spec)
            module_spec.loader.exec_module(module)
        else:
            cwd = str(Path.cwd())
            added = cwd not in sys.path
            if added:
                sys.path.insert(0, cwd)
            try:
                module = importlib.import_module(module_name)
            finally:
                if added:
                    sys.path.remove(cwd)
    except GpuwiseError:
        raise
    except Exception as err:
        raise GpuwiseError(
            f"{option} {spec!r}: cannot import module {module_name!r} ({type(err).__name__}: "
            f"{_first_line(err)}); "
            f"check PYTHONPATH or give path/to/file.py:function, or {ANALYTIC_HINT}"
        ) from None
    func = getattr(module, attr, None)
    if func is None or not callable(func):
        names = [n for n in dir(module) if not n.startswith("_") and callable(getattr(module, n))]
        from gpuwise.errors import did_you_mean

        raise did_you_mean(
            f"callable in {module_name} for {option}",
            attr,
            names,
            hint="it defines " + (", ".join(names[:6]) or "no public callables"),
        )
    return func


def call_user(func: Callable[..., Any], option: str, spec: str, available: dict[str, Any]) -> Any:
    """Call a factory with the keyword arguments it declares among ``available``."""
    params: Mapping[str, inspect.Parameter]
    try:
        params = inspect.signature(func).parameters
    except (TypeError, ValueError):
        params = {}
    takes_all = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    kwargs = {k: v for k, v in available.items() if takes_all or k in params}
    try:
        return func(**kwargs)
    except GpuwiseError:
        raise
    except Exception as err:
        raise GpuwiseError(
            f"{option} {spec} raised {type(err).__name__}: {_first_line(err)} "
            f"(called with {sorted(kwargs) or 'no arguments'}); "
            f"fix the factory, or {ANALYTIC_HINT}"
        ) from None


def build_from_factory(spec: str, dtype: torch.dtype, input_spec: str | None) -> BuiltModel:
    """Call the user's factory with parameters created on ``meta`` (buffers stay real: init code
    may read them)."""
    from accelerate import init_empty_weights

    func = load_callable(spec, "--model-factory")
    with init_empty_weights(include_buffers=False), default_dtype(dtype):
        model = call_user(func, "--model-factory", spec, {})
    if not isinstance(model, nn.Module):
        raise GpuwiseError(f"--model-factory {spec} returned {type(model).__name__}, not a torch.nn.Module")
    input_factory = load_callable(input_spec, "--input-factory") if input_spec else None
    is_hf = hasattr(model, "config") and hasattr(model, "can_generate")
    kind = "custom"
    if is_hf and input_factory is None:
        kind = _hf_kind(model.config, False)
    elif input_factory is None:
        raise GpuwiseError(
            f"--model-factory {spec} returned a {type(model).__name__}, which is not a Hugging Face model: "
            "pass --input-factory pkg.module:function returning its inputs (a tensor, a tuple or a dict)"
        )
    return BuiltModel(
        model, kind, f"{type(model).__name__} from {spec}", input_factory=input_factory, is_hf=is_hf
    )


def _first_line(err: BaseException) -> str:
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__
