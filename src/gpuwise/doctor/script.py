"""The reference workload as a script: what ``gpuwise doctor`` hands to ``gpuwise tune``.

``python -m gpuwise.doctor.script --storage-latency-s 0.002`` trains the reference workload
with its settings as written (PyTorch's DataLoader defaults); the tuner's boot hook changes the loader
and the precision from outside, exactly as it does for a user's script. The profiler's ``--stop``
ends it after the measured steps; ``--steps`` bounds it otherwise.
"""

from __future__ import annotations

import argparse

from gpuwise.doctor.workload import WorkloadSettings, train


def main(argv: list[str] | None = None) -> None:
    """Parse the workload's settings from ``argv`` (None: ``sys.argv``) and train for ``--steps`` steps."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    parser.add_argument("--batch-size", type=int, default=WorkloadSettings.batch_size)
    parser.add_argument("--storage-latency-s", type=float, default=WorkloadSettings.storage_latency_s)
    parser.add_argument("--compute-threads", type=int, default=WorkloadSettings.compute_threads)
    parser.add_argument("--seed", type=int, default=WorkloadSettings.seed)
    parser.add_argument("--steps", type=int, default=1000)
    args = parser.parse_args(argv)
    settings = WorkloadSettings(
        batch_size=args.batch_size,
        storage_latency_s=args.storage_latency_s,
        compute_threads=args.compute_threads,
        seed=args.seed,
    )
    train(settings, args.steps, args.device)


def command(settings: WorkloadSettings, device: str, steps: int) -> list[str]:
    """The command line that runs the reference workload with these settings."""
    import sys

    return [
        sys.executable,
        "-m",
        "gpuwise.doctor.script",
        "--device",
        device,
        "--batch-size",
        str(settings.batch_size),
        "--storage-latency-s",
        repr(settings.storage_latency_s),
        "--compute-threads",
        str(settings.compute_threads),
        "--seed",
        str(settings.seed),
        "--steps",
        str(steps),
    ]


if __name__ == "__main__":
    main()


__all__ = ["command", "main"]
