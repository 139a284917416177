"""Every lint rule's fixed facts: id, the runtime finding it shares, severity, why (with the cost) and
the fix in each framework's terms. The checks themselves live in `rules`."""

from __future__ import annotations

from dataclasses import dataclass, field

from gpuwise.diagnose import thresholds as T
from gpuwise.diagnose.finding import Confidence, Severity
from gpuwise.lint.context import Framework

__all__ = [
    "DOCS_URL_ENV",
    "SECURITY_SEVERITY",
    "SHARED_FINDINGS",
    "SPECS",
    "SPECS_LIST",
    "RuleSpec",
    "docs_url",
]

# Where the rule reference (docs/lint.md, one "### rule_id" section per rule) is published, for SARIF's
# helpUri and informationUri. gpuwise has no public address of its own yet, so none is invented: the
# team (or a user who hosts the docs) names it here, e.g. the docs/lint.md of their repository.
DOCS_URL_ENV = "GPUWISE_DOCS_URL"


def docs_url() -> str | None:
    """The published rule reference (``$GPUWISE_DOCS_URL``), or None: SARIF then carries no link."""
    import os

    url = os.environ.get(DOCS_URL_ENV, "").strip()
    return url or None


# GitHub code scanning's security-severity (0-10; 7.0-8.9 is "high") for the security rules: unpickling
# an attacker's checkpoint runs code with the trainer's rights (CWE-502, deserialization of untrusted data).
SECURITY_SEVERITY = {"torch_load_unsafe": "7.8"}

# Runtime findings (gpuwise.diagnose.rules) that a lint rule can point at in the source.
SHARED_FINDINGS = ("input_bound", "pageable_copies", "sync_bound", "no_mixed_precision", "comm_bound")


@dataclass(frozen=True)
class RuleSpec:
    """What a lint rule is about, in the user's terms: severity, how often it is right
    (confidence), category, why it costs GPU time or correctness, the fix per framework, and the
    runtime finding id naming the same problem (so a profile can point at the line)."""

    id: str
    title: str
    severity: Severity
    confidence: Confidence  # how often the pattern is really the problem where the rule fires
    category: str  # input | host | compute | distributed | correctness | security (diagnose's categories +2)
    why: str  # the cost, in one or two sentences
    fix: dict[Framework, str]  # "pytorch" is the default
    finding: str = ""  # the runtime finding id for the same problem, if any
    fixable: bool = False  # --fix has an edit (Edit.safe says whether it can change behaviour)
    help_uri: str = ""
    tags: tuple[str, ...] = field(default=())

    @property
    def docs_uri(self) -> str | None:
        """The rule's section of the published rule reference (heading ``### rule_id``), if published."""
        base = docs_url()
        return f"{base}#{self.id}" if base else None

    def fix_for(self, framework: Framework) -> str:
        """The fix in `framework`'s terms, else the plain PyTorch one."""
        return self.fix.get(framework, self.fix["pytorch"])


