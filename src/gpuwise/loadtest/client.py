"""One streamed request to an OpenAI-compatible endpoint, timed chunk by chunk (SSE over httpx).

Every failure becomes an `ErrorKind` on the record; nothing here raises, so one bad request never
stops a load test. The clock starts when the request's last byte is written to the socket, so client-side
set-up, JSON encoding and waiting for a pooled connection never count as server latency. On an ``http://``
target (`gpuwise.loadtest.wire` streams) that is just after the ``send`` syscall returned, and each token is
timed by the kernel's receive timestamp of the bytes that completed its event, so a client woken late on a
busy machine still reads the wire's times; elsewhere (TLS) httpcore's ``send_request_body.complete`` trace
event and the time the event was parsed. A stream is complete at ``data: [DONE]``, or when it
ends cleanly (the response framing closed without error) after a ``finish_reason`` or ``usage``
(`transformers serve`, TGI before 2.x and some llama.cpp forks send no ``[DONE]``).
"""

from __future__ import annotations

import json
import ssl
import time
from typing import TYPE_CHECKING, Any

from gpuwise.loadtest.types import Endpoint, RequestRecord
from gpuwise.loadtest.wire import WireStream

if TYPE_CHECKING:  # pragma: no cover
    import httpx

# The detail of a JSON reply to ``stream: true``: the caller's one-line hint says to use --no-stream.
NOT_STREAMED = "the server answered stream:true with one JSON reply, not an SSE stream: use --no-stream"
_WRITTEN = ("http11.send_request_body.complete", "http2.send_request_body.complete")


def chunk_text(event: dict[str, Any], endpoint: Endpoint) -> str:
    """The generated text in one streamed event (completions: `text`; chat: `delta.content`)."""
    choices = event.get("choices") or []
    if not choices or not isinstance(choices[0], dict):
        return ""
    choice = choices[0]
    if endpoint == "chat":
        delta = choice.get("delta") or choice.get("message") or {}
        return str(delta.get("content") or "") if isinstance(delta, dict) else ""
    return str(choice.get("text") or "")


def _finished(event: dict[str, Any]) -> bool:
    """True when the event closes the generation: a choice with a finish_reason, or the usage block."""
    choices = event.get("choices") or []
    if any(isinstance(c, dict) and c.get("finish_reason") for c in choices):
        return True
    return isinstance(event.get("usage"), dict)


def _apply_usage(record: RequestRecord, event: dict[str, Any]) -> None:
    usage = event.get("usage")
    if isinstance(usage, dict) and usage.get("completion_tokens") is not None:
        record.output_tokens = int(usage["completion_tokens"])
        record.input_tokens = usage.get("prompt_tokens")
        record.token_source = "usage"


def tls_failure(err: BaseException) -> str | None:
    """The TLS reason when a connect error is a certificate or handshake failure, else None."""
    seen: BaseException | None = err
    while seen is not None:
        if isinstance(seen, ssl.SSLError):
            return getattr(seen, "verify_message", None) or seen.reason or str(seen)
        seen = seen.__cause__ or seen.__context__
    text = str(err)
    return text if "SSL" in text or "CERTIFICATE" in text.upper() else None


class _Stream:
    """The parse state of one SSE stream: text, timings, chunk count and how it ended."""

    def __init__(self, record: RequestRecord, endpoint: Endpoint) -> None:
        self.record, self.endpoint = record, endpoint
        self.chunks, self.last = 0, 0.0
        self.done = self.finished = False
        self.wire: WireStream | None = None  # the connection's kernel-timed socket (http:// targets)

    def now(self) -> float:
        """When the bytes parsed last reached the host: the kernel's receive time, else now."""
        if self.wire is not None and self.wire.arrived_s is not None:
            return self.wire.arrived_s
        return time.perf_counter()

    def line(self, line: str, start: float) -> None:
        if not line.startswith("data:"):
            return  # blank separators, comments (": ping"), event: lines
        payload = line[5:].strip()
        if payload == "[DONE]":
            self.done = True
            return
        event = json.loads(payload)
        if not isinstance(event, dict):
            raise ValueError("event is not a JSON object")
        now = self.now()
        if text := chunk_text(event, self.endpoint):
            self.record.text += text
            if self.record.ttft_s is None:
                self.record.ttft_s = now - start
            else:
                self.record.itl_s.append(now - self.last)
            self.chunks += 1
            self.last = now
        self.finished |= _finished(event)
        _apply_usage(self.record, event)


