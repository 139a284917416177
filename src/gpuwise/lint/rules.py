"""The checks: each reads a file's `Context` and yields `Hit`s (rule id, node, message, safe edit).

Facts that never change (severity, why, fix per framework, shared finding id) are in `catalog`.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from gpuwise.diagnose.finding import Severity
from gpuwise.lint.context import (
    Context,
    StepCode,
    has_star_kwargs,
    is_backward,
    is_rank_guard,
    keyword,
    subtree,
    words,
)
from gpuwise.lint.datasets import dataset_cost, small_items
from gpuwise.lint.spans import Positions, add_keyword
from gpuwise.lint.types import Edit

__all__ = [
    "AMP_WORDS",
    "CHECKS",
    "FACTORIES",
    "LOADERS",
    "SYNC_METHODS",
    "Check",
    "Hit",
    "accumulation_without_no_sync",
    "check",
    "cpu_tensor_per_step",
    "cuda_sync_in_loop",
    "every_rank_saves",
    "find_unused_parameters",
    "fp16_without_grad_scaler",
    "host_sync_per_step",
    "loader_no_pin_memory",
    "loader_no_workers",
    "no_mixed_precision",
    "non_blocking_from_pageable",
    "optimizer_before_fsdp",
    "sampler_without_set_epoch",
    "torch_load_unsafe",
]

LOADERS = ("torch.utils.data.DataLoader", "torch.utils.data.dataloader.DataLoader")
FACTORIES = tuple(
    f"torch.{name}"
    for name in ("tensor", "zeros", "ones", "full", "arange", "rand", "randn", "randint", "empty", "eye")
)
SYNC_METHODS = frozenset({"item", "cpu", "tolist", "numpy"})
# Any of these in a name, attribute, keyword or string means the author has chosen a precision.
AMP_WORDS = re.compile(
    r"autocast|bf16|fp16|float16|bfloat16|precision|(?<![a-z])(amp|half)(?![a-z])", re.IGNORECASE
)


@dataclass(frozen=True)
class Hit:
    """One place a rule fires: the node (for its line and column), the message, an optional
    edit for --fix, and a milder severity when this case deserves one."""

    rule: str
    node: ast.AST
    message: str
    edit: Edit | None = None
    severity: Severity | None = None  # below the rule's own when this case is milder (config still wins)


Check = Callable[[Context, Positions], Iterator[Hit]]
CHECKS: list[Check] = []


def check(func: Check) -> Check:
    """Register a rule function (ctx, positions) -> hits: every registered check runs on every file."""
    CHECKS.append(func)
    return func


def _argument(call: ast.Call, name: str, position: int) -> tuple[bool, ast.expr | None]:
    """(given, expression) of an argument passed by keyword or at ``position``."""
    kw = keyword(call, name)
    if kw is not None:
        return True, kw.value
    if len(call.args) > position and not any(isinstance(a, ast.Starred) for a in call.args[: position + 1]):
        return True, call.args[position]
    return False, None


def _loaders(ctx: Context) -> list[ast.Call]:
    """DataLoader calls, except one-shot ones (``next(iter(DataLoader(...)))`` reads one batch)."""
    if "loaders" not in ctx.memo:
        ctx.memo["loaders"] = list(_find_loaders(ctx))
    return ctx.memo["loaders"]  # type: ignore[return-value]  # memo holds what _find_loaders built


def _find_loaders(ctx: Context) -> Iterator[ast.Call]:
    for call in ctx.calls_to(*LOADERS):
        if has_star_kwargs(call):
            continue
        parent = ctx.parents.get(call)
        if (
            isinstance(parent, ast.Call)
            and isinstance(parent.func, ast.Name)
            and parent.func.id in {"iter", "next"}
        ):
            continue
        yield call


_COST_NOTE = {"heavy": "", "unknown": ""}  # the costs that get a finding (graded by severity); message kept


def _graded_loaders(ctx: Context) -> Iterator[tuple[ast.Call, str]]:
    """(DataLoader call, per-item cost) for loaders whose dataset does CPU work per item, or may:
    tensors already in memory and pre-tokenized rows are left alone (collating them costs
    milliseconds)."""
    for call in _loaders(ctx):
        cost = dataset_cost(ctx, call)
        if cost in _COST_NOTE:
            yield call, cost


@check
def loader_no_workers(ctx: Context, pos: Positions) -> Iterator[Hit]:
    """DataLoader (or TrainingArguments) without num_workers in GPU code: batches are prepared
    in the training process while the GPU waits. Medium when the dataset visibly reads, decodes or
    augments per item, low when its work cannot be seen, silent for in-memory or tokenized data."""
    if not ctx.uses_gpu:
        return
    for call, cost in _graded_loaders(ctx):
        given, expr = _argument(call, "num_workers", 5)
        severity: Severity | None = None if cost == "heavy" else "low"
        if not given:
            message = "DataLoader without num_workers: batches load in the training process"
            yield Hit("loader_no_workers", call, message + _COST_NOTE[cost], severity=severity)
        elif ctx.value(expr) == 0:
            message = "DataLoader(num_workers=0): batches load in the training process"
            yield Hit("loader_no_workers", call, message + _COST_NOTE[cost], severity=severity)
    for call in ctx.calls_to("transformers.TrainingArguments"):
        if not has_star_kwargs(call):
            kw = keyword(call, "dataloader_num_workers")
            if kw is None or ctx.value(kw.value) == 0:
                yield Hit(
                    "loader_no_workers", call, "TrainingArguments without dataloader_num_workers (default 0)"
                )


@check
def loader_no_pin_memory(ctx: Context, pos: Positions) -> Iterator[Hit]:
    """DataLoader without pin_memory=True in GPU code: host->device copies go through a pageable
    buffer (slower, cannot overlap compute). Fixable."""
    if not ctx.uses_gpu:
        return
    for call, _cost in _graded_loaders(ctx):
        if small_items(ctx, call):
            continue
        given, expr = _argument(call, "pin_memory", 7)
        if not given:
            edit = add_keyword(pos, call, "pin_memory=True")
            yield Hit("loader_no_pin_memory", call, "DataLoader without pin_memory=True", edit)
        elif ctx.value(expr) is False:
            yield Hit("loader_no_pin_memory", call, "DataLoader(pin_memory=False) on GPU code")


def _sync_call(ctx: Context, node: ast.AST) -> str:
    """The name of a host-device synchronizing call, or ''."""
    if not isinstance(node, ast.Call):
        return ""
    func = node.func
    if isinstance(func, ast.Attribute):
        return _sync_method(ctx, node, func)
    if isinstance(func, ast.Name):
        return _loss_to_host(ctx, node, func)
    return ""


def _sync_method(ctx: Context, node: ast.Call, func: ast.Attribute) -> str:
    """``t.item()``, ``t.cpu()``, ``t.tolist()`` ... (not on a NumPy array) or ``t.to("cpu")``, else ''."""
    if func.attr in SYNC_METHODS and not node.args and not node.keywords:
        numpy_owner = ctx.aliases.get(ctx.root_name(func.value), "").split(".")[0] == "numpy"
        return "" if func.attr in {"numpy", "tolist"} and numpy_owner else f".{func.attr}()"
    if func.attr == "to" and node.args and ctx.value(node.args[0]) == "cpu":
        return '.to("cpu")'
    return ""


def _loss_to_host(ctx: Context, node: ast.Call, func: ast.Name) -> str:
    """``print(loss)``, ``float(loss)``, ``int(loss)`` on a loss tensor (copies it to the host), else ''."""
    if func.id in {"print", "float", "int"} and node.args:
        mentioned = {w for a in node.args for w in words(a)}
        if mentioned & ctx.loss_names and not any(  # print(loss.item()): the .item() is the finding
            _sync_call(ctx, a) for arg in node.args for a in ast.walk(arg)
        ):
            return f"{func.id}(<loss tensor>)"
    return ""


def _step_message(what: str, via: tuple[ast.Call, ...]) -> str:
    through = f" (called every step from line {via[0].lineno})" if via else ""
    return f"{what} every training step{through}"


@check
def host_sync_per_step(ctx: Context, pos: Positions) -> Iterator[Hit]:
    """A host-device sync (.item(), .cpu(), .tolist(), print(loss), ...) reached every training
    step: the host stops queueing work until the GPU catches up. CPU-only code has no GPU to wait for."""
    if not ctx.uses_gpu:
        return
    seen: set[ast.Call] = set()
    synced = {id(code.loop) for code in _synchronizes(ctx)}  # the step already waits: reported there
    synced |= _sampling_loops(ctx)  # the step decodes token by token: it waits at every token anyway
    synced |= _fixed_batch_loops(ctx)  # one batch, drawn before the loop: a timing or overfit run
    for code in ctx.step_code:
        name = _sync_call(ctx, code.node)
        if name and code.node not in seen and id(code.loop) not in synced:
            seen.add(code.node)
            yield Hit("host_sync_per_step", code.node, _step_message(f"{name} waits for the GPU", code.via))


def _fixed_batch_loops(ctx: Context) -> set[int]:
    """Step loops that feed the model one batch drawn once before the loop (``x, y = next(it)``
    outside, ``loss = model(x, y)`` inside, ``x``/``y`` never rebound): a benchmark or an overfit
    check, not training on a data stream. Its waits time the model; they slow no training run."""
    found = ctx.memo.get("fixed_batch_loops")
    if found is None:
        drawn = {
            t.id
            for a in ctx.assigns
            if isinstance(a.value, ast.Call)
            and isinstance(a.value.func, ast.Name)
            and a.value.func.id == "next"
            for target in a.targets
            for t in ast.walk(target)
            if isinstance(t, ast.Name)
        }
        found = set()
        if drawn:
            losses = _loss_assigns(ctx)
            found = {id(loop) for loop in ctx.step_loops if _feeds_fixed(ctx, loop, drawn, losses)}
        ctx.memo["fixed_batch_loops"] = found
    return found  # type: ignore[return-value]  # memo holds what this function built


def _loss_assigns(ctx: Context) -> list[tuple[ast.Assign, set[str]]]:
    """``loss = f(a, b)`` statements of the file (a call assigned to a back-propagated name), with
    the plain names passed to the call."""
    found = []
    for node in ctx.assigns:
        if isinstance(node.value, ast.Call):
            targets = {t.id for target in node.targets for t in subtree(target) if type(t) is ast.Name}
            if targets & ctx.loss_names:
                found.append((node, {a.id for a in node.value.args if isinstance(a, ast.Name)}))
    return found


def _feeds_fixed(
    ctx: Context, loop: ast.AST, drawn: set[str], losses: list[tuple[ast.Assign, set[str]]]
) -> bool:
    """Is every loss computed in ``loop`` fed only names drawn before it and never rebound in it?
    The loop's own nodes are walked only when its loss inputs are all drawn ones."""
    inputs = [names for node, names in losses if _within(ctx, node, loop)]
    if not inputs or not all(names and names <= drawn for names in inputs):
        return False
    bound = {n.id for n in subtree(loop) if type(n) is ast.Name and type(n.ctx) is ast.Store}
    return not any(names & bound for names in inputs)


