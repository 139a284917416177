"""`gpuwise loadtest` against a real model: a tiny randomly initialized Llama on CPU behind an
OpenAI-compatible streaming server, with a word-level tokenizer built here (no download)."""

from __future__ import annotations

import pytest

from gpuwise.loadtest.endpoint import parse_target, resolve_model
from gpuwise.loadtest.prompts import _WORDS, Lengths
from gpuwise.loadtest.session import Settings, run_loadtest
from loadtest_servers import GenerateServer

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
tokenizers = pytest.importorskip("tokenizers")


def _tokenizer():
    from tokenizers import Tokenizer, models, pre_tokenizers

    vocab = {"[UNK]": 0, **{w: i + 1 for i, w in enumerate(dict.fromkeys(_WORDS))}}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    return tok


def _model(vocab_size: int):
    config = transformers.LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=256,
    )
    torch.manual_seed(0)
    return transformers.LlamaForCausalLM(config).eval()


@pytest.mark.slow
def test_a_real_tiny_model_streams_and_is_measured():
    tok = _tokenizer()
    model = _model(tok.get_vocab_size())
    words = {i: w for w, i in tok.get_vocab().items()}

    def generate(prompt: str, max_tokens: int):
        """Greedy decoding with the KV cache, one token per yield (prefill, then one decode step each)."""
        ids = torch.tensor([tok.encode(prompt).ids])
        past = None
        with torch.no_grad():
            for _ in range(max_tokens):
                out = model(input_ids=ids, past_key_values=past, use_cache=True)
                past = out.past_key_values
                ids = out.logits[:, -1:].argmax(-1)
                yield " " + words[int(ids[0, 0])]

    with GenerateServer(generate, lambda p: len(tok.encode(p).ids)) as server:
        target = parse_target(server.url, "chat")
        model_name = resolve_model(target, None, {}, 10)
        settings = Settings(
            target.url,
            target.endpoint,
            model_name,
            "concurrency",
            [2],
            max_requests=6,
            duration_s=30,
            timeout_s=20,
            lengths=Lengths(40, 6),
        )
        (level,) = run_loadtest(settings).levels
    assert model_name == "tiny-llama" and level.requests_ok == 6 and not level.errors
    assert level.token_source == "usage" and level.output_tokens == 6 * 6
    assert level.input_tokens == 6 * 40  # the synthetic prompts are exactly their target length here
    assert 0 < level.pct("ttft", 50) < level.pct("e2e", 50) and level.pct("tpot", 50) > 0
    assert level.pct("itl", 50) > 0 and level.request_throughput_per_s > 0
