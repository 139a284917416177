# The data module of the gpu_datamodule look-alike: a JPEG decoded and augmented per item, loaded in the
# training process.
import json
import os

from PIL import Image
from torch.utils.data import DataLoader, Dataset
from torchvision import transforms


class CaptionImages(Dataset):
    def __init__(self, root):
        self.root = root
        with open(os.path.join(root, "labels.json")) as handle:
            self.items = json.load(handle)
        self.augment = transforms.Compose([transforms.RandomCrop(32), transforms.ToTensor()])

    def __len__(self):
        return len(self.items)

    def __getitem__(self, index):
        name, label = self.items[index]
        image = Image.open(os.path.join(self.root, name)).convert("RGB")
        return self.augment(image), label


def make_loader(root, batch):
    images = CaptionImages(root)
    # expect-next[loader_no_workers] expect-next[loader_no_pin_memory]
    return DataLoader(images, batch_size=batch, shuffle=True)
