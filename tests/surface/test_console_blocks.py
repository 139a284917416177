"""Every ```console block of README.md and docs/*.md runs, and prints what the doc shows.

Why: the outputs in the docs are what a new user compares their first runs with; a renamed line, a
changed figure or a command that no longer exists makes the manual lie. Each `$ gpuwise …` line of a
block is run (in a temporary directory holding `examples/` and the files the docs' examples use) and the
lines the doc shows below it must appear in what it prints, in order: `…` stands for any text (a whole
line of it: lines left out), and numbers that vary between runs (timings, rates, run ids, dates, the
store's path) are masked. The first shown line must be the first line printed unless the block shows
`…` first. A block that cannot run here carries `<!-- surface: not run (REASON) -->` right above it;
a block with neither fails (test_every_console_block_runs_or_says_why).

docs/extending.md is left out: its blocks are a contributor's walk-through, tested by test_extending.py.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from gpuwise.catalog.gpus import clear_cache
from gpuwise.cli.app import main

REPO = Path(__file__).resolve().parents[2]
DOCS = [REPO / "README.md", *sorted(p for p in (REPO / "docs").glob("*.md") if p.name != "extending.md")]
MARKER = re.compile(r"^<!-- surface: not run \((?P<reason>.{10,})\) -->$")
# A block that reads what the block above it wrote (a run in the store): that block runs first, unchecked.
AFTER = re.compile(r"^<!-- surface: after the block above \((?P<reason>.{10,})\) -->$")
ELLIPSIS = "…"
COLUMNS = "100"  # the width the docs' outputs were captured at
# Commands that measure this machine: every number they print varies between runs.
MEASURED = {"profile", "tune", "bench", "runs"}
# Commands run in a fresh process (they start the user's script, or time things): marked slow.
SUBPROCESS = {"profile", "tune", "bench", "runs"}
SLOW = SUBPROCESS | {"trace"}  # the trace block parses a 35 MB file
EXIT_OK = {"lint": (0, 1)}  # lint exits 1 when it finds something, as linters do (docs/lint.md)
NUMBER = r"-?[\d][\d,]*(?:\.\d+)?"
BAR = "█▉▊▋▌▍▎▏"
# Figures that vary in every command: parse time and rate, run ids, store path, dates.
VARYING = [
    (re.compile(r"parsed in \S+ s \(\S+ MB/s\)"), r"parsed in \S+ s \(\S+ MB/s\)"),
    (re.compile(r"\brun \d+\b"), r"run \d+"),
    (re.compile(r"\d\d-\d\d \d\d:\d\d"), r"\d\d-\d\d \d\d:\d\d"),
    (re.compile(r" in /\S+\.sqlite"), r" in /\S+\.sqlite"),
]


@dataclass(frozen=True)
class Command:
    """One `$ gpuwise …` line and the output lines the doc shows under it."""

    text: str
    expected: tuple[str, ...]

    @property
    def argv(self) -> list[str]:
        return shlex.split(self.text, comments=True)[1:]

    @property
    def name(self) -> str:
        return self.argv[0]


@dataclass(frozen=True)
class Block:
    """A ```console block: where it is, its marker's reason (None: it must run) and its commands."""

    doc: Path
    line: int
    reason: str | None
    commands: tuple[Command, ...]
    setup: tuple[Command, ...] = ()  # the commands of the block above, when marked "after the block above"

    @property
    def id(self) -> str:
        return f"{self.doc.name}:{self.line}"


def parse(doc: Path) -> list[Block]:
    """The ```console blocks of DOC, each with the marker on the nearest non-blank line above it."""
    lines = doc.read_text(encoding="utf-8").splitlines()
    blocks: list[Block] = []
    i = 0
    while i < len(lines):
        if lines[i].strip() != "```console":
            i += 1
            continue
        above = next((lines[j].strip() for j in range(i - 1, -1, -1) if lines[j].strip()), "")
        marker = MARKER.match(above)
        setup = blocks[-1].commands if AFTER.match(above) and blocks else ()
        start, i = i + 1, i + 1
        while lines[i].strip() != "```":
            i += 1
        commands: list[Command] = []
        for text in lines[start:i]:
            if text.startswith("$ gpuwise "):
                commands.append(Command(text[2:], ()))
            elif commands:
                commands[-1] = Command(commands[-1].text, (*commands[-1].expected, text))
        reason = marker["reason"] if marker else None
        blocks.append(Block(doc, start, reason, tuple(commands), setup))
        i += 1
    return blocks


BLOCKS = [block for doc in DOCS for block in parse(doc)]
RUNNABLE = [
    pytest.param(
        b, id=b.id, marks=[pytest.mark.slow] if {c.name for c in (*b.setup, *b.commands)} & SLOW else []
    )
    for b in BLOCKS
    if b.reason is None
]


def test_every_console_block_runs_or_says_why() -> None:
    assert BLOCKS, "no ```console block found"
    for block in BLOCKS:
        assert block.commands, f"{block.id}: a console block without a `$ gpuwise …` line"
        for command in block.commands:
            assert command.text.startswith("gpuwise "), f"{block.id}: `$ {command.text}` is not gpuwise"
    assert RUNNABLE, "every block is marked not run"


def pattern(line: str, measured: bool) -> re.Pattern[str]:
    """The regex a shown line stands for: whitespace collapsed, `…` any text, varying figures masked."""
    parts = [mask(segment, measured) for segment in " ".join(line.split()).split(ELLIPSIS)]
    return re.compile(".*".join(parts))


def mask(segment: str, measured: bool) -> str:
    """SEGMENT escaped, its varying figures (all numbers and bars when MEASURED) as patterns."""
    out, pos = [], 0
    spans = [(m.start(), m.end(), repl) for found, repl in VARYING for m in found.finditer(segment)]
    if measured:
        spans += [(m.start(), m.end(), NUMBER) for m in re.finditer(NUMBER, segment)]
        spans += [(m.start(), m.end(), f"[{BAR}]*") for m in re.finditer(f"[{BAR}]+", segment)]
    for start, end, repl in sorted(spans):
        if start < pos:
            continue
        out += [re.escape(segment[pos:start]), repl]
        pos = end
    return "".join([*out, re.escape(segment[pos:])])


def find(regex: re.Pattern[str], lines: list[str], start: int, only_first: bool) -> int | None:
    """Index after the first line from START that REGEX matches, alone or joined with the next one (a
    line the terminal wrapped at a width that depends on a path or a timing); None if none does."""
    for k in range(start, start + 1 if only_first else len(lines)):
        if k < len(lines) and regex.fullmatch(lines[k]):
            return k + 1
        if k + 1 < len(lines) and regex.fullmatch(f"{lines[k]} {lines[k + 1]}"):
            return k + 2
    return None


def compare(command: Command, out: str, err: str) -> None:
    """The shown lines appear in stdout (or stderr), in order; the first shown is the first printed."""
    shown = [line for line in command.expected if line.strip()]
    printed = {
        "stdout": [" ".join(line.split()) for line in out.splitlines() if line.strip()],
        "stderr": [" ".join(line.split()) for line in err.splitlines() if line.strip()],
    }
    at = {"stdout": 0, "stderr": 0}
    measured = command.name in MEASURED
    for n, line in enumerate(shown):
        if line.strip() == ELLIPSIS:
            continue
        regex = pattern(line, measured)
        first = n == 0
        for stream, lines in printed.items():
            hit = find(regex, lines, at[stream], only_first=first)
            if hit is not None:
                at[stream] = hit
                break
        else:
            context = "\n".join([*printed["stdout"][:60], "-- stderr --", *printed["stderr"][:10]])
            where = "as the first line printed" if first else "after the lines matched before it"
            pytest.fail(f"$ {command.text}\nthe doc shows\n  {line}\nnot found {where} in\n{context}")


STARVED = REPO / "benchmarks" / "real_scripts" / "starved_loader.py"
# The profile example's loop moved to a GPU (docs/lint.md): the same loader, .cuda(), a loss read per step.
TRAIN_GPU = '''"""The profile example's training loop, moved to the GPU."""

