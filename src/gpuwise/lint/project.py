"""Facts about a project that no single file holds: does it run on a GPU, which torch it requires,
where ``set_epoch`` is called, whether it chooses a precision somewhere, and the dataset classes it
defines.

A project is the files linted together under the nearest folder that declares one (a
``pyproject.toml``, ``setup.py``, ``setup.cfg`` or ``requirements*.txt``), else the file's own folder:
``pytorch/examples/mnist`` is one project, ``nanoGPT`` another. Rules read these facts so that a data
module imported by a GPU script is checked as GPU code, a sampler re-seeded in a helper module is not
reported, and a model that casts itself to bf16 in ``model.py`` is not "fp32 training".
"""

from __future__ import annotations

import ast
import os
import re
import sys
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from gpuwise.lint.context import Context, keyword

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

__all__ = ["MARKERS", "Project", "declares", "folder_root", "gpu_evidence", "project_root", "torch_floor"]

MARKERS = ("pyproject.toml", "setup.py", "setup.cfg")
_REQUIREMENT = re.compile(r"^\s*torch\s*(?:\[[^\]]*\])?\s*(>=|==|~=|>)\s*(\d+)\.(\d+)", re.IGNORECASE)
_DEVICE_STRING = re.compile(r"^(cuda(:\d+)?|nccl|gpu|auto)$")
_DEVICE_KEYWORDS = ("device", "accelerator", "device_map", "backend", "map_location")
_CUDA_STRING = re.compile(r"^(cuda(:\d+)?|nccl)$")
_CONV_NETS = ("torchvision.models.", "timm.create_model", "timm.models.")
_CONV_ROOTS = ("torchvision", "timm")  # the modules _CONV_NETS start with
_FRAMEWORK_OBJECTS = ("Trainer", "Fabric", "TrainingArguments", "Accelerator")
_CPU_ONLY = re.compile(r"^(cpu|gloo)$")


def project_root(path: Path, stop: Path | None = None) -> Path:
    """The nearest folder at or above ``path``'s folder (not above ``stop``) that declares a project,
    else ``path``'s own folder."""
    return folder_root(path.resolve().parent, stop.resolve() if stop is not None else None)


def folder_root(folder: Path, limit: Path | None = None) -> Path:
    """`project_root` of the files of ``folder`` (resolved), looking no higher than ``limit``
    (resolved): the linter asks once per folder."""
    candidate = folder
    while True:
        if declares(candidate):
            return candidate
        if candidate == limit:
            return folder
        parent = candidate.parent
        if parent == candidate:
            return folder
        candidate = parent


@lru_cache(maxsize=4096)
def declares(folder: Path) -> bool:
    """Does the folder hold a project marker (pyproject.toml, setup.py, setup.cfg, requirements*.txt)?
    Cached per run of many files: one directory listing per folder."""
    try:
        names = {entry.name for entry in os.scandir(folder) if entry.is_file()}
    except OSError:
        return False
    return any(m in names for m in MARKERS) or any(
        n.startswith("requirements") and n.endswith(".txt") for n in names
    )


def torch_floor(root: Path) -> tuple[int, int] | None:
    """The lowest torch (major, minor) the project allows, from pyproject dependencies or
    requirements*.txt at ``root`` or above; None when no lower bound is declared."""
    for folder in [root, *root.parents]:
        if not declares(folder):
            continue
        lines: list[str] = []
        pyproject = folder / "pyproject.toml"
        if pyproject.is_file():
            try:
                document = tomllib.loads(pyproject.read_text(encoding="utf-8"))
            except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
                document = {}
            deps = document.get("project", {}).get("dependencies", [])
            lines += [d for d in deps if isinstance(d, str)]
        for requirements in sorted(folder.glob("requirements*.txt")):
            try:
                lines += requirements.read_text(encoding="utf-8").splitlines()
            except (OSError, UnicodeDecodeError):
                continue
        floors = [(int(m[2]), int(m[3])) for m in map(_REQUIREMENT.match, lines) if m]
        if floors:
            return min(floors)
        if lines:  # declared dependencies without a torch bound: do not look further up
            return None
    return None


def gpu_evidence(ctx: Context) -> bool | None:
    """Does the code place work on a GPU? True on semantic evidence (``torch.cuda``, ``.cuda()``,
    ``torch.accelerator``, a "cuda"/"nccl" device or backend argument, ``device_map=``, a Trainer or
    Fabric accelerator other than "cpu", HF/Lightning/Accelerate defaults); False when every
    Trainer/Fabric/Accelerator is told to use the CPU; None when the file says nothing. Help strings and
    comments never count."""
    if "gpu_evidence" not in ctx.memo:
        ctx.memo["gpu_evidence"] = _gpu_evidence(ctx)
    return ctx.memo["gpu_evidence"]  # type: ignore[return-value]  # set just above


