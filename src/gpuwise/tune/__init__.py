"""``gpuwise tune -- python train.py``: short trials of the user's unchanged script, each a fresh
profiled process with other settings, ranked by measured speed (docs/tuning.md).

- ``knobs``       the settings gpuwise applies from its boot hook, safe or numerics-changing (the hook
                  itself, the trial's side, is ``gpuwise.profile.knobs_boot``: the tuner sets
                  ``GPUWISE_TUNE``, the profiled child applies it on ``import torch``);
- ``params``      the script's own flags (``--param``), with the effective batch kept (``--accum``);
- ``trial``       one trial: a fresh process under the profiler, a time budget, its outcome;
- ``candidates``  findings of the baseline → the trials worth running;
- ``verify``      a numerics knob's losses against the baseline's;
- ``search``      the session: baseline, candidates, batch search, repeats, ranking;
- ``frameworks``  the winner in the script's own terms (TrainingArguments, Trainer, DataLoader);
- ``result``      the typed result and its JSON; ``saved_sessions`` saves it in the run store.

``gpuwise doctor`` (package ``gpuwise.doctor``) is this tuner run on a built-in workload.
"""

__all__: list[str] = []
