# Pattern of the current pytorch/examples imagenet/main.py and of timm's train.py: determinism asked
# only under --seed (the default run leaves cudnn.benchmark off), a model picked by name from
# torchvision.models, the deprecated torch.cuda.amp.autocast kept in a name and called each step.
import argparse
from contextlib import suppress

import torch
import torch.backends.cudnn as cudnn
import torchvision.datasets as datasets
import torchvision.models as models
import torchvision.transforms as transforms


def train(loader, model, criterion, optimizer, amp_autocast, scaler):
    model.train()
    for _, (images, target) in enumerate(loader):  # expect[cudnn_benchmark_off]
        images, target = images.cuda(non_blocking=True), target.cuda(non_blocking=True)
        with amp_autocast():
            loss = criterion(model(images), target)
        optimizer.zero_grad()
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("data")
    parser.add_argument("-a", "--arch", default="resnet50")
    parser.add_argument("-j", "--workers", default=8, type=int)
    parser.add_argument("--seed", default=None, type=int)
    parser.add_argument("--amp", action="store_true")
    args = parser.parse_args()
    if args.seed is not None:
        torch.manual_seed(args.seed)
        cudnn.deterministic = True
        cudnn.benchmark = False
    if getattr(torch.cuda.amp, "autocast", None) is not None:
        has_native_amp = True
    amp_autocast = suppress
    if args.amp and has_native_amp:
        amp_autocast = torch.cuda.amp.autocast  # expect[deprecated_torch_api]
    scaler = torch.amp.GradScaler("cuda", enabled=args.amp)
    model = models.__dict__[args.arch]().cuda()
    criterion = torch.nn.CrossEntropyLoss().cuda()
    optimizer = torch.optim.SGD(model.parameters(), 0.1, momentum=0.9)
    dataset = datasets.ImageFolder(
        args.data, transforms.Compose([transforms.RandomResizedCrop(224), transforms.ToTensor()])
    )
    loader = torch.utils.data.DataLoader(
        dataset, batch_size=256, shuffle=True, num_workers=args.workers, pin_memory=True
    )
    for _epoch in range(90):
        train(loader, model, criterion, optimizer, amp_autocast, scaler)


if __name__ == "__main__":
    main()
