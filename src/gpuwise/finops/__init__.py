"""FinOps analysis of a monitor history: what the GPUs cost, how busy they were, what to do about it.

- ``analyze``        a `History` (local or Prometheus) → a `FinopsReport` per GPU and fleet findings;
- ``tally``          one pass over a GPU's samples: in-use and idle hours, busy and headroom bands;
- ``attribution``    GPU-hours and energy per process and user;
- ``right_size``     the cheapest smaller catalog GPU that holds the peak and keeps up;
- ``fleet_findings`` one finding per id across the fleet, GPUs grouped;
- ``prometheus_source`` / ``prometheus_dialects`` / ``prometheus_http``  the fleet reader: a History
  from a Prometheus server that scrapes gpuwise's exporter, dcgm-exporter or nvitop-exporter.

Sits above ``gpuwise.monitor`` (series, energy, KPI constants) and below ``gpuwise.report``.
"""

__all__: list[str] = []
