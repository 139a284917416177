"""The exporter's HTTP server: wsgiref's, hardened for a port that scanners and load balancers probe.

- a bounded pool: ``workers`` threads serve connections taken from a queue of ``backlog``; a connection
  that finds the queue full is closed at once, so 200 idle clients hold ``workers`` threads, not 200;
- per-connection time limits: ``idle_timeout_s`` on each socket read (an idle client is dropped) and
  ``request_deadline_s`` for the whole request (a slow-loris client sending one byte at a time is cut off
  by one watchdog thread);
- one log line (logger ``gpuwise.exporter``) for a failed TLS handshake (a plain-HTTP or TLS 1.1 probe
  on the HTTPS port), a malformed request or a dropped connection, never a traceback;
- the ``Server`` header says ``gpuwise``, not the Python version;
- ``/metrics`` serves the metrics, ``/`` a page linking to it, any other path 404.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any
from wsgiref.simple_server import ServerHandler, WSGIRequestHandler, WSGIServer

log = logging.getLogger("gpuwise.exporter")

SERVER_NAME = "gpuwise"
# Defaults: Prometheus' default scrape_timeout is 10 s, so a real scrape never needs longer.
WORKERS = 8
BACKLOG = 32
IDLE_TIMEOUT_S = 5.0
REQUEST_DEADLINE_S = 10.0
_LANDING = (
    b"<!doctype html><html><head><title>gpuwise exporter</title></head><body>"
    b'<h1>gpuwise exporter</h1><p><a href="/metrics">Metrics</a></p></body></html>\n'
)

Wsgi = Callable[[dict, Callable], Iterable[bytes]]


def routes(app: Wsgi) -> Wsgi:
    """``app`` at ``/metrics`` only; ``/`` a landing page linking to it; any other path 404."""

    def routed(environ: dict, start_response: Callable) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "") or "/"
        if path == "/metrics":
            return app(environ, start_response)
        if path == "/":
            start_response("200 OK", [("Content-Type", "text/html; charset=utf-8")])
            return [_LANDING]
        start_response("404 Not Found", [("Content-Type", "text/plain; charset=utf-8")])
        return [b"Not Found: the metrics are at /metrics\n"]

    return routed


class _Handler(ServerHandler):
    server_software = SERVER_NAME  # wsgiref's default names the CPython version

    def log_exception(self, exc_info: Any) -> None:
        log.error("exporter: the metrics app failed: %s: %s", exc_info[0].__name__, exc_info[1])


class _RequestHandler(WSGIRequestHandler):
    """wsgiref's request handler without the version banner, the access log or tracebacks."""

    def version_string(self) -> str:
        return SERVER_NAME

    def log_message(self, format: str, *args: Any) -> None:
        pass  # no access log: one line per scrape would flood the journal

    def log_error(self, format: str, *args: Any) -> None:
        log.warning("exporter: %s: %s", self.client_address[0], format % args)

    def handle(self) -> None:
        """One request (wsgiref's handle, with the handler above)."""
        self.raw_requestline = self.rfile.readline(65537)
        if len(self.raw_requestline) > 65536:
            self.requestline = ""
            self.request_version = ""
            self.command = ""
            self.send_error(414)
            return
        if not self.parse_request():
            return
        handler = _Handler(
            self.rfile,
            self.wfile,  # type: ignore[arg-type]
            self.get_stderr(),
            self.get_environ(),
            multithread=True,
        )
        handler.request_handler = self  # type: ignore[attr-defined]
        handler.run(self.server.get_app())  # type: ignore[attr-defined]


class PooledServer(WSGIServer):
    """A WSGI server with a bounded worker pool, per-connection timeouts and one-line errors."""

    request_queue_size = (
        128  # listen() backlog: a burst is accepted (and closed if need be), not left in SYN retries
    )

    def __init__(
        self,
        address: tuple[str, int],
        workers: int = WORKERS,
        backlog: int = BACKLOG,
        idle_timeout_s: float = IDLE_TIMEOUT_S,
        request_deadline_s: float = REQUEST_DEADLINE_S,
    ) -> None:
        super().__init__(address, _RequestHandler)
        self.idle_timeout_s = idle_timeout_s
        self.request_deadline_s = request_deadline_s
        self._queue: queue.Queue[tuple[Any, Any] | None] = queue.Queue(maxsize=backlog)
        self._deadlines: dict[socket.socket, float] = {}
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        self._threads = [threading.Thread(target=self._work, daemon=True) for _ in range(workers)]
        self._threads.append(threading.Thread(target=self._watch, daemon=True))
        for thread in self._threads:
            thread.start()

    def process_request(self, request: Any, client_address: Any) -> None:
        """Queue the connection for a worker; close it when the queue is full (one log line)."""
        try:
            self._queue.put_nowait((request, client_address))
        except queue.Full:
            log.warning(
                "exporter: %s: %d connections waiting, closed", client_address[0], self._queue.qsize()
            )
            self.shutdown_request(request)

    def _work(self) -> None:
        while (item := self._queue.get()) is not None:
            request, address = item
            with self._lock:
                self._deadlines[request] = time.monotonic() + self.request_deadline_s
            try:
                request.settimeout(self.idle_timeout_s)
                if isinstance(request, ssl.SSLSocket):
                    request.do_handshake()
                self.finish_request(request, address)
            except Exception as err:  # a client's fault: one line, the server goes on
                self._one_line(address, err)
            finally:
                with self._lock:
                    self._deadlines.pop(request, None)
                self.shutdown_request(request)

    def _watch(self) -> None:
        """Cut off connections past their request deadline (slow-loris clients)."""
        while not self._stopped.wait(min(0.25, self.request_deadline_s / 4)):
            now = time.monotonic()
            with self._lock:
                late = [s for s, deadline in self._deadlines.items() if deadline < now]
            for sock in late:
                with contextlib.suppress(OSError):  # the worker's read returns at once
                    socket.socket.shutdown(sock, socket.SHUT_RDWR)

    @staticmethod
    def _one_line(address: Any, err: BaseException) -> None:
        if isinstance(err, ssl.SSLError):
            what = f"TLS handshake failed ({err.reason or err})"
        elif isinstance(err, TimeoutError):
            what = "timed out"
        else:
            what = f"{type(err).__name__}: {err}"
        log.warning("exporter: %s: %s", address[0] if address else "?", what)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """socketserver prints a traceback here; errors are logged in one line by the worker instead."""

    def server_close(self) -> None:
        """Stop the workers and the watchdog, then close the listening socket."""
        self._stopped.set()
        while True:  # connections still waiting are closed
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                break
            if item is not None:
                self.shutdown_request(item[0])
        for _ in self._threads:
            self._queue.put(None)
        super().server_close()


__all__ = [
    "BACKLOG",
    "IDLE_TIMEOUT_S",
    "REQUEST_DEADLINE_S",
    "SERVER_NAME",
    "WORKERS",
    "PooledServer",
    "routes",
]
