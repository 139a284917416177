"""The streaming parser: same events as a plain JSON load, whatever the layout, batch size or compression."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuwise.trace import parser, reader
from gpuwise.trace.parser import parse_trace, scan_elements

DATA = Path(__file__).parents[1] / "data" / "traces"


def assert_same_as_json(table, document):
    everything = document["traceEvents"] if isinstance(document, dict) else document
    assert table.events_total == len(everything)
    events = [e for e in everything if e.get("ph") == "X"]  # rows are the complete events
    assert table.num_events == len(events)
    expected_ts = np.array(
        [e.get("ts") if isinstance(e.get("ts"), (int, float)) else None for e in events], dtype=float
    )
    assert np.array_equal(table.ts, expected_ts, equal_nan=True)
    assert [table.names[i] for i in table.name] == [e.get("name") for e in events]
    if isinstance(document, dict):
        assert table.metadata == {k: v for k, v in document.items() if k != "traceEvents"}


@pytest.fixture
def tiny_batches(monkeypatch):
    """Force many batches and many chunk boundaries on small files."""
    monkeypatch.setattr(parser, "BATCH_BYTES", 97)
    monkeypatch.setattr(reader, "CHUNK_BYTES", 61)


def test_real_traces_match_a_plain_json_load(trace_dir):
    for rel in (
        "hta/amd_trace/mi250_minitoy_train_ROCm6_2_kineto.json.gz",
        "kineto/test/gpu_metrics_input.json",
        "hta/trace_file_list/inference_rank_1.json.gz",
        "hta/nccl_parser_config/nccl_data.json.gz",
    ):
        path = trace_dir / rel
        raw = gzip.decompress(path.read_bytes()) if rel.endswith(".gz") else path.read_bytes()
        assert_same_as_json(parse_trace(path), orjson.loads(raw))


def test_tiny_batches_and_chunks_give_the_same_table(tiny_batches):
    document = json.loads((DATA / "hand_rank0.json").read_text())
    table = parse_trace(DATA / "hand_rank0.json")
    assert_same_as_json(table, document)
    assert table.memory.total_reserved.tolist() == [4 * 2**30, 4 * 2**30]


def test_layouts(tmp_path, tiny_batches):
    events = [
        {
            "ph": "X",
            "cat": "kernel",
            "name": 'a "}, {" trap \\ }]',
            "ts": 1,
            "dur": 2,
            "args": {"stream": 7, "x": [{"y": 1}, {"z": "}, {"}]},
        },
        {"ph": "X", "cat": "cpu_op", "name": "ünïcødé ✓", "ts": 2.5, "dur": 1, "args": {"correlation": 3}},
    ]
    layouts = {
        "compact.json": json.dumps({"traceEvents": events, "traceName": "x"}, separators=(",", ":")),
        "indented.json": json.dumps(
            {"schemaVersion": 1, "traceEvents": events, "distributedInfo": {"rank": 3}}, indent=4
        ),
        "events_last.json": json.dumps(
            {"deviceProperties": [{"name": "traceEvents"}], "note": '"traceEvents": [', "traceEvents": events}
        ),
        "bare_array.json": json.dumps(events),
        "bom.json": "\ufeff" + json.dumps({"traceEvents": events}),
    }
    for name, text in layouts.items():
        path = tmp_path / name
        path.write_bytes(text.encode("utf-8"))
        document = json.loads(text.lstrip("\ufeff"))
        table = parse_trace(path)
        assert_same_as_json(table, document)
        assert table.ts_has_float  # ts 2.5: HTA rounds such traces to whole µs
        assert table.stream.tolist() == [7, -1] and table.correlation.tolist() == [-1, 3]


def test_gzip_is_detected_by_content_and_members_concatenate(tmp_path):
    doc = json.loads((DATA / "hand_rank0.json").read_text())
    text = json.dumps(doc).encode()
    half = len(text) // 2
    path = tmp_path / "looks_plain.json"  # gzip data under a plain name
    path.write_bytes(gzip.compress(text[:half]) + gzip.compress(text[half:]))
    assert_same_as_json(parse_trace(path), doc)


def test_empty_event_list_parses_to_an_empty_table(tmp_path):
    path = tmp_path / "empty.json"
    path.write_text('{"traceEvents": [ ], "traceName": "t"}')
    table = parse_trace(path)
    assert table.num_events == 0 and table.metadata == {"traceName": "t"}


json_leaf = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**12), 10**12),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(alphabet=st.sampled_from([*'ab{}[]",:\\ \n\tü', "\u2028"]), max_size=12),
)
json_value = st.recursive(
    json_leaf,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=8,
)
event = st.fixed_dictionaries(
    {
        "ph": st.sampled_from(["X", "i", "s", "f", "M"]),
        "name": st.text(alphabet=st.sampled_from(list('ab}{,"\\ [')), max_size=10),
        "ts": st.one_of(st.integers(0, 10**9), st.floats(0, 1e9)),
        "dur": st.integers(0, 10**6),
    },
    optional={
        "cat": st.sampled_from(["kernel", "cpu_op", "cuda_runtime"]),
        "args": st.dictionaries(st.text(max_size=8), json_value, max_size=4),
        "pid": st.one_of(st.integers(0, 9), st.text(max_size=4)),
    },
)


@settings(
    max_examples=60,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(events=st.lists(event, max_size=12), indent=st.sampled_from([None, 0, 2]), tail=st.booleans())
def test_property_any_valid_trace_parses_exactly(tmp_path, tiny_batches, events, indent, tail):
    document = {"schemaVersion": 1, "traceEvents": events}
    if tail:
        document["traceName"] = "}, {]"
    path = tmp_path / "prop.json"
    path.write_text(json.dumps(document, indent=indent, ensure_ascii=False), encoding="utf-8")
    assert_same_as_json(parse_trace(path), document)


@settings(max_examples=60, deadline=None, derandomize=True)
@given(elements=st.lists(json_value, max_size=8), after=st.text(max_size=10))
def test_scan_elements_finds_exact_element_ends(elements, after):
    body = ",".join(json.dumps(e) for e in elements)
    data = (body + "]" + after).encode()
    ends, array_end = scan_elements(data)
    assert array_end == len(body.encode())
    # every reported end closes an object or array element at the top level
    containers = [e for e in elements if isinstance(e, (dict, list))]
    assert len(ends) == len(containers)
