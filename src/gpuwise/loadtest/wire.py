"""Kernel-timestamped plain-TCP streams for httpx: the load tester's clock read at the wire.

On a loaded machine the client process wakes milliseconds after a reply's bytes arrive, so a clock read
after the event loop, the HTTP parser and the SSE parser ran is late by the scheduling delay (measured:
p90 2.4-4.9 ms, max 8-9.5 ms at load 4-17 on 2 CPUs). Here every ``recvmsg`` asks the kernel for the time
the bytes were queued on the socket (``SO_TIMESTAMPNS``, no privilege needed), converted from
CLOCK_REALTIME to ``time.perf_counter`` (CLOCK_MONOTONIC), and every write by the kernel's transmit
timestamp of its last byte (``SO_TIMESTAMPING`` software TX, read from the socket's error queue), else
the time just before its last ``send``. `client.send` reads both through the response's ``network_stream``.

Only ``http://`` targets on Linux use it (a TLS target, or another OS, keeps httpx's own backend and the
write-complete trace event; environment proxies do not apply to a wire-clocked target). Where the kernel
gives no timestamp a read falls back to ``perf_counter`` at return.
"""

from __future__ import annotations

import asyncio
import contextlib
import select
import socket
import struct
import time
from collections.abc import Iterable
from typing import Any

import httpcore

SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)  # Linux value; Python exposes it on 3.12+ only
SO_TIMESTAMPING = getattr(socket, "SO_TIMESTAMPING", 37)
# linux/net_tstamp.h: software TX timestamps, reported on the error queue without the payload, numbered.
_TX_FLAGS = (1 << 1) | (1 << 4) | (1 << 7) | (1 << 11)  # TX_SOFTWARE | SOFTWARE | OPT_ID | OPT_TSONLY
_ANCILLARY_BYTES = socket.CMSG_SPACE(16)  # one struct timespec (two 64-bit fields)
_ERRQUEUE_BYTES = 512  # a scm_timestamping (three timespecs) and the sock_extended_err beside it


def realtime_offset_s() -> float:
    """CLOCK_REALTIME minus CLOCK_MONOTONIC now, in seconds: subtract it from a kernel timestamp."""
    before = time.clock_gettime(time.CLOCK_MONOTONIC)
    real = time.clock_gettime(time.CLOCK_REALTIME)
    after = time.clock_gettime(time.CLOCK_MONOTONIC)
    return real - (before + after) / 2


def kernel_time_s(ancillary: list[tuple[int, int, bytes]], offset_s: float) -> float | None:
    """The kernel's time in a ``recvmsg``'s ancillary data (a receive timestamp, or a transmit one from the
    error queue; the first timespec is the software one), in perf_counter seconds; None when none."""
    for level, kind, data in ancillary:
        if level == socket.SOL_SOCKET and kind in (SO_TIMESTAMPNS, SO_TIMESTAMPING) and len(data) >= 16:
            sec, nsec = struct.unpack("qq", data[:16])
            return sec + nsec / 1e9 - offset_s
    return None


def _stamp_id(ancillary: list[tuple[int, int, bytes]]) -> int | None:
    """The ``ee_data`` of the ``sock_extended_err`` beside a TX stamp: with OPT_ID on a TCP socket, the
    offset of the last byte the stamp is for (IP_RECVERR, IPV6_RECVERR)."""
    for level, kind, data in ancillary:
        if (level, kind) in ((socket.IPPROTO_IP, 11), (socket.IPPROTO_IPV6, 25)) and len(data) >= 16:
            return int(struct.unpack_from("I", data, 12)[0])
    return None


def _settle(ready: asyncio.Future) -> None:
    if not ready.done():
        ready.set_result(None)


