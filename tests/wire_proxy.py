"""A timestamping TCP proxy on 127.0.0.1: the load tester's packet-level ground truth without root.

Run as its own process (`ProxyProcess`) between the load tester and a server. For every request it logs,
on CLOCK_MONOTONIC (``time.perf_counter``):
- ``request_at``: the kernel's receive time (``SO_TIMESTAMPNS``) of the bytes that completed the request
  (head + Content-Length body) — on loopback, the instant the client's write syscall put them on the wire;
- ``first_token_handing_at`` / ``first_token_at``: just before the proxy's write of the first ``data: {``
  event to the client started / after it returned — the instant those bytes reached the client's socket
  lies between (loopback delivers inside the sender's syscall);
- ``first_token_from_server_at``: the kernel's receive time of those bytes from the server.
TTFT as the client's wire sees it lies between ``first_token_handing_at - request_at`` and
``first_token_at - request_at``: a client clock woken late by the
scheduler is late against it; the proxy's own delays shift both the truth and what the client receives.
The log is one JSON list written to the path given on the command line at SIGTERM.
"""

from __future__ import annotations

import contextlib
import json
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
from gpuwise.loadtest.wire import SO_TIMESTAMPNS, kernel_time_s, realtime_offset_s

_ANCILLARY = socket.CMSG_SPACE(16)


class _Connection:
    """One client connection and its server connection, with the requests seen on it."""

    def __init__(self, client: socket.socket, upstream: tuple[str, int], log: list[dict]) -> None:
        self.client = client
        self.server = socket.create_connection(upstream)
        for sock in (self.client, self.server):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
        self.log, self.offset_s = log, realtime_offset_s()
        self.waiting: list[dict] = []  # requests complete, first token not yet forwarded
        self.lock = threading.Lock()

    def _recv(self, sock: socket.socket) -> tuple[bytes, float]:
        data, ancillary, _flags, _addr = sock.recvmsg(65536, _ANCILLARY)
        stamp = kernel_time_s(ancillary, self.offset_s)
        return data, time.perf_counter() if stamp is None else stamp

    def upstream(self) -> None:
        """Client → server: find each request's last byte."""
        buffer = b""
        while True:
            try:
                data, stamp = self._recv(self.client)
            except OSError:  # the client reset the connection (a load test ending): nothing more to forward
                data, stamp = b"", 0.0
            if not data:
                with contextlib.suppress(OSError):
                    self.server.shutdown(socket.SHUT_WR)
                return
            buffer += data
            while (end := buffer.find(b"\r\n\r\n")) >= 0:
                head = buffer[:end].decode("latin-1").lower()
                length = next(
                    (
                        int(line.split(":", 1)[1])
                        for line in head.split("\r\n")
                        if line.startswith("content-length:")
                    ),
                    0,
                )
                if len(buffer) < end + 4 + length:
                    break
                buffer = buffer[end + 4 + length :]
                with self.lock:
                    entry = {"request_at": stamp, "path": head.split(" ", 2)[1]}
                    self.waiting.append(entry)
                    self.log.append(entry)
            self.server.sendall(data)

    def downstream(self) -> None:
        """Server → client: time the first event of each reply as it is handed to the client."""
        while True:
            try:
                data, stamp = self._recv(self.server)
            except OSError:
                data = b""
            if not data:
                self.client.close()
                return
            handing = time.perf_counter()
            self.client.sendall(data)
            forwarded = time.perf_counter()
            if b"data: {" in data:
                with self.lock:
                    if self.waiting:
                        entry = self.waiting.pop(0)
                        entry["first_token_at"] = forwarded
                        entry["first_token_handing_at"] = handing
                        entry["first_token_from_server_at"] = stamp


def serve(upstream_port: int, log_path: str) -> None:
    log: list[dict] = []
    listener = socket.create_server(("127.0.0.1", 0))

    def dump(*_args: object) -> None:
        Path(log_path).write_text(json.dumps(log))
        sys.exit(0)

    signal.signal(signal.SIGTERM, dump)
    print(listener.getsockname()[1], flush=True)
    while True:
        client, _ = listener.accept()
        conn = _Connection(client, ("127.0.0.1", upstream_port), log)
        threading.Thread(target=conn.upstream, daemon=True).start()
        threading.Thread(target=conn.downstream, daemon=True).start()


class ProxyProcess:
    """The proxy in its own process in front of ``upstream_url``; ``entries()`` after exit."""

    def __init__(self, upstream_url: str, log_path: Path) -> None:
        self.upstream_port = int(upstream_url.rsplit(":", 1)[1])
        self.log_path = log_path
        self.url = ""

    def __enter__(self) -> ProxyProcess:
        self.proc = subprocess.Popen(
            [sys.executable, __file__, str(self.upstream_port), str(self.log_path)],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        self.url = f"http://127.0.0.1:{int(self.proc.stdout.readline())}"
        return self

    def __exit__(self, *exc: object) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=10)

    def entries(self) -> list[dict]:
        """Every request seen, in arrival order (those answered with a stream carry ``first_token_at``)."""
        return sorted(json.loads(self.log_path.read_text()), key=lambda e: e["request_at"])


if __name__ == "__main__":
    serve(int(sys.argv[1]), sys.argv[2])