async def _read(response: httpx.Response, record: RequestRecord, body: dict, stream: _Stream) -> float:
    """Read the reply into ``record``; returns the start time (the request fully written)."""
    start = stream.last = record.sent_at
    if not body.get("stream"):
        data = json.loads(await response.aread())
        record.ttft_s = record.e2e_s = stream.now() - start
        record.streamed = False
        record.text = chunk_text(data, stream.endpoint)
        stream.chunks = 1 if record.text else 0
        _apply_usage(record, data)
        stream.done = True
        return start
    if "json" in response.headers.get("content-type", "") and "event-stream" not in response.headers.get(
        "content-type", ""
    ):
        await response.aread()
        raise _NotStreamed
    async for line in response.aiter_lines():
        stream.line(line, start)
        if stream.done:
            break
    record.e2e_s = stream.now() - start
    return start


class _NotStreamed(Exception):
    """A plain JSON reply where an SSE stream was asked for."""


async def send(
    client: httpx.AsyncClient,
    url: str,
    body: dict[str, Any],
    endpoint: Endpoint,
    origin: float,
    headers: dict[str, str] | None = None,
) -> RequestRecord:
    """POST ``body`` to ``url`` and time it; ``origin`` is the level's perf_counter zero."""
    import httpx

    issued = time.perf_counter()
    record = RequestRecord(start_s=issued - origin, sent_at=issued)

    async def trace(name: str, _info: dict[str, Any]) -> None:
        if name in _WRITTEN:
            record.sent_at = time.perf_counter()
            record.start_s = record.sent_at - origin

    stream = _Stream(record, endpoint)
    try:
        async with client.stream(
            "POST", url, json=body, headers=headers, extensions={"trace": trace}
        ) as response:
            _wire_clock(response, record, stream, origin)
            if response.status_code >= 400:
                await response.aread()
                record.error, record.error_detail = "http_status", str(response.status_code)
                return record
            await _read(response, record, body, stream)
    except httpx.TimeoutException:
        record.error = "timeout"
    except httpx.ConnectError as err:
        reason = tls_failure(err)
        record.error = "connect"
        record.error_detail = f"TLS: {reason}"[:200] if reason else str(err)[:200]
    except (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError) as err:
        record.error, record.error_detail = "dropped", str(err)[:200]
    except _NotStreamed:
        record.error, record.error_detail = "malformed_sse", NOT_STREAMED
    except (ValueError, TypeError) as err:  # json.JSONDecodeError is a ValueError
        record.error, record.error_detail = "malformed_sse", str(err)[:200]
    else:
        _close(record, stream)
    return record


def _wire_clock(response: httpx.Response, record: RequestRecord, stream: _Stream, origin: float) -> None:
    """On a kernel-timed connection, start the clock when the request's last write syscall returned."""
    wire = response.extensions.get("network_stream")
    if isinstance(wire, WireStream) and wire.written_s is not None:
        stream.wire = wire
        record.sent_at = wire.written_s
        record.start_s = wire.written_s - origin


def _close(record: RequestRecord, stream: _Stream) -> None:
    """The verdict of a stream that ended without a transport error."""
    if not stream.done and not stream.finished:
        record.error = "dropped"
        record.error_detail = "stream ended without data: [DONE], a finish_reason or usage"
    elif record.ttft_s is None:
        record.error, record.error_detail = "malformed_sse", "no generated text in the response"
    elif record.token_source == "chunks":
        record.output_tokens = stream.chunks


__all__ = ["NOT_STREAMED", "chunk_text", "send", "tls_failure"]
