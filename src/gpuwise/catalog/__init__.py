"""GPU and model catalogs: package data with a source for every number, plus user additions.

A GPU is one row of ``data/gpus.csv`` (or a user file entry): its specs, its typed ``generation`` and the
device names runtimes report for it, which :func:`resolve_device` (the one device-name matcher) reads.
"""

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
