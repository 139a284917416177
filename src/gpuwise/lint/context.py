"""What a file is, in the terms the rules need: imports and aliases, constants, framework, GPU and
distributed use, the training loop, and which code runs every step.

The training (step) loop is the innermost loop whose body — following calls into functions of the
same file — calls both ``backward()`` and ``.step()``; code inside it runs every step unless it sits
under a periodic guard (``if step % log_every == 0:``, ``if i == 0:``, ``if args.log:``).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import cached_property
from operator import attrgetter
from typing import TYPE_CHECKING, Any, Literal

from gpuwise.lint.walk import FAST_CHILDREN as _FAST_CHILDREN
from gpuwise.lint.walk import children

if TYPE_CHECKING:
    from gpuwise.lint.project import Project

__all__ = [
    "BACKWARD",
    "CALL_DEPTH",
    "FRAMEWORKS",
    "STEP_METHODS",
    "Context",
    "Framework",
    "FunctionNode",
    "Loop",
    "Reach",
    "StepCode",
    "children",
    "has_star_kwargs",
    "is_backward",
    "is_periodic_guard",
    "is_rank_guard",
    "keyword",
    "subtree",
    "words",
]

Framework = Literal["pytorch", "hf_trainer", "lightning", "accelerate", "deepspeed"]
FRAMEWORKS: tuple[Framework, ...] = ("pytorch", "hf_trainer", "lightning", "accelerate", "deepspeed")

STEP_METHODS = ("training_step", "compute_loss")  # Lightning / HF Trainer hooks run once per step
CALL_DEPTH = 3  # how deep the linter follows same-file calls from a loop
Loop = ast.For | ast.AsyncFor | ast.While
FunctionNode = ast.FunctionDef | ast.AsyncFunctionDef
# isinstance tuples for hot paths (an ``A | B`` union is built anew at every evaluation)
_CHAINED = (ast.Attribute, ast.Call, ast.Subscript)
_DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)

_PERIODIC = re.compile(
    r"log|print|eval|valid|save|ckpt|checkpoint|interval|every|freq|verbose|debug|display|report|"
    r"sample|visual|plot|wandb|tensorboard|writer|profil|first|last|warmup",
    re.IGNORECASE,
)
_OPTIMIZER = re.compile(r"optim|opt\b|^opt|scaler", re.IGNORECASE)
_RANK = re.compile(
    r"rank|master|main_process|is_main|gpu_id|global_zero|world_process_zero|process_index|is_local_main",
    re.IGNORECASE,
)


def subtree(node: ast.AST) -> list[ast.AST]:
    """Every node under ``node`` (itself included), in no set order: ast.walk over the fields that
    can hold names, calls and constants (``children``), at a third of its cost."""
    out: list[ast.AST] = []
    stack = [node]
    while stack:
        current = stack.pop()
        out.append(current)
        kind = type(current)
        if kind is not ast.Name and kind is not ast.Constant:
            stack.extend(children(current))
    return out


def words(node: ast.AST) -> Iterator[str]:
    """Identifiers, attribute names and string constants mentioned in an expression."""
    return _words_of(subtree(node))


def _words_of(nodes: list[ast.AST]) -> Iterator[str]:
    for sub in nodes:
        if isinstance(sub, ast.Name):
            yield sub.id
        elif isinstance(sub, ast.Attribute):
            yield sub.attr
        elif isinstance(sub, ast.Constant) and isinstance(sub.value, str):
            yield sub.value


def is_periodic_guard(test: ast.expr) -> bool:
    """A condition true on a few steps only: a modulo, an equality with a constant, or a logging flag."""
    nodes = subtree(test)
    for sub in nodes:
        if isinstance(sub, ast.BinOp) and isinstance(sub.op, ast.Mod):
            return True
        if (
            isinstance(sub, ast.Compare)
            and any(isinstance(op, ast.Eq) for op in sub.ops)
            and any(isinstance(c, ast.Constant) and isinstance(c.value, int) for c in sub.comparators)
            and not is_rank_guard(sub)
        ):
            return True
    # one search of the words joined by newlines (the pattern's words hold none): a search per word
    return _PERIODIC.search("\n".join(_words_of(nodes))) is not None


def is_rank_guard(test: ast.expr) -> bool:
    """A condition that selects one process: ``rank == 0``, ``is_main_process``, ``self.gpu_id == 0``."""
    return _RANK.search("\n".join(words(test))) is not None  # as in `is_periodic_guard`


BACKWARD = frozenset({"backward", "manual_backward"})


@dataclass(slots=True)
class Reach:
    """What a stretch of code does, following same-file calls: the facts that find the step loop."""

    backward: bool = False
    step: bool = False
    loops: list[Loop] = field(default_factory=list)

    def add(self, other: Reach) -> None:
        """Merge what `other` (a called function's reach) does into this one."""
        self.backward |= other.backward
        self.step |= other.step
        self.loops.extend(other.loops)


@dataclass(slots=True)
class StepCode:
    """A call that runs every step, reached from ``loop`` (through ``via`` calls, if any)."""

    node: ast.Call
    loop: ast.AST  # the step loop, or a framework's per-step method (training_step)
    via: tuple[ast.Call, ...] = ()


@dataclass
class Context:
    """One file's syntax tree indexed once (parents, children, names, strings, calls, loops,
    functions, import aliases, module constants) with the questions rules ask of it: what a name
    resolves to, which framework the file uses, where the training step runs. Results are
    memoized per file so twenty rules cost about one pass."""

    tree: ast.Module
    text: str
    aliases: dict[str, str] = field(default_factory=dict)  # local name -> dotted import path
    constants: dict[str, ast.expr] = field(default_factory=dict)  # module-level NAME = literal
    functions: dict[str, list[FunctionNode]] = field(default_factory=dict)  # by name (methods too)
    calls: list[ast.Call] = field(default_factory=list)  # every call in the file
    assume_gpu: bool = False  # known to run on a GPU whatever the text says
    parents: dict[ast.AST, ast.AST] = field(default_factory=dict)  # node -> parent (leaves: none)
    names: set[str] = field(default_factory=set)  # every identifier, attribute and keyword name
    strings: list[str] = field(default_factory=list)  # every string constant
    loops: list[Loop] = field(default_factory=list)
    assigns: list[ast.Assign] = field(default_factory=list)  # every ``a = b`` statement
    classes: list[ast.ClassDef] = field(default_factory=list)
    memo: dict[str, object] = field(default_factory=dict)  # per-file results rules share
    imported: dict[tuple[str, ...], bool] = field(default_factory=dict)  # `imports` results
    qualnames: dict[ast.AST, str] = field(default_factory=dict)  # node -> resolved dotted name
    kids: dict[ast.AST, list[ast.AST]] = field(default_factory=dict)  # node -> children (leaves: none)
    walks: dict[ast.AST, list[ast.AST]] = field(default_factory=dict)  # calls_and_loops results
    guards: dict[ast.AST, bool] = field(default_factory=dict)  # condition -> is_periodic_guard
    reaches: dict[tuple[ast.AST, int], Reach] = field(default_factory=dict)  # (function, depth) -> Reach
    sites: dict[ast.AST, list[ast.Call]] = field(default_factory=dict)  # call_sites results
    found_calls: dict[tuple[str, ...], list[ast.Call]] = field(default_factory=dict)  # calls_to results
    project: Project | None = None  # facts of the files linted with this one (set by the runner)

    @classmethod
    def build(cls, tree: ast.Module, text: str, assume_gpu: bool = False) -> Context:
        """Index `tree` (the parsed `text`) in one pass: parents, children, names, strings, calls,
        loops, functions, import aliases and module constants. `assume_gpu`: the file is known to
        run on a GPU whatever its text says."""
        ctx = cls(tree, text, assume_gpu=assume_gpu)
        # One pass over the tree: every later question reads its tables. Nodes are dict keys by
        # identity (no id() calls), and leaves (names, constants: half of all nodes) get no entries
        # but a parent: their parent's step reads them (they are never stacked).
        stack: list[ast.AST] = [tree]
        pop, push = stack.pop, stack.append  # bound once: the loop runs per node
        parents, all_kids, strings = ctx.parents, ctx.kids, ctx.strings
        add_name, fast, slow = ctx.names.add, _FAST_CHILDREN.get, children
        calls, assigns = ctx.calls, ctx.assigns
        while stack:
            node: Any = pop()  # dispatch on type() below: isinstance per node costs a third of lint
            kind = type(node)
            if kind is ast.Attribute:  # the commonest inner node: one child, spelled out
                add_name(node.attr)
                child = node.value
                all_kids[node] = [child]
                parents[child] = node
                child_kind = type(child)
                if child_kind is ast.Name:  # leaves (names, constants) are read here, never stacked
                    add_name(child.id)
                elif child_kind is ast.Constant:
                    if type(child.value) is str:
                        strings.append(child.value)
                else:
                    push(child)
                continue
            spelled = fast(kind)
            kids: list[Any] = spelled(node) if spelled is not None else slow(node)
            all_kids[node] = kids
            for child in kids:
                parents[child] = node
                child_kind = type(child)
                if child_kind is ast.Name:
                    add_name(child.id)
                elif child_kind is ast.Constant:
                    if type(child.value) is str:
                        strings.append(child.value)
                else:
                    push(child)
            if kind is ast.Call:
                calls.append(node)
            elif kind is ast.Assign:  # the commonest indexed types, without a method call
                assigns.append(node)
            elif kind is ast.keyword:
                if node.arg:
                    add_name(node.arg)
            elif kind in _INDEXED:  # most inner nodes (expressions, statements) hold nothing more
                ctx._collect(node, kind)
        ctx.calls.sort(key=_POSITION)
        ctx.constants.update(_module_constants(tree))
        return ctx

    def _collect(self, node: Any, kind: type) -> None:
        """`build`'s tables for the rarer node types in ``_INDEXED`` (assignments and keyword names are
        collected in its loop): loops, import aliases, functions and classes."""
        if kind in _LOOPS:
            self.loops.append(node)
        elif kind is ast.Import or kind is ast.ImportFrom:
            _add_aliases(self.aliases, node)
        elif kind is ast.FunctionDef or kind is ast.AsyncFunctionDef:
            self.functions.setdefault(node.name, []).append(node)
        elif kind is ast.ClassDef:
            self.classes.append(node)

    # --- names ---------------------------------------------------------------------------------------
    def qualname(self, node: ast.AST) -> str:
        """Dotted name of a Name/Attribute chain with import aliases resolved; '' for anything else."""
        name = self.qualnames.get(node)
        if name is None:
            name = self.qualnames[node] = self._qualname(node)
        return name

    def _qualname(self, node: Any) -> str:
        parts: list[str] = []
        while type(node) is ast.Attribute:  # parsed trees hold exact node types
            parts.append(node.attr)
            node = node.value
        if type(node) is not ast.Name:
            return ""
        root = self.aliases.get(node.id, node.id)
        if not parts:
            return root
        parts.append(root)
        parts.reverse()
        return ".".join(parts)

    def is_api(self, node: ast.AST, *targets: str) -> bool:
        """Whether ``node`` names one of ``targets`` (dotted paths), through aliases; a bare name that no
        import explains (star import, re-export) matches by its last part."""
        name = self.qualname(node)
        if name in targets:
            return True
        bare = isinstance(node, ast.Name) and node.id not in self.aliases and node.id not in self.functions
        return bare and any(name == t.rsplit(".", 1)[-1] for t in targets)

    @staticmethod
    def root_name(node: ast.AST) -> str:
        """The variable an expression chain starts from: ``np`` for ``np.asarray(x).tolist``."""
        while isinstance(node, _CHAINED):
            node = node.func if isinstance(node, ast.Call) else node.value
        return node.id if isinstance(node, ast.Name) else ""

    @property
    def calls_by_name(self) -> dict[str, list[ast.Call]]:
        """Calls by the last part of their resolved name (``DL(...)`` aliasing DataLoader: "DataLoader")."""
        return self._call_index[0]

    @property
    def _callers(self) -> dict[str, list[ast.Call]]:
        """Calls by the function name `callees` resolves them by (``f(...)``, ``self.f(...)``)."""
        return self._call_index[1]

    @cached_property
    def _call_index(self) -> tuple[dict[str, list[ast.Call]], dict[str, list[ast.Call]]]:
        """`calls_by_name` and `_callers`, in one pass over the calls."""
        by_name: dict[str, list[ast.Call]] = {}
        callers: dict[str, list[ast.Call]] = {}
        aliases = self.aliases
        for call in self.calls:  # the last part of `qualname`, without resolving the whole chain
            func: Any = call.func
            kind = type(func)
            if kind is ast.Attribute:
                root = owner = func.value
                while type(root) is ast.Attribute:
                    root = root.value
                if type(root) is not ast.Name:
                    continue  # `f().g()`: no dotted name, no same-file callee
                last = func.attr
                if owner is root and root.id in _SELF:
                    callers.setdefault(last, []).append(call)
            elif kind is ast.Name:
                last = aliases.get(func.id, func.id).rpartition(".")[2]
                callers.setdefault(func.id, []).append(call)
            else:
                continue
            by_name.setdefault(last, []).append(call)
        return by_name, callers

    def calls_to(self, *targets: str) -> list[ast.Call]:
        """Calls of any of ``targets`` (dotted paths, as ``is_api``), in source order. Only calls whose
        last name part matches are tested, so a rule does not resolve every call of the file."""
        found = self.found_calls.get(targets)
        if found is None:
            lasts = {t.rpartition(".")[2] for t in targets}
            found = [
                c for last in lasts for c in self.calls_by_name.get(last, ()) if self.is_api(c.func, *targets)
            ]
            if len(lasts) > 1:
                found.sort(key=lambda c: (c.lineno, c.col_offset))
            self.found_calls[targets] = found
        return found

    def uses_api(self, *targets: str) -> bool:
        """Does the file call any of `targets` (dotted paths, resolved through import aliases)?"""
        return bool(self.calls_to(*targets))

    def value(self, node: ast.expr | None) -> object:
        """The literal value of an expression, through module constants; ``...`` when unknown."""
        if isinstance(node, ast.Name) and node.id in self.constants:
            node = self.constants[node.id]
        if isinstance(node, ast.Constant):
            return node.value
        if node is not None and self.qualname(node) in {"torch.float16", "torch.half"}:
            return "float16"
        if node is not None and self.qualname(node) in {"torch.bfloat16"}:
            return "bfloat16"
        return ...

    # --- what kind of file ------------------------------------------------------------------------
    def imports(self, *prefixes: str) -> bool:
        """Does the file import any module under one of the dotted `prefixes`?"""
        verdict = self.imported.get(prefixes)  # asked by many rules, with the same few prefixes
        if verdict is None:
            dotted = tuple(p + "." for p in prefixes)
            verdict = self.imported[prefixes] = any(
                path in prefixes or path.startswith(dotted) for path in self.aliases.values()
            )
        return verdict

    @cached_property
    def framework(self) -> Framework:
        """The training framework the file is written for (hf_trainer, lightning, accelerate,
        deepspeed, else pytorch): rules stay silent where the framework does the thing for you, and
        fixes are given in its terms."""
        if self.imports("transformers") and self.uses_api("transformers.Trainer"):
            return "hf_trainer"
        if self.imports("trl") and any(self.qualname(c.func).endswith("Trainer") for c in self.calls):
            return "hf_trainer"
        if self.imports("lightning", "pytorch_lightning"):
            return "lightning"
        if self.imports("accelerate"):
            return "accelerate"
        if self.imports("deepspeed"):
            return "deepspeed"
        return "pytorch"

    @cached_property
    def uses_gpu(self) -> bool:
        """The code targets a GPU: the file places work on one (``torch.cuda``, ``.cuda()``,
        ``torch.accelerator``, a "cuda" device, ``device_map=``, a framework accelerator other than
        "cpu"), or says nothing itself and belongs to a project whose other files do. Help strings
        and comments never count; a Trainer/Fabric pinned to the CPU is CPU code."""
        if self.assume_gpu:
            return True
        from gpuwise.lint.project import gpu_evidence

        verdict = gpu_evidence(self)
        if verdict is not None:
            return verdict
        return self.project is not None and self.project.gpu

    @cached_property
    def distributed(self) -> bool:
        """Does the file run data-parallel or sharded training (DDP, FSDP, DistributedSampler,
        init_process_group, DeepSpeed)? Rank-related rules only apply then."""
        names = (
            "torch.nn.parallel.DistributedDataParallel",
            "torch.distributed.init_process_group",
            "torch.distributed.fsdp.FullyShardedDataParallel",
            "torch.utils.data.distributed.DistributedSampler",
        )
        return self.imports("deepspeed") or self.uses_api(*names)

    # --- the training loop ------------------------------------------------------------------------
    def callees(self, call: ast.Call) -> list[FunctionNode]:
        """Same-file functions a call may reach: ``f(...)`` and ``self.f(...)`` by name."""
        func = call.func
        if isinstance(func, ast.Name):
            return self.functions.get(func.id, [])
        if (
            isinstance(func, ast.Attribute)
            and isinstance(func.value, ast.Name)
            and func.value.id in {"self", "cls"}
        ):
            return self.functions.get(func.attr, [])
        return []

    def _reach(self, body: list[ast.stmt], depth: int) -> Reach:
        """What ``body`` and the same-file functions it calls do (any branch): backward, step, loops."""
        reach = Reach()
        functions, deeper = self.functions, depth < CALL_DEPTH
        for stmt in body:
            for node in self.calls_and_loops(stmt):
                kind = type(node)
                if kind is ast.Call:
                    func: Any = node.func  # type: ignore[attr-defined]  # a Call, checked just above
                    callees = None  # `callees`, spelled out: this runs for every call of every loop
                    if type(func) is ast.Attribute:
                        reach.backward |= func.attr in BACKWARD
                        reach.step |= func.attr == "step"
                        owner = func.value
                        if deeper and type(owner) is ast.Name and owner.id in _SELF:
                            callees = functions.get(func.attr)
                    elif deeper and type(func) is ast.Name:
                        callees = functions.get(func.id)
                    if callees:
                        for callee in callees:
                            reach.add(self._function_reach(callee, depth + 1))
                elif kind in _LOOPS:
                    reach.loops.append(node)  # type: ignore[arg-type]  # a loop, checked just above
        return reach

    def _function_reach(self, func: FunctionNode, depth: int) -> Reach:
        key = (func, depth)
        reach = self.reaches.get(key)
        if reach is None:
            self.reaches[key] = Reach()  # a recursive call sees nothing more
            reach = self.reaches[key] = self._reach(func.body, depth)
        return reach

    @cached_property
    def step_loops(self) -> list[Loop]:
        """Innermost loops that both back-propagate and step an optimizer."""
        if not any(is_backward(c) for c in self.calls):
            return []
        trains: dict[int, Loop] = {}
        inner: dict[int, list[int]] = {}
        # only loops above both a backward and a step call (directly or through a caller) can reach both
        candidates = self._loops_above(_calls_backward) & self._loops_above(_calls_step)
        for loop in self.loops:
            if loop not in candidates:
                continue
            reach = self._reach(loop.body, 0)
            if reach.backward and reach.step:
                trains[id(loop)] = loop
                inner[id(loop)] = [id(n) for n in reach.loops]
        return [loop for key, loop in trains.items() if not any(i in trains for i in inner[key])]

    def _loops_above(self, wanted: Callable[[Any], bool]) -> set[ast.AST]:
        """Loops that hold a call ``wanted`` accepts, or a call of a function that holds one (at any
        depth, through nested bodies): every loop whose `_reach` finds such a call, and maybe more. A
        walk up the parents from the few such calls, instead of `_reach` from every loop."""
        parents, callers = self.parents, self._callers
        found: set[ast.AST] = set()
        seen: set[ast.AST] = set()
        stack: list[ast.AST] = [c for c in self.calls if wanted(c.func)]
        while stack:
            node = parents.get(stack.pop())
            while node is not None and node not in seen:  # a seen node's ancestors are done
                seen.add(node)
                kind = type(node)
                if kind in _LOOPS:
                    found.add(node)
                elif kind is ast.FunctionDef or kind is ast.AsyncFunctionDef:
                    stack.extend(callers.get(node.name, ()))  # type: ignore[attr-defined]
                node = parents.get(node)
        return found

    @cached_property
    def step_code(self) -> list[StepCode]:
        """Calls made on every step of a training loop (periodic guards excluded)."""
        found: list[StepCode] = []
        for loop in self.step_loops:
            self._every_step(loop.body, loop, (), found, set())
        if self.framework in {"lightning", "hf_trainer"}:  # the framework's loop calls these every step
            for name in STEP_METHODS:
                for func in self.functions.get(name, []):
                    self._every_step(func.body, func, (), found, {id(func)})
        return found

    def _every_step(
        self,
        body: list[ast.stmt],
        loop: ast.AST,
        via: tuple[ast.Call, ...],
        out: list[StepCode],
        seen: set[int],
    ) -> None:
        kids, expr = self.kids, ast.expr
        for stmt in body:
            kind = type(stmt)
            if kind is ast.If:
                test = stmt.test  # type: ignore[attr-defined]  # an If, checked just above
                self._expr_nodes(test, loop, via, out, seen)
                if not self._periodic(test) or self.steps_optimizer(stmt):  # type: ignore[arg-type]
                    self._every_step(stmt.body, loop, via, out, seen)  # type: ignore[attr-defined]
                    self._every_step(stmt.orelse, loop, via, out, seen)  # type: ignore[attr-defined]
                continue
            if kind in _DEFINITION_TYPES:
                continue
            for child in kids.get(stmt, ()):  # ast.iter_child_nodes, without markers
                if isinstance(child, expr):
                    self._expr_nodes(child, loop, via, out, seen)
                elif type(child) is ast.withitem:
                    self._expr_nodes(child.context_expr, loop, via, out, seen)
            names, handlers = _bodies(kind)
            for name in names:
                inner = getattr(stmt, name)
                if isinstance(inner, list):
                    self._every_step(inner, loop, via, out, seen)
            if handlers:
                for handler in stmt.handlers:  # type: ignore[attr-defined]  # a try statement
                    self._every_step(handler.body, loop, via, out, seen)

    def _periodic(self, test: ast.expr) -> bool:
        """`is_periodic_guard`, once per condition (the step walk meets it once per path)."""
        verdict = self.guards.get(test)
        if verdict is None:
            verdict = self.guards[test] = is_periodic_guard(test)
        return verdict

    def _expr_nodes(
        self, expr: ast.expr, loop: ast.AST, via: tuple[ast.Call, ...], out: list[StepCode], seen: set[int]
    ) -> None:
        for node in self.calls_and_loops(expr):
            if type(node) is not ast.Call:
                continue
            out.append(StepCode(node, loop, via))
            if len(via) < CALL_DEPTH:
                for func in self.callees(node):
                    if id(func) not in seen:
                        self._every_step(func.body, loop, (*via, node), out, seen | {id(func)})

    def steps_optimizer(self, branch: ast.If, depth: int = 0) -> bool:
        """Does the branch step an optimizer (``optimizer.step()``, ``scaler.step(opt)``, following
        same-file calls) or test ``accelerator.sync_gradients``? Then it runs on every optimizer step
        (``if (i + 1) % accum == 0:``), not on a few logging steps: what it calls is per-step code."""
        if "sync_gradients" in set(words(branch.test)):
            return True
        return self._steps_in(branch.body, depth)

    def _steps_in(self, body: list[ast.stmt], depth: int) -> bool:
        for stmt in body:
            for node in self.calls_and_loops(stmt):
                if type(node) is not ast.Call:
                    continue
                func = node.func
                if isinstance(func, ast.Attribute) and func.attr == "step":
                    owner = self.root_name(func.value).lower()
                    if _OPTIMIZER.search(owner) or (owner == "self" and _OPTIMIZER.search(_attr_chain(func))):
                        return True
                if depth < CALL_DEPTH - 1:
                    for callee in self.callees(node):
                        if self._steps_in(callee.body, depth + 1):
                            return True
        return False

    def call_sites(self, func: FunctionNode) -> list[ast.Call]:
        """Calls of ``func`` by name, and calls that hand it over (``mp.spawn(func, ...)``); cached."""
        sites = self.sites.get(func)
        if sites is None:
            sites = self.sites[func] = self._call_sites(func)
        return sites

    @cached_property
    def _calls_naming(self) -> dict[str, list[ast.Call]]:
        """Calls by every name that could make them a call site: the called name or attribute, and
        the plain names passed as arguments (in source order; each call once per name)."""
        index: dict[str, list[ast.Call]] = {}
        for call in self.calls:
            func = call.func
            named = (
                {func.id}
                if isinstance(func, ast.Name)
                else {func.attr}
                if isinstance(func, ast.Attribute)
                else set()
            )
            named.update(
                a.id for a in (*call.args, *(k.value for k in call.keywords)) if isinstance(a, ast.Name)
            )
            for name in named:
                index.setdefault(name, []).append(call)
        return index

    def _call_sites(self, func: FunctionNode) -> list[ast.Call]:
        candidates = self._calls_naming.get(func.name, [])  # the only calls the tests below can match
        sites = [c for c in candidates if func in self.callees(c)]
        for call in candidates:
            method = isinstance(call.func, ast.Attribute) and call.func.attr == func.name
            if method and self.root_name(call.func) not in self.aliases and call not in sites:
                sites.append(call)  # trainer.train(): a method called on an instance, not torch.save
            passed = [*call.args, *(k.value for k in call.keywords)]
            if any(isinstance(a, ast.Name) and a.id == func.name for a in passed):
                sites.append(call)
        return sites

    def calls_and_loops(self, node: ast.AST) -> list[ast.AST]:
        """The calls and loops of ``node`` (itself included) in ast.walk-like order, not entering
        nested function, lambda or class bodies below it: all the step-loop search reads, cached."""
        out = self.walks.get(node)
        if out is not None:
            return out
        get, skip, loops = self.kids.get, _NOT_DESCENDED, _LOOPS
        out = []
        stack = [node]
        pop, push, keep = stack.pop, stack.append, out.append  # bound once: this loop runs per node
        while stack:
            current = pop()
            kind = type(current)
            if kind is ast.Call or kind in loops:
                keep(current)
            for child in get(current, ()):
                if type(child) not in skip:
                    push(child)
        self.walks[node] = out
        return out

    @cached_property
    def loss_names(self) -> set[str]:
        """Names of the tensors back-propagated (``loss.backward()``, ``scaler.scale(loss)``)."""
        names: set[str] = set()
        for call in self.calls:
            if is_backward(call):
                target = call.func.value if isinstance(call.func, ast.Attribute) else None
                if isinstance(target, ast.Call) and target.args:  # scaler.scale(loss).backward()
                    target = target.args[0]
                if call.args and not isinstance(target, ast.Name):  # accelerator.backward(loss)
                    target = call.args[0]
                if isinstance(target, ast.Name):
                    names.add(target.id)
        return names


def _calls_backward(func: Any) -> bool:
    """A call `_reach` counts as back-propagation: ``x.backward()``, ``self.manual_backward()``."""
    return type(func) is ast.Attribute and func.attr in BACKWARD


def _calls_step(func: Any) -> bool:
    """A call `_reach` counts as an optimizer step: any ``x.step()``."""
    return type(func) is ast.Attribute and func.attr == "step"


def _attr_chain(func: ast.Attribute) -> str:
    """``self.optimizer.step`` -> "optimizer": the attribute a method is called on."""
    return func.value.attr if isinstance(func.value, ast.Attribute) else ""


def is_backward(call: ast.Call) -> bool:
    """Is the call ``.backward()`` or Lightning's ``.manual_backward()``? It marks a training step."""
    return isinstance(call.func, ast.Attribute) and call.func.attr in BACKWARD


def keyword(call: ast.Call, name: str) -> ast.keyword | None:
    """The call's keyword argument `name`, None when it is not given by name."""
    return next((k for k in call.keywords if k.arg == name), None)


def has_star_kwargs(call: ast.Call) -> bool:
    """Does the call pass ``**kwargs``? Then a missing keyword may be given there."""
    return any(k.arg is None for k in call.keywords)


_LOOPS = frozenset({ast.For, ast.AsyncFor, ast.While})
# The inner node types `Context.build` collects something from besides calls and attributes.
_INDEXED = _LOOPS | {
    ast.keyword,
    ast.Import,
    ast.ImportFrom,
    ast.FunctionDef,
    ast.AsyncFunctionDef,
    ast.Assign,
    ast.ClassDef,
}
_POSITION = attrgetter("lineno", "col_offset")


_NESTED = frozenset({ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef})
_NOT_DESCENDED = _NESTED | {ast.Name, ast.Constant}  # nested bodies; leaves (no calls below)
_DEFINITION_TYPES = frozenset(_DEFINITIONS)
_SELF = frozenset({"self", "cls"})  # receivers of same-class method calls (`callees`)
_BODIES: dict[type, tuple[tuple[str, ...], bool]] = {}


def _bodies(kind: type) -> tuple[tuple[str, ...], bool]:
    """(the statement type's fields among body/orelse/finalbody, whether it has except handlers)."""
    found = _BODIES.get(kind)
    if found is None:
        fields = getattr(kind, "_fields", ())
        names = tuple(n for n in ("body", "orelse", "finalbody") if n in fields)
        found = _BODIES[kind] = (names, "handlers" in fields)
    return found


def _add_aliases(aliases: dict[str, str], node: ast.Import | ast.ImportFrom) -> None:
    """Local name -> dotted path for each imported name (``import numpy as np``: np -> numpy;
    ``from torch.utils.data import DataLoader as DL``: DL -> torch.utils.data.DataLoader). Relative
    imports name nothing outside the project and are skipped."""
    if isinstance(node, ast.Import):
        for alias in node.names:
            local = alias.asname or alias.name.split(".")[0]
            aliases[local] = alias.name if alias.asname else local
    elif node.module and node.level == 0:
        for alias in node.names:
            aliases[alias.asname or alias.name] = f"{node.module}.{alias.name}"


def _module_constants(tree: ast.Module) -> dict[str, ast.Constant]:
    """Module-level ``NAME = literal`` assignments (``NUM_WORKERS = 0``), which rules read through."""
    out: dict[str, ast.Constant] = {}
    for stmt in tree.body:
        if (
            isinstance(stmt, ast.Assign)
            and len(stmt.targets) == 1
            and isinstance(stmt.targets[0], ast.Name)
            and isinstance(stmt.value, ast.Constant)
        ):
            out[stmt.targets[0].id] = stmt.value
    return out
