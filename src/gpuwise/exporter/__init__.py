"""`gpuwise exporter`: the monitor's live readings as a Prometheus endpoint.

- ``scrape``      the metric families, read from NVML at each scrape, and the server's start;
- ``web_config``  Prometheus' web config file (TLS, basic auth) and the WSGI server that honours it.

Sits above ``gpuwise.monitor`` (sampler, KPI verdicts); the fleet reader in ``gpuwise.finops`` reads
what this endpoint publishes through Prometheus, never by importing it.
"""

__all__: list[str] = []
