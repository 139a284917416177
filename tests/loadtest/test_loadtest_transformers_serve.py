"""`gpuwise loadtest` against `transformers serve` itself (the real server: FastAPI + uvicorn) on a tiny
randomly initialised GPT-2 with a word-level tokenizer built here (no network). Its stream ends after the
finish_reason/usage event with no `data: [DONE]`.

`transformers serve` needs fastapi, uvicorn and openai (`pip install 'transformers[serving]'`); without
them the test is skipped, saying so.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

import httpx
import pytest

from gpuwise.loadtest.endpoint import parse_target
from gpuwise.loadtest.prompts import _WORDS, Lengths
from gpuwise.loadtest.session import Settings, run_loadtest

transformers = pytest.importorskip("transformers")
torch = pytest.importorskip("torch")
_serve = pytest.importorskip("transformers.utils.import_utils")
if not _serve.is_serve_available():
    pytest.skip(
        "transformers serve needs fastapi, uvicorn and openai: pip install 'transformers[serving]'",
        allow_module_level=True,
    )


def _tiny_model(where) -> str:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    vocab = {"[UNK]": 0, "<eos>": 1, **{w: i + 2 for i, w in enumerate(dict.fromkeys(_WORDS))}}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.decoder = decoders.WordPiece(prefix="##")
    fast = transformers.PreTrainedTokenizerFast(
        tokenizer_object=tok, unk_token="[UNK]", eos_token="<eos>", pad_token="<eos>"
    )
    fast.chat_template = "{% for m in messages %}{{ m['content'] }} {% endfor %}"
    fast.save_pretrained(where)
    config = transformers.GPT2Config(
        vocab_size=len(vocab), n_embd=64, n_layer=2, n_head=4, n_positions=512, bos_token_id=1, eos_token_id=1
    )
    torch.manual_seed(0)
    transformers.GPT2LMHeadModel(config).eval().save_pretrained(where)
    return str(where)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.slow
def test_transformers_serve_is_measured_without_done(tmp_path):
    model = _tiny_model(tmp_path / "tiny-gpt2")
    port = _free_port()
    code = "import sys; from transformers.cli.transformers import main; sys.argv[0] = 'transformers'; main()"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-c", code, "serve", "--host", "127.0.0.1", "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        url = f"http://127.0.0.1:{port}"
        for _ in range(240):  # the import of transformers + FastAPI takes a while on a busy machine
            try:
                if httpx.get(f"{url}/v1/models", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.5)
        raw = httpx.post(
            f"{url}/v1/chat/completions",
            json={"model": model, "messages": [{"role": "user", "content": "the day"}], "max_tokens": 3,
                  "stream": True},
            timeout=120,
        ).text  # fmt: skip
        assert "finish_reason" in raw and "[DONE]" not in raw  # the behaviour under test
        target = parse_target(url, "chat")
        settings = Settings(
            target.url, target.endpoint, model, "concurrency", [2], max_requests=4, duration_s=120,
            timeout_s=60, lengths=Lengths(16, 5),
        )  # fmt: skip
        result = run_loadtest(settings)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    (level,) = result.levels
    assert level.requests_ok == 4 and not level.errors and not result.warnings
    assert level.token_source == "usage" and 4 <= level.output_tokens <= 4 * 5
    assert level.input_tokens >= 4 * 16  # the chat template adds a separator per message
    assert 0 < level.pct("ttft", 50) < level.pct("e2e", 50)
