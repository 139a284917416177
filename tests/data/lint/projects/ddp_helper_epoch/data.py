# The dataset of the ddp_helper_epoch look-alike: decodes and augments a JPEG per item.
import os

from PIL import Image
from torch.utils.data import Dataset
from torchvision import transforms


class CropFolder(Dataset):
    def __init__(self, root, split):
        self.files = sorted(os.path.join(root, split, f) for f in os.listdir(os.path.join(root, split)))
        self.transform = transforms.Compose([transforms.RandomResizedCrop(224), transforms.ToTensor()])

    def __len__(self):
        return len(self.files)

    def __getitem__(self, index):
        image = Image.open(self.files[index]).convert("RGB")
        return self.transform(image), int(os.path.basename(self.files[index]).split("_")[0])
