"""`--traced` runs the real model, so it needs torch and the `sim` extra; say so in one line."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from gpuwise.errors import GpuwiseError

__all__ = ["SIM_PACKAGES", "sim_extra_required"]

# torch is installed by the user (CPU, CUDA or ROCm build); the rest come with `gpuwise[sim]`.
SIM_PACKAGES = frozenset({"torch", "transformers", "peft", "accelerate"})


@contextmanager
def sim_extra_required() -> Iterator[None]:
    """Turn a missing simulation package (imported lazily, deep in a run) into an install hint."""
    try:
        yield
    except ModuleNotFoundError as err:
        package = (err.name or "").split(".")[0]
        if package not in SIM_PACKAGES:
            raise
        raise GpuwiseError(
            f"--traced needs {package}, which is not installed: pip install 'gpuwise[sim]' "
            "(and a torch build for your machine)"
        ) from None
