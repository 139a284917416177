"""Input-pipeline sizing for vision training: the CPU cores and storage read bandwidth each GPU needs to be
fed at its predicted images/s, and which loader to use when the node's cores are short.

The per-core rates (JPEG decode, the ImageNet training transforms), the bytes per image and the cores per
GPU of common nodes are in ``perf/data/input_pipeline.toml``, each with its public source. A core decodes
and augments ``1000 / (decode_ms + augment_ms)`` images per second; a GPU taking R images/s needs R times
that time in cores. DALI (nvJPEG, the A100/H100 hardware JPEG decoder) moves decode and augmentation onto
the GPU, which is the option when even the fast CPU path needs more cores than the node has.
"""

from __future__ import annotations

import sys
from dataclasses import asdict, dataclass
from functools import lru_cache
from typing import Any, Literal

from gpuwise.catalog.bundled import bundled_text
from gpuwise.plan.types import Outcome
from gpuwise.workload import Workload

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

__all__ = ["InputOption", "InputSizing", "LoaderVerdict", "size_input_pipeline"]

LoaderVerdict = Literal["enough", "tight", "short", "unknown"]  # the node's cores vs what the GPUs consume


@dataclass(frozen=True)
class InputOption:
    """One way to feed the GPUs: cores per GPU it needs, GPU time it takes (ms per second), its source."""

    name: str
    cores_per_gpu: float
    gpu_ms_per_s: float  # GPU time spent decoding per second of training (0: all on the CPU)
    fits: bool | None  # within the node's usable cores (None: node unknown)
    how: str
    source: str

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        return asdict(self)


@dataclass(frozen=True)
class InputSizing:
    """What the input pipeline must deliver per GPU and the loaders ranked by whether the node can."""

    images_per_s_per_gpu: float
    crop_px: int
    source_resolution: str
    read_mb_per_s_per_gpu: float  # MB = 10^6 bytes, first epoch (the page cache may hold later ones)
    read_mb_per_s_total: float
    node: str | None  # the usual node for this GPU, whose cores are compared
    node_cores_per_gpu: int | None
    usable_cores_per_gpu: float | None
    verdict: LoaderVerdict
    options: tuple[InputOption, ...]  # ranked: the first is the recommendation
    sources: tuple[str, ...]

    @property
    def summary(self) -> str:
        """One line: the rate, the cores per path, the storage bandwidth and the node's verdict."""
        best = self.options[0]
        node = (
            f"; the usual node ({self.node.split(':')[0]}) has {self.node_cores_per_gpu} cores per GPU, "
            f"{self.usable_cores_per_gpu:.0f} usable for loader workers: {self.verdict}"
            if self.node
            else ""
        )
        return (
            f"{self.images_per_s_per_gpu:,.0f} images/s per GPU need "
            + ", ".join(
                f"{o.cores_per_gpu:.1f} cores ({o.name})" for o in self.options if o.cores_per_gpu >= 1
            )
            + f" and {self.read_mb_per_s_per_gpu:,.0f} MB/s of storage reads per GPU "
            f"({self.read_mb_per_s_total:,.0f} MB/s in all, first epoch){node}; use: {best.name}"
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON form (the plan's `input_pipeline`)."""
        data = asdict(self)
        data["options"] = [o.to_dict() for o in self.options]
        data["sources"] = list(self.sources)
        data["summary"] = self.summary
        return data


@lru_cache(maxsize=1)
def _table() -> dict[str, Any]:
    text = bundled_text("gpuwise.perf", "data/input_pipeline.toml")
    return tomllib.loads(text)


def _decode_row(crop_px: int) -> int:
    limits = _table()["decode"]["max_crop_px"]
    return next(i for i, limit in enumerate(limits) if crop_px <= limit)


def _options(rate: float, crop_px: int, usable: float | None) -> list[InputOption]:
    t = _table()
    row = _decode_row(crop_px)
    scale = (crop_px / t["augment"]["reference_crop_px"]) ** 2
    pil_ms = t["decode"]["pil_ms"][row] + t["augment"]["v1_ms"] * scale
    fast_ms = t["decode"]["torchvision_ms"][row] + t["augment"]["v2_ms"] * scale
    gpu_ms = t["gpu_decode"]["ms_per_image"]

    def fits(cores: float) -> bool | None:
        return None if usable is None else cores <= usable

    cpu_src = f"{t['decode']['source']}; {t['augment']['source']}"
    pil = rate * pil_ms / 1000
    fast = rate * fast_ms / 1000
    return [
        InputOption(
            "DataLoader: PIL decode + torchvision transforms",
            pil,
            0.0,
            fits(pil),
            f"{pil_ms:.2f} ms of one core per image; DataLoader(num_workers={max(1, round(pil))} per GPU, "
            "pin_memory=True, persistent_workers=True)",
            cpu_src,
        ),
        InputOption(
            "DataLoader: torchvision.io.decode_jpeg + transforms.v2",
            fast,
            0.0,
            fits(fast),
            f"{fast_ms:.2f} ms per image: libjpeg-turbo decode to a uint8 tensor and the native uint8 resize",
            cpu_src,
        ),
        InputOption(
            "NVIDIA DALI (decode and augment on the GPU)",
            0.0,
            rate * gpu_ms,
            None if usable is None else True,
            f"the CPU only reads files and batches (not sized); nvJPEG at {gpu_ms} ms of GPU time per image "
            f"({rate * gpu_ms / 10:.0f} % of a GPU at this rate on CUDA cores; the A100/H100 hardware JPEG "
            "decoder takes it off the SMs)",
            t["gpu_decode"]["source"],
        ),
    ]


def _verdict(options: list[InputOption]) -> LoaderVerdict:
    pil, fast = options[0].fits, options[1].fits
    if pil is None:
        return "unknown"
    return "enough" if pil else "tight" if fast else "short"


def size_input_pipeline(w: Workload, outcome: Outcome) -> InputSizing | None:
    """Cores and storage bandwidth per GPU for a vision training job at ``outcome``'s images/s; None for
    other jobs or when no speed is predicted."""
    if w.task != "cv-train" or outcome.throughput_unit != "images/s" or not outcome.throughput:
        return None
    t = _table()
    rate = outcome.throughput / max(1, outcome.num_gpus)
    crop = int(w.image_size or t["augment"]["reference_crop_px"])
    node_entry = t["host"]["cores_per_gpu"].get(outcome.gpu)
    cores = int(node_entry[0]) if node_entry else None
    usable = cores * float(t["host"]["usable_core_share"]) if cores else None
    options = _options(rate, crop, usable)
    verdict = _verdict(options)
    order = {"enough": (0, 1, 2), "unknown": (0, 1, 2), "tight": (1, 2, 0), "short": (2, 1, 0)}[verdict]
    ranked = [options[i] for i in order]
    mb = rate * float(t["storage"]["bytes_per_image"]) / 1e6
    return InputSizing(
        images_per_s_per_gpu=rate,
        crop_px=crop,
        source_resolution=t["decode"]["source_resolution"][_decode_row(crop)],
        read_mb_per_s_per_gpu=mb,
        read_mb_per_s_total=mb * outcome.num_gpus,
        node=node_entry[1] if node_entry else None,
        node_cores_per_gpu=cores,
        usable_cores_per_gpu=usable,
        verdict=verdict,
        options=tuple(ranked),
        sources=(
            t["decode"]["source"],
            t["augment"]["source"],
            t["gpu_decode"]["source"],
            t["storage"]["source"],
        ),
    )
