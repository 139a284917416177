"""Kernel and runtime-API taxonomy: one sourced data file (``data/kernel_taxonomy.csv``), one registry.

Why data, not regexes in code: kernel names change with every library release (cuBLASLt's ``nvjet_*``,
Tensile's ``Cijk_*``, trtllm-gen's ``bmm_*``); each row names the library and the source (library
docs or source file) its pattern was read from, so a new family is one reviewed line.

Rows (``kind,category,pattern,library,precision,source``), read in file order, first match wins:
- ``kernel``: the category of a kernel (communication, attention, convolution, gemm, reduction,
  elementwise); ``precision`` is empty (the ``precision`` rows decide) or a rule: ``tensile`` reads
  Tensile's data-type characters (``_HHS_`` fp16, ``_BBS_`` bf16, ``_SB_`` fp32, ``_F8…`` fp8).
- ``precision``: the precision a matmul/convolution kernel's name shows (fp4 ... fp32).
- ``api``: the role of a CUDA/HIP runtime or driver call (``ApiRole``): host-blocking syncs and
  copies, stream waits, graph capture and replay, kernel launches, one-off set-up.

Patterns are Python regexes, case-insensitive, searched in the kernel name without its parameter
list (template arguments kept) and in the API name as written.
"""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass
from functools import cached_property, lru_cache
from typing import Literal, get_args

from gpuwise.catalog.bundled import bundled_text

__all__ = [
    "HOST_BLOCKING_ROLES",
    "KERNEL_CATEGORIES",
    "NAME_READ_CHARS",
    "UNCLASSIFIED_KERNEL_PCT",
    "ApiRole",
    "TaxonomyEntry",
    "api_role",
    "entries",
    "kernel_category",
    "kernel_entry",
    "matmul_precision",
    "runtime_platform",
    "without_parameters",
]

ApiRole = Literal[
    "host_sync",  # the host waits for the device (cudaDeviceSynchronize, cudaStreamSynchronize, ...)
    "blocking_copy",  # a copy that returns when done (cudaMemcpy, hipMemcpyWithStream, ...)
    "stream_wait",  # a stream waits for an event on the device; the host does not block
    "event_query",  # a non-blocking poll
    "graph_capture",  # stream capture and graph instantiation (a one-off cost, not a per-step one)
    "graph_launch",  # one call that replays every captured kernel
    "kernel_launch",
    "setup",  # allocation, event/stream creation, module loading: one-off start-up work
]
KernelCategory = Literal["communication", "attention", "convolution", "gemm", "reduction", "elementwise"]
KERNEL_CATEGORIES: tuple[str, ...] = get_args(KernelCategory)
# Calls during which the host waits for the device: what `.item()`, `.cpu()` and `print(t)` become.
HOST_BLOCKING_ROLES = frozenset({"host_sync", "blocking_copy"})
# A kernel no row names that takes more than this share of device-op time (%) is listed by name as
# unclassified (issue #26: never a silent "other" for a kernel that matters).
UNCLASSIFIED_KERNEL_PCT = 5.0
# Names are read up to this many characters: the longest in the public traces tested is 5,123 (a
# templated kernel with its parameter list); a multi-megabyte name would cost seconds of regex work.
NAME_READ_CHARS = 16384

_DATA = "kernel_taxonomy.csv"
_KINDS = ("kernel", "precision", "api")


@dataclass(frozen=True)
class TaxonomyEntry:
    """One row of the taxonomy: what the pattern recognises, in which library, and the source."""

    kind: str  # kernel, precision or api
    category: str  # kernel category, precision or API role
    regex: str
    library: str
    precision: str  # kernel rows: "" (the precision rows decide) or a rule ("tensile")
    source: str

    @cached_property
    def pattern(self) -> re.Pattern[str]:
        """The compiled pattern (case-insensitive), on first use: a run compiles only what it reads."""
        return re.compile(self.regex, re.I)

    @cached_property
    def matcher(self) -> _Matcher:
        """``pattern.search(text) is not None``, faster (see `_Matcher`), built on first use."""
        return _Matcher(self.regex)

    def matches(self, text: str) -> bool:
        """Whether the row's pattern occurs in ``text`` (case-insensitive), as ``pattern.search``."""
        return self.matcher(text)


