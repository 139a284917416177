"""GPU and model catalogs: package data with a source for every number, plus user additions.

A GPU is one row of ``data/gpus.csv`` (or a user file entry): its specs, its typed ``generation`` and the
device names runtimes report for it, which :func:`resolve_device` (the one device-name matcher) reads.

The names below load their module on first use (PEP 562): `gpuwise trace` reads GPUs, not models, and
does not pay for the model catalog's import (start-up time).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gpuwise.catalog.device_names import DeviceMatch, match_device_name, resolve_device
    from gpuwise.catalog.gpus import GENERATIONS, GPU, Generation, get_gpu, list_gpus
    from gpuwise.catalog.models import ModelArch, get_model, list_models

__all__ = [
    "GENERATIONS",
    "GPU",
    "DeviceMatch",
    "Generation",
    "ModelArch",
    "get_gpu",
    "get_model",
    "list_gpus",
    "list_models",
    "match_device_name",
    "resolve_device",
]

# name -> the module of this package that defines it
_HOME = {
    "DeviceMatch": "device_names",
    "match_device_name": "device_names",
    "resolve_device": "device_names",
    "GENERATIONS": "gpus",
    "GPU": "gpus",
    "Generation": "gpus",
    "get_gpu": "gpus",
    "list_gpus": "gpus",
    "ModelArch": "models",
    "get_model": "models",
    "list_models": "models",
}


def __getattr__(name: str) -> Any:
    """Each public name, imported from its module the first time it is asked for."""
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
