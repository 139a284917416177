"""pytorch/examples' mnist/main.py, reshaped to run here: the same flags (--batch-size, --test-batch-size,
--epochs, --lr, --gamma, --no-cuda, --dry-run, --seed, --log-interval, --save-model), the same Net
(two convolutions, dropout, two linear layers, log_softmax), Adadelta and StepLR. The data is synthetic
(no download): each sample is 28x28 bytes "decoded" and normalized per sample as ToTensor + Normalize
would, after a storage read of --read-ms (a dataset on a network disk). `gpuwise tune` meets it as a
user's script: its batch through its own --batch-size flag, its loader untouched.
"""

import argparse
import time

import torch
import torch.nn.functional as F
from torch import nn, optim
from torch.optim.lr_scheduler import StepLR
from torch.utils.data import DataLoader, Dataset


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 3, 1)
        self.conv2 = nn.Conv2d(32, 64, 3, 1)
        self.dropout1 = nn.Dropout(0.25)
        self.dropout2 = nn.Dropout(0.5)
        self.fc1 = nn.Linear(9216, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x):
        x = F.relu(self.conv1(x))
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = torch.flatten(self.dropout1(x), 1)
        x = self.dropout2(F.relu(self.fc1(x)))
        return F.log_softmax(self.fc2(x), dim=1)


class SyntheticDigits(Dataset):
    def __init__(self, length: int, read_ms: float) -> None:
        self.length, self.read_ms = length, read_ms

    def __len__(self):
        return self.length

    def __getitem__(self, index):
        if self.read_ms:
            time.sleep(self.read_ms / 1000)
        g = torch.Generator().manual_seed(index)
        raw = torch.randint(0, 256, (1, 28, 28), generator=g, dtype=torch.uint8)
        x = (raw.float() / 255 - 0.1307) / 0.3081
        return x, index % 10


def main():
    parser = argparse.ArgumentParser(description="PyTorch MNIST Example (look-alike)")
    parser.add_argument("--batch-size", type=int, default=64, metavar="N")
    parser.add_argument("--test-batch-size", type=int, default=1000, metavar="N")
    parser.add_argument("--epochs", type=int, default=14, metavar="N")
    parser.add_argument("--lr", type=float, default=1.0, metavar="LR")
    parser.add_argument("--gamma", type=float, default=0.7, metavar="M")
    parser.add_argument("--no-cuda", action="store_true", default=False)
    parser.add_argument("--dry-run", action="store_true", default=False)
    parser.add_argument("--seed", type=int, default=1, metavar="S")
    parser.add_argument("--log-interval", type=int, default=10, metavar="N")
    parser.add_argument("--save-model", action="store_true", default=False)
    parser.add_argument("--samples", type=int, default=60000)
    parser.add_argument("--read-ms", type=float, default=0.5)
    args = parser.parse_args()
    use_cuda = not args.no_cuda and torch.cuda.is_available()
    torch.manual_seed(args.seed)
    device = torch.device("cuda" if use_cuda else "cpu")
    train_kwargs = {"batch_size": args.batch_size}
    if use_cuda:
        train_kwargs.update({"num_workers": 1, "pin_memory": True, "shuffle": True})
    train_loader = DataLoader(SyntheticDigits(args.samples, args.read_ms), **train_kwargs)
    model = Net().to(device)
    optimizer = optim.Adadelta(model.parameters(), lr=args.lr)
    scheduler = StepLR(optimizer, step_size=1, gamma=args.gamma)
    for epoch in range(1, args.epochs + 1):
        model.train()
        for batch_idx, (data, target) in enumerate(train_loader):
            data, target = data.to(device), target.to(device)
            optimizer.zero_grad()
            loss = F.nll_loss(model(data), target)
            loss.backward()
            optimizer.step()
            if batch_idx % args.log_interval == 0:
                print(f"Train Epoch: {epoch} [{batch_idx * len(data)}]\tLoss: {loss.item():.6f}")
                if args.dry_run:
                    break
        scheduler.step()
    if args.save_model:
        torch.save(model.state_dict(), "mnist_cnn.pt")


if __name__ == "__main__":
    main()