# A pattern is searched branch by branch in the lower-cased name when lower-casing it keeps its meaning:
# ASCII, and no escape whose meaning depends on case (\W, \B, \x41, ...): only \w \d \s \b and
# escaped punctuation. A literal branch is then a substring test.
_CASE_SAFE_ESCAPE = re.compile(r"\\(?:[wdsb]|[^A-Za-z0-9])")
_META = frozenset(".^$*+?{}[]\\|()")


def _branches(regex: str) -> list[str]:
    """The top-level alternatives of ``regex`` (``|`` outside groups, classes and escapes)."""
    out, start, depth, in_class, i = [], 0, 0, False, 0
    while i < len(regex):
        ch = regex[i]
        if ch == "\\":
            i += 2
            continue
        if in_class:
            in_class = ch != "]"
        elif ch == "[":
            in_class = True
            if regex[i + 1 : i + 2] == "]":  # a ']' right after '[' is a member, not the end
                i += 1
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == "|" and depth == 0:
            out.append(regex[start:i])
            start = i + 1
        i += 1
    out.append(regex[start:])
    return out


class _Matcher:
    """``re.compile(regex, re.I).search(text) is not None``, answered faster on ASCII text.

    Python's re tries every alternative at every position of a case-insensitive search; the taxonomy's
    patterns are alternations of mostly literal names, searched in names of hundreds of characters. On
    ASCII text, a case-insensitive match is a match of the lower-cased pattern in the lower-cased text,
    and an alternation occurs iff one of its branches does: so each literal branch is a substring test,
    a ``^literal`` branch a prefix test, and the rest small case-sensitive regexes (which re scans for
    by their literal prefix). Non-ASCII text, or a pattern whose meaning lower-casing could change,
    goes to the case-insensitive regex as written."""

    def __init__(self, regex: str) -> None:
        self.regex = regex
        self.exact: re.Pattern[str] | None = None
        self.literals: tuple[str, ...] = ()
        self.prefixes: tuple[str, ...] = ()
        self.patterns: tuple[re.Pattern[str], ...] = ()
        stripped = _CASE_SAFE_ESCAPE.sub("", regex)
        if not regex.isascii() or "\\" in stripped or "(?" in regex.replace("(?:", "").replace("(?!", ""):
            self.exact = re.compile(regex, re.I)
            return
        literals, prefixes, patterns = [], [], []
        for branch in _branches(regex.lower()):
            if not branch:  # an empty alternative matches everywhere
                literals.append("")
            elif not _META.intersection(branch):
                literals.append(branch)
            elif branch[0] == "^" and not _META.intersection(branch[1:]):
                prefixes.append(branch[1:])
            else:
                patterns.append(re.compile(branch))
        self.literals, self.prefixes, self.patterns = tuple(literals), tuple(prefixes), tuple(patterns)

    def __call__(self, text: str) -> bool:
        if self.exact is not None or not text.isascii():
            exact = self.exact or re.compile(self.regex, re.I)
            return exact.search(text) is not None
        low = text.lower()
        return (
            any(lit in low for lit in self.literals)
            or (bool(self.prefixes) and low.startswith(self.prefixes))
            or any(p.search(low) for p in self.patterns)
        )


@lru_cache(maxsize=1)
def entries() -> tuple[TaxonomyEntry, ...]:
    """Every row of the bundled taxonomy, in file order (each pattern compiled on first use)."""
    text = bundled_text("gpuwise.trace", f"data/{_DATA}")
    out = []
    for row in csv.DictReader(text.splitlines()):
        kind, category = row["kind"], row["category"]
        if kind not in _KINDS:
            raise ValueError(f"{_DATA}: unknown kind {kind!r}")
        if kind == "kernel" and category not in KERNEL_CATEGORIES:
            raise ValueError(f"{_DATA}: unknown kernel category {category!r}")
        if kind == "api" and category not in get_args(ApiRole):
            raise ValueError(f"{_DATA}: unknown API role {category!r}")
        if not row["source"].strip():
            raise ValueError(f"{_DATA}: the row for {row['pattern']!r} names no source")
        out.append(
            TaxonomyEntry(kind, category, row["pattern"], row["library"], row["precision"], row["source"])
        )
    return tuple(out)


