# Pattern of Lightning-AI examples run on the CPU (Trainer(accelerator="cpu")): no GPU finding applies.
import lightning as L
import torch
from torch import nn
from torch.utils.data import DataLoader, random_split
from torchvision import transforms
from torchvision.datasets import MNIST


class LitAutoEncoder(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(28 * 28, 64), nn.ReLU(), nn.Linear(64, 3))
        self.decoder = nn.Sequential(nn.Linear(3, 64), nn.ReLU(), nn.Linear(64, 28 * 28))

    def training_step(self, batch, batch_idx):
        x, _ = batch
        x = x.view(x.size(0), -1)
        loss = nn.functional.mse_loss(self.decoder(self.encoder(x)), x)
        print("train loss", loss.item())
        self.log("train_loss", loss)
        return loss

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=1e-3)


def main():
    dataset = MNIST(".", download=True, transform=transforms.ToTensor())
    train, val = random_split(dataset, [55000, 5000])
    trainer = L.Trainer(accelerator="cpu", devices=1, max_epochs=1)
    trainer.fit(LitAutoEncoder(), DataLoader(train, batch_size=32), DataLoader(val, batch_size=32))


if __name__ == "__main__":
    main()
