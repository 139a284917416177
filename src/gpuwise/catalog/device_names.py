"""The one device-name matcher: the catalog GPU a runtime-reported name stands for.

NVML (``nvmlDeviceGetName``, what ``nvidia-smi`` and gpuwise monitor read), CUDA
(``cudaGetDeviceProperties().name``, what ``torch.cuda.get_device_name`` returns and Kineto writes into a
trace's ``deviceProperties``) and ROCm (``hipDeviceProp_t.name``, "AMD Instinct MI300X"; some ROCm
releases leave only the ``gfx942`` target or a generic "AMD Radeon Graphics") name GPUs their own way
("NVIDIA A100-SXM4-80GB", "Tesla T4", "NVIDIA H100 80GB HBM3"). Every GPU row of the catalog lists the
names it reports in its ``device_names`` column, so trace, profile, bench and monitor resolve a name
here and nowhere else; a new GPU is a new CSV row (or user-file entry), never new code.

Matching, on words (lower case, split at anything not a letter or digit, vendor words dropped):
1. **exact**: the name is one of a GPU's ``device_names`` or its catalog ``name``;
2. **family**: the name holds every model word of one of them (memory sizes and packaging words such as
   ``SXM4``, ``PCIe``, ``HBM3`` aside): "NVIDIA A100-PG509-200" (a board name) is an A100, "NVIDIA H200
   NVL" an H200; an AMD ``gfx942`` target counts as a model word of its GPUs. Among several, the one with
   the same PCIe-ness, then the closest memory size, then the fewest name words it lacks wins, and the
   match carries a note saying it was not exact;
3. **compute capability** (ROCm traces only): a generic name with HIP's major.minor picks the AMD GPUs
   of that gfx target, by memory size.
Model words with digits must match whole, so an "RTX 3090" is never an RTX 4090.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from gpuwise.catalog.gpus import GPU, list_gpus
from gpuwise.units import GB

# Words every vendor prefixes (or not) to the same part: they never tell two GPUs apart.
_VENDOR_WORDS = frozenset({"nvidia", "tesla", "geforce", "amd", "instinct"})
# Packaging and memory words: they tell variants of one family apart, not families.
_VARIANT_WORDS = frozenset(
    {"sxm", "sxm2", "sxm4", "sxm5", "pcie", "hbm2", "hbm2e", "hbm3", "hbm3e", "generation", "edition"}
)
_MEMORY_WORD = re.compile(r"\d+g(b)?")


@dataclass(frozen=True)
class DeviceMatch:
    """The catalog GPU a device name resolved to (None: not in the catalog) and a one-line note ('' when
    the name is one the catalog lists for that GPU)."""

    gpu: GPU | None
    note: str


def name_words(name: str) -> tuple[str, ...]:
    """A device name as comparable words: 'NVIDIA A100-SXM4-80GB' -> ('a100', 'sxm4', '80gb')."""
    return tuple(w for w in re.split(r"[^a-z0-9]+", name.lower()) if w and w not in _VENDOR_WORDS)


def _model_words(words: tuple[str, ...]) -> frozenset[str]:
    """The words that name a family: all but memory sizes and packaging."""
    return frozenset(w for w in words if w not in _VARIANT_WORDS and not _MEMORY_WORD.fullmatch(w))


def _aliases(gpu: GPU) -> list[tuple[str, ...]]:
    """The names this GPU answers to, as words: its runtime device names, then its catalog name."""
    return [name_words(n) for n in (*gpu.device_names, gpu.name)]


def _family_keys(gpu: GPU) -> list[frozenset[str]]:
    """Model-word sets of which any one, found in a name, makes the name this GPU's family."""
    keys = [k for k in map(_model_words, _aliases(gpu)) if k]
    if gpu.arch_target.startswith("gfx"):
        keys.append(frozenset({gpu.arch_target}))
    return keys


def _pick(candidates: list[GPU], words: tuple[str, ...], memory_bytes: int | None) -> GPU:
    """Among GPUs of one family: the same PCIe-ness as the name, then the closest memory size (whole GB),
    then the fewest name words the GPU's names lack ('Tesla V100-DGXS-32GB' -> DGXS, not SXM2)."""
    pcie = "pcie" in words
    same_form = [g for g in candidates if ("pcie" in g.id) == pcie] or candidates
    wanted = set(words)

    def distance(g: GPU) -> tuple[float, int]:
        memory = round(abs(g.memory_gb * GB - memory_bytes) / GB) if memory_bytes else 0
        known = {w for alias in _aliases(g) for w in alias}
        return memory, len(wanted - known)

    return min(same_form, key=distance)


def _closest_memory(candidates: list[GPU], memory_bytes: int | None) -> GPU:
    if not memory_bytes:
        return candidates[0]
    return min(candidates, key=lambda g: abs(g.memory_gb * GB - memory_bytes))


def resolve_device(
    name: str | None, memory_bytes: int | None = None, compute: tuple[int, int] | None = None
) -> DeviceMatch:
    """The catalog GPU behind a runtime device name.

    ``memory_bytes`` (the device's total memory, bytes) separates variants of one family (A100 40 vs
    80 GB); ``compute`` is HIP's (major, minor), used only for AMD devices whose name says nothing.
    """
    if not name:
        return DeviceMatch(None, "no device name")
    words = name_words(name)
    gpus = list_gpus()
    exact = [g for g in gpus if words and words in _aliases(g)]
    if exact:
        return DeviceMatch(_closest_memory(exact, memory_bytes), "")
    present = set(words)
    family = [g for g in gpus if any(key <= present for key in _family_keys(g))]
    if family:
        best = _pick(family, words, memory_bytes)
        return DeviceMatch(
            best, f"{name!r} matched to catalog entry {best.id!r} (same family, closest memory size)"
        )
    same_target = [
        g for g in gpus if compute and g.vendor.upper() == "AMD" and g.compute_capability == compute
    ]
    if same_target:
        best = _closest_memory(same_target, memory_bytes)
        return DeviceMatch(
            best,
            f"{name!r} matched to catalog entry {best.id!r} by its gfx target ({best.arch_target}, "
            "closest memory size)",
        )
    return DeviceMatch(None, f"{name!r} is not in the GPU catalog")


def match_device_name(device_name: str) -> str | None:
    """Catalog id for an NVML/CUDA/ROCm device name ('NVIDIA A100-SXM4-80GB' -> 'a100-80gb-sxm'), if any."""
    match = resolve_device(device_name)
    return match.gpu.id if match.gpu else None


__all__ = ["DeviceMatch", "match_device_name", "name_words", "resolve_device"]
