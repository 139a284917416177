"""Issue 27 items 1-2: every real script is profiled, and phases follow where the time is spent.

- The boot hook survives ``importlib.util.find_spec("torch")`` (``datasets``/``transformers`` call it
  before importing torch), ``importlib.import_module`` and a ``LazyLoader``.
- A script that fails to start says why (its traceback's last line) and keeps its exit code.
- Module calls inside ``DataLoader.__next__`` (an ``nn.Module`` transform) are data wait, not forward.
- A sleep inside the function that calls the model (a DDP tutorial's ``_run_batch``) is not "batch
  preparation", whatever its name.
- A CPU-bound loader under CPU burners is not read as waiting on I/O.
"""

from __future__ import annotations

import sys

from conftest import run_cli
from profile_scenarios import cpu_burners, profile_script

LOOP = """
m = torch.nn.Linear(8, 1)
opt = torch.optim.SGD(m.parameters(), lr=0.01)
for _ in range(40):
    opt.zero_grad(); m(torch.randn(16, 8)).sum().backward(); opt.step()
"""
FIND_SPEC = (
    'import importlib.util\nassert importlib.util.find_spec("torch") is not None\nimport torch\n' + LOOP
)
IMPORT_MODULE = (
    "import importlib, importlib.util, importlib.metadata\n"
    'importlib.util.find_spec("torch"); importlib.metadata.version("torch")\n'
    'importlib.util.find_spec("torch")\n'
    'torch = importlib.import_module("torch")\n' + LOOP
)
LAZY = (
    "import importlib.util, sys\n"
    'spec = importlib.util.find_spec("torch")\n'
    "loader = importlib.util.LazyLoader(spec.loader)\n"
    "spec.loader = loader\n"
    "torch = importlib.util.module_from_spec(spec)\n"
    'sys.modules["torch"] = torch\n'
    "loader.exec_module(torch)\n" + LOOP
)


def test_find_spec_import_module_and_lazy_imports_of_torch_are_profiled(tmp_path):
    for source in (FIND_SPEC, IMPORT_MODULE, LAZY):
        doc = profile_script(tmp_path, source, steps=10, warmup=2)
        assert doc["measured_steps"] == 10, (source, doc["notes"])
        assert doc["status"] == "completed"


def test_a_script_that_fails_to_start_says_why_and_keeps_its_exit_code(tmp_path):
    cases = {
        "import torch\nfor i in range(3:\n    pass\n": "SyntaxError",
        "import importlib.util\nimport no_such_mod_xyz\n": "No module named 'no_such_mod_xyz'",
    }
    for source, said in cases.items():
        script = tmp_path / "train.py"
        script.write_text(source)
        result = run_cli("profile", "--json", "--no-save", "--", sys.executable, str(script))
        assert result.exit_code == 1
        notes = result.json()["notes"]
        assert any("failed before any training step (exit code 1)" in n and said in n for n in notes), notes


TRANSFORM_LOADER = """
import time, torch
from torch.utils.data import DataLoader, Dataset
torch.set_num_threads(1)
torch.manual_seed(0)

class Augment(torch.nn.Module):  # a transform written as a module, as torchvision's are
    def forward(self, x):
        time.sleep(0.02)  # decoding and augmenting one sample
        return x.flip(-1)

class Images(Dataset):
    def __init__(self):
        self.augment = Augment()
    def __len__(self):
        return 10_000
    def __getitem__(self, i):
        return self.augment(torch.randn(3, 8, 8)), i % 10

model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(192, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for step, (x, y) in enumerate(DataLoader(Images(), batch_size=2)):
    loss = torch.nn.functional.cross_entropy(model(x), y)
    opt.zero_grad(); loss.backward(); opt.step()
    if step == 16:
        break
"""


def test_an_nn_module_transform_inside_the_loader_is_data_wait_not_forward(tmp_path):
    doc = profile_script(tmp_path, TRANSFORM_LOADER, steps=10, warmup=3)
    phases = doc["phases"]
    assert phases["data_wait"]["pct"] > 80, phases  # 40 ms of sleeping per batch against a tiny model
    assert phases["forward"]["pct"] < 10, phases
    top = doc["findings"][0]
    assert top["id"] == "input_bound"
    # the table and the finding read the same data-wait share
    assert abs(top["metrics"]["data_wait_pct"] - phases["data_wait"]["pct"]) < 5


RUN_BATCH = """
import time, torch
torch.set_num_threads(1)

class Trainer:  # the DDP tutorial's shape: _run_batch calls the model itself
    def __init__(self):
        self.model = torch.nn.Linear(32, 1)
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.01)

    def _run_batch(self, source, targets):
        self.optimizer.zero_grad()
        time.sleep(0.03)  # a straggler's extra work, inside the step's own function
        loss = torch.nn.functional.mse_loss(self.model(source), targets)
        loss.backward()
        self.optimizer.step()

    def train(self, steps):
        for _ in range(steps):
            self._run_batch(torch.randn(16, 32), torch.randn(16, 1))

Trainer().train(30)
"""


def test_a_sleep_in_the_function_that_calls_the_model_is_not_batch_preparation(tmp_path):
    doc = profile_script(tmp_path, RUN_BATCH, steps=15, warmup=3)
    ids = [f["id"] for f in doc["findings"]]
    assert "input_bound" not in ids, doc["findings"]
    host = next(f for f in doc["findings"] if f["id"] == "unexplained_host_time")
    assert host["category"] == "host" and "_run_batch" in host["metrics"]["top_frames"][0]
    assert "prefetch" not in host["fix_snippet"]


CPU_LOADER = """
import torch
from torch.utils.data import DataLoader, Dataset
torch.set_num_threads(1)
torch.manual_seed(0)

class Heavy(Dataset):
    def __len__(self):
        return 10_000
    def __getitem__(self, i):
        x = torch.randn(64, 64)
        for _ in range(8):  # CPU-bound decoding: matrix work, no sleep, no file
            x = torch.tanh(x @ x.T / 64)
        return x.flatten()[:32], i % 2

model = torch.nn.Linear(32, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for step, (x, y) in enumerate(DataLoader(Heavy(), batch_size=8)):
    loss = torch.nn.functional.cross_entropy(model(x), y)
    opt.zero_grad(); loss.backward(); opt.step()
    if step == 20:
        break
"""


def test_a_cpu_bound_loader_under_cpu_burners_is_not_read_as_io(tmp_path):
    with cpu_burners(2, seconds=60):
        doc = profile_script(tmp_path, CPU_LOADER, steps=10, warmup=3)
    loader = doc["runs"][0]["loader"]
    assert loader["num_workers"] == 0
    # the thread ran or waited for a core for most of its batch loads: CPU-bound, whatever the load
    assert loader["loader_busy_pct"] >= 50, loader
    top = next(f for f in doc["findings"] if f["id"] == "input_bound")
    assert "I/O" not in top["fix"] and "I/O" not in top["summary"], top
