"""Request bodies: synthetic prompts of a target length, or prompts read from a JSONL dataset."""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpuwise.errors import GpuwiseError
from gpuwise.loadtest.types import Endpoint

# Common one-token English words: most tokenizers (BPE, SentencePiece) encode each, with its leading space,
# as one token, so N words is about N prompt tokens. The server's `usage` reports the exact count.
_WORDS = [
    "the",
    "of",
    "and",
    "to",
    "in",
    "is",
    "was",
    "for",
    "on",
    "that",
    "with",
    "as",
    "by",
    "at",
    "from",
    "his",
    "her",
    "they",
    "this",
    "which",
    "are",
    "be",
    "had",
    "it",
    "an",
    "not",
    "but",
    "all",
    "were",
    "when",
    "we",
    "there",
    "can",
    "more",
    "one",
    "has",
    "been",
    "would",
    "their",
    "also",
    "two",
    "time",
    "first",
    "new",
    "into",
    "after",
    "other",
    "some",
    "what",
    "only",
    "over",
    "most",
    "made",
    "out",
    "then",
    "them",
    "these",
    "may",
    "such",
    "could",
    "many",
    "about",
    "city",
    "year",
    "people",
    "world",
]


@dataclass
class Lengths:
    """Prompt and output lengths in tokens: a mean, and a spread (0 = fixed; 0.5 = uniform ±50 %)."""

    prompt_tokens: int = 256
    output_tokens: int = 128
    spread: float = 0.0

    def draw(self, rng: random.Random, mean: int) -> int:
        """A length around ``mean`` tokens: uniform within ±``spread`` (at least 1), or ``mean`` itself when
        the spread is 0.
        """
        if self.spread <= 0:
            return mean
        low, high = max(1, round(mean * (1 - self.spread))), max(1, round(mean * (1 + self.spread)))
        return rng.randint(low, high)


def synthetic_prompt(rng: random.Random, tokens: int) -> str:
    """A prompt of ``tokens`` random common English words (at least one), roughly one token each."""
    return " ".join(rng.choice(_WORDS) for _ in range(max(1, tokens)))


def read_dataset(path: Path) -> list[dict[str, Any]]:
    """JSONL: one object per line with `prompt` (text) or `messages` (chat), and optional `max_tokens`."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as err:
        raise GpuwiseError(f"cannot read dataset {path}: {err.strerror}") from None
    rows = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as err:
            raise GpuwiseError(f"{path}:{number}: not JSON ({err.msg})") from None
        if not isinstance(row, dict) or not ("prompt" in row or "messages" in row):
            raise GpuwiseError(f"{path}:{number}: each line needs a 'prompt' or 'messages' field")
        rows.append(row)
    if not rows:
        raise GpuwiseError(f"dataset {path} has no requests")
    return rows


def _body_for(endpoint: Endpoint, model: str, prompt: Any, max_tokens: int, stream: bool) -> dict[str, Any]:
    body: dict[str, Any] = {"model": model, "max_tokens": max_tokens, "stream": stream, "temperature": 0}
    if stream:
        body["stream_options"] = {"include_usage": True}
    if endpoint == "chat":
        body["messages"] = prompt if isinstance(prompt, list) else [{"role": "user", "content": prompt}]
    else:
        body["prompt"] = prompt if isinstance(prompt, str) else " ".join(m.get("content", "") for m in prompt)
    return body


def request_bodies(
    endpoint: Endpoint,
    model: str,
    count: int,
    lengths: Lengths,
    seed: int,
    stream: bool = True,
    dataset: list[dict[str, Any]] | None = None,
    ignore_eos: bool = False,
) -> list[dict[str, Any]]:
    """``count`` bodies, the same for the same seed (the dataset is cycled in order); ``ignore_eos`` adds
    ``"ignore_eos": true`` (vLLM, SGLang, TGI and llama.cpp honour it: every reply is max_tokens long, as in
    ``vllm bench serve --ignore-eos``)."""
    rng = random.Random(seed)
    bodies = []
    for i in range(count):
        if dataset:
            row = dataset[i % len(dataset)]
            prompt = row.get("messages") or row.get("prompt")
            max_tokens = int(row.get("max_tokens") or lengths.draw(rng, lengths.output_tokens))
        else:
            prompt = synthetic_prompt(rng, lengths.draw(rng, lengths.prompt_tokens))
            max_tokens = lengths.draw(rng, lengths.output_tokens)
        body = _body_for(endpoint, model, prompt, max_tokens, stream)
        if ignore_eos:
            body["ignore_eos"] = True
        bodies.append(body)
    return bodies


__all__ = ["Lengths", "read_dataset", "request_bodies", "synthetic_prompt"]