def _within(ctx: Context, node: ast.AST, outer: ast.AST) -> bool:
    """Is ``outer`` an ancestor of ``node``?"""
    parent = ctx.parents.get(node)
    while parent is not None and parent is not outer:
        parent = ctx.parents.get(parent)
    return parent is outer


def _sampling_loops(ctx: Context) -> set[int]:
    """Step loops that sample from the model every step (RL rollouts: ``model.generate(...)``,
    ``engine.generate_batch(...)``, directly or through ``next()`` of a generator defined in the file).
    Autoregressive decoding reads each token on the host, so the step already waits for the GPU once per
    token; one more ``.item()`` for a log line costs nothing measurable there."""
    loops: set[int] = set()
    if not _DECODERS & ctx.names:  # no decoding call anywhere in the file
        return loops
    for code in ctx.step_code:
        if id(code.loop) not in loops and (_generates(code.node) or _next_of_sampler(ctx, code.node)):
            loops.add(id(code.loop))
    return loops


_DECODERS = frozenset({"generate", "generate_batch"})  # HF/vLLM ``model.generate``, nanochat's engine


def _generates(node: ast.AST) -> bool:
    """An autoregressive decoding call (``generate_square_subsequent_mask`` is not one)."""
    func = node.func if isinstance(node, ast.Call) else None
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
    return name in _DECODERS


