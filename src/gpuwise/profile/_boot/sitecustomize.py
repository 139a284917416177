"""gpuwise's bootstrap, found through PYTHONPATH in processes started by ``gpuwise profile``.

Python imports ``sitecustomize`` at start-up; this one attaches the profiler (gpuwise.profile.child)
when GPUWISE_PROFILE is set, then runs the environment's own sitecustomize, if there is one, so
nothing the user's setup relies on is lost.
"""

import os
import sys


def _gpuwise_attach():
    if not os.environ.get("GPUWISE_PROFILE"):
        return
    try:
        try:
            from gpuwise.profile import child
        except ImportError:
            extra = os.environ.get("GPUWISE_PROFILE_PATH")
            if not extra:
                raise
            sys.path.append(extra)  # last, so the interpreter's own packages (its torch) win
            from gpuwise.profile import child
        child.activate()
    except Exception as exc:
        print(
            f"gpuwise: could not attach the profiler ({type(exc).__name__}: {exc}); running unprofiled",
            file=sys.stderr,
        )


def _chain_next_sitecustomize():
    import importlib.machinery
    import importlib.util

    here = os.path.dirname(os.path.abspath(__file__))
    others = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", others)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)


_gpuwise_attach()
try:
    _chain_next_sitecustomize()
except Exception as _exc:
    print(f"gpuwise: the environment's sitecustomize failed: {_exc}", file=sys.stderr)
