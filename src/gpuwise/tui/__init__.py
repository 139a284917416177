"""The live terminal view of `gpuwise monitor` (``live``): a `rich` screen refreshed from the sampler.

It renders through ``gpuwise.report`` (the same document `monitor --json` prints), so it sits above
report; nothing below report may import it.
"""

__all__: list[str] = []
