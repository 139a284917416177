"""Drive one load level (a concurrency or a rate) against the endpoint, bounded in count and time.

Stops issuing at --max-requests or --duration; requests still in flight get at most the request timeout
more. A set ``stop`` event (Ctrl-C) cancels what is in flight and keeps what finished.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from gpuwise.loadtest.client import send
from gpuwise.loadtest.schedule import arrival_times
from gpuwise.loadtest.types import Endpoint, LoadMode, RequestRecord

if TYPE_CHECKING:  # pragma: no cover
    import httpx


@dataclass
class LevelPlan:
    """One load level to drive: where to send, how (``mode`` and ``target``: a concurrency, or a rate in
    requests/s), the request bodies (their count bounds the level), the level's duration and each request's
    timeout in seconds, the arrival seed, and the HTTP headers (the API key).
    """

    url: str
    endpoint: Endpoint
    mode: LoadMode
    target: float  # concurrency, or rate in requests/s
    bodies: list[dict[str, Any]]  # one per request: their count is --max-requests
    duration_s: float
    timeout_s: float
    seed: int = 0
    headers: dict[str, str] = field(default_factory=dict)


def http_client(plan_timeout_s: float, verify: Any = True, wire: bool = False) -> httpx.AsyncClient:
    """No pool cap (httpx's default of 100 connections would queue requests inside the client); ``verify``
    is httpx's TLS setting (True, False for --insecure, or an ssl.SSLContext with --ca-cert); ``wire``
    (``http://`` targets) times requests with kernel timestamps (`gpuwise.loadtest.wire`)."""
    import httpx

    limits = httpx.Limits(max_connections=None, max_keepalive_connections=1024)
    timeout = httpx.Timeout(plan_timeout_s, connect=min(10.0, plan_timeout_s))
    if wire and sys.platform.startswith("linux"):  # recvmsg and the kernel's timestamps: Linux only
        from gpuwise.loadtest.wire import wire_transport

        return httpx.AsyncClient(timeout=timeout, transport=wire_transport(limits=limits))
    return httpx.AsyncClient(verify=verify, timeout=timeout, limits=limits)


def proxy_applies(url: str) -> bool:
    """Whether the environment sends ``url`` through a proxy (``HTTP_PROXY``/``ALL_PROXY``, less
    ``NO_PROXY``): then httpx's own transport, which honours it, is kept instead of the wire clock's
    direct sockets (the TTFT clock falls back to httpx's write event, as on ``https://``)."""
    import urllib.request
    from urllib.parse import urlsplit

    proxies = urllib.request.getproxies_environment()
    if not (proxies.get("http") or proxies.get("all")):
        return False
    return not urllib.request.proxy_bypass(
        urlsplit(url).hostname or ""
    )  # NO_PROXY (on Linux: the environment)


async def run_level(
    client: httpx.AsyncClient,
    plan: LevelPlan,
    stop: asyncio.Event,
    on_done: Callable[[RequestRecord], None] | None = None,
) -> tuple[list[RequestRecord], bool]:
    """The records of every request sent, and whether ``stop`` cut the level short."""
    origin = time.perf_counter()
    deadline = origin + plan.duration_s
    records: list[RequestRecord] = []

    async def one(index: int, body: dict[str, Any]) -> None:
        sent = time.perf_counter() - origin
        try:
            record = await asyncio.wait_for(
                send(client, plan.url, body, plan.endpoint, origin, plan.headers), plan.timeout_s
            )
        except asyncio.TimeoutError:
            record = RequestRecord(start_s=sent, error="timeout", error_detail="request timeout")
        except asyncio.CancelledError:
            records.append(RequestRecord(start_s=sent, error="cancelled", index=index))
            raise
        record.index = index
        records.append(record)
        if on_done is not None:
            on_done(record)

    tasks: list[asyncio.Task] = []
    if plan.mode == "concurrency":
        queue = iter(enumerate(plan.bodies))

        async def worker() -> None:
            while not stop.is_set() and time.perf_counter() < deadline:
                item = next(queue, None)
                if item is None:
                    return
                await one(*item)

        tasks = [asyncio.create_task(worker()) for _ in range(max(1, int(plan.target)))]
        issuer: asyncio.Task | None = None
    else:
        times = arrival_times(plan.mode, plan.target, len(plan.bodies), plan.seed)

        async def issue() -> None:
            for index, (offset, body) in enumerate(zip(times, plan.bodies, strict=True)):
                if offset > plan.duration_s or stop.is_set():
                    return
                delay = origin + offset - time.perf_counter()
                if delay > 0:
                    await asyncio.sleep(delay)
                tasks.append(asyncio.create_task(one(index, body)))

        issuer = asyncio.create_task(issue())
    hard_deadline = deadline + plan.timeout_s + 1.0
    while not stop.is_set() and time.perf_counter() < hard_deadline:
        pending = [t for t in [*tasks, *([issuer] if issuer else [])] if not t.done()]
        if not pending:
            break
        await asyncio.wait(pending, timeout=0.05)
    interrupted = stop.is_set()
    for task in [*tasks, *([issuer] if issuer else [])]:
        task.cancel()
    await asyncio.gather(*tasks, *([issuer] if issuer else []), return_exceptions=True)
    records.sort(key=lambda r: r.start_s)
    return records, interrupted


__all__ = ["LevelPlan", "http_client", "proxy_applies", "run_level"]
