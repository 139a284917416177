"""Real OpenAI-compatible streaming servers on 127.0.0.1 for the load-test tests (asyncio, in a thread).

`ScriptedServer`: known timings. A request waits for one of ``slots`` (so its capacity is
slots / service time), then sends its first token ``ttft_s`` after getting the slot and each next one
``token_s`` later, on absolute deadlines (sleep overshoot does not accumulate). Its log (GET /v1/log)
keeps when each request arrived, took its slot, sent its first token and freed the slot: on a busy
machine the event loop wakes late, so the service really lasts longer than designed. A prompt containing
`#500`, `#drop`, `#bad` or `#hang` gets an HTTP 500, a connection dropped mid-stream, a malformed SSE
event, or no answer at all.
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from collections.abc import Callable
from typing import Any


class _Http:
    """A minimal HTTP/1.1 server (keep-alive, Content-Length bodies) running its own loop in a thread."""

    def __init__(self) -> None:
        self.port = 0
        self.tls: Any = None  # an ssl.SSLContext: TLS, upgraded after `handshake_delay_s` on each connection
        self.handshake_delay_s = 0.0
        self.close_after = False  # close the connection after every reply (a new handshake per request)
        self.request_headers: list[dict[str, str]] = []
        self._tasks: set[asyncio.Task] = set()
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._server: asyncio.base_events.Server | None = None

    def __enter__(self):
        self._thread.start()
        if self.tls is not None:
            self._listener = socket.create_server(("127.0.0.1", 0))
            self._listener.setblocking(False)
            self.port = self._listener.getsockname()[1]
            asyncio.run_coroutine_threadsafe(self._accept_tls(), self.loop)
            return self
        self._server = asyncio.run_coroutine_threadsafe(
            asyncio.start_server(self._connection, "127.0.0.1", 0), self.loop
        ).result(timeout=10)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def _accept_tls(self) -> None:
        """Accept, wait `handshake_delay_s` without reading (the ClientHello waits in the kernel), then
        TLS."""
        loop = asyncio.get_running_loop()
        while True:
            conn, _ = await loop.sock_accept(self._listener)
            self._tasks.add(task := loop.create_task(self._tls_connection(conn)))
            task.add_done_callback(self._tasks.discard)

    async def _tls_connection(self, conn: socket.socket) -> None:
        await asyncio.sleep(self.handshake_delay_s)
        reader = asyncio.StreamReader()
        protocol = asyncio.StreamReaderProtocol(reader, self._connection)
        try:
            await asyncio.get_running_loop().connect_accepted_socket(lambda: protocol, conn, ssl=self.tls)
        except (OSError, ConnectionError):
            conn.close()  # the client refused the certificate

    def __exit__(self, *exc) -> None:
        async def close() -> None:
            if self.tls is not None:
                self._listener.close()
            assert self._server is not None or self.tls is not None
            if self._server is not None:
                self._server.close()
            for task in asyncio.all_tasks():
                if task is not asyncio.current_task():
                    task.cancel()

        asyncio.run_coroutine_threadsafe(close(), self.loop).result(timeout=10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=10)

    @property
    def url(self) -> str:
        return f"{'https' if self.tls is not None else 'http'}://127.0.0.1:{self.port}"

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode().split("\r\n")
                method, path, _ = lines[0].split(" ", 2)
                headers = {k.lower(): v.strip() for k, _, v in (ln.partition(":") for ln in lines[1:] if ln)}
                self.request_headers.append(headers)
                body = await reader.readexactly(int(headers.get("content-length", "0")))
                keep = await self.handle(method, path, json.loads(body) if body else {}, writer)
                if not keep or self.close_after:
                    break
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError, OSError):
            pass
        finally:
            writer.close()

    async def handle(self, method: str, path: str, body: dict, writer: asyncio.StreamWriter) -> bool:
        raise NotImplementedError

    @staticmethod
    async def respond_json(writer: asyncio.StreamWriter, status: int, payload: Any) -> bool:
        data = json.dumps(payload).encode()
        head = f"HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {len(data)}\r\n\r\n"
        writer.write(head.encode() + data)
        await writer.drain()
        return True

    @staticmethod
    async def start_stream(writer: asyncio.StreamWriter) -> None:
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
        )
        await writer.drain()

    @staticmethod
    async def event(writer: asyncio.StreamWriter, payload: Any) -> None:
        text = payload if isinstance(payload, str) else json.dumps(payload)
        data = f"data: {text}\n\n".encode()
        writer.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        await writer.drain()

    @staticmethod
    async def end_stream(writer: asyncio.StreamWriter) -> None:
        writer.write(b"0\r\n\r\n")
        await writer.drain()


def prompt_text(body: dict) -> str:
    if "messages" in body:
        return " ".join(m.get("content", "") for m in body["messages"])
    return str(body.get("prompt", ""))


def chunk(body: dict, text: str) -> dict:
    if "messages" in body:
        return {"choices": [{"index": 0, "delta": {"content": text}}]}
    return {"choices": [{"index": 0, "text": text}]}


class ScriptedServer(_Http):
    def __init__(self, ttft_s: float, token_s: float, slots: int = 64, usage: bool = True) -> None:
        super().__init__()
        self.ttft_s, self.token_s, self.usage = ttft_s, token_s, usage
        self.slots = slots
        self.served = 0
        self.log: list[dict] = []  # per request, in arrival order: time.perf_counter() when it was read
        self._sem: asyncio.Semaphore | None = None

    async def handle(self, method: str, path: str, body: dict, writer: asyncio.StreamWriter) -> bool:
        if method == "GET" and path.endswith("/models"):
            return await self.respond_json(writer, 200, {"data": [{"id": "scripted"}]})
        if method == "GET" and path.endswith("/log"):
            return await self.respond_json(writer, 200, self.log)
        entry = {"received_at": time.perf_counter()}  # the request fully read: its arrival
        self.log.append(entry)
        if not path.endswith("completions"):
            return await self.respond_json(writer, 404, {"error": "not found"})
        prompt = prompt_text(body)
        if "#500" in prompt:
            return await self.respond_json(writer, 500, {"error": "injected"})
        if self._sem is None:
            self._sem = asyncio.Semaphore(self.slots)
        async with self._sem:
            return await self._stream(body, prompt, writer, entry)

    async def _stream(self, body: dict, prompt: str, writer: asyncio.StreamWriter, entry: dict) -> bool:
        if "#hang" in prompt:
            await asyncio.sleep(3600)
        n = int(body.get("max_tokens", 16))
        start = entry["slot_at"] = time.perf_counter()  # the slot taken: its service starts
        if not body.get("stream"):  # one JSON reply once the last token is due
            await asyncio.sleep(self.ttft_s + (n - 1) * self.token_s)
            reply = chunk(body, "".join(f" w{i}" for i in range(n)))
            reply["usage"] = {"prompt_tokens": len(prompt.split()), "completion_tokens": n}
            return await self.respond_json(writer, 200, reply)
        await self.start_stream(writer)
        for i in range(n):
            await asyncio.sleep(max(0.0, start + self.ttft_s + i * self.token_s - time.perf_counter()))
            if i == 1 and "#drop" in prompt:
                writer.transport.abort()
                return False
            if i == 1 and "#bad" in prompt:
                await self.event(writer, '{"choices": [{"text": "unterminated')
                continue
            await self.event(writer, chunk(body, f" w{i}"))
            if i == 0:
                entry["first_sent_at"] = time.perf_counter()  # the first token's bytes handed to the kernel
        if self.usage and (body.get("stream_options") or {}).get("include_usage"):
            await self.event(
                writer,
                {"choices": [], "usage": {"prompt_tokens": len(prompt.split()), "completion_tokens": n}},
            )
        await self.event(writer, "[DONE]")
        await self.end_stream(writer)
        entry["done_at"] = time.perf_counter()  # the slot freed (later than designed on a busy machine)
        self.served += 1
        return True


class GenerateServer(_Http):
    """Streams tokens from ``step(prompt, max_tokens)`` (a generator function run in a worker thread)."""

    def __init__(self, generate: Callable[[str, int], Any], count_prompt: Callable[[str], int]) -> None:
        super().__init__()
        self.generate, self.count_prompt = generate, count_prompt
        self._lock = threading.Lock()

    async def handle(self, method: str, path: str, body: dict, writer: asyncio.StreamWriter) -> bool:
        if method == "GET" and path.endswith("/models"):
            return await self.respond_json(writer, 200, {"data": [{"id": "tiny-llama"}]})
        prompt, n = prompt_text(body), int(body.get("max_tokens", 16))
        queue: asyncio.Queue = asyncio.Queue()
        loop = asyncio.get_running_loop()

        def work() -> None:
            with self._lock:  # one generation at a time, like a batch-1 server
                for piece in self.generate(prompt, n):
                    loop.call_soon_threadsafe(queue.put_nowait, piece)
            loop.call_soon_threadsafe(queue.put_nowait, None)

        threading.Thread(target=work, daemon=True).start()
        await self.start_stream(writer)
        produced = 0
        while (piece := await queue.get()) is not None:
            produced += 1
            await self.event(writer, chunk(body, piece))
        usage = {"prompt_tokens": self.count_prompt(prompt), "completion_tokens": produced}
        await self.event(writer, {"choices": [], "usage": usage})
        await self.event(writer, "[DONE]")
        await self.end_stream(writer)
        return True


class ServerProcess:
    """`ScriptedServer` in its own process (no GIL shared with the client under test); stopped on exit."""

    def __init__(self, ttft_s: float, token_s: float, slots: int = 64, usage: bool = True) -> None:
        self.args = [str(ttft_s), str(token_s), str(slots), "1" if usage else "0"]
        self.url = ""

    def __enter__(self):
        import subprocess
        import sys

        self.proc = subprocess.Popen(
            [sys.executable, __file__, *self.args], stdout=subprocess.PIPE, text=True
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()  # the port, once listening
        if not line.strip():
            self.proc.kill()
            raise RuntimeError("scripted server did not start")
        self.url = f"http://127.0.0.1:{int(line)}"
        return self

    def __exit__(self, *exc) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except Exception:
            self.proc.kill()


if __name__ == "__main__":
    import sys

    ttft, token, slots, usage = sys.argv[1:5]
    with ScriptedServer(float(ttft), float(token), int(slots), usage == "1") as server:
        print(server.port, flush=True)
        threading.Event().wait(600)  # bounded: the test stops it long before