def _next_of_sampler(ctx: Context, call: ast.Call) -> bool:
    """``next(rollouts)`` where ``rollouts = make_rollouts()`` and that function of the file generates."""
    if not (isinstance(call.func, ast.Name) and call.func.id == "next" and call.args):
        return False
    source = call.args[0]
    if not isinstance(source, ast.Name):
        return False
    for assign in ctx.assigns:
        value = assign.value
        named = any(isinstance(t, ast.Name) and t.id == source.id for t in assign.targets)
        if named and isinstance(value, ast.Call) and isinstance(value.func, ast.Name):
            for func in ctx.functions.get(value.func.id, []):
                if any(_generates(node) for node in ast.walk(func)):
                    return True
    return False


@check
def cuda_sync_in_loop(ctx: Context, pos: Positions) -> Iterator[Hit]:
    """torch.cuda.synchronize / empty_cache / ipc_collect reached every training step. A synchronize()
    under an opt-in flag (``if args.sync_timing:``, off unless asked) is a measurement choice: quiet."""
    first: dict[tuple[int, str], StepCode] = {}  # (loop, API) -> its first call; later ones are listed
    also: dict[tuple[int, str], list[int]] = {}
    for code in _synchronizes(ctx):
        key = (id(code.loop), ctx.qualname(code.node.func))
        if key in first:
            also[key].append(code.node.lineno)
        else:
            first[key], also[key] = code, []
    for key, code in first.items():
        hosts = sorted(
            {c.node.lineno for c in ctx.step_code if c.loop is code.loop and _sync_call(ctx, c.node)}
        )
        lines = [*also[key], *hosts] if ctx.is_api(code.node.func, "torch.cuda.synchronize") else also[key]
        unique = sorted(set(lines))
        plural = "s" if len(unique) > 1 else ""
        more = f"; the same step also waits at line{plural} {', '.join(map(str, unique))}" if unique else ""
        message = _step_message(f"{key[1]}()", code.via) + more
        yield Hit("cuda_sync_in_loop", code.node, message)


