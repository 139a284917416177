import csv
import io
import json
from importlib import resources

import pytest

from gpuwise.catalog import get_gpu, get_model, list_gpus, list_models
from gpuwise.catalog import gpus as gpus_module
from gpuwise.catalog import models as models_module
from gpuwise.errors import GpuwiseError


def _bundled_ids(kind: str) -> list[str]:
    text = resources.files("gpuwise.catalog").joinpath(f"data/{kind}.csv").read_text(encoding="utf-8")
    return [row["id"] for row in csv.DictReader(io.StringIO(text))]


def test_every_bundled_row_is_in_the_catalog_once():
    # Every GPU row and 59 architectures (16 vision/diffusion rows added by helper "vision"), each row with
    # its sources (catalog/data/*.csv); none dropped or merged. Adding a GPU is one row: no count here.
    gpu_ids, model_ids = _bundled_ids("gpus"), _bundled_ids("models")
    assert len(gpu_ids) == len(set(gpu_ids)) > 0
    assert len(model_ids) == len(set(model_ids)) == 59
    assert set(gpu_ids) <= {g.id for g in list_gpus()}
    assert set(model_ids) <= {m.id for m in list_models()}


def test_llama3_8b_parameter_count_is_exact():
    counts = get_model("llama-3-8b").param_counts()
    assert counts.total == 8_030_261_248
    assert counts.embedding == 128_256 * 4096
    assert counts.lm_head == 128_256 * 4096


def test_parameter_counts_match_published_within_2pct():
    for model in list_models():
        if model.params_b:
            assert model.num_params / 1e9 == pytest.approx(model.params_b, rel=0.02), model.id


def test_mixtral_active_parameters():
    counts = get_model("mixtral-8x7b").param_counts()
    assert counts.total / 1e9 == pytest.approx(46.7, rel=0.01)
    assert counts.active / 1e9 == pytest.approx(12.9, rel=0.02)  # ~12.9B active per token


def test_gpu_dense_peaks_and_units():
    h100 = get_gpu("H100-SXM")
    assert h100.peak_tflops("bf16") == 989.5
    assert h100.memory_bytes == 80 * 10**9
    assert get_gpu("a100-80gb-sxm").peak_tflops("fp8") is None


def test_unknown_names_suggest():
    with pytest.raises(GpuwiseError, match="did you mean 'h100-sxm'"):
        get_gpu("h100")
    with pytest.raises(GpuwiseError, match="llama-3-8b"):
        get_model("llama3-8b")


def test_hf_config_json(tmp_path):
    config = {
        "model_type": "llama",
        "hidden_size": 4096,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "intermediate_size": 14336,
        "vocab_size": 128256,
        "tie_word_embeddings": False,
    }
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    assert get_model(str(path)).num_params == 8_030_261_248
    assert get_model(str(tmp_path)).num_params == 8_030_261_248  # folder holding config.json
    del config["num_attention_heads"]
    path.write_text(json.dumps(config))
    with pytest.raises(GpuwiseError, match="missing 'num_attention_heads'"):
        get_model(str(path))
    path.write_text("{not json")
    with pytest.raises(GpuwiseError, match="line 1, column 2"):
        get_model(str(path))


def test_user_catalog_files(tmp_path, monkeypatch):
    gpus = tmp_path / "gpus.yaml"
    gpus.write_text("- id: lab-card\n  memory_gb: 20\n  mem_bw_tbps: 0.5\n  bf16_tflops: 100\n")
    models = tmp_path / "models.toml"
    models.write_text(
        '[[models]]\nid = "tiny"\nhidden_size = 64\nnum_layers = 2\n'
        "num_attention_heads = 4\nvocab_size = 100\n"
    )
    monkeypatch.setenv("GPUWISE_GPUS", str(gpus))
    monkeypatch.setenv("GPUWISE_MODELS", str(models))
    gpus_module.clear_cache()
    models_module.clear_cache()
    try:
        assert get_gpu("lab-card").peak_tflops("bf16") == 100
        assert get_gpu("lab-card").origin == str(gpus)
        assert get_model("tiny").num_params > 0
        gpus.write_text("- id: broken\n  memory_gb: [1,\n")
        gpus_module.clear_cache()
        with pytest.raises(GpuwiseError, match=r"gpus.yaml:.*line"):
            get_gpu("lab-card")
    finally:
        monkeypatch.delenv("GPUWISE_GPUS")
        monkeypatch.delenv("GPUWISE_MODELS")
        gpus_module.clear_cache()
        models_module.clear_cache()


def test_cli_lists_and_errors(cli):
    result = cli("gpus", "--json")
    assert result.exit_code == 0
    assert len(result.json()["gpus"]) >= 28
    result = cli("gpus", "h100")
    assert result.exit_code == 2
    assert "did you mean 'h100-sxm'" in result.stderr
    assert "Traceback" not in result.stderr
    result = cli("models", "llama-3-8b", "--json")
    assert result.json()["model"]["num_params"] == 8_030_261_248


def test_every_gpu_row_says_how_sure_it_is_and_derived_rows_say_how():
    """`confidence` is a closed set; a `derived` row's notes name what was computed, and `plan` asks
    for a matmul benchmark on `derived` and `uncertain` rows alike."""
    from gpuwise.plan.hardware import _spec_caveats

    for gpu in list_gpus():
        assert gpu.confidence in {"official", "secondary", "derived", "uncertain"}, gpu.id
        if gpu.confidence == "derived":
            assert "derived" in gpu.notes.lower(), gpu.id
    assert get_gpu("rtx-4080").confidence == "derived" and get_gpu("tpu-v6e").confidence == "official"
    assert any("marked derived" in c for c in _spec_caveats(get_gpu("rtx-4080")))
    assert not any("marked" in c for c in _spec_caveats(get_gpu("tpu-v6e")))
    assert get_gpu("tpu-v5p").int8_tops is None  # Google's v5p page gives no INT8 rate
