"""Which ML framework a workload runs (PyTorch, JAX, TensorFlow) and whether an accelerator can take it.

The workload's free-text ``framework`` field names the stack the user runs ("hf-trainer", "deepspeed",
"vllm", "jax", "flax", "tensorflow", "keras"); every name that is not JAX's or TensorFlow's is a PyTorch
stack. The catalog's ``platform`` (cuda, rocm, gaudi, tpu; from the row's generation) says what software
runs on a device:

- a Google TPU runs XLA programs: JAX or TensorFlow (PyTorch/XLA exists but gpuwise does not model it) (the
  TPU7x row's notes say TensorFlow is not supported there);
- an Intel Gaudi runs PyTorch through the Intel Gaudi software bridge (JAX and TensorFlow are not modelled);
- NVIDIA (CUDA) and AMD (ROCm) GPUs run all three.

What gpuwise models on a TPU, and what it does not, is :data:`TPU_MODELLED` (shown with every TPU estimate).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal, get_args

if TYPE_CHECKING:  # an annotation only: the diagnosis loads no catalog through this module (start-up)
    from gpuwise.catalog import GPU

MlFramework = Literal["pytorch", "jax", "tensorflow"]
ML_FRAMEWORKS: tuple[MlFramework, ...] = get_args(MlFramework)

_JAX_NAMES = frozenset({"jax", "flax", "maxtext", "pax", "praxis", "t5x", "levanter", "equinox"})
_TF_NAMES = frozenset({"tensorflow", "tf", "keras", "tf-keras", "tensorflow-keras"})

TPU_MODELLED = (
    "TPU: memory is fitted per chip against its HBM (weights, activations, KV cache and optimizer state "
    "as XLA would hold them); speed is the chip's bf16 peak times a stated matmul efficiency "
    "(confidence low). Not modelled on TPUs: XLA fusion and its HBM reserve (the CUDA context and "
    "caching-allocator terms stand in for it), ICI collectives and slice topology, megacore/SparseCore "
    "details, PyTorch/XLA."
)


def ml_framework(framework: str) -> MlFramework:
    """'jax' for JAX stacks (flax, maxtext, ...), 'tensorflow' for TensorFlow/Keras, else 'pytorch'."""
    name = framework.strip().lower()
    if name in _JAX_NAMES:
        return "jax"
    if name in _TF_NAMES:
        return "tensorflow"
    return "pytorch"


def placement_issue(framework: str, gpu: GPU) -> str | None:
    """One line saying why a workload of this framework cannot be placed on ``gpu`` (None: it can).

    The line names the accelerator, what it runs, and what to pass instead."""
    ml = ml_framework(framework)
    if gpu.platform == "tpu":
        if ml == "pytorch":
            return (
                f"{gpu.id} is a Google TPU: it runs JAX or TensorFlow programs through XLA, and gpuwise does "
                "not model PyTorch on TPUs (PyTorch/XLA); pass --framework jax (or tensorflow) for an XLA "
                "workload, or pick a GPU"
            )
        return None
    if gpu.platform == "gaudi" and ml != "pytorch":
        return (
            f"{gpu.id} is an Intel Gaudi: it runs PyTorch through the Intel Gaudi bridge; gpuwise does not "
            f"model {ml} on Gaudi; pick a GPU or a TPU"
        )
    return None


def runs_on(framework: str, gpu: GPU) -> bool:
    """True when a workload of ``framework`` can be placed on ``gpu`` (see :func:`placement_issue`)."""
    return placement_issue(framework, gpu) is None


__all__ = ["ML_FRAMEWORKS", "TPU_MODELLED", "MlFramework", "ml_framework", "placement_issue", "runs_on"]
