"""One streamed request to an OpenAI-compatible endpoint, timed chunk by chunk (SSE over httpx).

Every failure becomes an `ErrorKind` on the record; nothing here raises, so one bad request never
stops a load test.
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any

from gpuwise.loadtest.types import Endpoint, RequestRecord

if TYPE_CHECKING:  # pragma: no cover
    import httpx


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


def _apply_usage(record: RequestRecord, event: dict[str, Any]) -> None:
    usage = event.get("usage")
    if isinstance(usage, dict) and usage.get("completion_tokens") is not None:
        record.output_tokens = int(usage["completion_tokens"])
        record.input_tokens = usage.get("prompt_tokens")
        record.token_source = "usage"


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

    start = time.perf_counter()
    record = RequestRecord(start_s=start - origin, sent_at=start)
    chunks, last = 0, start
    done = False
    try:
        async with client.stream("POST", url, json=body, headers=headers) as response:
            if response.status_code >= 400:
                await response.aread()
                record.error, record.error_detail = "http_status", str(response.status_code)
                return record
            if not body.get("stream"):
                data = json.loads(await response.aread())
                now = time.perf_counter()
                record.ttft_s = record.e2e_s = now - start
                record.streamed = False
                record.text = chunk_text(data, endpoint)
                chunks = 1 if record.text else 0
                _apply_usage(record, data)
                done = True
            else:
                async for line in response.aiter_lines():
                    if not line.startswith("data:"):
                        continue  # blank separators, comments (": ping"), event: lines
                    payload = line[5:].strip()
                    if payload == "[DONE]":
                        done = True
                        break
                    event = json.loads(payload)
                    if not isinstance(event, dict):
                        raise ValueError("event is not a JSON object")
                    now = time.perf_counter()
                    if text := chunk_text(event, endpoint):
                        record.text += text
                        if record.ttft_s is None:
                            record.ttft_s = now - start
                        else:
                            record.itl_s.append(now - last)
                        chunks += 1
                        last = now
                    _apply_usage(record, event)
            if record.streamed:
                record.e2e_s = time.perf_counter() - start
    except httpx.TimeoutException:
        record.error = "timeout"
    except httpx.ConnectError as err:
        record.error, record.error_detail = "connect", str(err)[:200]
    except (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError) as err:
        record.error, record.error_detail = "dropped", str(err)[:200]
    except (ValueError, TypeError) as err:  # json.JSONDecodeError is a ValueError
        record.error, record.error_detail = "malformed_sse", str(err)[:200]
    else:
        if not done:
            record.error, record.error_detail = "dropped", "stream ended without data: [DONE]"
        elif record.ttft_s is None:
            record.error, record.error_detail = "malformed_sse", "no generated text in the response"
        elif record.token_source == "chunks":
            record.output_tokens = chunks
    return record


__all__ = ["chunk_text", "send"]
