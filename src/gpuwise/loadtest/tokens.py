"""Token counts from a tokenizer file when the server sends no `usage` (better than one per chunk:
servers may pack several tokens into one event)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gpuwise.errors import GpuwiseError
from gpuwise.loadtest.types import RequestRecord


def load_tokenizer(path: Path) -> Any:
    """A Hugging Face `tokenizer.json` (the `tokenizers` library, installed with transformers)."""
    try:
        from tokenizers import Tokenizer
    except ImportError:
        raise GpuwiseError("--tokenizer needs the tokenizers package: pip install tokenizers") from None
    try:
        return Tokenizer.from_file(str(path))
    except Exception as err:  # tokenizers raises its own Exception type for unreadable files
        raise GpuwiseError(f"cannot read tokenizer {path}: {str(err).splitlines()[0][:200]}") from None


def _prompt_text(body: dict[str, Any]) -> str:
    if "messages" in body:
        return " ".join(str(m.get("content", "")) for m in body["messages"])
    return str(body.get("prompt", ""))


def recount(records: list[RequestRecord], bodies: list[dict[str, Any]], tokenizer: Any) -> None:
    """Tokenizer counts (the output text, the prompt sent) for requests whose server sent no `usage`."""
    for record in records:
        if record.ok and record.token_source == "chunks" and 0 <= record.index < len(bodies):
            body = bodies[record.index]
            record.output_tokens = len(tokenizer.encode(record.text, add_special_tokens=False).ids)
            record.input_tokens = len(tokenizer.encode(_prompt_text(body)).ids)
            record.token_source = "tokenizer"


__all__ = ["load_tokenizer", "recount"]
