# The dataset of the ddp_no_sampler look-alike: fixed windows of a token file held in memory.
import numpy as np
import torch
from torch.utils.data import Dataset


class TokenWindows(Dataset):
    def __init__(self, path, window=128):
        self.tokens = torch.from_numpy(np.fromfile(path, dtype=np.int32).astype(np.int64))
        self.window = window

    def __len__(self):
        return len(self.tokens) // self.window

    def __getitem__(self, index):
        start = index * self.window
        return self.tokens[start : start + self.window].float()
