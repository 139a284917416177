# Pattern of pytorch/examples regression/main.py and tutorial scripts that never place anything on a GPU
# (the help text names CUDA; no device is used): host syncs cost nothing here.
import argparse

import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

parser = argparse.ArgumentParser(description="polynomial regression")
parser.add_argument(
    "--no-cuda", action="store_true", help="disables CUDA training (this example is CPU only)"
)
args = parser.parse_args()

W = torch.randn(4, 1) * 5
x = torch.randn(4096, 4)
loader = DataLoader(TensorDataset(x, x @ W), batch_size=32, shuffle=True)
fc = torch.nn.Linear(4, 1)
optimizer = torch.optim.SGD(fc.parameters(), lr=0.1)
for _epoch in range(10):
    for batch_x, batch_y in loader:
        optimizer.zero_grad()
        loss = F.smooth_l1_loss(fc(batch_x), batch_y)
        loss.backward()
        optimizer.step()
        print("loss:", loss.item())
