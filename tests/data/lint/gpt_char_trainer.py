# Pattern of karpathy/nanoGPT train.py (a class-based fork): periodic .item(), GradScaler, DDP with
# require_backward_grad_sync, master-only eval save, but an end-of-run save on every rank.
import os
from contextlib import nullcontext

import numpy as np
import torch
from torch.distributed import init_process_group
from torch.nn.parallel import DistributedDataParallel as DDP


class Runner:
    def __init__(self, cfg):
        self.cfg = cfg
        self.ddp = int(os.environ.get("RANK", -1)) != -1
        if self.ddp:
            init_process_group(backend="nccl")
            self.is_master = int(os.environ["RANK"]) == 0
        else:
            self.is_master = True
        self.device = "cuda"
        self.amp = torch.amp.autocast(device_type="cuda", dtype=cfg.dtype) if cfg.amp else nullcontext()
        self.tokens = np.memmap(cfg.path, dtype=np.uint16, mode="r")
        self.net = cfg.build()
        if cfg.resume:
            state = torch.load(os.path.join(cfg.out, "last.pt"), map_location=self.device)
            self.net.load_state_dict(state["net"])
        self.net.to(self.device)
        self.scaler = torch.cuda.amp.GradScaler(enabled=cfg.dtype == "float16")
        self.opt = torch.optim.AdamW(self.net.parameters(), lr=cfg.lr)
        if self.ddp:
            self.net = DDP(self.net, device_ids=[int(os.environ["LOCAL_RANK"])])
        self.step = 0

    def sample(self):
        starts = torch.randint(len(self.tokens) - 65, (16,))
        x = torch.stack([torch.from_numpy(self.tokens[s : s + 64].astype(np.int64)) for s in starts])
        return x.pin_memory().to(self.device, non_blocking=True)

    @torch.no_grad()
    def evaluate(self):
        scores = torch.zeros(20)
        for k in range(20):
            with self.amp:
                _, loss = self.net(self.sample())
            scores[k] = loss.item()
        return scores.mean()

    def fit(self):
        batch = self.sample()
        while True:
            if self.step % self.cfg.eval_every == 0 and self.is_master:
                val = self.evaluate()
                torch.save({"net": self.net.state_dict(), "val": val}, os.path.join(self.cfg.out, "best.pt"))
            for micro in range(self.cfg.accum):
                if self.ddp:
                    self.net.require_backward_grad_sync = micro == self.cfg.accum - 1
                with self.amp:
                    _, loss = self.net(batch)
                    loss = loss / self.cfg.accum
                batch = self.sample()
                self.scaler.scale(loss).backward()
            self.scaler.step(self.opt)
            self.scaler.update()
            self.opt.zero_grad(set_to_none=True)
            if self.step % self.cfg.log_every == 0 and self.is_master:
                print(f"step {self.step}: loss {loss.item() * self.cfg.accum:.4f}")
            self.step += 1
            if self.step > self.cfg.max_steps:
                torch.save({"net": self.net.state_dict()}, os.path.join(self.cfg.out, "last.pt"))
                break


def main(cfg):
    Runner(cfg).fit()


if __name__ == "__main__":
    main(None)
