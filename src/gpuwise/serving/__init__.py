"""Serving capacity planning: a demand and an SLO in, replicas, the cheapest GPU and the monthly cost out.

A discrete-event simulation of a continuous-batching engine (``simulator``) timed by
``gpuwise.perf``'s step model, a goodput search (``goodput``), deployments at the demand
(``evaluate``) and the catalog sweep (``sweep``). Torch-free; see docs/serving.md.
"""

__all__: list[str] = []
