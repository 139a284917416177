"""Samples/s a DataLoader gets out of the user's own dataset, to compare with the matmul and
storage figures (is training going to wait for data?).

The dataset is named as `FILE.py:NAME` (NAME a Dataset object, or a function returning one); the
file runs as a module, as `python FILE.py` would import it.
"""

from __future__ import annotations

import importlib.util
import sys
import time
from pathlib import Path
from typing import Any

from gpuwise.errors import GpuwiseError


def load_dataset(spec: str) -> Any:
    """Import ``FILE.py:NAME`` and return the dataset it names (called first when ``NAME`` is a function).

    The file's directory is on ``sys.path`` while it imports, so its own imports work. Raises
    ``GpuwiseError`` for a malformed spec, a missing file or name, or an object that is not a dataset (no
    ``__getitem__`` or ``__iter__``).
    """
    path_text, _, name = spec.rpartition(":")
    if not path_text or not name:
        raise GpuwiseError(
            f"--dataset expects FILE.py:NAME (a Dataset or a function returning one), got {spec!r}"
        )
    path = Path(path_text)
    if not path.is_file():
        raise GpuwiseError(f"no such dataset file: {path}")
    module_spec = importlib.util.spec_from_file_location(f"gpuwise_bench_dataset_{path.stem}", path)
    if module_spec is None or module_spec.loader is None:
        raise GpuwiseError(f"{path} cannot be imported as a Python module")
    module = importlib.util.module_from_spec(module_spec)
    sys.path.insert(0, str(path.parent.resolve()))
    try:
        module_spec.loader.exec_module(module)
    except (SyntaxError, ValueError, ImportError) as err:  # not Python (binary, null bytes), or its imports
        raise GpuwiseError(f"--dataset {path} cannot be imported: {type(err).__name__}: {err}") from None
    finally:
        sys.path.pop(0)
    if not hasattr(module, name):
        raise GpuwiseError(f"{path} defines no {name!r}")
    found = getattr(module, name)
    dataset = found() if callable(found) and not hasattr(found, "__getitem__") else found
    if not hasattr(dataset, "__getitem__") and not hasattr(dataset, "__iter__"):
        raise GpuwiseError(f"{spec} is not a dataset (no __getitem__ or __iter__)")
    return dataset


def loader_samples_per_s(
    torch: Any, dataset: Any, batch_size: int, num_workers: int, budget_s: float, max_batches: int = 200
) -> dict[str, Any]:
    """Iterate a DataLoader for up to `budget_s` (after its first batch, which pays worker start-up)."""
    loader = torch.utils.data.DataLoader(dataset, batch_size=batch_size, num_workers=num_workers)
    batches = iter(loader)
    started = time.perf_counter()
    next(batches)
    first_batch_s = time.perf_counter() - started
    count, start = 0, time.perf_counter()
    for _ in batches:
        count += 1
        if count >= max_batches or time.perf_counter() - start > budget_s:
            break
    elapsed = time.perf_counter() - start
    return {
        "batch_size": batch_size,
        "num_workers": num_workers,
        "batches_timed": count,
        "first_batch_s": first_batch_s,
        "samples_per_s": count * batch_size / elapsed if count and elapsed > 0 else None,
        "note": "" if count else "the dataset ended after one batch: no steady-state figure",
    }


__all__ = ["load_dataset", "loader_samples_per_s"]
