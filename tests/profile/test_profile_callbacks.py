"""Framework callbacks on tiny real training runs: Hugging Face Trainer and Lightning (both on CI)."""

from __future__ import annotations

import time

import pytest
import torch
from torch.utils.data import Dataset


class SlowPairs(Dataset):
    """A tiny regression set whose items take a while to load (so input_bound shows)."""

    def __init__(self, n: int = 256, delay_s: float = 0.002) -> None:
        g = torch.Generator().manual_seed(0)
        self.x = torch.randn(n, 8, generator=g)
        self.y = self.x.sum(dim=1, keepdim=True)
        self.delay_s = delay_s

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i):
        time.sleep(self.delay_s)
        return {"x": self.x[i], "labels": self.y[i]}


@pytest.mark.slow
def test_hugging_face_trainer_callback(tmp_path):
    transformers = pytest.importorskip("transformers")
    from gpuwise.profile.callbacks import GpuwiseCallback

    class Regressor(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.net = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))

        def forward(self, x, labels=None):
            out = self.net(x)
            return {"loss": torch.nn.functional.mse_loss(out, labels), "logits": out}

    callback = GpuwiseCallback(steps=8, warmup=2, store=tmp_path / "runs.sqlite")
    args = transformers.TrainingArguments(
        output_dir=str(tmp_path / "out"),
        per_device_train_batch_size=8,
        gradient_accumulation_steps=2,
        max_steps=12,
        logging_steps=100,
        save_strategy="no",
        report_to=[],
        use_cpu=True,
        dataloader_num_workers=0,
        disable_tqdm=True,
    )
    transformers.Trainer(
        model=Regressor(), args=args, train_dataset=SlowPairs(), callbacks=[callback]
    ).train()
    run = callback.result
    assert run is not None and run.run_id == 1
    assert run.summary.total_steps == 10 and run.summary.measured_steps == 8  # then the profiler detached
    assert run.summary.loader.batches >= 2 * 10  # a step is an optimizer step: two micro-batches each
    assert run.summary.loader.batch_size == 8
    assert "input_bound" in [f.id for f in run.findings]
    assert run.phases["forward"].s_per_step > 0 and run.phases["backward"].s_per_step > 0


@pytest.mark.slow
def test_lightning_callback(tmp_path):
    pl = pytest.importorskip("lightning.pytorch")
    from gpuwise.profile.callbacks import GpuwiseLightningCallback

    class Regressor(pl.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.net = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))

        def training_step(self, batch, batch_idx):
            return torch.nn.functional.mse_loss(self.net(batch["x"]), batch["labels"])

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.01)

    callback = GpuwiseLightningCallback(steps=8, warmup=2, store=tmp_path / "runs.sqlite")
    loader = torch.utils.data.DataLoader(SlowPairs(), batch_size=8)
    trainer = pl.Trainer(
        max_steps=12,
        accelerator="cpu",
        devices=1,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        callbacks=[callback],
        default_root_dir=str(tmp_path),
    )
    trainer.fit(Regressor(), loader)
    run = callback.result
    assert run is not None and run.run_id == 1
    assert run.summary.measured_steps == 8
    # Lightning runs forward/backward inside optimizer.step(closure): the phase stack keeps them apart
    phases = run.phases
    assert phases["forward"].s_per_step > 0 and phases["backward"].s_per_step > 0
    assert (
        phases["optimizer"].s_per_step
        < phases["forward"].s_per_step + phases["backward"].s_per_step + phases["data_wait"].s_per_step
    )
    assert "input_bound" in [f.id for f in run.findings]