def _synchronizes(ctx: Context) -> list[StepCode]:
    """torch.cuda.synchronize/empty_cache/ipc_collect reached every step, once per call site, without
    the opt-in ones (a synchronize() under ``if args.flag:``)."""
    found = ctx.memo.get("synchronizes")
    if found is None:
        found, seen = list[StepCode](), set[ast.Call]()
        targets = ("torch.cuda.synchronize", "torch.cuda.empty_cache", "torch.cuda.ipc_collect")
        for code in ctx.step_code:
            node = code.node
            if node in seen or not ctx.is_api(node.func, *targets):
                continue
            seen.add(node)
            opt_in = ctx.is_api(node.func, "torch.cuda.synchronize") and (
                any(_under_flag(ctx, n) for n in (node, *code.via))
                or id(code.loop) in _fixed_batch_loops(ctx)
            )
            if not opt_in:
                found.append(code)
        ctx.memo["synchronizes"] = found
    return found  # type: ignore[return-value]  # memo holds what this function built


def _under_flag(ctx: Context, node: ast.AST) -> bool:
    """Is ``node`` in the body of ``if flag:`` / ``if args.flag:`` (a bare switch, no comparison)?"""
    child, parent = node, ctx.parents.get(node)
    while parent is not None and not isinstance(parent, _SCOPES):
        if (
            isinstance(parent, ast.If)
            and child in parent.body
            and isinstance(parent.test, ast.Name | ast.Attribute)
        ):
            return True
        child, parent = parent, ctx.parents.get(parent)
    return False


def mentions_amp(ctx: Context) -> bool:
    """Does the file name autocast, a 16-bit dtype or a precision setting anywhere?"""
    if "amp" not in ctx.memo:
        # one search over the words joined by newlines: no pattern spans one, and a newline is no
        # letter for the (?<![a-z]) / (?![a-z]) edges, so this is a search of each word in turn
        ctx.memo["amp"] = _amp_search("\n".join((*ctx.names, *ctx.strings)))
    return bool(ctx.memo["amp"])


