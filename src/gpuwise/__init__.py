"""gpuwise: find where a GPU workload loses time and memory, fix it, then pick the hardware.

Importing the package is cheap and never imports torch; the live profiler
(`gpuwise.profile`) pulls torch in only when it is used.
"""

from gpuwise._version import __version__

__all__ = ["__version__", "profile"]


def __getattr__(name: str):
    # Lazy so that `import gpuwise` stays torch-free for the planning commands.
    if name == "profile":
        from gpuwise.profile.api import profile

        return profile
    raise AttributeError(f"module 'gpuwise' has no attribute {name!r}")
