# Pattern of Lightning-AI examples/pytorch/basics/autoencoder.py: LightningModule that logs tensors,
# a DataModule whose loaders have no workers, a callback that reads one batch per epoch.
import torch
import torch.nn.functional as F
from lightning.pytorch import LightningDataModule, LightningModule, callbacks
from torch import nn
from torch.utils.data import DataLoader


class PreviewCallback(callbacks.Callback):
    def on_train_epoch_end(self, trainer, module):
        images, _ = next(iter(DataLoader(trainer.datamodule.val_set, batch_size=4)))
        with torch.no_grad():
            module(images.flatten(1).to(module.device))


class AutoEncoder(LightningModule):
    def __init__(self, hidden=64):
        super().__init__()
        self.encode = nn.Sequential(nn.Linear(784, hidden), nn.ReLU(), nn.Linear(hidden, 3))
        self.decode = nn.Sequential(nn.Linear(3, hidden), nn.ReLU(), nn.Linear(hidden, 784))

    def forward(self, x):
        return self.decode(self.encode(x))

    def training_step(self, batch, index):
        return self.shared(batch, "train")

    def validation_step(self, batch, index):
        self.shared(batch, "val")

    def shared(self, batch, stage):
        x = batch[0].flatten(1)
        loss = F.mse_loss(x, self(x))
        self.log(f"{stage}_loss", loss, on_step=True)
        return loss

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=1e-3)


class Digits(LightningDataModule):
    def __init__(self, train_set, val_set, batch=32):
        super().__init__()
        self.train_set, self.val_set, self.batch = train_set, val_set, batch

    def train_dataloader(self):
        return DataLoader(self.train_set, batch_size=self.batch)

    def val_dataloader(self):
        return DataLoader(self.val_set, batch_size=self.batch)