_AMP_PLAIN = ("autocast", "bf16", "fp16", "float16", "bfloat16", "precision")  # AMP_WORDS' plain words
_AMP_BOUNDED = re.compile(r"(?<![a-z])(amp|half)(?![a-z])")  # its bounded ones, for lower-case ASCII


def _amp_search(text: str) -> bool:
    """``AMP_WORDS.search(text)``: on ASCII text as substring tests of the lower-cased text (a
    case-insensitive pattern scans ten times slower); other text goes to the pattern itself."""
    if not text.isascii():
        return AMP_WORDS.search(text) is not None
    low = text.lower()
    if any(word in low for word in _AMP_PLAIN):
        return True
    return ("amp" in low or "half" in low) and _AMP_BOUNDED.search(low) is not None


def _chooses_precision(ctx: Context) -> bool:
    """The file or another file of its project (a model that casts itself) chooses a precision."""
    return mentions_amp(ctx) or (ctx.project is not None and ctx.project.chooses_precision)


# A fixed, literal-sized model under 2 M weights (the MNIST example nets: 1.2 M; ResNet-18: 11.7 M) runs
# a step of a few tens of kernels of microseconds each: launch-bound, so 16-bit math saves nothing measurable.
_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)  # tuples: isinstance on hot paths
_SCOPES = (*_FUNCTIONS, ast.Module)
_TOY_WEIGHTS = 2_000_000
_LAYERS = ("torch.nn.Linear", "torch.nn.Conv1d", "torch.nn.Conv2d", "torch.nn.Embedding", "torch.nn.Bilinear")


def _toy_model(ctx: Context) -> bool:
    """The file's model is a few literal-sized layers (``torch.nn.Linear(20, 1)`` in a DDP tutorial,
    the MNIST ``Net``): no model zoo or config-sized layer, and the literal sizes total under 2 M weights."""
    names = [ctx.qualname(c.func) for c in ctx.calls]
    if any(w in n for n in names for w in ("from_pretrained", ".models.", "create_model", "from_config")):
        return False
    layers = [c for c, n in zip(ctx.calls, names, strict=True) if n.startswith(_LAYERS)]
    if not layers or not _models_built_here(ctx):
        return False
    total = 0
    for layer in layers:
        values = [ctx.value(a) for a in layer.args[:3]]
        sizes = [v for v in values if isinstance(v, int) and not isinstance(v, bool)]
        if len(sizes) < 2 or len(sizes) != len(values):
            return False
        kernel = sizes[2] ** 2 if len(sizes) == 3 and "Conv" in ctx.qualname(layer.func) else 1
        total += sizes[0] * sizes[1] * kernel
    return total < _TOY_WEIGHTS


def _models_built_here(ctx: Context) -> bool:
    """Is every model (a name whose ``.parameters()`` an optimizer takes) assigned in this file from
    torch.nn layers or a class of this file (``model = Net().to(device)``)? ``model = GPT(cfg)``
    imported from elsewhere is not: its size cannot be read here."""
    models = {
        c.func.value.id
        for c in ctx.calls
        if isinstance(c.func, ast.Attribute)
        and c.func.attr in {"parameters", "named_parameters"}
        and isinstance(c.func.value, ast.Name)
    }
    own = {n.name for n in ctx.kids if isinstance(n, ast.ClassDef)}
    seen = False
    for node in ctx.kids:
        if not isinstance(node, ast.Assign) or not any(
            isinstance(t, ast.Name) and t.id in models for t in node.targets
        ):
            continue
        value = node.value
        while (
            isinstance(value, ast.Call)
            and isinstance(value.func, ast.Attribute)
            and value.func.attr
            in {
                "to",
                "cuda",
            }
        ):
            value = value.func.value
        if not isinstance(value, ast.Call):
            return False
        name = ctx.qualname(value.func)
        if not (name.startswith("torch.nn.") or name in own):
            return False
        seen = True
    return seen


