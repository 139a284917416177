"""Issue 11 item 7: a plain `gpuwise profile -- python train.py` of a Hugging Face Trainer or a Lightning
script (no gpuwise callback added) detects the framework, so the loader fix comes in its own form."""

from __future__ import annotations

import textwrap

import pytest

from profile_scenarios import profile_script

# A dataset whose samples take 4 ms each to "read": batches of 8 keep the loop waiting ~30 ms.
SLOW_DATASET = """
import time
import torch

torch.set_num_threads(1)
torch.manual_seed(0)


class SlowSet(torch.utils.data.Dataset):
    def __len__(self):
        return 4096

    def __getitem__(self, i):
        time.sleep(0.004)
        return {"x": torch.randn(16), "labels": torch.tensor(i % 4)}
"""

HF_TRAINER = SLOW_DATASET + textwrap.dedent(
    """
    import sys
    from transformers import Trainer, TrainingArguments


    class Classifier(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.net = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))

        def forward(self, x, labels=None):
            logits = self.net(x)
            return {"loss": torch.nn.functional.cross_entropy(logits, labels), "logits": logits}


    args = TrainingArguments(
        output_dir=sys.argv[1], max_steps=24, per_device_train_batch_size=8, use_cpu=True,
        report_to=[], save_strategy="no", logging_strategy="no", disable_tqdm=True,
    )
    Trainer(model=Classifier(), args=args, train_dataset=SlowSet()).train()
    """
)

LIGHTNING = SLOW_DATASET + textwrap.dedent(
    """
    import lightning.pytorch as pl


    class Classifier(pl.LightningModule):
        def __init__(self):
            super().__init__()
            self.net = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))

        def training_step(self, batch, i):
            return torch.nn.functional.cross_entropy(self.net(batch["x"]), batch["labels"])

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.1)


    loader = torch.utils.data.DataLoader(SlowSet(), batch_size=8)
    trainer = pl.Trainer(
        max_steps=24, accelerator="cpu", logger=False, enable_checkpointing=False,
        enable_progress_bar=False, enable_model_summary=False,
    )
    trainer.fit(Classifier(), loader)
    """
)


@pytest.mark.slow
def test_a_plain_profile_of_a_hf_trainer_script_gives_training_arguments(tmp_path):
    doc = profile_script(tmp_path, HF_TRAINER, str(tmp_path / "out"), steps=12, warmup=3)
    assert doc["evidence"]["framework"] == "hf-trainer"
    fix = {f["id"]: f for f in doc["findings"]}["input_bound"]
    assert (
        fix["fix_snippet"].startswith("TrainingArguments(")
        and "dataloader_num_workers=" in fix["fix_snippet"]
    )
    assert "dataloader_pin_memory=False" in fix["fix_snippet"]  # a CPU run: nothing to pin


@pytest.mark.slow
def test_a_plain_profile_of_a_lightning_script_gives_the_datamodule_form(tmp_path):
    doc = profile_script(tmp_path, LIGHTNING, steps=12, warmup=3)
    assert doc["evidence"]["framework"] == "lightning"
    fix = {f["id"]: f for f in doc["findings"]}["input_bound"]
    assert "LightningDataModule" in fix["fix_snippet"] and "def train_dataloader" in fix["fix_snippet"]
