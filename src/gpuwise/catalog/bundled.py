"""The text of a data file shipped inside a gpuwise package, read without `importlib.resources`.

`importlib.resources` costs ~4 ms of CPU on first use (it imports `zipfile` and its readers), paid by
every `gpuwise trace` run for the taxonomy and the GPU catalog (start-up time, issue #26). An installed
package is a directory, so the file is read beside the package's ``__init__``; only a package that is not
a directory (a zip import) goes through `importlib.resources`.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

__all__ = ["bundled_text"]


def bundled_text(package: str, relative: str) -> str:
    """The UTF-8 text of ``relative`` (a ``/``-separated path) inside ``package`` (a dotted name)."""
    module = sys.modules.get(package) or importlib.import_module(package)
    init = getattr(module, "__file__", None)
    if init:
        path = Path(init).parent.joinpath(*relative.split("/"))
        if path.is_file():
            return path.read_text(encoding="utf-8")
    from importlib import resources

    return resources.files(package).joinpath(relative).read_text(encoding="utf-8")