@check
def no_mixed_precision(ctx: Context, pos: Positions) -> Iterator[Hit]:
    """A plain PyTorch GPU training loop with no autocast and no 16-bit dtype anywhere: matmuls
    run in fp32, several times slower than bf16/fp16 tensor cores."""
    if not ctx.uses_gpu or _chooses_precision(ctx):
        return
    if ctx.framework == "pytorch" and ctx.step_loops and not _toy_model(ctx):
        backward = next(
            (c.node for c in ctx.step_code if is_backward(c.node)),
            ctx.step_loops[0],
        )
        yield Hit(
            "no_mixed_precision", backward, "GPU training loop runs in fp32 (no autocast, no 16-bit dtype)"
        )
    if ctx.framework == "hf_trainer":
        for call in ctx.calls_to("transformers.TrainingArguments"):
            if not has_star_kwargs(call):
                message = "TrainingArguments without bf16=True or fp16=True: fp32 training"
                yield Hit("no_mixed_precision", call, message)
    if ctx.framework == "lightning":
        for call in ctx.calls_to(
            "lightning.Trainer", "lightning.pytorch.Trainer", "pytorch_lightning.Trainer"
        ):
            if not has_star_kwargs(call):
                yield Hit("no_mixed_precision", call, "Lightning Trainer without precision=: fp32 training")
    for call in ctx.calls_to("lightning.Fabric", "lightning.fabric.Fabric", "lightning_fabric.Fabric"):
        launched = (
            not call.args and not call.keywords
        )  # Fabric() takes its settings from `fabric run --precision`
        if not has_star_kwargs(call) and keyword(call, "precision") is None and not launched:
            yield Hit("no_mixed_precision", call, "Fabric without precision=: fp32 training")


@check
def fp16_without_grad_scaler(ctx: Context, pos: Positions) -> Iterator[Hit]:
    """float16 autocast in a training script without GradScaler: small gradients underflow to zero."""
    if ctx.framework != "pytorch" or not any(is_backward(c) for c in ctx.calls):
        return
    if any("GradScaler" in w or w == "scale" for c in ctx.calls for w in words(c.func)):
        return
    for call in ctx.calls_to("torch.autocast", "torch.amp.autocast", "torch.cuda.amp.autocast"):
        dtype = keyword(call, "dtype")
        device = keyword(call, "device_type")
        device_value = ctx.value(device.value if device else call.args[0] if call.args else None)
        cuda_default = ctx.is_api(call.func, "torch.cuda.amp.autocast") or device_value == "cuda"
        if (dtype is not None and ctx.value(dtype.value) == "float16") or (dtype is None and cuda_default):
            yield Hit(
                "fp16_without_grad_scaler", call, "float16 autocast in a training script without GradScaler"
            )


@check
def sampler_without_set_epoch(ctx: Context, pos: Positions) -> Iterator[Hit]:
    """DistributedSampler without set_epoch(): every epoch sees the same shuffle."""
    if ctx.framework not in {"pytorch", "deepspeed"}:
        return
    if any(isinstance(c.func, ast.Attribute) and c.func.attr == "set_epoch" for c in ctx.calls):
        return
    if ctx.project is not None and ctx.project.calls_set_epoch:
        return  # re-seeded in a helper or another module of the project
    for call in ctx.calls_to(
        "torch.utils.data.distributed.DistributedSampler", "torch.utils.data.DistributedSampler"
    ):
        shuffle = keyword(call, "shuffle")
        if shuffle is not None and ctx.value(shuffle.value) is not True:
            continue  # no shuffle (or decided elsewhere): the epoch seeds nothing
        yield Hit("sampler_without_set_epoch", call, "DistributedSampler, but set_epoch() is never called")


def _rank_guarded(ctx: Context, node: ast.AST, depth: int = 0) -> bool:
    """Whether only one process reaches ``node``: under a rank test, after an early return for the
    other ranks, or in a function every caller guards. Unknown callers count as guarded (quiet)."""
    child, parent = node, ctx.parents.get(node)
    while parent is not None:
        if isinstance(parent, ast.If) and child is not parent.test and is_rank_guard(parent.test):
            return True
        body = getattr(parent, "body", None)
        if isinstance(body, list) and child in body:
            for earlier in body[: body.index(child)]:
                if (
                    isinstance(earlier, ast.If)
                    and is_rank_guard(earlier.test)
                    and any(isinstance(s, ast.Return) for s in earlier.body)
                ):
                    return True
        if isinstance(parent, _FUNCTIONS):
            sites = ctx.call_sites(parent)
            return not sites or depth >= 3 or all(_rank_guarded(ctx, s, depth + 1) for s in sites)
        child, parent = parent, ctx.parents.get(parent)
    return False


