"""Every lint rule fires on its pattern and stays quiet on the correct variant (one pair per rule and
context feature: aliases, constants, periodic guards, same-file calls, frameworks)."""

from __future__ import annotations

import textwrap

import pytest

from gpuwise.diagnose import Evidence, diagnose
from gpuwise.lint import lint_source
from gpuwise.lint.catalog import SHARED_FINDINGS, SPECS
from gpuwise.lint.source import Source
from gpuwise.lint.types import Violation

LOOP = """
import torch
from torch.utils.data import DataLoader
model = model.cuda()
{setup}
for step, (x, y) in enumerate(loader):
    loss = model(x.cuda(), y.cuda())
    loss.backward()
    opt.step()
    opt.zero_grad()
{body}
"""


def lint(code: str) -> list[Violation]:
    found = lint_source(Source("t.py", textwrap.dedent(code)))
    assert isinstance(found, list), found
    return found


def rules(code: str, rule: str | None = None) -> list[tuple[str, int]]:
    return [(v.rule, v.line) for v in lint(code) if rule is None or v.rule == rule]


def loop(body: str = "", setup: str = "") -> str:
    return LOOP.format(setup=setup, body=textwrap.indent(textwrap.dedent(body), "    "))


# --- loader_no_workers / loader_no_pin_memory ----------------------------------------------------
@pytest.mark.parametrize(
    ("call", "expected"),
    [
        ("DataLoader(ds, batch_size=8)", 1),
        ("DataLoader(ds, num_workers=0)", 1),
        ("DataLoader(ds, num_workers=WORKERS)", 1),  # WORKERS = 0 resolved from the module constant
        ("DataLoader(ds, num_workers=4)", 0),
        ("DataLoader(ds, num_workers=args.workers)", 0),  # decided elsewhere: quiet
        ("DataLoader(ds, 8, True, None, None, 2)", 0),  # positional num_workers
        ("DataLoader(**cfg)", 0),
        ("next(iter(DataLoader(ds)))", 0),  # one batch, once
    ],
)
def test_loader_no_workers(call: str, expected: int) -> None:
    code = f"import torch\nfrom torch.utils.data import DataLoader\nWORKERS = 0\nx = {call}\ny = 1 .cuda()\n"
    assert len(rules(code, "loader_no_workers")) == expected


def test_loader_rules_need_gpu_code_and_resolve_aliases() -> None:
    cpu_only = "from torch.utils.data import DataLoader\nDataLoader(ds)\n"
    assert rules(cpu_only) == []
    aliased = "from torch.utils.data import DataLoader as DL\nDL(ds, pin_memory=True)\ndevice = 'cuda'\n"
    assert rules(aliased) == [("loader_no_workers", 2)]
    dotted = "import torch.utils.data as tud\ntud.DataLoader(ds, num_workers=2)\ndevice = 'cuda'\n"
    assert rules(dotted) == [("loader_no_pin_memory", 2)]


def test_hf_training_arguments_without_workers() -> None:
    code = (
        "from transformers import Trainer, TrainingArguments\n"
        "args = TrainingArguments('out', bf16=True)\nTrainer(args=args)\n"
    )
    assert rules(code) == [("loader_no_workers", 2)]
    assert "dataloader_num_workers" in lint(code)[0].fix
    ok = code.replace("bf16=True", "bf16=True, dataloader_num_workers=4")
    assert rules(ok) == []


def test_pin_memory_fix_is_a_keyword_edit() -> None:
    code = "from torch.utils.data import DataLoader\nx = DataLoader(ds, num_workers=2)\nd = 'cuda'\n"
    [v] = lint(code)
    assert v.rule == "loader_no_pin_memory" and v.edit is not None and v.edit.safe
    fixed = code[: v.edit.start] + v.edit.text + code[v.edit.end :]
    assert "DataLoader(ds, num_workers=2, pin_memory=True)" in fixed


