"""The CLI's contract: help, version, usage errors with exit 2, and exit codes passed through."""

import json
import os
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest
import typer
import typer.main

from conftest import CliResult
from gpuwise.cli import app as app_module
from gpuwise.cli.output import escape_markdown_html


def typer_version() -> str:
    return version("typer")


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


def _config_json(folder: Path) -> Path:
    """A small Llama-shaped Hugging Face config.json (no weights needed)."""
    folder.mkdir(parents=True, exist_ok=True)
    cfg = folder / "config.json"
    cfg.write_text(
        json.dumps(
            {
                "architectures": ["LlamaForCausalLM"],
                "model_type": "llama",
                "hidden_size": 512,
                "num_hidden_layers": 2,
                "num_attention_heads": 8,
                "num_key_value_heads": 2,
                "intermediate_size": 1376,
                "vocab_size": 32000,
            }
        )
    )
    return cfg


def _one_line_error(result) -> str:
    assert result.exit_code == 2, result.stderr
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1, result.stderr
    return result.stderr


def test_a_model_config_json_is_a_workload_argument(cli, tmp_path):
    cfg = _config_json(tmp_path / "my-model")
    result = cli("memory", str(cfg), "-t", "qlora", "-p", "nf4-dq", "--json")
    assert result.exit_code == 0, result.stderr
    doc = result.json()
    assert doc["workload"]["model"] == str(cfg) and doc["workload"]["task"] == "qlora"
    assert "model config.json" in _one_line_error(cli("memory", str(cfg), "--model", "llama-3-8b"))


# Hides one package from imports, as if it were not installed, then runs the CLI.
_WITHOUT_PACKAGE = """
import sys

hidden = sys.argv[1]

class Hide:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == hidden:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, Hide())
from gpuwise.cli.app import main
main(sys.argv[2:])
"""


@pytest.mark.parametrize("command", ["memory", "plan"])
def test_traced_without_the_sim_extra_says_what_to_install(command, tmp_path):
    cfg = _config_json(tmp_path)
    proc = subprocess.run(
        [sys.executable, "-c", _WITHOUT_PACKAGE, "transformers", command, str(cfg), "--traced"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    error = _one_line_error(CliResult(proc.returncode, proc.stdout, proc.stderr))
    assert "pip install 'gpuwise[sim]'" in error and ("transformers" in error or "torch" in error)


def test_help_shows_bracketed_text_and_no_value_for_boolean_flags(cli):
    wide = {**os.environ, "COLUMNS": "250"}
    for command in ("memory", "plan"):
        text = cli(command, "--help", env=wide).stdout
        assert "pip install 'gpuwise[sim]'" in text, text
        assert "<bool>" not in text, f"typer {typer_version()} prints <bool>: outside the tested range"
    help_lines = cli("plan", "--help", env=wide).stdout.splitlines()
    flag_line = next(line for line in help_lines if "--json" in line and "Print JSON" in line)
    assert "<" not in flag_line.split("Print JSON")[0], flag_line  # a flag takes no value


def test_every_help_renders(cli):
    # Rich markup in a help text (an unescaped "[/...]") used to crash `loadtest --help`
    commands = [[]] + [
        [*path.split(), name] if path else [name]
        for path, name in _commands(typer.main.get_command(app_module.app))
    ]
    for command in commands:
        result = cli(*command, "--help")
        assert result.exit_code == 0 and "Usage" in result.stdout, (command, result.stderr)
    assert "http://HOST:PORT[/v1[/completions]]" in cli("loadtest", "--help").stdout


def _commands(command, path=""):
    """(parent path, name) of every command and sub-command."""
    for name, sub in getattr(command, "commands", {}).items():
        yield path, name
        yield from _commands(sub, f"{path} {name}".strip())


def _options(command, path=()):
    """(command path, option strings) of every option of every command, sub-commands included."""
    for param in command.params:
        if getattr(param, "opts", None) and param.param_type_name == "option":
            yield " ".join(path), param.opts + param.secondary_opts
    for name, sub in getattr(command, "commands", {}).items():
        yield from _options(sub, (*path, name))


def test_short_flags_mean_the_same_in_every_command():
    meaning: dict[str, set[str]] = {}
    for _, opts in _options(typer.main.get_command(app_module.app)):
        longs = tuple(sorted(o for o in opts if o.startswith("--")))
        for short in (o for o in opts if len(o) == 2):
            meaning.setdefault(short, set()).add(longs)
    assert meaning["-n"] == {("--gpus",)}
    assert {short: names for short, names in meaning.items() if len(names) > 1} == {}


def test_profile_refuses_an_option_it_does_not_have(cli):
    assert "no option -n" in _one_line_error(cli("profile", "-n", "5", "--no-save", "--", "python", "-c", ""))


@pytest.mark.parametrize("option, command", [("--models-file", "models"), ("--gpus-file", "gpus")])
def test_a_binary_catalog_file_is_one_clear_line(cli, tmp_path, option, command):
    blob = tmp_path / "catalog.yaml"
    blob.write_bytes(bytes(range(256)) * 4)
    assert "not a text file" in _one_line_error(cli(option, str(blob), command))


@pytest.mark.parametrize("command", ["plan", "cost"])
def test_json_and_markdown_together_are_refused(cli, command):
    error = _one_line_error(cli(command, "examples/llama-3-8b-lora.yaml", "--json", "--markdown"))
    assert "--json and --markdown" in error


def test_markdown_escapes_html_from_the_inputs(cli, tmp_path):
    cfg = _config_json(tmp_path / "<img src=x onerror=alert(1)>")
    for command in ("cost", "plan"):
        result = cli(command, str(cfg), "-t", "inference", "--markdown")
        assert result.exit_code == 0, result.stderr
        outside_code = result.stdout.split("```")[::2]  # fenced blocks show text literally
        assert "&lt;img src=x" in result.stdout
        assert not any("<img" in part for part in outside_code), result.stdout


def test_markdown_escaping_keeps_code_and_line_breaks():
    text = "a <b> & c | x<br>y `<kbd>` here\n```yaml\nmodel: <m>\n```\n"
    assert escape_markdown_html(text) == (
        "a &lt;b&gt; &amp; c | x<br>y `<kbd>` here\n```yaml\nmodel: <m>\n```\n"
    )
