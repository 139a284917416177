"""Live GPU monitoring as a library: one NVML sampling layer (shared with the profiler), the per-snapshot
KPI checks, the recorder and the history it writes.

- ``nvml_sample`` / ``reading`` / ``sampler``  NVML and psutil reads into typed readings and snapshots;
- ``kpi``        one snapshot's verdicts (idle, throttled, PCIe downgrade, ECC) and its cost;
- ``recorder`` / ``tiers`` / ``history_read``  the 1 Hz recorder into ``monitor.sqlite``
                 (``gpuwise.store.history``), its raw → 1-min → 1-h tiers, and the history read back;
- ``series`` / ``energy``  the time series a history is made of, energy from NVML's counter.

What reads a history is elsewhere, above this package: ``gpuwise.finops`` (the FinOps report and the
Prometheus fleet reader), ``gpuwise.exporter`` (the Prometheus endpoint), ``gpuwise.tui`` (the live
terminal view, on top of ``gpuwise.report``). This package imports neither.

Imports only the standard library at import time; pynvml, psutil and prometheus_client are imported
when a sampler or the exporter starts, so `gpuwise` without the `monitor` extra still works.
"""

__all__: list[str] = []