# --- host_sync_per_step -----------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("print(loss.item())", 1),
        ("losses.append(loss.cpu())", 1),
        ("print(f'loss {loss}')", 1),  # formatting a tensor reads it
        ("if step % 100 == 0:\n    print(loss.item())", 0),
        ("if step % args.log_interval == 0 and is_master:\n    print(loss.item())", 0),
        ("if args.log:\n    print(loss.item())", 0),
        ("if step == 0:\n    print(loss.item())", 0),
        ("if not torch.isfinite(loss).item():\n    break", 1),  # the test runs every step
        ("if args.fp16:\n    print(loss.item())", 1),  # not a periodic guard
        ("running += loss.detach()", 0),
        ("import numpy as np\narr = np.asarray(x).tolist()", 0),
    ],
)
def test_host_sync_per_step(body: str, expected: int) -> None:
    assert len(rules(loop(body), "host_sync_per_step")) == expected


def test_host_sync_followed_into_same_file_functions() -> None:
    code = """
    import torch
    class T:
        def batch(self, x):
            loss = self.model(x.cuda())
            loss.backward()
            self.opt.step()
            self.seen.append(loss.item())
        def evaluate(self):
            return self.model(self.val).item()
        def epoch(self):
            for i, x in enumerate(self.loader):
                self.batch(x)
                if i % 50 == 0:
                    self.evaluate()
    """
    [v] = [v for v in lint(code) if v.rule == "host_sync_per_step"]
    assert v.line == 8
    assert "called every step from line 13" in v.message


def test_lightning_training_step_is_step_code() -> None:
    code = """
    import lightning as L
    class M(L.LightningModule):
        def training_step(self, batch, i):
            loss = self.net(batch)
            self.log("loss", loss.item())
            return loss
        def validation_step(self, batch, i):
            self.log("val", self.net(batch).item())
    """
    assert rules(code) == [("host_sync_per_step", 6)]


def test_eval_loop_outside_the_step_loop_is_not_step_code() -> None:
    code = loop(setup="def validate():\n    for x in val:\n        total += model(x).item()\n")
    assert rules(code, "host_sync_per_step") == []


# --- cuda_sync_in_loop ------------------------------------------------------------------------------
def test_cuda_sync_in_loop() -> None:
    assert len(rules(loop("torch.cuda.synchronize()\ntorch.cuda.empty_cache()"), "cuda_sync_in_loop")) == 2
    assert rules(loop("if step % 1000 == 0:\n    torch.cuda.empty_cache()"), "cuda_sync_in_loop") == []
    assert rules("import torch\ntorch.cuda.synchronize()\n", "cuda_sync_in_loop") == []


# --- no_mixed_precision -----------------------------------------------------------------------------
def test_no_mixed_precision() -> None:
    assert rules(loop(), "no_mixed_precision") == [("no_mixed_precision", 8)]
    amp = loop(setup="ctx = torch.autocast('cuda', dtype=torch.bfloat16)")
    assert rules(amp, "no_mixed_precision") == []
    assert rules(loop(setup="parser.add_argument('--amp')"), "no_mixed_precision") == []
    assert rules(loop().replace(".cuda()", ""), "no_mixed_precision") == []  # CPU code
    assert rules(
        loop(setup="sampler = DistributedSampler(ds)"), "no_mixed_precision"
    )  # 'sampler' is not 'amp'


def test_no_mixed_precision_in_framework_terms() -> None:
    hf = (
        "from transformers import Trainer, TrainingArguments\n"
        "Trainer(args=TrainingArguments('o', dataloader_num_workers=2))\n"
    )
    [v] = lint(hf)
    assert v.rule == "no_mixed_precision" and "bf16=True" in v.fix and v.framework == "hf_trainer"
    lit = "import lightning as L\ntrainer = L.Trainer(max_epochs=3)\n"
    [v] = lint(lit)
    assert v.rule == "no_mixed_precision" and "bf16-mixed" in v.fix
    assert rules(lit.replace("max_epochs=3", "precision='bf16-mixed'")) == []


