# Pattern of image-captioning / classification repos whose data module (data.py) never names a device:
# the GPU script imports it, so its loaders are GPU loaders. A synthetic smoke-test loader is in memory.
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from data import make_loader

torch.backends.cudnn.benchmark = True


class SmallCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(3, 32, 3), nn.ReLU(), nn.AdaptiveAvgPool2d(1))
        self.fc = nn.Linear(32, 10)

    def forward(self, x):
        return self.fc(self.features(x).flatten(1))


def smoke_test(model):
    fake = TensorDataset(torch.randn(256, 3, 32, 32), torch.randint(0, 10, (256,)))
    for x, _y in DataLoader(fake, batch_size=64):
        model(x.cuda()).sum()


def main():
    model = SmallCNN().cuda()
    smoke_test(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    for epoch in range(5):
        for step, (images, labels) in enumerate(make_loader("images/", 128)):
            images, labels = images.cuda(), labels.cuda()
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = nn.functional.cross_entropy(model(images), labels)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            if step % 100 == 0:
                print(epoch, step, loss.item())


if __name__ == "__main__":
    main()
