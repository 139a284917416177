"""Signals sent to the gpuwise process and a failing run store: the script is stopped and its run saved
as interrupted; a bad store is refused before the script starts; a store that fails at the end loses
nothing. Real `python -m gpuwise profile` processes, real CPU PyTorch scripts, real signals."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from conftest import REPO, run_cli

FOREVER = textwrap.dedent(
    """
    import os, sys, time
    import torch

    torch.set_num_threads(1)
    model = torch.nn.Linear(16, 4)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    ready = sys.argv[1]
    for step in range(10**9):  # trains until stopped
        loss = model(torch.randn(8, 16)).square().mean()
        opt.zero_grad(); loss.backward(); opt.step()
        time.sleep(0.005)
        if step == 10:
            open(ready, "w").close()
    """
)


def wait_for(path: Path, proc: subprocess.Popen, timeout_s: float = 180) -> None:
    deadline = time.monotonic() + timeout_s
    while not path.exists():
        assert proc.poll() is None, proc.communicate()[1][-2000:]
        assert time.monotonic() < deadline, "the script never reached step 10"
        time.sleep(0.1)


def profile_forever(store: str, script: Path, ready: Path) -> list[str]:
    """`gpuwise profile` of a script that trains until stopped (it touches READY once it has steps)."""
    cmd = ["profile", "--json", "--steps", "100000", "--store", store, "--", sys.executable]
    return [sys.executable, "-m", "gpuwise", *cmd, str(script), str(ready)]


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_a_signal_to_gpuwise_stops_the_script_and_saves_it_interrupted(tmp_path, sig):
    script, ready = tmp_path / "train.py", tmp_path / "ready"
    script.write_text(FOREVER)
    store = str(tmp_path / "runs.sqlite")
    proc = subprocess.Popen(
        profile_forever(store, script, ready),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
    )
    try:
        wait_for(ready, proc)
        os.kill(proc.pid, sig)  # to gpuwise only, as a scheduler's `kill -INT PID` does
        stdout, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 128 + sig, stderr[-2000:]  # the script died of the forwarded signal
    doc = json.loads(stdout)
    run = doc["runs"][0]
    assert run["status"] == "interrupted" and run["total_steps"] >= 10
    assert any(f"received {signal.Signals(sig).name}" in note for note in doc["notes"])
    shown = run_cli("runs", "show", "last", "--json", "--store", str(tmp_path / "runs.sqlite"))
    assert shown.json()["status"] == "interrupted"


def test_a_store_that_is_not_a_database_is_refused_before_the_script_runs(tmp_path):
    store = tmp_path / "notes.txt"
    store.write_text("this is not a database\n" * 100)
    marker = tmp_path / "ran"
    script = tmp_path / "train.py"
    script.write_text(f"open({str(marker)!r}, 'w').close()\nimport torch\n")
    result = run_cli("profile", "--store", str(store), "--", sys.executable, str(script))
    assert result.exit_code == 2
    assert "not a readable gpuwise run store" in result.stderr and "Traceback" not in result.stderr
    assert not marker.exists()  # refused before starting: nothing was run and lost


# trains, then breaks the store under gpuwise's feet (it was fine when checked) and exits 4
BREAKS_THE_STORE = textwrap.dedent(
    """
    import sys
    import torch

    torch.set_num_threads(1)
    model = torch.nn.Linear(16, 4)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(12):
        loss = model(torch.randn(8, 16)).square().mean()
        opt.zero_grad(); loss.backward(); opt.step()
    with open(sys.argv[1], "wb") as fh:
        fh.write(b"not a database any more" * 100)
    sys.exit(4)
    """
)


def test_a_store_failing_at_the_end_leaves_the_run_in_a_json_file_beside_it(tmp_path):
    store, script = tmp_path / "runs.sqlite", tmp_path / "train.py"
    script.write_text(BREAKS_THE_STORE)
    result = run_cli(
        "profile", "--json", "--steps", "6", "--warmup", "2", "--store", str(store), "--",
        sys.executable, str(script), str(store),
    )  # fmt: skip
    assert result.exit_code == 4  # the script's exit code, not gpuwise's store error
    doc = result.json()
    saved = Path(doc["store"])
    assert saved.parent == tmp_path and saved.suffix == ".json"
    assert str(saved) in result.stderr and any(str(saved) in note for note in doc["notes"])
    runs = json.loads(saved.read_text())
    assert runs[0]["measured_steps"] == 6 and runs[0]["exit_code"] == 4


def test_ctrl_c_in_a_terminal_reaches_the_script_once(tmp_path):
    """gpuwise in a terminal's foreground hands the terminal to the command's group: the terminal's
    Ctrl-C reaches the script directly (gpuwise forwards nothing, so it is not delivered twice)."""
    import fcntl
    import termios

    script, ready = tmp_path / "train.py", tmp_path / "ready"
    script.write_text(FOREVER)
    master, slave = os.openpty()

    def own_terminal() -> None:  # a new session whose controlling terminal is the pty, as a shell gives
        os.setsid()
        fcntl.ioctl(slave, termios.TIOCSCTTY, 0)

    store = str(tmp_path / "runs.sqlite")
    proc = subprocess.Popen(
        profile_forever(store, script, ready),
        stdin=slave,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
        preexec_fn=own_terminal,
    )
    os.close(slave)
    try:
        wait_for(ready, proc)
        os.write(master, b"\x03")  # the terminal's interrupt character
        stdout, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(master)
    assert proc.returncode == 130, stderr[-2000:]
    doc = json.loads(stdout)
    assert doc["runs"][0]["status"] == "interrupted"
    assert not any("forwarded" in note for note in doc["notes"])  # the script got it from the terminal
