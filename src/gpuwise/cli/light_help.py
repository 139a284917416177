"""`--help` without the parts of Rich it never draws: start-up time of every help screen.

Typer's help renderer (`typer.rich_utils`) imports `rich.markdown` (markdown-it, Pygments through
`rich.syntax`) and `rich.traceback` at module level, ~0.1 s of CPU, although with
``rich_markup_mode="rich"`` it draws neither a Markdown block nor a traceback. While the help is
rendered, those two modules are stand-ins whose classes load the real module on first use, so the
screen is the same, drawn by the same code; the stand-ins leave ``sys.modules`` afterwards, and an
`import rich.markdown` later in the process gets the real module.
"""

from __future__ import annotations

import importlib
import sys
import types
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["HELP_FLAGS", "light_rich_help", "wants_help"]

HELP_FLAGS = ("-h", "--help")  # app.build_app: context_settings help_option_names

# module -> the classes typer.rich_utils takes from it at import time
_DEFERRED: dict[str, tuple[str, ...]] = {"rich.markdown": ("Markdown",), "rich.traceback": ("Traceback",)}


def wants_help(argv: list[str]) -> bool:
    """True when the run prints a help screen (a help flag, or no arguments: no_args_is_help)."""
    return not argv or any(arg in HELP_FLAGS for arg in argv)


def _real(module: str) -> types.ModuleType:
    """The real module, imported now (the stand-in, if still registered, is set aside first)."""
    if getattr(sys.modules.get(module), "__gpuwise_stand_in__", False):
        del sys.modules[module]
    return importlib.import_module(module)


def _stand_in_class(module: str, name: str) -> type:
    """A class that builds the real ``module.name`` when called, and forwards its class attributes
    (`Traceback.from_exception`)."""

    class _Meta(type):
        def __getattr__(cls, attr: str) -> Any:
            return getattr(getattr(_real(module), name), attr)

    def __new__(cls: type, *args: Any, **kwargs: Any) -> Any:
        return getattr(_real(module), name)(*args, **kwargs)

    return _Meta(name, (), {"__new__": __new__, "__module__": module})


@contextmanager
def light_rich_help() -> Iterator[None]:
    """Register the stand-ins while a help screen is rendered (only when neither Typer's renderer nor
    the modules are loaded yet: a process that has them keeps them)."""
    if "typer.rich_utils" in sys.modules or any(m in sys.modules for m in _DEFERRED):
        yield
        return
    for module, names in _DEFERRED.items():
        stand_in = types.ModuleType(module, "stand-in until first use (gpuwise.cli.light_help)")
        stand_in.__gpuwise_stand_in__ = True  # type: ignore[attr-defined]
        for name in names:
            setattr(stand_in, name, _stand_in_class(module, name))
        sys.modules[module] = stand_in
    try:
        yield
    finally:
        for module in _DEFERRED:
            if getattr(sys.modules.get(module), "__gpuwise_stand_in__", False):
                del sys.modules[module]