_W = T.LINT_SUGGESTED_NUM_WORKERS
SPECS_LIST = [
    RuleSpec(
        "loader_no_workers",
        "DataLoader loads batches in the training process",
        "medium",
        "medium",
        "input",
        "With num_workers=0 every batch is read, decoded and collated between two GPU steps: the GPU idles "
        f"for the whole load (measured as `input_bound` when the wait passes {T.INPUT_WAIT_MODERATE_PCT:g} % "
        "of the step).",
        {
            "pytorch": f"DataLoader(..., num_workers={_W}, persistent_workers=True): batches load in "
            "parallel with compute.",
            "lightning": f"Give the DataLoaders of your LightningDataModule num_workers={_W}, "
            "persistent_workers=True.",
            "hf_trainer": f"TrainingArguments(dataloader_num_workers={_W}, "
            "dataloader_persistent_workers=True).",
            "accelerate": f"DataLoader(..., num_workers={_W}, persistent_workers=True) before "
            "accelerator.prepare.",
        },
        finding="input_bound",
    ),
    RuleSpec(
        "loader_no_pin_memory",
        "DataLoader batches are in pageable memory",
        "low",
        "medium",
        "input",
        "Copies from pageable memory go through a staging buffer at a fraction of PCIe speed and cannot "
        "overlap with compute (`non_blocking=True` silently becomes blocking).",
        {
            "pytorch": "DataLoader(..., pin_memory=True) and x.to(device, non_blocking=True) in the loop.",
            "hf_trainer": "TrainingArguments(dataloader_pin_memory=True) (the default; do not turn it off).",
            "lightning": "Give the DataLoaders of your LightningDataModule pin_memory=True.",
        },
        finding="pageable_copies",
        fixable=True,
    ),
    RuleSpec(
        "host_sync_per_step",
        "The host waits for the GPU every step",
        "medium",
        "medium",
        "host",
        ".item(), .cpu(), .tolist(), .numpy() or printing a tensor blocks until every queued kernel has run: "
        "the GPU then idles while Python launches the next step's kernels "
        f"(~{T.LAUNCH_HOST_US_PER_KERNEL:g} µs each); measured as `sync_bound`.",
        {
            "pytorch": "Accumulate on the device (running += loss.detach()) and read it under "
            "`if step % log_every == 0:`.",
            "lightning": "self.log('loss', loss) (a tensor, no .item()); Lightning reads it at "
            "log_every_n_steps.",
            "accelerate": "Accumulate loss.detach() and call accelerator.gather(...).item() every N steps.",
        },
        finding="sync_bound",
    ),
    RuleSpec(
        "cuda_sync_in_loop",
        "torch.cuda.synchronize()/empty_cache() every step",
        "medium",
        "high",
        "host",
        "synchronize() drains the GPU queue each step; empty_cache() also frees cached blocks that the next "
        "step must allocate again with cudaMalloc, which itself synchronizes. Both serialize host and GPU "
        "(measured as `sync_bound`).",
        {
            "pytorch": "Remove it from the loop; time with torch.cuda.Event(enable_timing=True) and "
            "free memory by dropping references, not by emptying the cache.",
        },
        finding="sync_bound",
    ),
    RuleSpec(
        "no_mixed_precision",
        "GPU training without mixed precision",
        "medium",
        "low",
        "compute",
        "fp32 matmuls use a fraction of a tensor-core GPU's 16-bit throughput; bf16 autocast typically "
        f"speeds training up 1.5-3× end to end (up to {T.AMP_SPEEDUP_CAP_X:g}× measured on an A100).",
        {
            "pytorch": 'with torch.autocast(device_type="cuda", dtype=torch.bfloat16): '
            "around forward and loss.",
            "hf_trainer": "TrainingArguments(bf16=True) (fp16=True on GPUs without bf16).",
            "lightning": 'Trainer(precision="bf16-mixed").',
            "accelerate": 'Accelerator(mixed_precision="bf16") or `accelerate config`.',
            "deepspeed": 'Enable "bf16": {"enabled": true} in the DeepSpeed config.',
        },
        finding="no_mixed_precision",
    ),
    RuleSpec(
        "fp16_without_grad_scaler",
        "float16 autocast without a GradScaler",
        "high",
        "high",
        "correctness",
        "fp16 gradients below ~6e-8 flush to zero: without loss scaling small gradients vanish and training "
        "silently stalls or diverges.",
        {
            "pytorch": "scaler = torch.amp.GradScaler('cuda'); scaler.scale(loss).backward(); "
            "scaler.step(optimizer); scaler.update() — or use bfloat16, which needs no scaler.",
        },
    ),
    RuleSpec(
        "sampler_without_set_epoch",
        "DistributedSampler without set_epoch()",
        "high",
        "high",
        "correctness",
        "DistributedSampler seeds its shuffle with the epoch: without sampler.set_epoch(epoch) every epoch "
        "sees the same order, which hurts convergence.",
        {
            "pytorch": "Call sampler.set_epoch(epoch) (or loader.sampler.set_epoch(epoch)) "
            "at the start of each epoch."
        },
    ),
    RuleSpec(
        "every_rank_saves",
        "Every rank writes the checkpoint",
        "medium",
        "medium",
        "distributed",
        "All N processes write the same file at once: N× the I/O, and readers can see a torn checkpoint.",
        {
            "pytorch": "Save on one rank: `if dist.get_rank() == 0: torch.save(...)` (then dist.barrier()).",
            "accelerate": "accelerator.save(obj, path) or `if accelerator.is_main_process:`.",
        },
    ),
    RuleSpec(
        "find_unused_parameters",
        "DDP searches for unused parameters every step",
        "low",
        "high",
        "distributed",
        "find_unused_parameters=True traverses the autograd graph after every forward and delays the "
        "gradient all-reduce; only models that really skip parameters need it.",
        {
            "pytorch": "DDP(model, ...) without find_unused_parameters (or static_graph=True).",
            "hf_trainer": "TrainingArguments(ddp_find_unused_parameters=False).",
            "lightning": 'Trainer(strategy="ddp") rather than "ddp_find_unused_parameters_true".',
        },
    ),
    RuleSpec(
        "accumulation_without_no_sync",
        "Gradient accumulation all-reduces every micro-step",
        "medium",
        "medium",
        "communication",
        "Under DDP every backward() all-reduces the gradients: accumulating k micro-batches costs k "
        "all-reduces instead of one (measured as `comm_bound`).",
        {
            "pytorch": "Wrap the non-final micro-steps in `with model.no_sync():`.",
            "accelerate": "with accelerator.accumulate(model): around each micro-step.",
        },
        finding="comm_bound",
    ),
    RuleSpec(
        "torch_load_unsafe",
        "torch.load that may unpickle arbitrary code",
        "high",  # weights_only=False; an unset weights_only is reported as medium (safe on torch >= 2.6)
        "high",
        "security",
        "With weights_only=False torch.load unpickles arbitrary objects: a malicious checkpoint runs code on "
        "load, on every PyTorch version. weights_only=True loads tensors and plain containers only; it is "
        "the default since PyTorch 2.6, so an unset weights_only is unsafe only on older PyTorch (medium).",
        {
            "pytorch": "torch.load(path, weights_only=True) (or safetensors.torch.load_file); a file "
            "written by torch.save(model) (a whole pickled module) needs a state_dict instead.",
        },
        fixable=True,
    ),
    RuleSpec(
        "non_blocking_from_pageable",
        "non_blocking=True copy from pageable memory",
        "low",
        "medium",
        "input",
        "An asynchronous copy needs pinned host memory; from pageable memory it runs synchronously, so "
        "non_blocking=True buys nothing (measured as `pageable_copies`).",
        {
            "pytorch": "DataLoader(..., pin_memory=True) (or tensor.pin_memory()) "
            "before .to(device, non_blocking=True)."
        },
        finding="pageable_copies",
    ),
    RuleSpec(
        "cpu_tensor_per_step",
        "Tensor created on the CPU and copied to the GPU every step",
        "low",
        "medium",
        "host",
        "A CPU allocation plus a host-to-device copy each step, where the tensor could be created on the "
        "device directly.",
        {
            "pytorch": "torch.zeros(..., device=device) (any factory takes device=), "
            "or create it once before the loop."
        },
    ),
    RuleSpec(
        "optimizer_before_fsdp",
        "Optimizer built before FSDP wraps the model",
        "high",
        "high",
        "correctness",
        "FSDP replaces the parameters with flattened shards: an optimizer built earlier holds the old "
        "tensors and updates nothing (or keeps full copies in memory).",
        {"pytorch": "model = FSDP(model, ...) first, then optimizer = AdamW(model.parameters(), ...)."},
    ),
    RuleSpec(
        "missing_distributed_sampler",
        "DDP without a DistributedSampler",
        "high",
        "medium",
        "correctness",
        "Without a DistributedSampler every rank iterates the whole dataset in the same order: N GPUs "
        "train on the same batches, so an epoch costs N× the compute for one GPU's worth of data.",
        {
            "pytorch": "DataLoader(dataset, sampler=DistributedSampler(dataset), ...) (drop shuffle=True; "
            "call sampler.set_epoch(epoch) each epoch).",
        },
    ),
    RuleSpec(
        "data_parallel",
        "nn.DataParallel instead of DistributedDataParallel",
        "medium",
        "high",
        "distributed",
        "DataParallel drives every GPU from one Python process: it copies the model to each GPU and "
        "scatters the batch every step, gathers outputs on GPU 0, and is bound by the GIL; PyTorch "
        "recommends DistributedDataParallel even on one machine.",
        {
            "pytorch": "torchrun --nproc_per_node=N train.py with "
            "DistributedDataParallel(model, device_ids=[local_rank]).",
        },
    ),
    RuleSpec(
        "zero_grad_keeps_tensors",
        "zero_grad(set_to_none=False)",
        "low",
        "high",
        "host",
        "Zeroing launches a memset per parameter every step and keeps the gradient memory allocated; "
        "set_to_none=True (the default since PyTorch 2.0) frees it and lets backward write instead of add.",
        {"pytorch": "optimizer.zero_grad() (set_to_none=True is the default)."},
    ),
    RuleSpec(
        "model_to_device_in_loop",
        "The model is moved to the device every step",
        "low",
        "medium",
        "host",
        "model.to(device) walks every parameter and buffer each time it is called: inside the step loop it "
        "is host work per step at best, and a copy of the whole model if it was elsewhere.",
        {"pytorch": "model.to(device) once, before the optimizer is built and the loop starts."},
    ),
    RuleSpec(
        "clip_before_unscale",
        "Gradient clipping of scaled gradients",
        "high",
        "high",
        "correctness",
        "With a GradScaler the gradients are multiplied by the loss scale (65536 at the start): clipping "
        "them before scaler.unscale_(optimizer) compares the scaled norm with the threshold, so every "
        "step is clipped far too hard (or the clip is meaningless).",
        {
            "pytorch": "scaler.unscale_(optimizer) before clip_grad_norm_(model.parameters(), max_norm), "
            "then scaler.step(optimizer).",
        },
    ),
    RuleSpec(
        "len_list_loader",
        "len(list(loader)) loads the whole epoch",
        "medium",
        "high",
        "input",
        "list(loader) reads, decodes and collates every batch of the epoch just to count them, and holds "
        "them all in memory; a map-style DataLoader knows its length.",
        {"pytorch": "len(loader) (an IterableDataset has no length: count once, or set it yourself)."},
        fixable=True,
    ),
    RuleSpec(
        "cudnn_benchmark_off",
        "Conv net without cudnn.benchmark",
        "low",
        "medium",
        "compute",
        "With benchmark off cuDNN runs a heuristic choice of convolution algorithm; with it on it times "
        "the candidates once per input shape and keeps the fastest, often 10-30 % faster convolutions "
        "for fixed-size inputs.",
        {"pytorch": "torch.backends.cudnn.benchmark = True before training (fixed input sizes)."},
    ),
    RuleSpec(
        "deprecated_torch_api",
        "Deprecated torch API",
        "low",
        "high",
        "correctness",
        "The call warns every time it runs and is due to be removed: torch.cuda.amp.autocast/GradScaler "
        "(FutureWarning since PyTorch 2.4), torch.testing.assert_allclose (since 1.12), torch.norm "
        "(documented as deprecated, may be removed), torch.nn.utils.clip_grad_norm (since 0.4). An upgrade "
        "then breaks the script.",
        {
            "pytorch": 'torch.amp.autocast("cuda", ...), torch.amp.GradScaler("cuda", ...), '
            "torch.testing.assert_close (stricter: checks dtypes), torch.linalg.vector_norm/matrix_norm, "
            "torch.nn.utils.clip_grad_norm_."
        },
        fixable=True,
    ),
]
SPECS: dict[str, RuleSpec] = {spec.id: spec for spec in SPECS_LIST}
