"""The linter over look-alike projects (tests/data/lint/projects): each folder is linted as one project
and must produce exactly the findings labelled ``# expect[rule]`` on their lines (benchmarks/lint_real.py
reads the same labels). Also the project facts those findings rest on, one by one."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from gpuwise.lint import lint_paths
from gpuwise.lint.context import Context
from gpuwise.lint.datasets import dataset_cost
from gpuwise.lint.project import Project, gpu_evidence, project_root, torch_floor

PROJECTS = Path(__file__).parent / "data" / "lint" / "projects"
LABEL = re.compile(r"(expect|debatable)(-next)?\[([a-z0-9_]+)\]")


def labelled(folder: Path) -> set[tuple[str, int, str]]:
    found = set()
    for path in folder.glob("*.py"):
        for number, line in enumerate(path.read_text().splitlines(), start=1):
            for kind, next_line, rule in LABEL.findall(line.partition("#")[2]):
                assert kind == "expect", "the test projects carry no debatable labels"
                found.add((path.name, number + bool(next_line), rule))
    return found


@pytest.mark.parametrize("folder", sorted(p.name for p in PROJECTS.iterdir() if p.is_dir()))
def test_each_project_gives_exactly_its_labelled_findings(folder: str) -> None:
    result = lint_paths([PROJECTS / folder])
    assert result.notes == []
    assert {(Path(v.path).name, v.line, v.rule) for v in result.violations} == labelled(PROJECTS / folder)


def test_a_file_alone_lacks_its_projects_facts() -> None:
    # data.py never names a device: alone it is not GPU code; with train.py (cuda) it is.
    alone = lint_paths([PROJECTS / "gpu_datamodule" / "data.py"])
    assert alone.violations == []
    # the sampler is re-seeded in utils.py: train.py alone is reported.
    rules = {v.rule for v in lint_paths([PROJECTS / "ddp_helper_epoch" / "train.py"]).violations}
    assert "sampler_without_set_epoch" in rules


def ctx_of(text: str, project: Project | None = None) -> Context:
    ctx = Context.build(ast.parse(text), text)
    ctx.project = project or Project.of([ctx], None)
    return ctx


@pytest.mark.parametrize(
    ("text", "verdict"),
    [
        ("import torch\nx = torch.zeros(3).cuda()\n", True),
        ("import torch\nd = torch.accelerator.current_accelerator()\n", True),
        ("from transformers import AutoModel\nm = AutoModel.from_pretrained('x', device_map='auto')\n", True),
        ("import lightning as L\nt = L.Trainer(accelerator='cpu')\n", False),
        ("import lightning as L\nt = L.Trainer(accelerator='gpu', devices=2)\n", True),
        (
            "import argparse\nargparse.ArgumentParser().add_argument('-x', help='disables CUDA training')\n",
            None,
        ),
        (
            "import argparse\nargparse.ArgumentParser().add_argument('-x', help='disables accelerator')\n",
            None,
        ),
    ],
)
def test_gpu_code_is_decided_by_code_never_by_help_strings(text: str, verdict: bool | None) -> None:
    assert gpu_evidence(ctx_of(text)) is verdict


def test_torch_floor_from_pyproject_and_requirements(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "x"\ndependencies = ["torch>=2.6.0", "numpy"]\n'
    )
    assert torch_floor(tmp_path) == (2, 6)
    sub = tmp_path / "example"
    sub.mkdir()
    (sub / "requirements.txt").write_text("torchvision\ntorch==2.4.1\n")
    assert torch_floor(sub) == (2, 4)
    (sub / "requirements.txt").write_text("numpy\n")
    assert torch_floor(sub) is None  # declared dependencies without a torch bound
    (sub / "train.py").write_text("")
    assert project_root(sub / "train.py") == sub.resolve()


@pytest.mark.parametrize(
    ("setup", "cost"),
    [
        ("ds = TensorDataset(torch.randn(8, 3), torch.zeros(8))", "memory"),
        (
            "raw = load_dataset('glue', 'mrpc')\ntok = raw.map(f, batched=True)\nds = tok['train']",
            "tokenized",
        ),
        ("ds = torchvision.datasets.ImageFolder('x', transform=t)", "heavy"),
        ("ds = torchvision.datasets.ImageFolder('x').with_transform(t)", "heavy"),
        ("ds = make_dataset(args)", "unknown"),
        ("ds = [torch.zeros(3) for _ in range(8)]", "memory"),
    ],
)
def test_dataset_cost_grades_the_loaders_dataset(setup: str, cost: str) -> None:
    text = (
        "import torch, torchvision\nfrom datasets import load_dataset\n"
        "from torch.utils.data import DataLoader, TensorDataset\n"
        "def main(args, f, t):\n"
        + "".join(f"    {line}\n" for line in setup.splitlines())
        + "    return DataLoader(ds)\n"
    )
    ctx = ctx_of(text)
    [loader] = ctx.calls_to("torch.utils.data.DataLoader")
    assert dataset_cost(ctx, loader) == cost


def test_a_branch_that_steps_the_optimizer_is_per_step_code(tmp_path: Path) -> None:
    path = tmp_path / "t.py"
    path.write_text(
        "import torch\n"
        "def train(model, opt, loader, accum):\n"
        "    for i, x in enumerate(loader):\n"
        "        model(x.cuda()).sum().backward()\n"
        "        if (i + 1) % accum == 0:\n"
        "            print(model.w.grad.norm().item())\n"
        "            opt.step()\n"
        "        if i % 100 == 0:\n"
        "            print(model.w.grad.norm().item())\n"
    )
    found = [(v.rule, v.line) for v in lint_paths([path]).violations if v.rule == "host_sync_per_step"]
    assert found == [("host_sync_per_step", 6)]


def test_one_print_of_loss_item_is_one_finding(tmp_path: Path) -> None:
    path = tmp_path / "t.py"
    path.write_text(
        "import torch\n"
        "def train(model, opt, loader):\n"
        "    for x in loader:\n"
        "        loss = model(x.cuda()).sum()\n"
        "        loss.backward()\n"
        "        opt.step()\n"
        "        print('loss:', loss.item())\n"
    )
    assert [(v.rule, v.col) for v in lint_paths([path]).violations if v.rule == "host_sync_per_step"] == [
        ("host_sync_per_step", 24)
    ]


def test_torch_load_respects_the_torch_pin_and_safe_globals(tmp_path: Path) -> None:
    script = tmp_path / "load.py"
    script.write_text(
        "import torch\n"
        "a = torch.load('a.pt')\n"
        "with torch.serialization.safe_globals([dict]):\n"
        "    b = torch.load('b.pt')\n"
        "c = torch.load('c.pt', weights_only=False)\n"
    )
    (tmp_path / "requirements.txt").write_text("torch>=2.1\n")
    assert [v.line for v in lint_paths([tmp_path]).violations] == [2, 5]
    (tmp_path / "requirements.txt").write_text("torch>=2.6\n")
    assert [v.line for v in lint_paths([tmp_path]).violations] == [5]  # weights_only=False is unsafe anywhere
