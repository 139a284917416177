# Pattern of the pytorch/examples dcgan loop: the functional nn.parallel.data_parallel in forward, the
# losses printed with "%.4f" every step (float() on a tensor: one host wait), a --cuda switch.
import argparse

import torch
import torch.nn as nn
import torch.optim as optim
import torchvision.datasets as dset
import torchvision.transforms as transforms


class Critic(nn.Module):
    def __init__(self, ngpu, width):
        super().__init__()
        self.ngpu = ngpu
        self.body = nn.Sequential(
            nn.Conv2d(3, width, 4, 2, 1), nn.LeakyReLU(0.2), nn.Conv2d(width, 1, 4, 1, 0)
        )

    def forward(self, x):
        ids = range(self.ngpu) if self.ngpu > 1 else None
        return nn.parallel.data_parallel(self.body, x, ids).view(-1)  # expect[data_parallel]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--dataroot", required=True)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--cuda", action="store_true")
    parser.add_argument("--ngpu", type=int, default=1)
    parser.add_argument("--width", type=int, default=64)
    opt = parser.parse_args()
    torch.backends.cudnn.benchmark = True
    data = dset.ImageFolder(opt.dataroot, transform=transforms.Compose([transforms.ToTensor()]))
    loader = torch.utils.data.DataLoader(
        data, batch_size=64, shuffle=True, num_workers=opt.workers, pin_memory=True
    )
    critic = Critic(opt.ngpu, opt.width)
    if opt.cuda:
        critic.cuda()
    critic_opt = optim.Adam(critic.parameters(), lr=2e-4)
    criterion = nn.BCEWithLogitsLoss()
    for epoch in range(25):
        for i, (real, _) in enumerate(loader):
            real = real.cuda(non_blocking=True)
            critic.zero_grad()
            with torch.autocast("cuda", dtype=torch.bfloat16):
                err = criterion(critic(real), torch.ones(real.size(0), device=real.device))
            err.backward()
            critic_opt.step()
            print("[%d/%d][%d/%d] loss %.4f" % (epoch, 25, i, len(loader), err))  # noqa: UP031  # expect[host_sync_per_step]
        if epoch % 5 == 0:
            print("epoch %d loss %.4f" % (epoch, err))  # noqa: UP031


if __name__ == "__main__":
    main()
