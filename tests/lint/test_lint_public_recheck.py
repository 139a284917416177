"""Look-alikes of what the second hand check of public training scripts found (docs/lint.md, "Public
repositories re-checked"): the misses it read in the loops are reported, the debatable finding is gone,
and each pattern's correct twin stays quiet. The code is written here in the style of those scripts
(pytorch/examples dcgan and imagenet, timm train.py, a Lightning data module); none of it is copied."""

from __future__ import annotations

import textwrap
from pathlib import Path

from gpuwise.lint import lint_paths, lint_source
from gpuwise.lint.source import Source


def found(code: str, rule: str) -> list[int]:
    result = lint_source(Source("t.py", textwrap.dedent(code)))
    assert isinstance(result, list), result
    return [v.line for v in result if v.rule == rule]


def project(tmp_path: Path, code: str, rule: str) -> list[int]:
    (tmp_path / "train.py").write_text(textwrap.dedent(code))
    return [v.line for v in lint_paths([tmp_path]).violations if v.rule == rule]


GAN_STEP = """
import torch
import torch.nn as nn
critic = Critic().cuda()
maker = Maker().cuda()
for epoch in range(epochs):
    for i, (real, _) in enumerate(loader):
        critic.zero_grad()
        err_real = bce(critic(real.cuda()), ones)
        err_real.backward()
        critic_opt.step()
        {report}
"""


def test_printing_a_formatted_loss_every_step_waits_for_the_gpu() -> None:
    # ``"%.4f" % err`` calls float() on the tensor: one host wait per step, even with a len() beside it
    every_step = "print('[%d/%d] loss %.4f' % (i, len(loader), err_real))"
    assert found(GAN_STEP.format(report=every_step), "host_sync_per_step") == [12]
    # the .item() inside the print is the finding, once (not the print around it as well)
    item = "print('[%d/%d] loss %.4f' % (i, len(loader), err_real.item()))"
    assert found(GAN_STEP.format(report=item), "host_sync_per_step") == [12]
    periodic = "if i % 100 == 0:\n            print('loss %.4f' % err_real)"
    assert found(GAN_STEP.format(report=periodic), "host_sync_per_step") == []


def test_the_functional_data_parallel_is_data_parallel() -> None:
    code = """
    import torch.nn as nn
    class Critic(nn.Module):
        def forward(self, x):
            return nn.parallel.data_parallel(self.body, x, self.gpu_ids)
    """
    assert found(code, "data_parallel") == [5]
    ddp = "import torch\nmodel = torch.nn.parallel.DistributedDataParallel(model, device_ids=[rank])\n"
    assert found(ddp, "data_parallel") == []


AMP_BY_NAME = """
import torch
from contextlib import suppress
amp_autocast = suppress
if args.amp:
    amp_autocast = torch.cuda.amp.autocast
    scaler = make_scaler(autocast_fn=torch.cuda.amp.autocast if args.fp16 else suppress)
if getattr(torch.cuda.amp, "autocast") is not None:
    has_amp = True
with amp_autocast():
    out = model(x)
"""


def test_a_deprecated_api_kept_in_a_name_is_reported_where_it_is_named() -> None:
    # every ``with amp_autocast():`` warns; the getattr feature test names no attribute and is quiet
    assert found(AMP_BY_NAME, "deprecated_torch_api") == [6, 7]
    clip = "import torch\nclip = torch.nn.utils.clip_grad_norm\nclip(model.parameters(), 1.0)\n"
    assert found(clip, "deprecated_torch_api") == [2]
    modern = AMP_BY_NAME.replace("torch.cuda.amp.autocast", "torch.amp.autocast")
    assert found(modern, "deprecated_torch_api") == []


IMAGENET = """
import torch
import torch.backends.cudnn as cudnn
import torchvision.models as models

def main(args):
    if args.seed is not None:
        torch.manual_seed(args.seed)
        cudnn.deterministic = True
        cudnn.benchmark = False
    model = models.__dict__[args.arch]().cuda()
    for images, target in loader:
        loss = criterion(model(images.cuda()), target.cuda())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
"""


def test_a_seeded_opt_in_does_not_turn_cudnn_benchmark_off_for_the_default_run(tmp_path: Path) -> None:
    # the model is picked by name from torchvision.models; without --seed cuDNN runs its heuristic
    assert project(tmp_path, IMAGENET, "cudnn_benchmark_off") == [12]


def test_cudnn_benchmark_set_or_always_deterministic_is_quiet(tmp_path: Path) -> None:
    on = IMAGENET.replace("def main(args):", "cudnn.benchmark = True\ndef main(args):")
    assert project(tmp_path, on, "cudnn_benchmark_off") == []
    always = IMAGENET.replace("def main(args):", "cudnn.deterministic = True\ndef main(args):")
    assert project(tmp_path, always, "cudnn_benchmark_off") == []


