# Pattern of pytorch/examples distributed/ddp-tutorial-series datautils.py: rows held in memory.
import torch
from torch.utils.data import Dataset


class PairsInMemory(Dataset):
    def __init__(self, size):
        self.size = size
        self.rows = [(torch.rand(20), torch.rand(1)) for _ in range(size)]

    def __len__(self):
        return self.size

    def __getitem__(self, index):
        return self.rows[index]