# --- fp16_without_grad_scaler ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("setup", "expected"),
    [
        ("ctx = torch.autocast('cuda', dtype=torch.float16)", 1),
        (
            "ctx = torch.autocast(device_type='cuda', dtype=HALF)\nHALF = torch.half",
            0,
        ),  # not a literal constant
        ("ctx = torch.cuda.amp.autocast()", 1),  # defaults to float16
        ("ctx = torch.autocast('cuda', dtype=torch.bfloat16)", 0),
        ("ctx = torch.autocast('cuda', dtype=torch.float16)\nscaler = torch.amp.GradScaler('cuda')", 0),
        ("ctx = torch.autocast('cpu')", 0),
    ],
)
def test_fp16_without_grad_scaler(setup: str, expected: int) -> None:
    assert len(rules(loop(setup=setup), "fp16_without_grad_scaler")) == expected


# --- sampler_without_set_epoch ----------------------------------------------------------------------
def test_sampler_without_set_epoch() -> None:
    code = "from torch.utils.data.distributed import DistributedSampler\nsampler = DistributedSampler(ds)\n"
    assert rules(code) == [("sampler_without_set_epoch", 2)]
    assert rules(code + "for e in range(3):\n    sampler.set_epoch(e)\n") == []
    assert rules(code + "import lightning as L\n") == []  # Lightning re-seeds it itself


# --- every_rank_saves ---------------------------------------------------------------------------------
DIST = "import torch\nimport torch.distributed as dist\ndist.init_process_group('nccl')\n"


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        ("torch.save(model.state_dict(), 'm.pt')", 1),
        ("if dist.get_rank() == 0:\n    torch.save(model.state_dict(), 'm.pt')", 0),
        ("if rank != 0:\n    pass\nelse:\n    torch.save(sd, 'm.pt')", 0),
        ("def save(sd):\n    torch.save(sd, 'm.pt')\nif is_main_process:\n    save(sd)", 0),
        ("def save(sd):\n    torch.save(sd, 'm.pt')\nsave(sd)", 1),
        ("def save(sd):\n    if local_rank != 0:\n        return\n    torch.save(sd, 'm.pt')\nsave(sd)", 0),
        ("def worker(rank):\n    torch.save(sd, 'm.pt')\nmp.spawn(worker, nprocs=2)", 1),
        ("def hook(sd):\n    torch.save(sd, 'm.pt')", 0),  # no caller in this file: unknown, quiet
    ],
)
def test_every_rank_saves(code: str, expected: int) -> None:
    assert len(rules(DIST + code, "every_rank_saves")) == expected


def test_every_rank_saves_only_in_distributed_code() -> None:
    assert rules("import torch\ntorch.save(sd, 'm.pt')\n") == []


# --- find_unused_parameters -------------------------------------------------------------------------
def test_find_unused_parameters() -> None:
    code = (
        "from torch.nn.parallel import DistributedDataParallel as DDP\n"
        "m = DDP(m, find_unused_parameters=True)\n"
    )
    assert rules(code) == [("find_unused_parameters", 2)]
    assert rules(code.replace("True", "False")) == []
    lit = (
        "import lightning as L\n"
        "L.Trainer(strategy='ddp_find_unused_parameters_true', precision='bf16-mixed')\n"
    )
    assert rules(lit) == [("find_unused_parameters", 2)]


# --- accumulation_without_no_sync ---------------------------------------------------------------------
ACCUM = """
import torch
from torch.nn.parallel import DistributedDataParallel as DDP
model = DDP(model.cuda(), device_ids=[0])
ctx = torch.autocast("cuda", dtype=torch.bfloat16)
for i, x in enumerate(loader):
    loss = model(x)
    loss.backward()
    if (i + 1) % accum == 0:
        opt.step()
        opt.zero_grad()
"""


def test_accumulation_without_no_sync() -> None:
    assert rules(ACCUM) == [("accumulation_without_no_sync", 8)]
    synced = ACCUM.replace("    loss = model(x)\n", "    with model.no_sync():\n        loss = model(x)\n")
    assert rules(synced) == []
    no_accumulation = ACCUM.replace("if (i + 1) % accum == 0:", "if True:")
    assert rules(no_accumulation) == []
    assert rules(ACCUM.replace("model = DDP(model.cuda(), device_ids=[0])", "model = model.cuda()")) == []


