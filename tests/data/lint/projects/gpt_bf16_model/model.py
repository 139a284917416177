# Pattern of nanochat / llm.c-style models that cast themselves: the model holds bf16 weights, so the loop
# in train.py needs no autocast (not fp32 training).
import torch
from torch import nn


class TinyLM(nn.Module):
    def __init__(self, vocab=32768, dim=512):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))
        self.head = nn.Linear(dim, vocab, bias=False)

    def init_weights(self):
        for module in self.modules():
            if isinstance(module, nn.Linear):
                nn.init.normal_(module.weight, std=0.02)
        self.to(dtype=torch.bfloat16)

    def forward(self, idx):
        return self.head(self.mlp(self.embed(idx)))
