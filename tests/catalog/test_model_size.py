"""Models given by size ('-m 13b', '70B', '8x7b'): a generic Llama-shaped decoder, stated and sourced."""

from __future__ import annotations

import pytest

from gpuwise.catalog import get_model
from gpuwise.catalog.model_size import generic_shape, parse_size
from gpuwise.errors import GpuwiseError


@pytest.mark.parametrize(
    ("text", "parsed"),
    [
        ("13b", (13.0, 1)),
        ("70B", (70.0, 1)),
        ("1.5b", (1.5, 1)),
        ("8x7b", (7.0, 8)),
        ("7B MoE 8x7b", (7.0, 8)),
        ("moe-8x22b", (22.0, 8)),
        ("13b dense", (13.0, 1)),
        ("llama-3-8b", None),
        ("mixtral-8x7b", None),
        ("13", None),
        ("gpt2", None),
    ],
)
def test_parse_size(text, parsed):
    assert parse_size(text) == parsed


@pytest.mark.parametrize("catalog_id", ["llama-3.1-8b", "llama-3.1-70b"])
def test_rule_reproduces_the_llama3_shapes_it_was_fitted_to(catalog_id):
    real = get_model(catalog_id)
    shape = generic_shape(real.num_params / 1e9)
    assert shape["hidden_size"] == real.hidden_size
    assert shape["num_attention_heads"] == real.num_attention_heads
    assert shape["num_kv_heads"] == real.num_kv_heads
    assert shape["intermediate_size"] == real.intermediate_size
    assert abs(shape["num_layers"] - real.num_layers) <= 1


@pytest.mark.parametrize(("size", "params_b"), [("8b", 8), ("13b", 13), ("70B", 70), ("405b", 405)])
def test_generic_model_has_the_size_asked_for(size, params_b):
    m = get_model(size)
    assert m.id.startswith("generic-") and m.is_decoder
    assert m.num_params / 1e9 == pytest.approx(params_b, rel=0.03)
    assert "assumed a generic" in m.notes and f"hidden {m.hidden_size}" in m.notes


def test_13b_names_the_nearest_catalog_models():
    notes = get_model("13b").notes
    assert "llama-2-13b" in notes and "nearest catalog models" in notes


def test_moe_size_is_a_mixtral_style_mixture():
    m = get_model("7B MoE 8x7b")
    assert m.is_moe and m.num_experts == 8 and m.experts_per_token == 2
    counts = m.param_counts()
    assert counts.active < counts.total / 3  # 2 of 8 experts per token
    assert "mixtral-8x7b" in m.notes and "8 experts with 2 routed per token" in m.notes


def test_catalog_ids_win_over_the_size_rule():
    assert get_model("llama-3-8b").origin == "catalog"
    assert get_model("mixtral-8x7b").origin == "catalog"


def test_out_of_range_sizes_are_refused():
    with pytest.raises(GpuwiseError, match="out of range"):
        get_model("0.1b")
    with pytest.raises(GpuwiseError, match="out of range"):
        get_model("5000b")


def test_cli_takes_a_size_and_states_the_shape(cli):
    res = cli("memory", "-m", "13b", "-t", "lora", "-g", "a100-80gb-sxm")
    assert res.exit_code == 0, res.stderr
    assert "generic Llama-3-shaped decoder" in res.stdout.replace("\n", " ")
    cost = cli("cost", "-m", "70B", "-t", "serving", "-g", "h100-sxm", "-n", "4", "--tp", "4", "--json")
    assert cost.exit_code == 0, cost.stderr
    assert any("llama-3-70b" in a for a in cost.json()["cost"]["perf"]["assumptions"])
    bad = cli("memory", "-m", "0.1b")
    assert bad.exit_code == 2 and "out of range" in bad.stderr and "Traceback" not in bad.stderr
