"""The package version, in a module of its own (layer 0).

`gpuwise.cli` prints it for ``--version`` and `gpuwise.lint` writes it into SARIF logs; they import it
from here rather than from the root package so that nothing below the root imports ``gpuwise``
itself (the root re-exports it for ``gpuwise.__version__``).
"""

__all__ = ["__version__"]

__version__ = "0.1.0"
