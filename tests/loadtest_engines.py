"""Real HTTP servers on 127.0.0.1 streaming the way each serving engine does (SSE framing, event shapes, how
the stream ends), scripted from the engines' own sources and captured streams:

- vLLM (entrypoints/openai serving_chat/serving_completion): a first chat event with ``role`` and empty
  content, content events with ``logprobs``/``finish_reason: null``, the finish_reason on the last content
  event, a ``choices: []`` usage event when ``stream_options.include_usage``, then ``data: [DONE]``.
- SGLang (srt/entrypoints/openai): the same shape, the usage event also when asked, ``[DONE]``.
- TGI (router/src/server.rs, axum ``Sse``): ``data:{…}`` with no space after the colon,
  ``system_fingerprint: "…-native"``, ``usage`` on the final event; TGI before 2.x ended the stream with
  no ``[DONE]`` (``tgi-legacy``, here also without chunked framing: the body ends when the connection closes).
- llama.cpp server: the last event carries ``finish_reason``, an empty delta, ``usage`` and ``timings``,
  then ``[DONE]``.
- Ollama (openai compatibility layer): ``system_fingerprint: "fp_ollama"``, a final event with
  ``finish_reason`` and empty content, a usage event when asked, ``[DONE]``.
- ``transformers serve``: a role event, content events (several written at once when they queue up), a
  final event with ``finish_reason`` and ``usage``, and no ``[DONE]``: the chunked body just ends (as
  measured from transformers 5.x on a tiny local model).

Extra behaviours: ``packed`` (two tokens per event, no ``usage``), ``json`` (a plain JSON reply to
``stream: true``) and ``cut`` (the body ends cleanly mid-generation: no finish_reason, no usage, no
``[DONE]``: a truncated reply that must count as dropped).
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

from loadtest_servers import _Http, chunk, prompt_text

STYLES = ("vllm", "sglang", "tgi", "tgi-legacy", "llamacpp", "ollama", "transformers")


def _choice(body: dict, text: str | None, finish: str | None, extra: dict | None = None) -> dict[str, Any]:
    if "messages" in body:
        delta = {} if text is None else {"content": text}
        out: dict[str, Any] = {"index": 0, "delta": delta}
    else:
        out = {"index": 0, "text": text or ""}
    out["finish_reason"] = finish
    out.update(extra or {})
    return out


class EngineServer(_Http):
    """Streams ``max_tokens`` tokens (" w0", " w1", …) in one engine's format, ``token_s`` apart."""

    def __init__(self, style: str, token_s: float = 0.005) -> None:
        super().__init__()
        self.style, self.token_s = style, token_s
        self.bodies: list[dict] = []

    async def handle(self, method: str, path: str, body: dict, writer: asyncio.StreamWriter) -> bool:
        if method == "GET" and path.endswith("/models"):
            return await self.respond_json(writer, 200, {"object": "list", "data": [{"id": self.style}]})
        self.bodies.append(body)
        n, prompt = int(body.get("max_tokens", 16)), prompt_text(body)
        usage = {"prompt_tokens": len(prompt.split()), "completion_tokens": n}
        usage["total_tokens"] = usage["prompt_tokens"] + n
        if self.style == "json" or not body.get("stream"):
            reply = chunk(body, "".join(f" w{i}" for i in range(n)))
            return await self.respond_json(writer, 200, {**reply, "usage": usage})
        if self.style == "tgi-legacy":
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n")
        else:
            await self.start_stream(writer)
        await self._events(body, n, usage, writer)
        if self.style == "tgi-legacy":
            await writer.drain()
            return False  # the body ends when the connection closes
        await self.end_stream(writer)
        return True

    async def _send(self, writer: asyncio.StreamWriter, payloads: list[Any]) -> None:
        sep = "data:" if self.style.startswith("tgi") else "data: "
        text = "".join(f"{sep}{p if isinstance(p, str) else json.dumps(p)}\n\n" for p in payloads)
        data = text.encode()
        if self.style == "tgi-legacy":
            writer.write(data)
        else:
            writer.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        await writer.drain()

    async def _events(self, body: dict, n: int, usage: dict, writer: asyncio.StreamWriter) -> None:
        style, chat = self.style, "messages" in body
        head = {"id": "x-1", "object": "chat.completion.chunk" if chat else "text_completion", "model": style}
        if style.startswith("tgi"):
            head["system_fingerprint"] = "2.4.1-native"
        if style == "ollama":
            head["system_fingerprint"] = "fp_ollama"
        include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
        if chat and style in ("vllm", "sglang", "transformers"):
            first = {
                "index": 0,
                "delta": {"role": "assistant", "content": "" if style != "transformers" else None},
            }
            await self._send(writer, [{**head, "choices": [first]}])
        step = 2 if style == "packed" else 1
        start = time.perf_counter()
        queued: list[Any] = []
        for i in range(0, n, step):
            await asyncio.sleep(max(0.0, start + i * self.token_s - time.perf_counter()))
            text = "".join(f" w{j}" for j in range(i, min(n, i + step)))
            last = i + step >= n
            finish = "length" if last and style in ("vllm", "sglang", "packed") else None
            event = {**head, "choices": [_choice(body, text, finish, {"logprobs": None})]}
            if style == "cut" and i >= n // 2:
                break
            queued.append(event)
            if style != "transformers" or i % 3 == 2 or last:  # transformers writes what queued at once
                await self._send(writer, queued)
                queued = []
        if style != "cut":
            await self._send(writer, [*queued, *self._tail(body, head, usage, include_usage)])

    def _tail(self, body: dict, head: dict, usage: dict, include_usage: bool) -> list[Any]:
        style = self.style
        if style in ("vllm", "sglang"):
            tail: list[Any] = [{**head, "choices": [], "usage": usage}] if include_usage else []
            return [*tail, "[DONE]"]
        if style in ("tgi", "tgi-legacy"):
            final = {**head, "choices": [_choice(body, None, "length")], "usage": usage}
            return [final] if style == "tgi-legacy" else [final, "[DONE]"]
        if style == "llamacpp":
            timings = {"prompt_n": usage["prompt_tokens"], "predicted_n": usage["completion_tokens"]}
            return [
                {**head, "choices": [_choice(body, None, "length")], "usage": usage, "timings": timings},
                "[DONE]",
            ]
        if style == "ollama":
            tail = [{**head, "choices": [], "usage": usage}] if include_usage else []
            return [{**head, "choices": [_choice(body, "", "length")]}, *tail, "[DONE]"]
        if style == "transformers":
            return [{**head, "choices": [_choice(body, None, "length")], "usage": usage}]
        return ["[DONE]"]  # packed: no usage at all