@lru_cache(maxsize=1)
def _kernel_runs() -> tuple[tuple[str, _Matcher], ...]:
    """Consecutive kernel rows of one category as one alternation: the same first-match order in
    a handful of tests per name instead of one per row."""
    runs: list[tuple[str, list[str]]] = []
    for e in entries():
        if e.kind != "kernel":
            continue
        if runs and runs[-1][0] == e.category:
            runs[-1][1].append(e.regex)
        else:
            runs.append((e.category, [e.regex]))
    return tuple((cat, _Matcher("|".join(pats))) for cat, pats in runs)  # each row: alternatives


def without_parameters(name: str) -> str:
    """The name and template arguments, not the parameter list: FBGEMM's embedding kernels take a
    `fbgemm_gpu::FixedDivisor`, which must not make them GEMMs."""
    text, depth = name[:NAME_READ_CHARS].replace("(anonymous namespace)", ""), 0
    for match in _ANGLE_OR_PAREN.finditer(text):  # only these three characters move the scan
        ch, i = match.group(), match.start()
        if ch == "<":
            depth += 1
        elif ch == ">" and depth:
            depth -= 1
        elif ch == "(" and depth == 0 and i:
            return text[:i]
    return text


_ANGLE_OR_PAREN = re.compile(r"[<>(]")


@lru_cache(maxsize=1 << 16)
def kernel_category(name: str) -> str:
    """The category the taxonomy gives a kernel name (communication, attention, convolution, gemm,
    reduction, elementwise: the first matching row), else "other"."""
    head = without_parameters(name)
    for category, matches in _kernel_runs():
        if matches(head):
            return category
    return "other"


@lru_cache(maxsize=1 << 12)
def kernel_entry(name: str) -> TaxonomyEntry | None:
    """The taxonomy row that classifies a kernel name (its library and source), None if none does."""
    head = without_parameters(name)
    return next((e for e in entries() if e.kind == "kernel" and e.matches(head)), None)


# Tensile's kernel names: Cijk_<A indices>_<B indices>_<types>_..., the types token led by the
# input data type's character (ROCm/Tensile Tensile/DataType.py; hipBLASLt adds F8, B8, X).
_TENSILE_TYPES = re.compile(r"^(?:Custom_)?Cijk_A[a-z]+_B[a-z]+_([0-9A-Za-z]+)")
_TENSILE_LEAD = (
    (("F8", "B8"), "fp8"),
    (("4xi8", "I8"), "int8"),
    (("H",), "fp16"),
    (("B",), "bf16"),
    (("X",), "tf32"),
    (("S", "C"), "fp32"),
    (("D", "Z"), "fp64"),
)


def _tensile_precision(name: str) -> str | None:
    match = _TENSILE_TYPES.match(name)
    if match is None:
        return None
    token = match.group(1)
    return next((p for leads, p in _TENSILE_LEAD if token.startswith(leads)), None)


@lru_cache(maxsize=1 << 12)
def matmul_precision(name: str) -> str | None:
    """The precision a matmul/convolution kernel's name shows (fp4, fp8, int8, int4, bf16, tf32,
    fp16, fp32, fp64), None when the name says nothing; only the first NAME_READ_CHARS are read."""
    head = without_parameters(name)
    rule = next(
        (e.precision for e in entries() if e.kind == "kernel" and e.precision and e.matches(head)), ""
    )
    if rule == "tensile":
        return _tensile_precision(name)
    text = name[:NAME_READ_CHARS]
    return next((e.category for e in entries() if e.kind == "precision" and e.matches(text)), None)


_HIP_CALL = re.compile(r"hip[A-Z]")
_CUDA_CALL = re.compile(r"cu(da)?[A-Z]")


@lru_cache(maxsize=1 << 12)
def api_role(name: str) -> str | None:
    """The role (`ApiRole`) of a CUDA/HIP runtime or driver call, None for calls no row names
    (API rows are anchored at the start of the name; kernel and CPU-op names are not looked at)."""
    if len(name) > 128 or not (_HIP_CALL.match(name) or _CUDA_CALL.match(name)):
        return None
    return next((e.category for e in entries() if e.kind == "api" and e.matches(name)), None)


def runtime_platform(api_names: list[str]) -> Literal["rocm", "cuda"] | None:
    """Which runtime the calls belong to: HIP (``hip*``) means ROCm, so an AMD device is never
    labelled CUDA; None when no call says."""
    if any(_HIP_CALL.match(n) for n in api_names):
        return "rocm"
    if any(_CUDA_CALL.match(n) for n in api_names):
        return "cuda"
    return None
