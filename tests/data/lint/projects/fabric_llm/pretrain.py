# Pattern of Lightning-AI Fabric examples (lit-gpt style pretraining): Fabric on GPUs without precision=,
# a random-token dataset for a quick run.
import lightning as L
import torch
from torch.utils.data import DataLoader, Dataset


class RandomTokens(Dataset):
    def __init__(self, length=10_000, block=256):
        self.length, self.block = length, block

    def __len__(self):
        return self.length

    def __getitem__(self, index):
        return torch.randint(0, 50257, (self.block + 1,))


def main():
    fabric = L.Fabric(accelerator="cuda", devices=2, strategy="ddp")  # expect[no_mixed_precision]
    fabric.launch()
    model = torch.nn.Sequential(torch.nn.Embedding(50257, 256), torch.nn.Linear(256, 50257))
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)
    model, optimizer = fabric.setup(model, optimizer)
    loader = fabric.setup_dataloaders(DataLoader(RandomTokens(), batch_size=8))
    for step, batch in enumerate(loader):
        logits = model(batch[:, :-1])
        loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), batch[:, 1:].flatten())
        fabric.backward(loss)
        optimizer.step()
        optimizer.zero_grad()
        if step % 50 == 0:
            fabric.print(f"step {step} loss {loss.item():.3f}")


if __name__ == "__main__":
    main()
