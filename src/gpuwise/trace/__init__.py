"""`gpuwise trace`: PyTorch profiler (Kineto) traces in, where the time went out.

Parse (`parser`, `reader`, `table`) -> select HTA's rows (`hta_selection`) -> per-rank analysis
(`rank`: breakdown, kernels, steps, host, copies, communication, memory) -> across ranks
(`cross_rank`) -> evidence and findings (`to_evidence`, `analyze.analyze_traces`); `compare`
sets two analyses side by side. Import from the submodules; no torch import anywhere here."""

__all__: list[str] = []
