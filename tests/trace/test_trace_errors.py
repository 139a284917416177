"""Bad input: one GpuwiseError line naming the file and the position, or a warning when the rest is usable."""

from __future__ import annotations

import gzip
import json
import random
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuwise.errors import GpuwiseError
from gpuwise.trace import parser, reader
from gpuwise.trace.analyze import build_report
from gpuwise.trace.rank import analyze_file

DATA = Path(__file__).parents[1] / "data" / "traces"
HAND = (DATA / "hand_rank0.json").read_bytes()


def write(tmp_path: Path, name: str, data: bytes) -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


def error_of(path: Path) -> str:
    with pytest.raises(GpuwiseError) as err:
        analyze_file(path)
    message = str(err.value)
    assert "\n" not in message and str(path) in message
    return message


def test_truncated_json_names_the_position(tmp_path):
    cut = HAND[: len(HAND) * 2 // 3]
    message = error_of(write(tmp_path, "cut.json", cut))
    assert "truncated" in message and "byte" in message


def test_truncated_json_in_many_batches(tmp_path, monkeypatch):
    monkeypatch.setattr(parser, "BATCH_BYTES", 80)
    monkeypatch.setattr(reader, "CHUNK_BYTES", 50)
    for size in (300, 1500, len(HAND) - 40, len(HAND) - 3):
        assert "truncated" in error_of(write(tmp_path, f"cut{size}.json", HAND[:size]))


def test_syntax_error_gives_line_and_column(tmp_path):
    broken = HAND.replace(b'"cat": "cpu_op", "name"', b'"cat": "cpu_op" "name"', 1)
    message = error_of(write(tmp_path, "broken.json", broken))
    line = HAND[: HAND.index(b'"cat": "cpu_op", "name"')].count(b"\n") + 1
    assert "invalid JSON" in message and f"line {line}," in message


def test_corrupt_and_truncated_gzip(tmp_path):
    data = bytearray(gzip.compress(HAND * 20))
    data[len(data) // 2 : len(data) // 2 + 8] = b"\xff" * 8
    assert "corrupt gzip data near compressed byte" in error_of(write(tmp_path, "bad.json.gz", bytes(data)))
    whole = gzip.compress(HAND)
    assert "gzip stream is truncated" in error_of(write(tmp_path, "short.json.gz", whole[: len(whole) - 30]))


@pytest.mark.parametrize(
    "content, expected",
    [
        (b"", "the file is empty"),
        (b"   \n", "the file is empty"),
        (b'{"schema": 1, "nodes": []}', "no 'traceEvents' array (top-level keys: schema, nodes)"),
        (b'{"traceEvents": {"a": 1}}', "no 'traceEvents' array"),
        (b"[[1, 2], [3, 4]]", "not a PyTorch profiler trace"),
        (b"\x89PNG\r\n\x1a\n\x00\x00", "binary data"),
        (b"hello", "expected '{' or '['"),
        (b'{"traceEvents": []}', "no events (empty traceEvents)"),
        (b'{"traceEvents": [{"ph": "X", "ts": 1, "dur": 2}],}', "invalid JSON after the events array"),
    ],
)
def test_not_a_trace(tmp_path, content, expected):
    assert expected in error_of(write(tmp_path, "x.json", content))


def test_usable_traces_with_bad_events_warn_instead(tmp_path):
    doc = json.loads(HAND)
    events = doc["traceEvents"]
    events.append(
        {
            "ph": "X",
            "cat": "kernel",
            "name": "k",
            "ts": 400,
            "dur": -5,
            "args": {"stream": 7, "correlation": 1},
        }
    )
    events.append({"ph": "X", "cat": "kernel", "name": "no_dur", "ts": 400, "args": {"stream": 7}})
    events.append({"ph": "X", "cat": "cpu_op", "name": "bad args", "ts": 1, "dur": 1, "args": [1, 2]})
    events.append([1, 2, 3])
    events.append({"ph": "X", "cat": "kernel", "name": "str ts", "ts": "later", "dur": 3})
    analysis = analyze_file(write(tmp_path, "odd.json", json.dumps(doc).encode()))
    text = " | ".join(analysis.warnings)
    for needle in (
        "negative duration",
        "without a numeric ts or dur",
        "non-object 'args'",
        "not JSON objects",
        "unknown kind ph='Q'",
    ):
        assert needle in text
    assert analysis.temporal.span_us == 1500  # the rest is analyzed as before


def test_cli_prints_one_line_and_exits_2(cli, tmp_path):
    path = write(tmp_path, "cut.json", HAND[:500])
    result = cli("trace", str(path))
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gpuwise: error: ") and "cut.json" in lines[0]
    missing = cli("trace", str(tmp_path / "nope.json"))
    assert missing.exit_code == 2 and "no such file or directory" in missing.stderr


def _mutate(data: bytes, rng: random.Random, steps: int) -> bytes:
    buf = bytearray(data)
    for _ in range(steps):
        op = rng.randrange(6)
        i = rng.randrange(len(buf) + 1) if buf else 0
        if op == 0 and buf:  # delete a run
            del buf[i : i + rng.randrange(1, 40)]
        elif op == 1:  # insert structural noise
            buf[i:i] = rng.choice(
                [b"{", b"}", b"[", b"]", b",", b'"', b"\\", b":", b"-1", b"null", b"\x00", b"\xff", b"1e999"]
            )
        elif op == 2 and buf:  # truncate
            del buf[i:]
        elif op == 3 and buf:  # duplicate a slice
            j = rng.randrange(len(buf))
            buf[i:i] = buf[j : j + rng.randrange(1, 200)]
        elif op == 4 and buf:  # flip a byte
            buf[min(i, len(buf) - 1)] ^= 1 << rng.randrange(8)
        elif op == 5:  # swap numbers for odd values
            buf = bytearray(
                bytes(buf).replace(
                    b'"dur": ', rng.choice([b'"dur": -', b'"dur": "', b'"dur": [', b'"dur": 1e308, "x": '])
                )
            )
    return bytes(buf)


@settings(
    max_examples=150, deadline=None, derandomize=True
)  # deterministic in CI; raise max_examples to fuzz wider
@given(seed=st.integers(0, 2**32 - 1), steps=st.integers(1, 6), compress=st.booleans(), small=st.booleans())
def test_fuzz_mutated_real_traces_raise_nothing_but_gpuwise_error(
    tmp_path_factory, seed, steps, compress, small
):
    """Whatever the damage, the user sees a GpuwiseError or an analysis, never a traceback."""
    rng = random.Random(seed)
    data = _mutate(HAND, rng, steps)
    if compress:
        data = gzip.compress(data)
        if rng.random() < 0.3:
            data = _mutate(data, rng, 1)
    path = tmp_path_factory.mktemp("fuzz") / ("m.json.gz" if compress else "m.json")
    path.write_bytes(data)
    old = parser.BATCH_BYTES, reader.CHUNK_BYTES
    if small:
        parser.BATCH_BYTES, reader.CHUNK_BYTES = 64, 48
    try:
        build_report([analyze_file(path)]).to_dict()  # evidence, rules and JSON too
    except GpuwiseError as err:
        assert "\n" not in str(err)
    finally:
        parser.BATCH_BYTES, reader.CHUNK_BYTES = old


REAL_TRACES = (
    "hta/trace_compare/base/base.json.gz",
    "hta/amd_trace/mi250_minitoy_train_ROCm6_2_kineto.json.gz",
    "hta/critical_path/cuda_event_sync/event_sync_trace.json.gz",
)


@settings(
    max_examples=120,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    which=st.sampled_from(REAL_TRACES),
    seed=st.integers(0, 2**32 - 1),
    steps=st.integers(1, 6),
    small=st.booleans(),
)
def test_fuzz_mutated_real_traces(trace_dir, tmp_path, which, seed, steps, small):
    """Mutations of real Kineto traces (HTA's test data): a GpuwiseError or an analysis, nothing else."""
    raw = gzip.decompress((trace_dir / which).read_bytes())
    rng = random.Random(seed)
    path = write(tmp_path, "mutated.json", _mutate(raw, rng, steps))
    old = parser.BATCH_BYTES, reader.CHUNK_BYTES
    if small:
        parser.BATCH_BYTES, reader.CHUNK_BYTES = 64, 48
    try:
        build_report([analyze_file(path)]).to_dict()  # evidence, rules and JSON too
    except GpuwiseError as err:
        assert "\n" not in str(err)
    finally:
        parser.BATCH_BYTES, reader.CHUNK_BYTES = old