def _gpu_evidence(ctx: Context) -> bool | None:
    cpu_only = _framework_on_cpu(ctx)
    if cpu_only is not None:
        return not cpu_only
    if "cuda" in ctx.names and _uses_cuda_api(ctx):
        return True
    if any(ctx.qualname(c.func).startswith("torch.accelerator.") for c in ctx.calls):
        return True
    for call in ctx.calls:
        for kw in call.keywords:
            if kw.arg == "device_map":
                return True
            if kw.arg in _DEVICE_KEYWORDS and _gpu_string(ctx.value(kw.value)):
                return True
    if any(_CUDA_STRING.match(text) for text in ctx.strings):
        return True  # "cuda", "cuda:0", "nccl" as a value (a sentence mentioning CUDA is not one)
    if ctx.framework in {"hf_trainer", "lightning", "accelerate", "deepspeed"}:
        return True  # these place the model on the GPU themselves when one is present
    return None


def _may_name(ctx: Context, roots: tuple[str, ...]) -> bool:
    """Can a resolved name of the file start with one of ``roots`` (top-level modules)? Only if the
    module is imported (an alias resolves to it) or named bare: a cheap test before resolving calls."""
    return any(r in ctx.names for r in roots) or any(v.startswith(roots) for v in ctx.aliases.values())


def _gpu_string(value: object) -> bool:
    return isinstance(value, str) and bool(_DEVICE_STRING.match(value))


def _uses_cuda_api(ctx: Context) -> bool:
    """``torch.cuda.*``, ``x.cuda()``, ``torch.backends.cuda``: the word used as code, not as text."""
    for call in ctx.calls:
        func = call.func
        if isinstance(func, ast.Attribute) and func.attr == "cuda":
            return True
        if ".cuda." in f".{ctx.qualname(func)}.":
            return True
    return any(
        isinstance(node, ast.Attribute) and node.attr == "cuda" and ctx.qualname(node).startswith("torch.")
        for node in ctx.kids
    )


def _framework_on_cpu(ctx: Context) -> bool | None:
    """True when every Trainer/Fabric/TrainingArguments/Accelerator call pins the CPU, False when one
    names a GPU accelerator, None when none says."""
    verdicts: list[bool] = []
    by_name = ctx.calls_by_name
    for call in (c for name in _FRAMEWORK_OBJECTS for c in by_name.get(name, ())):
        for arg in ("accelerator", "use_cpu", "no_cuda", "cpu"):
            kw = keyword(call, arg)
            if kw is None:
                continue
            value = ctx.value(kw.value)
            if arg == "accelerator" and isinstance(value, str):
                verdicts.append(bool(_CPU_ONLY.match(value)))
            elif arg != "accelerator" and isinstance(value, bool):
                verdicts.append(value)
    if not verdicts:
        return None
    return all(verdicts)


def _reseeds_for_others(ctx: Context) -> bool:
    """Does this file call ``.set_epoch(...)`` on behalf of other files: in a function of a module
    that is not itself a script (``utils.begin_epoch(loader, epoch)``)? A sibling script with its own
    ``if __name__ == "__main__":`` re-seeds only its own sampler."""
    if any(_is_main_guard(node) for node in ctx.tree.body):
        return False
    return any(
        isinstance(c.func, ast.Attribute) and c.func.attr == "set_epoch" and _in_function(ctx, c)
        for c in ctx.calls
    )


def _is_main_guard(node: ast.stmt) -> bool:
    """``if __name__ == "__main__":`` at module level."""
    if not isinstance(node, ast.If) or not isinstance(node.test, ast.Compare):
        return False
    names = [node.test.left, *node.test.comparators]
    return any(isinstance(n, ast.Name) and n.id == "__name__" for n in names)


def _in_function(ctx: Context, node: ast.AST) -> bool:
    """Is ``node`` inside a function (code another module can call), not module-level script code?"""
    parent = ctx.parents.get(node)
    while parent is not None and not isinstance(parent, ast.Module):
        if isinstance(parent, ast.FunctionDef | ast.AsyncFunctionDef):
            return True
        parent = ctx.parents.get(parent)
    return False


