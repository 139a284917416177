"""The resolved hardware context: one GPU's peaks, MAMF and links, computed once and reused.

Why: a plan evaluates hundreds of candidate workloads on the same few GPUs, and every step-time
estimate needs the same facts: the dense peak of the dtype it computes in (after falling back to a
dtype the GPU has), the achievable large-GEMM fraction (MAMF) and the links its collectives run over.
Before, each call re-derived them from the catalog row and efficiency.toml (the plan's walk computed
``peak_flops`` 8 times per evaluation). Here they are computed once per (GPU, dtype) and per GPU, and
cached; :mod:`gpuwise.perf.roofline` and :mod:`gpuwise.perf.comm` read them, with the very same
arithmetic as before, so every figure is bit-identical.

A MAMF measured by ``gpuwise bench --calibrate`` (``efficiency.MEASURED_MAMF``) is part of the cache
key, so a calibration takes effect at once.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from functools import lru_cache
from typing import Any, Literal

from gpuwise.catalog import GPU
from gpuwise.perf import efficiency as eff
from gpuwise.perf.numerics import supported_dtype

# Form factors whose NVLink reaches every GPU of the node through NVSwitch (or AMD's
# all-to-all Infinity Fabric); elsewhere an NVLink bridge joins pairs only.
_SWITCHED = ("sxm", "oam", "superchip", "hgx")
# Dtypes whose GEMMs reach the fp8 MAMF fraction (the 8- and 4-bit tensor-core paths).
_LOW_BIT = frozenset({"fp8", "fp4", "int8"})


@dataclass(frozen=True)
class Link:
    """The link a collective's ring runs over, at its achievable NCCL bus bandwidth."""

    kind: str  # none | nvlink | pcie | network
    bytes_per_s: float
    latency_s: float

    def to_dict(self) -> dict[str, Any]:
        """The link as a JSON-ready mapping."""
        return asdict(self)


NO_LINK = Link("none", float("inf"), 0.0)


@dataclass(frozen=True)
class Links:
    """One GPU's collective links at their achievable bus bandwidth (bytes/s) and latency (s).

    ``nvlink`` is None without NVLink; ``nvlink_switched`` says whether it reaches every GPU of the
    node (NVSwitch, Infinity Fabric) or joins pairs only (a bridge)."""

    nvlink: Link | None
    nvlink_switched: bool
    pcie: Link
    network: Link


@lru_cache(maxsize=256)
def links(gpu: GPU) -> Links:
    """The NVLink, PCIe and inter-node links of ``gpu`` (efficiency.toml [comm] fractions applied)."""
    comm = eff.constants().comm
    latency = comm.latency_us
    network = Link("network", eff.network_bytes_per_s(gpu) * comm.network_fraction, latency.network * 1e-6)
    nvlink = None
    if gpu.nvlink_gbps:
        per_direction = gpu.nvlink_gbps / 2 * 1e9  # catalog lists total bidirectional NVLink bandwidth
        nvlink = Link("nvlink", per_direction * comm.nvlink_fraction, latency.nvlink * 1e-6)
    pcie = gpu.pcie_gbps * 1e9 * comm.pcie_fraction
    if gpu.consumer:
        pcie *= comm.consumer_pcie_factor  # no peer-to-peer on GeForce: through host memory
    switched = any(tag in gpu.form_factor.lower() for tag in _SWITCHED)
    return Links(nvlink, switched, Link("pcie", pcie, latency.pcie * 1e-6), network)


@dataclass(frozen=True)
class Hardware:
    """What one GPU offers for matmuls in one dtype, resolved once.

    ``dtype`` is the dtype asked for (fp32, tf32, bf16, fp16, fp8, int8, fp4); ``peak_dtype`` the one
    whose dense peak applies (the GPU's next lower dtype where it lacks ``dtype``; None if it has no
    peak at all), ``peak_flops`` that peak in FLOP/s (0.0 when none). ``gemm_fraction`` is the best
    sustained large-GEMM share of the peak (MAMF; SIMT SGEMM's share for fp32) and the
    ``*_efficiency`` fields that fraction times the framework's stack factor (fp32: unscaled).
    """

    gpu: GPU
    dtype: str
    peak_dtype: str | None
    peak_flops: float
    mamf: eff.Mamf
    gemm_fraction: float
    training_efficiency: float
    inference_efficiency: float
    mem_bw_bytes_per_s: float
    links: Links

    def matmul_efficiency(self, kind: Literal["training", "inference"]) -> float:
        """Fraction of the dense peak a tuned stack reaches on large matmuls (MAMF × stack)."""
        return self.training_efficiency if kind == "training" else self.inference_efficiency


def hardware(gpu: GPU, dtype: str) -> Hardware:
    """The resolved context of ``gpu`` computing in ``dtype`` (cached per GPU, dtype and any
    measured MAMF of this GPU model)."""
    return _hardware(gpu, dtype, eff.MEASURED_MAMF.get(gpu.id))


@lru_cache(maxsize=1024)
def _hardware(gpu: GPU, dtype: str, measured: eff.Mamf | None) -> Hardware:
    """Build the context; ``measured`` only keys the cache (``eff.mamf`` reads it)."""
    del measured
    try:
        peak_dtype: str | None = supported_dtype(gpu, dtype)
    except ValueError:
        peak_dtype = None  # roofline.peak_flops raises the same error when asked
    peak = gpu.peak_tflops(peak_dtype) if peak_dtype else None
    m = eff.mamf(gpu)
    if dtype == "fp32":
        fraction = eff.fp32_matmul_fraction(gpu)
        training = inference = fraction
    else:
        fraction = m.fp8 if dtype in _LOW_BIT else m.bf16
        training, inference = fraction * eff.stack("training"), fraction * eff.stack("inference")
    return Hardware(
        gpu=gpu,
        dtype=dtype,
        peak_dtype=peak_dtype,
        peak_flops=peak * 1e12 if peak else 0.0,
        mamf=m,
        gemm_fraction=fraction,
        training_efficiency=training,
        inference_efficiency=inference,
        mem_bw_bytes_per_s=gpu.mem_bw_bytes_per_s,
        links=links(gpu),
    )


def clear_cache() -> None:
    """Forget every resolved context (after the catalog or efficiency.toml changed in-process)."""
    _hardware.cache_clear()
    links.cache_clear()


__all__ = ["NO_LINK", "Hardware", "Link", "Links", "clear_cache", "hardware", "links"]
