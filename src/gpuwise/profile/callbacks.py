"""Framework callbacks: profile a Hugging Face ``Trainer`` or a Lightning ``Trainer`` run.

    from gpuwise.profile.callbacks import GpuwiseCallback            # transformers
    trainer = Trainer(..., callbacks=[GpuwiseCallback(steps=50)])

    from gpuwise.profile.callbacks import GpuwiseLightningCallback   # lightning / pytorch_lightning
    trainer = L.Trainer(..., callbacks=[GpuwiseLightningCallback(steps=50)])

Both are optional imports: the classes are built on first access, so importing this module needs
neither library. After training, ``callback.result`` is the ``ProfileRun`` (also saved to the run
store unless ``store=False``); the top findings are logged.
"""

from __future__ import annotations

import atexit
import logging
from typing import Any

from gpuwise.profile.analysis import ProfileRun
from gpuwise.profile.api import Profile

log = logging.getLogger("gpuwise")
_built: dict[str, type] = {}


class _Session:
    """What both callbacks share: start once, step, stop once (also at interpreter exit)."""

    def __init__(
        self, steps: int | None, warmup: int, store: Any, label: str, auto_step: bool, log_findings: bool
    ) -> None:
        self.options = {
            "steps": steps,
            "warmup": warmup,
            "store": store,
            "label": label,
            "auto_step": auto_step,
        }
        self.profile: Profile | None = None
        self.result: ProfileRun | None = None
        self.log_findings = log_findings

    def start(self, meta: dict[str, Any]) -> None:
        if self.profile is not None:
            return
        self.profile = Profile(**self.options, meta=meta)
        self.profile.start()
        atexit.register(self.stop, "incomplete")

    def step(self) -> None:
        if self.profile is not None:
            self.profile.step()

    def stop(self, status: str | None = None, error: str | None = None):
        if self.profile is None or self.result is not None:
            return self.result
        self.result = self.profile.stop(status=status, error=error)
        atexit.unregister(self.stop)
        if self.result is not None and self.log_findings:
            summary = self.result.summary
            log.warning(
                "gpuwise: %s steps measured, %.2f steps/s; %s",
                summary.measured_steps,
                summary.steps_per_s or 0,
                "; ".join(f"{f.id} ({f.severity}): {f.summary}" for f in self.result.findings[:3])
                or "no findings",
            )
        return self.result


def _make_hf() -> type:
    from transformers import TrainerCallback

    class GpuwiseCallback(TrainerCallback):
        """Steps are the Trainer's optimizer steps (``on_step_end``), so gradient accumulation counts once."""

        def __init__(
            self,
            steps: int | None = None,
            warmup: int = 5,
            store: Any = None,
            label: str = "hf-trainer",
            log_findings: bool = True,
        ) -> None:
            self.session = _Session(steps, warmup, store, label, auto_step=False, log_findings=log_findings)

        @property
        def result(self):
            return self.session.result

        def on_train_begin(self, args, state, control, **kwargs):
            self.session.start(
                {
                    "script": "transformers.Trainer",
                    "framework": "hf-trainer",
                    "rank": getattr(args, "process_index", None),
                    "world_size": getattr(args, "world_size", None),
                }
            )

        def on_step_end(self, args, state, control, **kwargs):
            self.session.step()

        def on_train_end(self, args, state, control, **kwargs):
            self.session.stop()

    return GpuwiseCallback


def _make_lightning() -> type:
    pl: Any
    try:
        import lightning.pytorch as pl
    except ImportError:  # the older package name
        import pytorch_lightning as pl

    class GpuwiseLightningCallback(pl.Callback):
        """Steps end at each optimizer step (torch's optimizer hooks; Lightning runs forward and
        backward inside ``optimizer.step(closure)``, which the phase stack accounts for)."""

        def __init__(
            self,
            steps: int | None = None,
            warmup: int = 5,
            store: Any = None,
            label: str = "lightning",
            log_findings: bool = True,
        ) -> None:
            super().__init__()
            self.session = _Session(steps, warmup, store, label, auto_step=True, log_findings=log_findings)

        @property
        def result(self):
            return self.session.result

        def on_train_start(self, trainer, pl_module):
            self.session.start(
                {
                    "script": "lightning.Trainer",
                    "framework": "lightning",
                    "rank": getattr(trainer, "global_rank", None),
                    "world_size": getattr(trainer, "world_size", None),
                }
            )

        def on_train_end(self, trainer, pl_module):
            self.session.stop()

        def on_exception(self, trainer, pl_module, exception):
            status = "interrupted" if isinstance(exception, KeyboardInterrupt) else "error"
            self.session.stop(status=status, error=f"{type(exception).__name__}: {exception}")

    return GpuwiseLightningCallback


_FACTORIES = {"GpuwiseCallback": _make_hf, "GpuwiseLightningCallback": _make_lightning}


def __getattr__(name: str):
    if name in _FACTORIES:
        if name not in _built:
            _built[name] = _FACTORIES[name]()
        return _built[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# Both are built by __getattr__ on first use: transformers and lightning are optional dependencies.
__all__ = ["GpuwiseCallback", "GpuwiseLightningCallback"]  # noqa: F822
