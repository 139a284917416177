# Pattern of older pytorch/examples imagenet/main.py and its forks: nn.DataParallel, the epoch length
# counted with len(list(loader)), torch.cuda.empty_cache() every step, no cudnn.benchmark.
import argparse

import torch
import torch.nn as nn
import torchvision.datasets as datasets
import torchvision.models as models
import torchvision.transforms as transforms


def train(train_loader, model, criterion, optimizer, epoch):
    model.train()
    steps = len(list(train_loader))  # expect[len_list_loader]
    for i, (images, target) in enumerate(train_loader):  # expect[cudnn_benchmark_off]
        images, target = images.cuda(non_blocking=True), target.cuda(non_blocking=True)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = criterion(model(images), target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        torch.cuda.empty_cache()  # expect[cuda_sync_in_loop]
        if i % 10 == 0:
            print(f"epoch {epoch} [{i}/{steps}] loss {loss.item():.3f}")


def main():
    parser = argparse.ArgumentParser(description="PyTorch ImageNet Training")
    parser.add_argument("data")
    parser.add_argument("-j", "--workers", default=4, type=int)
    parser.add_argument("--epochs", default=90, type=int)
    args = parser.parse_args()
    model = nn.DataParallel(models.resnet50()).cuda()  # expect[data_parallel]
    criterion = nn.CrossEntropyLoss().cuda()
    optimizer = torch.optim.SGD(model.parameters(), 0.1, momentum=0.9, weight_decay=1e-4)
    normalize = transforms.Normalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225])
    train_dataset = datasets.ImageFolder(
        args.data + "/train",
        transforms.Compose([transforms.RandomResizedCrop(224), transforms.ToTensor(), normalize]),
    )
    train_loader = torch.utils.data.DataLoader(
        train_dataset, batch_size=256, shuffle=True, num_workers=args.workers, pin_memory=True
    )
    for epoch in range(args.epochs):
        train(train_loader, model, criterion, optimizer, epoch)


if __name__ == "__main__":
    main()