# --- torch_load_unsafe ---------------------------------------------------------------------------------
def test_torch_load_unsafe() -> None:
    [v] = lint("import torch\nsd = torch.load('x.pt', map_location='cpu')\n")
    assert v.rule == "torch_load_unsafe" and v.edit is not None and not v.edit.safe
    assert v.severity == "medium" and "torch < 2.6" in v.message  # weights_only=True by default since 2.6
    [explicit] = lint("import torch\nsd = torch.load('x.pt', weights_only=False)\n")
    assert (explicit.rule, explicit.line, explicit.severity, explicit.edit) == (
        "torch_load_unsafe",
        2,
        "high",
        None,
    )
    assert "every torch version" in explicit.message
    constant = "import torch\nRISKY = False\nsd = torch.load('x.pt', weights_only=RISKY)\n"
    assert [v.severity for v in lint(constant)] == ["high"]
    assert rules("import torch\nsd = torch.load('x.pt', weights_only=True)\n") == []
    assert rules("from torch import load\nsd = load('x.pt')\n") == [("torch_load_unsafe", 2)]
    assert rules("import pickle\nsd = pickle.load(f)\nimport numpy as np\nnp.load('a.npy')\n") == []


# --- non_blocking_from_pageable / cpu_tensor_per_step / optimizer_before_fsdp ---------------------------
def test_non_blocking_from_pageable() -> None:
    code = loop("x = x.to('cuda', non_blocking=True)", setup="loader = DataLoader(ds, num_workers=2)")
    assert len(rules(code, "non_blocking_from_pageable")) == 1
    pinned = code.replace("num_workers=2", "num_workers=2, pin_memory=True")
    assert rules(pinned, "non_blocking_from_pageable") == []


def test_cpu_tensor_per_step() -> None:
    assert len(rules(loop("mask = torch.ones(8).cuda()"), "cpu_tensor_per_step")) == 1
    assert rules(loop("mask = torch.ones(8, device='cuda')"), "cpu_tensor_per_step") == []


def test_optimizer_before_fsdp() -> None:
    code = """
    import torch
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
    def main(model):
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
        model = FSDP(model)
    """
    assert rules(code) == [("optimizer_before_fsdp", 5)]
    fixed = code.replace("        opt = torch.optim.AdamW(model.parameters(), lr=1e-4)\n", "").replace(
        "model = FSDP(model)\n", "model = FSDP(model)\n        opt = torch.optim.AdamW(model.parameters())\n"
    )
    assert rules(fixed) == []


# --- suppressions, catalog -------------------------------------------------------------------------------
def test_suppressions_by_rule_or_finding_id() -> None:
    base = "import torch\nsd = torch.load('x.pt')"
    assert rules(base + "  # gpuwise: ignore[torch_load_unsafe]\n") == []
    assert rules(base + "  # gpuwise: ignore\n") == []
    assert rules(base + "  # gpuwise: ignore[sync_bound]\n") == [("torch_load_unsafe", 2)]
    assert rules("# gpuwise: ignore-file[torch_load_unsafe]\n" + base + "\n") == []
    assert rules(loop("print(loss.item())  # gpuwise: ignore[sync_bound]"), "host_sync_per_step") == []


def test_every_rule_has_why_and_a_pytorch_fix() -> None:
    for spec in SPECS.values():
        assert spec.why and spec.fix["pytorch"] and spec.title
        assert spec.finding in ("", *SHARED_FINDINGS)


@pytest.mark.parametrize(
    ("finding", "evidence"),
    [
        ("input_bound", {"input_wait_pct": 30.0}),
        ("pageable_copies", {"pageable_copy_pct": 90.0, "h2d_copy_pct": 10.0}),
        ("sync_bound", {"sync_wait_pct": 30.0}),
        ("no_mixed_precision", {"fp32_matmul_pct": 90.0, "tensor_core_speedup": 8.0}),
        ("comm_bound", {"comm_exposed_pct": 40.0}),
    ],
)
def test_shared_finding_ids_are_the_runtime_rules_ids(finding: str, evidence: dict[str, float]) -> None:
    """A lint rule and the runtime rule engine name the same problem with the same id."""
    assert finding in SHARED_FINDINGS
    assert finding in {f.id for f in diagnose(Evidence.flat(source="profile", **evidence))}
