import pytest

from gpuwise.errors import GpuwiseError
from gpuwise.workload import load_workload, workload_from_mapping


def test_defaults_and_aliases():
    w = workload_from_mapping({"model": "llama-3-8b", "task": "qlora", "precision": "nf4-dq", "gpus": 1})
    assert w.precision == "nf4" and w.double_quant
    assert w.is_lora and w.is_training
    inference = workload_from_mapping({"model": "llama-3-8b"})
    assert inference.optimizer == "none" and inference.is_inference


@pytest.mark.parametrize(
    "data, message",
    [
        ({"model": "llama-3-8b", "batch_size": 0}, "batch_size must be at least 1"),
        ({"model": "llama-3-8b", "task": "lora", "lora_rank": 4096}, "smaller than llama-3-8b's hidden size"),
        ({"model": "llama-3-8b", "tp": 3, "num_gpus": 3}, "does not divide llama-3-8b's 32 attention heads"),
        ({"model": "llama-3-8b", "task": "full-finetune", "precision": "nf4"}, "cannot be fully fine-tuned"),
        ({"model": "llama-3-8b", "gpu": "a100"}, "did you mean"),
        ({"model": "llama-3-8b", "precison": "bf16"}, "did you mean 'precision'"),
        ({"model": "llama-3-8b", "optimizer": "adamw9"}, "unknown optimizer"),
        ({"task": "lora"}, "needs a model"),
        ({"model": "llama-3-8b", "tp": 2}, "must be a multiple of tp"),
        ({"model": "llama-3-8b", "batch_size": True}, "batch_size must be int, got True"),
        ({"model": "llama-3-8b", "epochs": False}, "epochs must be float, got False"),
    ],
)
def test_impossible_values_get_one_clear_line(data, message):
    with pytest.raises(GpuwiseError, match=message):
        workload_from_mapping(data)


def test_yaml_errors_name_file_and_line(tmp_path):
    path = tmp_path / "w.yaml"
    path.write_text("model: llama-3-8b\ntask: lora\nbatch_size: [1,\n")
    with pytest.raises(GpuwiseError, match=r"w.yaml: line \d+"):
        load_workload(path)
    path.write_text("- just\n- a list\n")
    with pytest.raises(GpuwiseError, match="must be a mapping"):
        load_workload(path)
