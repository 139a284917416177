"""``gpuwise.profile()``: profile a training loop from inside the script.

    import gpuwise
    with gpuwise.profile(steps=50) as p:
        for batch in loader:
            ...
            optimizer.step()          # a step boundary (or call p.step() yourself)
    print(p.result.findings[0].summary)

Steps end at each ``optimizer.step()`` unless you call ``p.step()``, which then takes over.
The run is saved to the run store (``store=False`` to skip, ``store=PATH`` to choose the file).
The block's exceptions pass through unchanged; a run that ends in an exception or Ctrl-C is
still built and saved, marked ``error`` or ``interrupted``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from gpuwise.profile.analysis import ProfileRun, build_run
from gpuwise.profile.recorder import Recorder
from gpuwise.profile.types import PhaseShare


class Profile:
    """The handle ``gpuwise.profile()`` returns: a context manager (or ``start``/``stop``) around the training
    loop. ``steps`` is the measured window after ``warmup`` steps (None: until stop); ``store`` is the run
    store file (None: the default, False: do not save). After ``stop``, ``result`` holds the ``ProfileRun``
    (None if it could not be built).
    """

    def __init__(
        self,
        steps: int | None = None,
        warmup: int = 5,
        *,
        label: str = "",
        store: str | os.PathLike | bool | None = None,
        telemetry: bool = True,
        sample_interval_s: float = 0.5,
        auto_step: bool = True,
        meta: dict[str, Any] | None = None,
    ) -> None:
        self.store = store
        self.result: ProfileRun | None = None
        script = Path(sys.argv[0]).name if sys.argv and sys.argv[0] else "python"
        self._recorder = Recorder(
            steps=steps,
            warmup=warmup,
            auto_step=auto_step,
            telemetry=telemetry,
            sample_interval_s=sample_interval_s,
            label=label or script,
            meta={"script": script, "command": " ".join(sys.argv), "api": "python", **(meta or {})},
        )

    # -- context manager -------------------------------------------------------------------------------
    def __enter__(self) -> Profile:
        self.start()
        return self

    def __exit__(self, exc_type, exc, tb) -> None:  # None: the block's exception is never swallowed
        if exc_type is None:
            self.stop()
        elif issubclass(exc_type, KeyboardInterrupt):
            self.stop(status="interrupted", error="KeyboardInterrupt")
        else:
            self.stop(status="error", error=f"{exc_type.__name__}: {exc}")

    def start(self) -> Profile:
        """Install the hooks and start sampling; returns self."""
        self._recorder.start()
        return self

    def step(self) -> None:
        """Mark a step boundary yourself (then optimizer steps no longer do)."""
        self._recorder.step()

    @property
    def recorder(self) -> Recorder:
        """The in-process ``Recorder`` (for callbacks and advanced use)."""
        return self._recorder

    def stop(self, status: str | None = None, error: str | None = None) -> ProfileRun | None:
        """Detach, build the run and save it; returns ``result`` (the same run on a second call).

        ``status``/``error`` mark a run that ended early (``interrupted``, ``error``). A failure to build
        the run is contained (returns None, reported on stderr); a failure to save only prints a warning.
        """
        if self.result is not None:
            return self.result
        raw = self._recorder.stop(status=status, error=error)
        try:
            self.result = build_run(raw)
        except Exception as exc:
            self._recorder.contain("result building", exc, active_check=False)
            return None
        if self.store is not False:
            try:
                from gpuwise.profile.saved_runs import save_run
                from gpuwise.store.runs import RunStore

                with RunStore.open(None if isinstance(self.store, bool) else self.store) as runs:
                    self.result.run_id = save_run(runs, self.result)
            except Exception as exc:
                print(f"gpuwise: the run was profiled but not saved: {exc}", file=sys.stderr)
        return self.result

    # -- conveniences ------------------------------------------------------------------------------------
    @property
    def findings(self):
        """The run's findings, most important first; empty before ``stop``."""
        return self.result.findings if self.result else []

    @property
    def phases(self) -> dict[str, PhaseShare]:
        """Phase name → mean seconds per step and % of the step; empty before ``stop``."""
        return self.result.phases if self.result else {}


def profile(steps: int | None = None, warmup: int = 5, **kwargs: Any) -> Profile:
    """Profile the enclosed training loop; see the module docstring."""
    return Profile(steps=steps, warmup=warmup, **kwargs)


__all__ = ["Profile", "profile"]
