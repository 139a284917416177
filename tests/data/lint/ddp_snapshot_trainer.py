# Pattern of pytorch/examples distributed/ddp-tutorial-series/multigpu_torchrun.py: a DistributedSampler
# that is never re-seeded, a loader without workers, fp32 training, snapshots saved on local rank 0.
import os

import torch
from torch.distributed import destroy_process_group, init_process_group
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader
from torch.utils.data.distributed import DistributedSampler


class SnapshotTrainer:
    def __init__(self, net, loader, opt, every, snapshot):
        self.local = int(os.environ["LOCAL_RANK"])
        self.net = net.to(self.local)
        self.loader, self.opt, self.every = loader, opt, every
        self.first_epoch = 0
        if os.path.exists(snapshot):
            self.restore(snapshot)
        self.net = DDP(self.net, device_ids=[self.local])

    def restore(self, snapshot):
        saved = torch.load(snapshot)
        self.net.load_state_dict(saved["weights"])
        self.first_epoch = saved["epoch"]

    def one_batch(self, x, y):
        self.opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(self.net(x), y)
        loss.backward()
        self.opt.step()

    def one_epoch(self, epoch):
        for x, y in self.loader:
            self.one_batch(x.to(self.local), y.to(self.local))

    def write(self, epoch):
        torch.save({"weights": self.net.module.state_dict(), "epoch": epoch}, "snapshot.pt")

    def run(self, epochs):
        for epoch in range(self.first_epoch, epochs):
            self.one_epoch(epoch)
            if self.local == 0 and epoch % self.every == 0:
                self.write(epoch)


def make_loader(dataset, batch):
    return DataLoader(
        dataset, batch_size=batch, pin_memory=True, shuffle=False, sampler=DistributedSampler(dataset)
    )


def main(dataset, net, every, epochs):
    init_process_group(backend="nccl")
    opt = torch.optim.SGD(net.parameters(), lr=1e-3)
    SnapshotTrainer(net, make_loader(dataset, 32), opt, every, "snapshot.pt").run(epochs)
    destroy_process_group()