def _builds_conv_net(ctx: Context, call: ast.Call) -> bool:
    """An ImageNet-scale conv net, where the algorithm choice matters: ``torchvision.models.resnet50()``,
    ``timm.create_model(...)``, or one picked by name (``models.__dict__[args.arch]()``)."""
    func = call.func.value if isinstance(call.func, ast.Subscript) else call.func
    return ctx.qualname(func).startswith(_CONV_NETS)


def _sets_cudnn_benchmark(ctx: Context) -> bool:
    """Does the file turn ``torch.backends.cudnn.benchmark`` on (or leave it to a value decided
    elsewhere)? ``cudnn.benchmark = False`` (a seeded, deterministic run) does not."""
    for node in ctx.assigns:
        for target in node.targets:
            benchmark = (
                isinstance(target, ast.Attribute) and ctx.qualname(target) == "torch.backends.cudnn.benchmark"
            )
            if benchmark and ctx.value(node.value) is not False:
                return True
    return False


def always_deterministic(ctx: Context) -> bool:
    """Does the file ask for deterministic kernels on every run (``cudnn.deterministic = True`` or
    ``torch.use_deterministic_algorithms(True)`` outside any ``if``)? A request under ``if args.seed:``
    is opt-in: the default run is free to benchmark."""
    found: list[ast.AST] = [
        n
        for n in ctx.assigns
        if any(ctx.qualname(t) == "torch.backends.cudnn.deterministic" for t in n.targets)
        and ctx.value(n.value) is True
    ]
    found += [
        c
        for c in ctx.calls_to("torch.use_deterministic_algorithms")
        if c.args and ctx.value(c.args[0]) is True
    ]
    return any(not _conditional(ctx, node) for node in found)


def _conditional(ctx: Context, node: ast.AST) -> bool:
    """Is ``node`` inside an ``if`` of its function or module?"""
    parent = ctx.parents.get(node)
    while parent is not None and not isinstance(parent, ast.FunctionDef | ast.AsyncFunctionDef | ast.Module):
        if isinstance(parent, ast.If):
            return True
        parent = ctx.parents.get(parent)
    return False


def _yields_items(cls: ast.ClassDef) -> bool:
    """A class that yields items (``__getitem__``/``__iter__``) or names Dataset among its bases."""
    methods = {f.name for f in cls.body if isinstance(f, ast.FunctionDef)}
    return bool(methods & {"__getitem__", "__iter__"}) or any("Dataset" in ast.unparse(b) for b in cls.bases)


@dataclass
class Project:
    """What the files linted together tell about each other (see the module docstring)."""

    root: Path | None = None
    gpu: bool = False  # some file of the project places work on a GPU
    torch_floor: tuple[int, int] | None = None  # lowest torch the project allows
    calls_set_epoch: bool = False  # some file calls .set_epoch(...)
    chooses_precision: bool = False  # some file names autocast/bf16/fp16/a precision setting
    conv_net: bool = False  # some file builds a Conv2d/Conv3d/torchvision model
    sets_cudnn_benchmark: bool = False
    uses_distributed_sampler: bool = False  # some file builds a DistributedSampler
    datasets: dict[str, ast.ClassDef] = field(default_factory=dict)  # Dataset subclasses by name
    item_classes: set[str] = field(default_factory=set)  # classes with __getitem__/__iter__ or a Dataset base

    @classmethod
    def of(cls, contexts: list[Context], root: Path | None) -> Project:
        """Collect the facts from every parsed file of one project."""
        from gpuwise.lint.rules import mentions_amp  # rules read Project: imported at run time

        project = cls(root=root, torch_floor=torch_floor(root) if root is not None else None)
        verdicts = [gpu_evidence(ctx) for ctx in contexts]
        project.gpu = any(v is True for v in verdicts)
        for ctx in contexts:
            project.calls_set_epoch |= "set_epoch" in ctx.names and _reseeds_for_others(ctx)
            project.chooses_precision |= mentions_amp(ctx)
            project.conv_net |= _may_name(ctx, _CONV_ROOTS) and any(
                _builds_conv_net(ctx, c) for c in ctx.calls
            )
            project.sets_cudnn_benchmark |= "benchmark" in ctx.names and _sets_cudnn_benchmark(ctx)
            project.uses_distributed_sampler |= "DistributedSampler" in ctx.names
            for node in ctx.classes:
                project.datasets.setdefault(node.name, node)
                if _yields_items(node):
                    project.item_classes.add(node.name)
        return project

    def allows_weights_only_default(self) -> bool:
        """Does every torch the project allows default to ``weights_only=True`` (2.6 and later)?"""
        return self.torch_floor is not None and self.torch_floor >= (2, 6)
