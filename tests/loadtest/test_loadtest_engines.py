"""`gpuwise loadtest` against each engine's stream format (tests/loadtest_engines.py, real HTTP on 127.0.0.1),
a real TLS server with an openssl-made certificate, and the TTFT clock starting at the request's write."""

from __future__ import annotations

import ssl

import pytest

from gpuwise.errors import GpuwiseError
from gpuwise.loadtest.client import NOT_STREAMED
from gpuwise.loadtest.endpoint import parse_target, resolve_model
from gpuwise.loadtest.prompts import Lengths
from gpuwise.loadtest.session import Settings, run_loadtest
from loadtest_engines import STYLES, EngineServer
from loadtest_servers import ScriptedServer
from self_signed import self_signed


def _settings(url: str, endpoint: str, **kw) -> Settings:
    target = parse_target(url, endpoint)  # type: ignore[arg-type]
    base = {"mode": "concurrency", "targets": [2], "max_requests": 6, "duration_s": 30, "timeout_s": 10}
    base.update(kw)
    return Settings(target.url, target.endpoint, "m", lengths=Lengths(12, 8), **base)


@pytest.mark.parametrize("endpoint", ["chat", "completions"])
@pytest.mark.parametrize("style", STYLES)
def test_every_engine_stream_is_measured(style, endpoint):
    with EngineServer(style) as server:
        result = run_loadtest(_settings(server.url, endpoint))
    (level,) = result.levels
    assert level.requests_ok == 6 and not level.errors, (style, level.errors)
    assert level.token_source == "usage" and level.output_tokens == 6 * 8
    assert level.input_tokens == 6 * 12 and not result.warnings
    assert level.pct("ttft", 50) > 0 and level.pct("tpot", 50) > 0


def test_a_clean_end_without_finish_or_usage_is_dropped():
    with EngineServer("cut") as server, pytest.raises(GpuwiseError, match=r"dropped.*finish_reason"):
        run_loadtest(_settings(server.url, "chat"))


def test_a_json_reply_to_a_stream_request_says_no_stream():
    with EngineServer("json") as server:
        with pytest.raises(GpuwiseError, match="--no-stream"):
            run_loadtest(_settings(server.url, "chat"))
        (level,) = run_loadtest(_settings(server.url, "chat", stream=False)).levels
    assert level.requests_ok == 6 and level.output_tokens == 48
    assert NOT_STREAMED.endswith("use --no-stream")


def test_packed_events_warn_and_a_tokenizer_counts_them():
    from tokenizers import Tokenizer, models, pre_tokenizers

    with EngineServer("packed") as server:
        result = run_loadtest(_settings(server.url, "completions"))
        (level,) = result.levels
        assert level.token_source == "chunks" and level.output_tokens == 6 * 4  # 8 tokens in 4 events
        assert result.warnings and "--tokenizer" in result.warnings[0]
        vocab = {"[UNK]": 0, **{f"w{i}": i + 1 for i in range(8)}}
        tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
        tok.pre_tokenizer = pre_tokenizers.Whitespace()
        counted = run_loadtest(_settings(server.url, "completions", tokenizer=tok))
    (level,) = counted.levels
    assert level.token_source == "tokenizer" and level.output_tokens == 6 * 8 and not counted.warnings


def test_ignore_eos_is_sent_only_when_asked():
    with EngineServer("vllm") as server:
        run_loadtest(_settings(server.url, "chat", ignore_eos=True, max_requests=2))
        asked = list(server.bodies)
        server.bodies.clear()
        run_loadtest(_settings(server.url, "chat", max_requests=2))
    assert all(b.get("ignore_eos") is True for b in asked) and len(asked) == 3  # + the test request
    assert all("ignore_eos" not in b for b in server.bodies)


def _tls_server(tmp_path, **kw) -> tuple[ScriptedServer, ssl.SSLContext]:
    cert, key = self_signed(tmp_path)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server = ScriptedServer(kw.get("ttft_s", 0.01), 0.005)
    server.tls = context
    return server, ssl.create_default_context(cafile=str(cert))


def test_tls_errors_are_said_and_ca_cert_or_insecure_fix_them(tmp_path):
    server, trusting = _tls_server(tmp_path)
    with server:
        assert server.url.startswith("https://")
        target = parse_target(server.url, "chat")
        with pytest.raises(
            GpuwiseError, match=r"TLS failed .*self-signed certificate.*--ca-cert.*--insecure"
        ):
            resolve_model(target, None, {}, 5)
        assert resolve_model(target, None, {}, 5, trusting) == "scripted"
        assert resolve_model(target, None, {}, 5, False) == "scripted"
        with pytest.raises(GpuwiseError, match="TLS failed"):
            run_loadtest(_settings(server.url, "chat", max_requests=2))
        for verify in (trusting, False):
            (level,) = run_loadtest(_settings(server.url, "chat", max_requests=2, verify=verify)).levels
            assert level.requests_ok == 2, level.errors


def test_the_ttft_clock_starts_when_the_request_is_written(tmp_path):
    """Each request opens a new connection whose TLS handshake the server holds for 0.5 s: a clock started
    before the write would count it (TTFT >= 0.5 s); the designed TTFT is 0.01 s."""
    server, trusting = _tls_server(tmp_path)
    server.handshake_delay_s, server.close_after = 0.5, True
    with server:
        (level,) = run_loadtest(
            _settings(server.url, "chat", max_requests=3, targets=[1], verify=trusting)
        ).levels
    assert level.requests_ok == 3
    assert level.pct("ttft", 50) < 0.4 and level.pct("e2e", 50) < 0.45