@check
def every_rank_saves(ctx: Context, pos: Positions) -> Iterator[Hit]:
    """torch.save in distributed code with no rank check on the way: every rank writes the same
    checkpoint."""
    if not ctx.distributed or ctx.framework not in {"pytorch", "deepspeed"}:
        return
    for call in ctx.calls_to("torch.save"):
        if not _rank_guarded(ctx, call):
            yield Hit(
                "every_rank_saves", call, "torch.save runs on every rank (no rank check on the way here)"
            )


@check
def find_unused_parameters(ctx: Context, pos: Positions) -> Iterator[Hit]:
    """find_unused_parameters=True (DDP or TrainingArguments): an extra autograd-graph traversal
    every step."""
    for call in ctx.calls:
        for kw in call.keywords:
            if (
                kw.arg in {"find_unused_parameters", "ddp_find_unused_parameters"}
                and ctx.value(kw.value) is True
            ):
                yield Hit(
                    "find_unused_parameters",
                    kw.value,
                    f"{kw.arg}=True: an extra autograd-graph pass every step",
                )
            if kw.arg == "strategy" and ctx.value(kw.value) == "ddp_find_unused_parameters_true":
                yield Hit("find_unused_parameters", kw.value, 'strategy="ddp_find_unused_parameters_true"')


def _steps(node: ast.AST) -> bool:
    return any(
        isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute) and c.func.attr == "step"
        for c in ast.walk(node)
    )


def _accumulates(loop: ast.AST) -> bool:
    """Several backward() per optimizer step: a step under ``if ... % k``, or an inner backward-only loop."""
    for node in ast.walk(loop):
        modulo = isinstance(node, ast.If) and any(
            isinstance(s, ast.BinOp) and isinstance(s.op, ast.Mod) for s in ast.walk(node.test)
        )
        if modulo and _steps(node):
            return True
        inner = node is not loop and isinstance(node, ast.For | ast.While) and not _steps(node)
        if inner and any(isinstance(c, ast.Call) and is_backward(c) for c in ast.walk(node)):
            return True
    return False


@check
def accumulation_without_no_sync(ctx: Context, pos: Positions) -> Iterator[Hit]:
    """Plain DDP, or Accelerate without ``accelerator.accumulate`` (its backward all-reduces each call)."""
    if ctx.framework == "pytorch":
        if not ctx.uses_api("torch.nn.parallel.DistributedDataParallel"):
            return
    elif ctx.framework != "accelerate":
        return
    if ctx.names & {"no_sync", "require_backward_grad_sync", "accumulate"}:
        return
    for loop in ctx.step_loops:
        if _accumulates(loop):
            backward = next(n for n in ast.walk(loop) if isinstance(n, ast.Call) and is_backward(n))
            yield Hit(
                "accumulation_without_no_sync",
                backward,
                "gradient accumulation all-reduces on every backward (no no_sync/accumulate)",
            )


@check
def torch_load_unsafe(ctx: Context, pos: Positions) -> Iterator[Hit]:
    """weights_only=False unpickles code on every torch: high. Unset is safe on torch >= 2.6 (its default
    became True) but not on older ones: medium, and the fix spells the safe choice out."""
    default_safe = ctx.project is not None and ctx.project.allows_weights_only_default()
    for call in ctx.calls_to("torch.load"):
        if has_star_kwargs(call):
            continue
        kw = keyword(call, "weights_only")
        if kw is None and (default_safe or _in_safe_globals(ctx, call)):
            continue  # torch >= 2.6 required (weights_only=True by default), or an explicit allow-list
        if kw is None:
            edit = add_keyword(pos, call, "weights_only=True")
            unsafe = Edit(edit.start, edit.end, edit.text, safe=False) if edit else None
            message = "torch.load without weights_only: unpickles arbitrary code on torch < 2.6"
            yield Hit("torch_load_unsafe", call, message, unsafe, severity="medium")
        elif ctx.value(kw.value) is False:
            message = "torch.load(weights_only=False) unpickles arbitrary code on every torch version"
            yield Hit("torch_load_unsafe", call, message)


