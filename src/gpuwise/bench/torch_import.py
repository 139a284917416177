"""The one place bench imports torch, so a missing torch is one clear line, not a traceback."""

from __future__ import annotations

from types import ModuleType

from gpuwise.errors import GpuwiseError


def require_torch() -> ModuleType:
    """The ``torch`` module; raises ``GpuwiseError`` with the install command when it is missing."""
    try:
        import torch
    except ImportError:
        raise GpuwiseError("gpuwise bench needs PyTorch to run its kernels: pip install torch") from None
    return torch


__all__ = ["require_torch"]
