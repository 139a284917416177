"""Kernel names short enough for a table row, yet distinct: two `cutlass::Kernel` rows must not look alike.

A short name drops template arguments and parameters; where two listed kernels share one, the template
arguments in which they differ are shown (`implicit_convolve_sgemm<1024>` / `<128>`), and rows that
still read the same are numbered.
"""

from __future__ import annotations

from collections import Counter, defaultdict

from gpuwise.trace.kernels import short_name
from gpuwise.trace.taxonomy import NAME_READ_CHARS

__all__ = ["distinct_short_names", "template_args"]

_OPEN, _CLOSE = "<([{", ">)]}"


def template_args(name: str) -> list[str]:
    """Top-level arguments of the kernel's template list: `void k<4, F<float> >(int)` -> ['4', 'F<float>']."""
    text = name[:NAME_READ_CHARS].replace("->", "").replace("(anonymous namespace)", "").removeprefix("void ")
    start = text.find("<")
    paren = text.find("(")
    if start < 0 or (0 <= paren < start):
        return []
    args: list[str] = []
    current: list[str] = []
    depth = 0
    for ch in text[start + 1 :]:
        if ch in _OPEN:
            depth += 1
        elif ch in _CLOSE:
            if depth == 0:
                break
            depth -= 1
        elif ch == "," and depth == 0:
            args.append("".join(current).strip())
            current = []
            continue
        current.append(ch)
    args.append("".join(current).strip())
    return args


def _short_arg(arg: str) -> str:
    """`at::native::CUDAFunctor_add<float>` -> `CUDAFunctor_add`; a lambda is named by its enclosing
    function (`sqrt_kernel_cuda(...)::{lambda()#2}` -> `sqrt_kernel_cuda`)."""
    out, depth = [], 0
    for ch in arg.split("::{lambda")[0]:
        if ch in _OPEN:
            depth += 1
        elif ch in _CLOSE and depth:
            depth -= 1
        elif depth == 0:
            out.append(ch)
    return "".join(out).strip().rsplit("::", 1)[-1].strip() or arg


def _fit(text: str, width: int) -> str:
    """Cut the middle, not the end: kernel variants differ in their last characters (`_tn_align1`)."""
    if len(text) <= width:
        return text
    head = (width - 1) // 2
    return text[:head] + "…" + text[len(text) - (width - 1 - head) :]


def distinct_short_names(names: list[str], width: int = 60) -> list[str]:
    """Short names (at most `width` characters) for a list of kernel names, in order: names that
    would read the same show the template arguments in which they differ, else get #1, #2, ..."""
    shorts = [short_name(n, 10**6) for n in names]
    groups: dict[str, list[int]] = defaultdict(list)
    for i, s in enumerate(shorts):
        groups[s].append(i)
    out = list(shorts)
    for short, members in groups.items():
        if len(members) < 2:
            continue
        arg_lists = [[_short_arg(a) for a in template_args(names[i])] for i in members]
        longest = max(map(len, arg_lists))
        differing = [
            k for k in range(longest) if len({args[k] if k < len(args) else "" for args in arg_lists}) > 1
        ]
        for i, args in zip(members, arg_lists, strict=True):
            if differing:  # the namespace gives way to the arguments that tell the rows apart
                stem = short.rsplit("::", 1)[-1]
                out[i] = f"{stem}<{', '.join(args[k] if k < len(args) else '' for k in differing)}>"
    out = [_fit(s, width) for s in out]
    repeated = {s for s, n in Counter(out).items() if n > 1}
    seen: Counter[str] = Counter()
    for i, s in enumerate(out):
        if s in repeated:
            seen[s] += 1
            out[i] = _fit(s, width - 4) + f" #{seen[s]}"
    return out
