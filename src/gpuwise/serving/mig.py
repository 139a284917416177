"""MIG slices as fractional GPUs, so a small model can be planned on part of an A100/H100.

An NVIDIA MIG ``Ng`` slice gets N of the GPU's 7 compute slices and a share of its 8 memory slices
(1g → 1/8, 2g → 2/8, 3g → 4/8 of memory and bandwidth: the 1g.10gb, 2g.20gb and 3g.40gb profiles of
an 80 GB A100/H100, NVIDIA MIG user guide). A slice is billed at N/7 of the GPU's price: the plan
assumes the other slices serve other replicas or services.
"""

from __future__ import annotations

from dataclasses import replace

from gpuwise.catalog import GPU

__all__ = ["MIG_PROFILES", "can_slice", "catalog_id", "mig_slice"]


MIG_PROFILES = {1: 1, 2: 2, 3: 4}  # compute slices -> memory slices (of 7 and 8)
_SEP = ":mig"


def mig_slice(gpu: GPU, compute_slices: int) -> GPU:
    """``gpu`` cut to one MIG profile (requires an NVIDIA GPU with ``mig_max`` 7)."""
    memory = MIG_PROFILES[compute_slices] / 8
    compute = compute_slices / 7

    def scaled(value: float | None) -> float | None:
        return None if value is None else value * compute

    return replace(
        gpu,
        id=f"{gpu.id}{_SEP}{compute_slices}g",
        name=f"{gpu.name} MIG {compute_slices}g.{round(gpu.memory_gb * memory)}gb",
        memory_gb=gpu.memory_gb * memory,
        mem_bw_tbps=gpu.mem_bw_tbps * memory,
        fp32_tflops=scaled(gpu.fp32_tflops),
        tf32_tflops=scaled(gpu.tf32_tflops),
        bf16_tflops=scaled(gpu.bf16_tflops),
        fp16_tflops=scaled(gpu.fp16_tflops),
        fp8_tflops=scaled(gpu.fp8_tflops),
        int8_tops=scaled(gpu.int8_tops),
        fp4_tflops=scaled(gpu.fp4_tflops),
        tdp_w=scaled(gpu.tdp_w),
        nvlink_gbps=0.0,
        mig_max=0,
        cloud_usd_per_hr=scaled(gpu.cloud_usd_per_hr),
    )


def catalog_id(gpu_id: str) -> str:
    """The catalog GPU a (possibly MIG-sliced) GPU id belongs to."""
    return gpu_id.split(_SEP)[0]


def can_slice(gpu: GPU) -> bool:
    """Whether ``gpu`` can be split into MIG slices (NVIDIA GPUs with 7-way MIG)."""
    return gpu.vendor == "NVIDIA" and gpu.mig_max == 7
