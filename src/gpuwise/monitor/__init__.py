"""Live GPU monitoring: one NVML sampling layer (shared with the profiler), KPI checks, cost, exporter.

Imports only the standard library at import time; pynvml, psutil and prometheus_client are imported
when a sampler or the exporter starts, so `gpuwise` without the `monitor` extra still works.
"""
