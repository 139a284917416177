"""The CLI's contract: help, version, usage errors with exit 2, and exit codes passed through."""

import pytest
import typer

from gpuwise.cli import app as app_module


def test_help_version_and_usage_errors(cli):
    assert cli("--help").exit_code == 0
    assert cli("--version").stdout.startswith("gpuwise ")
    result = cli("no-such-command")
    assert result.exit_code == 2 and "Traceback" not in result.stderr
    result = cli("memory", "llama-3-8b", "--batch", "lots")
    assert result.exit_code == 2 and "Traceback" not in result.stderr


def test_debug_shows_the_traceback(cli):
    result = cli("--debug", "gpus", "h100")
    assert result.exit_code != 0 and "Traceback" in result.stderr


def test_typer_exit_code_is_passed_through():
    @app_module.app.command("exit-probe", hidden=True)
    def probe() -> None:
        raise typer.Exit(3)

    try:
        with pytest.raises(SystemExit) as done:
            app_module.main(["exit-probe"])
        assert done.value.code == 3
    finally:
        app_module.app.registered_commands = [
            c for c in app_module.app.registered_commands if c.name != "exit-probe"
        ]


def test_gpus_file_adds_a_gpu_for_one_run(cli, tmp_path):
    extra = tmp_path / "mine.yaml"
    extra.write_text("- id: lab-8gb\n  memory_gb: 8\n  mem_bw_tbps: 0.3\n  bf16_tflops: 30\n")
    result = cli("--gpus-file", str(extra), "gpus", "lab-8gb", "--json")
    assert result.exit_code == 0 and result.json()["gpu"]["memory_gb"] == 8
    assert cli("gpus", "lab-8gb").exit_code == 2  # only for that run
    missing = cli("--gpus-file", str(tmp_path / "none.yaml"), "gpus")
    assert missing.exit_code == 2 and "does not exist" in missing.stderr
