"""The model-family registry (gpuwise.catalog.families) covers every family the data and HF configs use."""

from __future__ import annotations

import json
from typing import get_args

import pytest

from gpuwise.catalog import list_models
from gpuwise.catalog.families import (
    FAMILIES,
    MLP_TYPES,
    NORM_TENSORS,
    NORM_TYPES,
    Family,
    family_for_hf_model_type,
    family_spec,
)
from gpuwise.catalog.models import model_from_hf_config, model_from_mapping
from gpuwise.errors import GpuwiseError
from gpuwise.vision.architectures import described, vision_arch


def test_the_family_literal_and_the_registry_keys_are_one_set():
    assert set(get_args(Family)) == set(FAMILIES)
    assert all(spec.name == name for name, spec in FAMILIES.items())
    assert set(NORM_TENSORS) == set(NORM_TYPES)


@pytest.mark.parametrize("model", list_models(), ids=lambda m: m.id)
def test_every_catalog_model_resolves_to_a_registered_family(model):
    assert model.family in FAMILIES, f"{model.id}: family {model.family!r} is not in catalog/families.py"
    assert model.mlp_type in MLP_TYPES and model.norm_type in NORM_TYPES
    spec = model.spec
    assert spec is FAMILIES[model.family]
    # The kind agrees with what the columns say: layer-list kinds are exactly the non-transformers.
    assert spec.is_layer_list == (not model.is_transformer)
    assert spec.is_decoder == model.is_decoder or not model.is_transformer


@pytest.mark.parametrize("model_id", described())
def test_every_vision_architecture_resolves_to_a_registered_image_family(model_id):
    arch = vision_arch(model_id)
    assert arch is not None
    spec = FAMILIES[arch.family]
    assert spec.takes_images
    assert (spec.kind == "diffusion") == arch.is_diffusion


def test_a_user_label_gets_the_generic_family_of_its_mlp():
    own = model_from_mapping(
        {"id": "tiny", "hidden_size": 64, "num_layers": 2, "num_attention_heads": 4, "vocab_size": 100},
        origin="models.yaml",
    )
    assert own.family == "tiny" and own.spec.kind == "decoder" and own.is_decoder
    assert family_spec("my-detector", "conv").kind == "cnn"
    assert family_spec("my-unet", "diffusion-unet").kind == "diffusion"


def test_every_hf_model_type_maps_to_a_family_that_claims_it():
    for name, spec in FAMILIES.items():
        for model_type in spec.hf_model_types:
            assert family_for_hf_model_type(model_type).name == name


def _config(tmp_path, **fields):
    cfg = {"hidden_size": 256, "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 1000, **fields}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    return path


def test_an_unknown_hf_model_type_is_one_clear_error(tmp_path):
    path = _config(tmp_path, model_type="qwen2_moe_not_real")
    with pytest.raises(GpuwiseError) as err:
        model_from_hf_config(path)
    text = str(err.value)
    assert "\n" not in text
    assert "config.json" in text and "unknown Hugging Face model_type 'qwen2_moe_not_real'" in text
    assert "qwen2" in text  # the known types are named


def test_hf_configs_take_the_family_conventions(tmp_path):
    gemma = model_from_hf_config(_config(tmp_path, model_type="gemma2"))
    assert (gemma.family, gemma.mlp_type, gemma.norm_type, gemma.tie_word_embeddings) == (
        "gemma",
        "gated_gelu",
        "rmsnorm",
        True,
    )
    llama_gelu = model_from_hf_config(_config(tmp_path, model_type="llama", hidden_act="gelu"))
    assert llama_gelu.mlp_type == "gated_gelu" and not llama_gelu.tie_word_embeddings
    mistral_gelu = model_from_hf_config(_config(tmp_path, model_type="mistral", hidden_act="gelu"))
    assert mistral_gelu.mlp_type == "gated_silu"  # only Llama configs let hidden_act pick the gate
    moe = model_from_hf_config(_config(tmp_path, model_type="qwen2", num_experts=8))
    assert moe.mlp_type == "gated_silu_moe" and moe.family == "qwen2"


def test_an_unknown_mlp_or_norm_type_is_named_with_its_file():
    row = {"id": "x", "hidden_size": 64, "num_layers": 2, "num_attention_heads": 4, "vocab_size": 100}
    with pytest.raises(GpuwiseError, match=r"models.yaml: unknown mlp_type 'swiglu'"):
        model_from_mapping({**row, "mlp_type": "swiglu"}, origin="models.yaml")
    with pytest.raises(GpuwiseError, match=r"unknown norm_type 'rms'.*did you mean 'rmsnorm'"):
        model_from_mapping({**row, "norm_type": "rms"}, origin="models.yaml")


def test_a_layer_list_model_without_a_published_count_is_counted_from_its_geometry():
    from dataclasses import replace

    from gpuwise.catalog import get_model

    resnet = get_model("resnet-50")
    unpublished = replace(resnet, params_b=None)
    assert unpublished.num_params == pytest.approx(resnet.num_params, rel=0.01)
    assert replace(resnet, id="not-described", params_b=None).num_params == 0
