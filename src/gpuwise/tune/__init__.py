"""``gpuwise tune -- python train.py``: short trials of the user's unchanged script, each a fresh
profiled process with other settings, ranked by measured speed (docs/tuning.md).

- ``knobs``       the settings gpuwise applies from its boot hook, safe or numerics-changing;
- ``boot``        the trial's side: applies the knobs on ``import torch`` (stdlib-only at import);
- ``params``      the script's own flags (``--param``), with the effective batch kept (``--accum``);
- ``trial``       one trial: a fresh process under the profiler, a time budget, its outcome;
- ``candidates``  findings of the baseline → the trials worth running;
- ``verify``      a numerics knob's losses against the baseline's;
- ``search``      the session: baseline, candidates, batch search, repeats, ranking;
- ``frameworks``  the winner in the script's own terms (TrainingArguments, Trainer, DataLoader);
- ``result``      the typed result and its JSON; ``store`` saves it in the run store.
"""