def _in_safe_globals(ctx: Context, call: ast.Call) -> bool:
    """Inside ``with torch.serialization.safe_globals([...]):``: the author loads with weights_only."""
    parent = ctx.parents.get(call)
    while parent is not None:
        if isinstance(parent, ast.With | ast.AsyncWith) and any(
            isinstance(item.context_expr, ast.Call)
            and ctx.qualname(item.context_expr.func).endswith("safe_globals")
            for item in parent.items
        ):
            return True
        parent = ctx.parents.get(parent)
    return False


@check
def non_blocking_from_pageable(ctx: Context, pos: Positions) -> Iterator[Hit]:
    """non_blocking=True copies while the DataLoader does not pin memory: from pageable memory
    the copy is synchronous anyway."""
    loaders = _loaders(ctx)
    if not loaders or any(
        isinstance(c.func, ast.Attribute) and c.func.attr == "pin_memory" for c in ctx.calls
    ):
        return
    for loader in loaders:
        given, expr = _argument(loader, "pin_memory", 7)
        if given and ctx.value(expr) is not False:  # pinned, or decided elsewhere
            return
    for call in ctx.calls:
        kw = keyword(call, "non_blocking")
        if (
            isinstance(call.func, ast.Attribute)
            and call.func.attr in {"to", "cuda"}
            and kw
            and ctx.value(kw.value) is True
        ):
            yield Hit(
                "non_blocking_from_pageable",
                call,
                "non_blocking=True, but the DataLoader does not pin memory",
            )


@check
def cpu_tensor_per_step(ctx: Context, pos: Positions) -> Iterator[Hit]:
    """A tensor built on the CPU and moved with .to()/.cuda() every step: build it on the device
    (device=...) and skip the copy."""
    seen: set[ast.Call] = set()
    for code in ctx.step_code:
        node = code.node
        if not (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in {"to", "cuda"}
        ):
            continue
        made = node.func.value
        if (
            isinstance(made, ast.Call)
            and ctx.is_api(made.func, *FACTORIES)
            and keyword(made, "device") is None
            and node not in seen
        ):
            seen.add(node)
            yield Hit(
                "cpu_tensor_per_step",
                node,
                _step_message(f"{ctx.qualname(made.func)}(...) is built on the CPU and copied", code.via),
            )


def _parameters_of(call: ast.Call) -> str:
    """``model`` for ``Optimizer(model.parameters(), ...)``; '' otherwise."""
    for arg in call.args[:1]:
        if (
            isinstance(arg, ast.Call)
            and isinstance(arg.func, ast.Attribute)
            and arg.func.attr == "parameters"
        ):
            owner = arg.func.value
            return owner.id if isinstance(owner, ast.Name) else ""
    return ""


@check
def optimizer_before_fsdp(ctx: Context, pos: Positions) -> Iterator[Hit]:
    """An optimizer built on model.parameters() before FSDP wraps the model: it holds the
    unsharded parameters, not the ones that train."""
    wrappers = (
        "torch.distributed.fsdp.FullyShardedDataParallel",
        "torch.distributed.fsdp.fully_shard",
        "torch.distributed._composable.fsdp.fully_shard",
    )
    wraps = [c for c in ctx.calls_to(*wrappers) if c.args and isinstance(c.args[0], ast.Name)]
    if not wraps:
        return
    for call in ctx.calls:
        model = _parameters_of(call)
        if not model or not ctx.qualname(call.func).startswith(("torch.optim.", "bitsandbytes.")):
            continue
        for wrap in wraps:
            same_scope = _scope_of(ctx, wrap) is _scope_of(ctx, call)
            if same_scope and wrap.args[0].id == model and wrap.lineno > call.lineno:  # type: ignore[attr-defined]  # wraps keeps Name first args only
                yield Hit(
                    "optimizer_before_fsdp",
                    call,
                    f"optimizer built on {model}.parameters() before FSDP wraps {model} (line {wrap.lineno})",
                )
                break


def _scope_of(ctx: Context, node: ast.AST) -> ast.AST | None:
    parent = ctx.parents.get(node)
    while parent is not None and not isinstance(parent, _SCOPES):
        parent = ctx.parents.get(parent)
    return parent
