# Pattern of pytorch/examples mnist/main.py (torch.accelerator version): the device comes from
# torch.accelerator, loader options are passed as **kwargs, the loss is printed every log_interval.
# No finding: the fixed-size MNIST net (1.2 M weights) gains nothing from 16-bit math.
import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torchvision import datasets, transforms


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 3, 1)
        self.conv2 = nn.Conv2d(32, 64, 3, 1)
        self.fc1 = nn.Linear(9216, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv2(F.relu(self.conv1(x)))), 2)
        return F.log_softmax(self.fc2(F.relu(self.fc1(torch.flatten(x, 1)))), dim=1)


def train(args, model, device, train_loader, optimizer, epoch):
    model.train()
    for batch_idx, (data, target) in enumerate(train_loader):
        data, target = data.to(device), target.to(device)
        optimizer.zero_grad()
        loss = F.nll_loss(model(data), target)
        loss.backward()  # quiet: a literal 1.2 M-weight net is launch-bound, 16-bit math saves nothing
        optimizer.step()
        if batch_idx % args.log_interval == 0:
            print(f"Train Epoch: {epoch} [{batch_idx * len(data)}]\tLoss: {loss.item():.6f}")


def main():
    parser = argparse.ArgumentParser(description="PyTorch MNIST Example")
    parser.add_argument("--no-accel", action="store_true", help="disables accelerator")
    parser.add_argument("--log-interval", type=int, default=10)
    parser.add_argument("--epochs", type=int, default=14)
    args = parser.parse_args()
    use_accel = not args.no_accel and torch.accelerator.is_available()
    device = torch.accelerator.current_accelerator() if use_accel else torch.device("cpu")
    train_kwargs = {"batch_size": 64}
    if use_accel:
        train_kwargs.update(
            {"num_workers": 1, "persistent_workers": True, "pin_memory": True, "shuffle": True}
        )
    transform = transforms.Compose([transforms.ToTensor(), transforms.Normalize((0.1307,), (0.3081,))])
    dataset = datasets.MNIST("../data", train=True, download=True, transform=transform)
    train_loader = torch.utils.data.DataLoader(dataset, **train_kwargs)
    model = Net().to(device)
    optimizer = optim.Adadelta(model.parameters(), lr=1.0)
    for epoch in range(1, args.epochs + 1):
        train(args, model, device, train_loader, optimizer, epoch)
    torch.save(model.state_dict(), "mnist_cnn.pt")


if __name__ == "__main__":
    main()