class WireStream(httpcore.AsyncNetworkStream):
    """A non-blocking TCP socket on the running asyncio loop that keeps ``arrived_s`` (the kernel
    time of the bytes the last read returned) and ``written_s`` (the kernel's transmit time of the last
    non-empty write's last byte)."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.arrived_s: float | None = None
        self.written_s: float | None = None
        self._sent_bytes = 0  # bytes written since the TX stamps were switched on: their OPT_ID counter
        self._offset_s = realtime_offset_s()
        with contextlib.suppress(OSError):  # no kernel timestamps here: reads fall back to perf_counter
            sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
        try:
            sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPING, _TX_FLAGS)
            self._tx_stamps = True
        except OSError:
            self._tx_stamps = False  # writes are timed just before their last send syscall

    def _transmitted_s(self) -> float | None:
        """The transmit timestamp of the last byte written so far, from the error queue (drained), or
        None when the kernel has not sent that byte yet (a stamp of an earlier write never stands in)."""
        found = None
        while self._tx_stamps:
            try:
                _data, ancillary, _flags, _addr = self.sock.recvmsg(0, _ERRQUEUE_BYTES, socket.MSG_ERRQUEUE)
            except OSError:  # BlockingIOError: drained
                break
            stamp = kernel_time_s(ancillary, self._offset_s)
            if stamp is not None and _stamp_id(ancillary) == (self._sent_bytes - 1) % 2**32:
                found = stamp
        return found

    async def _readable(self, timeout: float | None) -> None:
        loop = asyncio.get_running_loop()
        ready = loop.create_future()
        fd = self.sock.fileno()
        loop.add_reader(fd, _settle, ready)
        try:
            await asyncio.wait_for(ready, timeout)
        except asyncio.TimeoutError:
            raise httpcore.ReadTimeout("read timed out") from None
        finally:
            loop.remove_reader(fd)

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        """Up to ``max_bytes`` (b"" at end of stream), timing their arrival."""
        while True:
            try:
                data, ancillary, _flags, _addr = self.sock.recvmsg(max_bytes, _ANCILLARY_BYTES)
            except BlockingIOError:
                self._transmitted_s()  # a late transmit timestamp would keep the socket signalled
                await self._readable(timeout)
                continue
            except OSError as err:
                raise httpcore.ReadError(str(err)) from err
            arrived = kernel_time_s(ancillary, self._offset_s)
            self.arrived_s = time.perf_counter() if arrived is None else arrived
            return data

    async def _writable(self, timeout: float | None) -> None:
        loop = asyncio.get_running_loop()
        ready = loop.create_future()
        fd = self.sock.fileno()
        loop.add_writer(fd, _settle, ready)
        try:
            await asyncio.wait_for(ready, timeout)
        except asyncio.TimeoutError:
            raise httpcore.WriteTimeout("write timed out") from None
        finally:
            loop.remove_writer(fd)

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        """Send all of ``buffer``; ``written_s`` is the kernel's transmit time of its last byte, else the
        time just before the last ``send`` (a task woken by the send may preempt this one before the
        syscall returns: a clock read after it is late by that)."""
        if not buffer:
            return  # h11 ends a Content-Length body with an empty write: nothing goes on the wire
        view = memoryview(buffer)
        before = time.perf_counter()
        while view:
            try:
                before = time.perf_counter()
                sent = self.sock.send(view)
            except BlockingIOError:
                await self._writable(timeout)
                continue
            except OSError as err:
                raise httpcore.WriteError(str(err)) from err
            view = view[sent:]
            self._sent_bytes += sent
        self.written_s = self._transmitted_s() or before

    async def aclose(self) -> None:
        """Close the socket."""
        self.sock.close()

    def get_extra_info(self, info: str) -> Any:
        """What httpcore asks: the socket, the addresses, whether an idle connection turned readable."""
        if info == "socket":
            return self.sock
        if info == "client_addr":
            return self.sock.getsockname()
        if info == "server_addr":
            return self.sock.getpeername()
        if info == "is_readable":
            self._transmitted_s()
            return bool(select.select([self.sock], [], [], 0)[0])
        return None


class WireBackend(httpcore.AsyncNetworkBackend):
    """httpcore's network backend for plain TCP: connects and returns `WireStream`s."""

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        """Resolve, connect (TCP_NODELAY, as asyncio's own streams) and wrap the socket."""
        loop = asyncio.get_running_loop()
        try:
            infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except OSError as err:
            raise httpcore.ConnectError(str(err)) from err
        last: OSError | None = None
        for family, kind, proto, _name, address in infos:
            sock = socket.socket(family, kind, proto)
            sock.setblocking(False)
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                for option in socket_options or ():
                    sock.setsockopt(*option)
                if local_address:
                    sock.bind((local_address, 0))
                await asyncio.wait_for(loop.sock_connect(sock, address), timeout)
                return WireStream(sock)
            except asyncio.TimeoutError:
                sock.close()
                raise httpcore.ConnectTimeout(f"connect to {host}:{port} timed out") from None
            except OSError as err:
                sock.close()
                last = err
        raise httpcore.ConnectError(str(last or f"no address for {host}")) from last

    async def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None
    ) -> httpcore.AsyncNetworkStream:
        """Not used by the load tester (targets are URLs)."""
        raise httpcore.ConnectError("unix sockets are not supported by the wire clock")

    async def sleep(self, seconds: float) -> None:
        """httpcore's retry back-off."""
        await asyncio.sleep(seconds)


def wire_transport(**options: Any) -> Any:
    """An httpx transport whose connections are `WireStream`s (``options`` as httpx.AsyncHTTPTransport's
    limits; no proxy, no TLS: used for ``http://`` targets only)."""
    import httpx

    limits = options.get("limits") or httpx.Limits()
    transport = httpx.AsyncHTTPTransport(limits=limits)
    # httpx has no network-backend argument; its pool is httpcore's, which takes one.
    transport._pool = httpcore.AsyncConnectionPool(
        max_connections=limits.max_connections,
        max_keepalive_connections=limits.max_keepalive_connections,
        keepalive_expiry=limits.keepalive_expiry,
        network_backend=WireBackend(),
    )
    return transport


__all__ = [
    "SO_TIMESTAMPING",
    "SO_TIMESTAMPNS",
    "WireBackend",
    "WireStream",
    "kernel_time_s",
    "realtime_offset_s",
    "wire_transport",
]
