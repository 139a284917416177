"""GPU and model catalogs: package data with a source for every number, plus user additions."""

from gpuwise.catalog.gpus import GPU, get_gpu, list_gpus
from gpuwise.catalog.models import ModelArch, get_model, list_models

__all__ = ["GPU", "ModelArch", "get_gpu", "get_model", "list_gpus", "list_models"]
