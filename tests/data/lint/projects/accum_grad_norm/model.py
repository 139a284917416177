# The model of the accum_grad_norm look-alike: a tiny causal LM (the fp16 autocast is in train_gpt.py).
import torch
from torch import nn
from torch.nn import functional as F


class GPT(nn.Module):
    def __init__(self, vocab=50304, dim=256, layers=4):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.blocks = nn.ModuleList(
            nn.TransformerEncoderLayer(dim, 4, batch_first=True) for _ in range(layers)
        )
        self.head = nn.Linear(dim, vocab, bias=False)

    def forward(self, idx, targets=None):
        x = self.embed(idx)
        mask = torch.nn.Transformer.generate_square_subsequent_mask(idx.size(1), device=idx.device)
        for block in self.blocks:
            x = block(x, src_mask=mask, is_causal=True)
        logits = self.head(x)
        loss = None if targets is None else F.cross_entropy(logits.flatten(0, 1), targets.flatten())
        return logits, loss
