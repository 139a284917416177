"""All-reduce bus bandwidth across the local GPUs: one process per GPU (NCCL), as nccl-tests runs.

The same code runs on the CPU with the gloo backend, which is how the tests exercise it for real.
"""

from __future__ import annotations

import os
import socket
import time
from typing import Any

from gpuwise.bench.timing import Samples
from gpuwise.bench.transfers import BUSBW, all_reduce_bus_bandwidth_gb_per_s
from gpuwise.bench.types import BandwidthFigure


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _rank_main(
    rank: int, world: int, backend: str, size_bytes: int, repeats: int, port: int, out: Any
) -> None:
    import torch
    import torch.distributed as dist

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group(backend, rank=rank, world_size=world)
    try:
        on_gpu = backend == "nccl"
        device = f"cuda:{rank}" if on_gpu else "cpu"
        if on_gpu:
            torch.cuda.set_device(rank)
        sync = torch.cuda.synchronize if on_gpu else (lambda: None)
        data = torch.ones(size_bytes // 4, dtype=torch.float32, device=device)
        for _ in range(2):
            dist.all_reduce(data)
        sync()
        times = []
        for _ in range(repeats):
            dist.barrier()
            start = time.perf_counter()
            dist.all_reduce(data)
            sync()
            times.append(time.perf_counter() - start)
        if rank == 0:
            out.put(times)
    finally:
        dist.destroy_process_group()


def all_reduce_figure(
    world: int,
    size_bytes: int,
    repeats: int,
    backend: str,
    link_gb_per_s: float | None,
    timeout_s: float = 120,
) -> BandwidthFigure:
    """Spawn `world` ranks, all-reduce fp32 data of `size_bytes`, return rank 0's best busbw."""
    import multiprocessing

    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    port = _free_port()
    procs = [
        ctx.Process(target=_rank_main, args=(r, world, backend, size_bytes, repeats, port, out))
        for r in range(world)
    ]
    for proc in procs:
        proc.start()
    try:
        times = out.get(timeout=timeout_s)
    finally:
        for proc in procs:
            proc.join(timeout=10)
            if proc.is_alive():
                proc.terminate()
    samples = Samples(times)
    busbw = all_reduce_bus_bandwidth_gb_per_s(size_bytes, samples.best_s, world)
    return BandwidthFigure(
        f"all-reduce busbw ({world} ranks, {backend})",
        busbw,
        size_bytes,
        samples.best_s,
        link_gb_per_s,
        BUSBW,
    )


__all__ = ["all_reduce_figure"]