DATA_MODULE = """
import torch
from torch.utils.data import DataLoader, random_split
from lightning.pytorch import LightningDataModule
from somewhere.demos import {cls}

class Digits(LightningDataModule):
    def __init__(self, batch_size=32):
        super().__init__()
        full = {cls}("data", train=True, download=True)
        self.train_part, self.val_part = random_split(full, [55000, 5000])
        self.batch_size = batch_size

    def train_dataloader(self):
        return DataLoader(self.train_part, batch_size=self.batch_size)
"""


def test_a_random_split_of_thumbnails_in_a_data_module_needs_no_pinned_memory() -> None:
    # the split is read back to the dataset it came from, assigned in another method of the class
    assert found(DATA_MODULE.format(cls="MNIST"), "loader_no_pin_memory") == []
    assert found(DATA_MODULE.format(cls="MNIST"), "loader_no_workers") == [15]
    assert found(DATA_MODULE.format(cls="ImageFolder"), "loader_no_pin_memory") == [15]


ROLLOUTS = """
import torch

@torch.no_grad()
def rollouts():
    while True:
        seqs = engine.generate_batch(prompt(), num_samples=8)
        yield torch.tensor(seqs, device="cuda")

batches = rollouts()
for step in range(steps):
    tokens = next(batches)
    loss = policy_loss(model(tokens), tokens)
    loss.backward()
    print(f"step {step} loss {loss.item():.4f}")
    opt.step()
"""


def test_a_step_that_samples_token_by_token_is_not_held_up_by_one_more_item() -> None:
    # RL: each step decodes with the model (a host read per token); the logged .item() adds nothing
    assert found(ROLLOUTS, "host_sync_per_step") == []
    # the same loop fed by a plain iterator still waits once per step for its log line
    plain = ROLLOUTS.replace("engine.generate_batch(prompt(), num_samples=8)", "read_rows(8)")
    assert found(plain, "host_sync_per_step") == [15]
    # a causal mask built each step decodes nothing
    masked = plain.replace(
        "tokens = next(batches)",
        "tokens = next(batches)\n    mask = model.generate_square_subsequent_mask(64)",
    )
    assert found(masked, "host_sync_per_step") == [16]


TUTORIAL = """
import torch
from torch.utils.data import DataLoader
from torch.utils.data.distributed import DistributedSampler
from torch.nn.parallel import DistributedDataParallel as DDP

def run(model, dataset, epochs):
    loader = DataLoader(dataset, batch_size=32, shuffle=False, sampler=DistributedSampler(dataset))
    model = DDP(model.to("cuda"), device_ids=[0])
    for epoch in range(epochs):
        {reseed}
        for x, y in loader:
            loss = model(x.cuda()).sum()
            loss.backward()
            opt.step()

if __name__ == "__main__":
    run(build(), data(), 10)
"""


def test_a_sibling_script_that_reseeds_its_own_sampler_does_not_excuse_this_one(tmp_path: Path) -> None:
    (tmp_path / "single.py").write_text(
        textwrap.dedent(TUTORIAL.format(reseed="loader.sampler.set_epoch(epoch)"))
    )
    (tmp_path / "torchrun.py").write_text(textwrap.dedent(TUTORIAL.format(reseed="pass")))
    rule = "sampler_without_set_epoch"
    hits = [(Path(v.path).name, v.line) for v in lint_paths([tmp_path]).violations if v.rule == rule]
    assert hits == [("torchrun.py", 8)]
    # a helper module (no main guard) that re-seeds for its callers still counts for the project
    (tmp_path / "helpers.py").write_text(
        "def begin_epoch(loader, epoch):\n    loader.sampler.set_epoch(epoch)\n"
    )
    assert [v for v in lint_paths([tmp_path]).violations if v.rule == rule] == []


ONE_BATCH = """
import time
import torch

model = GPT(config).to("cuda")
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
batches = iter(make_batches(tokens))
x, y = next(batches)
for i in range(steps):
    t0 = time.time()
    {draw}
    with torch.autocast("cuda", dtype=torch.bfloat16):
        logits, loss = model(x, y)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()
    torch.cuda.synchronize()
    print(f"iteration {{i}}, loss: {{loss.item()}}, time: {{(time.time() - t0) * 1000:.1f}}ms")
"""


def test_a_timing_loop_over_one_fixed_batch_is_a_measurement() -> None:
    # llm.c-style: one batch drawn before the loop, every iteration timed: the waits are the timing
    fixed = ONE_BATCH.format(draw="pass")
    assert found(fixed, "cuda_sync_in_loop") == [] and found(fixed, "host_sync_per_step") == []
    # the same loop drawing a new batch each step is training: one finding for the step's waits
    streaming = ONE_BATCH.format(draw="x, y = next(batches)")
    assert found(streaming, "cuda_sync_in_loop") == [17]