import time

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset


class Slow(Dataset):
    def __len__(self):
        return 100000

    def __getitem__(self, i):
        time.sleep(0.002)  # the read
        return torch.randn(32), i % 4


def train():
    loader = DataLoader(Slow(), batch_size=16, shuffle=True)
    model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 4)).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for x, y in loader:
        loss = nn.functional.cross_entropy(model(x.cuda()), y.cuda())
        print(loss.item())
        opt.zero_grad()
        loss.backward()
        opt.step()


if __name__ == "__main__":
    train()
'''


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A directory like a user's: examples/, train.py (the profile example's loop), train_gpu.py; a
    fresh run store; the docs' terminal width."""
    (tmp_path / "examples").symlink_to(REPO / "examples")
    shutil.copy(STARVED, tmp_path / "train.py")
    (tmp_path / "train_gpu.py").write_text(TRAIN_GPU)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("COLUMNS", COLUMNS)
    monkeypatch.setenv("GPUWISE_STORE", str(tmp_path / "store" / "runs.sqlite"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.delenv("GPUWISE_GPUS", raising=False)
    return tmp_path


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """`gpuwise ARGV`: in-process, or in a fresh process for the commands that measure or spawn."""
    if argv[0] in SUBPROCESS:
        path = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
        env = {**os.environ, "PYTHONPATH": str(REPO / "src"), "PATH": path}  # `python` is this one
        proc = subprocess.run(
            [sys.executable, "-m", "gpuwise", *argv], capture_output=True, text=True, env=env, timeout=600
        )
        return proc.returncode, proc.stdout, proc.stderr
    clear_cache()
    try:
        main(argv)
        code = 0
    except SystemExit as done:
        code = done.code if isinstance(done.code, int) else (0 if done.code is None else 1)
    finally:
        clear_cache()
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("block", RUNNABLE)
def test_console_block(block: Block, workdir: Path, capsys: pytest.CaptureFixture[str], request) -> None:
    for command in block.setup:
        code, _, err = run(command.argv, capsys)
        assert code == 0, f"{block.id}: $ {command.text} (the block above): exit {code}\n{err[-2000:]}"
    for command in block.commands:
        argv = command.argv
        if argv[0] == "trace":  # kineto's sample trace, from the third-party data (tests/README.md)
            trace_dir = request.getfixturevalue("trace_dir")
            sample = (
                trace_dir / "kineto/samples/resnet50_num_workers_0/worker0.1623143089861.pt.trace.json.gz"
            )
            (workdir / "resnet50_num_workers_0").symlink_to(sample.parent)
        code, out, err = run(argv, capsys)
        assert code in EXIT_OK.get(command.name, (0,)), (
            f"{block.id}: $ {command.text}: exit {code}\n{err[-2000:]}"
        )
        compare(command, out, err)
