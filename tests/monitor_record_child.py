"""A real recorder process on faked NVML, for the kill and concurrency tests of the monitor history.

``python monitor_record_child.py STORE SCENARIO INTERVAL [cli]``: with ``cli`` it runs
``gpuwise monitor --record --quiet`` itself (stopped by SIGTERM); otherwise the recorder loop, printing
``sampled N`` for each sample *before* it is written, so a test that kills it knows what it took.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from fake_nvml import fake_nvml
from gpuwise.monitor import recorder
from gpuwise.store.history import HistoryStore


def main() -> None:
    store, scenario, interval = Path(sys.argv[1]), sys.argv[2], float(sys.argv[3])
    with fake_nvml(scenario):
        if sys.argv[4:] == ["cli"]:
            from gpuwise.cli.app import main as gpuwise

            gpuwise(["monitor", "--record", "--quiet", "--interval", str(interval), "--store", str(store)])
            return
        sampler = recorder.ResilientSampler()
        rec = recorder.Recorder(HistoryStore.open(store), interval)
        taken = [0]

        def tick(_snap: object) -> None:
            taken[0] += 1
            print(f"sampled {taken[0]}", flush=True)

        recorder.run(sampler, rec, interval, on_tick=tick)


if __name__ == "__main__":
    main()
