"""The document model and its three renderers: formatting, escaping, charts, the missing-matplotlib path."""

from __future__ import annotations

import io
import re
import subprocess
import sys

import pytest
from rich.console import Console

from gpuwise.report import chart_svg, chart_text, html, markdown, terminal, units
from gpuwise.report.document import (
    Bars,
    Bullets,
    Chart,
    Code,
    Document,
    Finding,
    Heading,
    Headline,
    KeyFigures,
    Note,
    Paragraph,
    Series,
    Table,
    visible_controls,
)

SCRIPT = "<script>alert(1)</script>"
IMG = '"><img src=x onerror=alert(1)>'
JS_URL = "javascript:alert(1)"
BIDI = "abc\u202edcba\u2066x\u2069"
PROBES = (SCRIPT, IMG, JS_URL, BIDI, "[bold red]markup[/]")


def hostile_document() -> Document:
    """Every block kind, each carrying every probe where an input string can go."""
    text = " ".join(PROBES)
    return Document(text, subtitle=text).add(
        Headline(text),
        KeyFigures([(text, text)], caption=text),
        Heading(text),
        Heading("two", 2),
        Heading("three", 2),
        Heading("four", 2),
        Paragraph(text),
        Note(text),
        Table([text, "n"], [[text, "1"]], caption=text),
        Bars([(text, 1.0, text)], 2.0, total_label=text, caption=text),
        Bullets([text]),
        Code(text, label=text),
        Finding("high", text, text, text, text, text),
        Chart(
            "bar", text, [text, "b"], [Series(text, [1.0, 2.0])], x_label=text, y_label=text, description=text
        ),
        Chart("scatter", "points", [text, "b"], [Series("y", [1.0, 2.0])], x=[1.0, 3.0], marked=[0]),
    )


def test_units_format_one_way_everywhere():
    assert units.usd(0.4) == "$0.40" and units.usd(12345.6) == "$12,346" and units.usd(None) == "—"
    assert units.usd(0.0123, 4) == "$0.0123"
    assert units.gib(3 * 2**30) == "3.00" and units.ms(0.01234) == "12.3 ms" and units.pct(12.345) == "12.3 %"
    assert units.tokens(1.5e9) == "1.5 B" and units.decimal_size(35.2e6) == "35.2 MB"
    assert units.num(1234.5) == "1,234" and units.num(None) == "—" and units.duration(90) == "90.0 s"


def test_bidi_and_control_characters_are_made_visible():
    assert visible_controls(BIDI) == "abc<U+202E>dcba<U+2066>x<U+2069>"
    assert visible_controls("a\tb\nc\x1b[31m") == "a\tb\nc<U+001B>[31m"


def test_html_escapes_every_input_and_forbids_scripts():
    page = html.render(hostile_document(), charts=True)
    assert '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; ' in page
    assert (
        "<script" not in page
        and "<img" not in page
        and "onerror=alert" not in page.replace("onerror=alert(1)&gt;", "")
    )
    assert (
        "&lt;script&gt;alert(1)&lt;/script&gt;" in page
        and "&quot;&gt;&lt;img src=x onerror=alert(1)&gt;" in page
    )
    assert "\u202e" not in page and "\u2066" not in page and "abc&lt;U+202E&gt;dcba" in page
    links = re.findall(r'href="([^"]*)"', page)
    assert "#s1" in links and all(link.startswith("#") for link in links)  # contents, SVG markers: in-page
    assert not re.search(r"\bsrc=", page.replace("src=x onerror", ""))  # nothing is loaded from anywhere


def test_html_chart_has_title_description_and_axis_labels():
    chart = Chart(
        "stacked",
        "Phases per step",
        ["rank 0", "rank 1"],
        [Series("forward", [1.0, 2.0]), Series("backward", [2.0, 3.0])],
        x_label="rank",
        y_label="time per step (ms)",
        description="two ranks",
    )
    svg = chart_svg.render(chart)
    assert svg.startswith("<svg") and 'role="img" aria-label="Phases per step"' in svg
    assert "<title>Phases per step</title><desc>two ranks</desc>" in svg
    assert ">time per step (ms)<" in svg and ">rank 1<" in svg and ">forward<" in svg
    assert chart_svg.render(chart) == svg  # the same bytes every time


@pytest.mark.parametrize("kind", ["bar", "grouped", "stacked", "line", "scatter", "waterfall"])
def test_every_chart_kind_draws_in_svg_and_text(kind):
    chart = Chart(
        kind,
        f"{kind} chart",
        ["a", "b", "c"],
        [Series("one", [1.0, 4.0, 2.0]), Series("two", [2.0, 1.0, 3.0])],
        x_label="x axis",
        y_label="y axis",
        x=[1.0, 2.0, 3.0],
        marked=[1],
        mark_label="marked",
    )
    assert "<path" in chart_svg.render(chart)
    lines = chart_text.lines(chart)
    assert lines and all(line.strip() for line in lines)


def test_terminal_shows_inputs_literally():
    out = io.StringIO()
    terminal.render(Console(file=out, width=200, color_system=None), hostile_document())
    text = out.getvalue()
    assert (
        "[bold red]markup[/]" in text
        and SCRIPT in text
        and "abc<U+202E>dcba" in text
        and "\u202e" not in text
    )


def test_markdown_shows_charts_as_text_and_no_raw_controls():
    doc = Document("t").add(Chart("line", "Step time", ["1", "2", "3"], [Series("ms", [1.0, 5.0, 2.0])]))
    doc.add(Finding("medium", "slow", "why", "do this", "[id]", "x = 1"))
    text = markdown.render(doc)
    assert "*Step time*" in text and "```text" in text and "▁█▃" in text
    assert "**MEDIUM: slow** [id]" in text and "*fix:* do this" in text
    assert "\u202e" not in markdown.render(hostile_document())


# Hides matplotlib from imports, as if the report extra were not installed, then writes an HTML report.
_WITHOUT_MATPLOTLIB = """
import sys

class Hide:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == "matplotlib":
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, Hide())
from gpuwise.cli.app import main
main(sys.argv[1:])
"""


def test_html_without_matplotlib_says_so_in_one_line_and_in_the_page(tmp_path):
    page = tmp_path / "fit.html"
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            _WITHOUT_MATPLOTLIB,
            "memory",
            "llama-3-8b",
            "-t",
            "lora",
            "--html",
            str(page),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    warning = [line for line in proc.stderr.splitlines() if "warning" in line]
    assert len(warning) == 1 and "pip install 'gpuwise[report]'" in warning[0]
    text = page.read_text()
    assert "<svg" not in text and "not drawn: charts need matplotlib: pip install" in text


def test_a_missing_directory_is_one_clear_error(cli, tmp_path):
    result = cli("gpus", "--html", str(tmp_path / "nowhere" / "gpus.html"))
    assert result.exit_code == 2 and "does not exist" in result.stderr and "Traceback" not in result.stderr


@pytest.mark.parametrize(
    "args",
    [
        ("gpus",),
        ("models", "llama-3-8b"),
        ("fit", "examples/llama-3-8b-qlora-4090.yaml"),
        ("cost", "llama-3-8b", "-t", "lora", "--all-gpus"),
        ("trace", "tests/data/traces/hand_rank0.json", "tests/data/traces/hand_rank1.json"),
    ],
)
def test_commands_print_markdown_from_the_same_document(cli, args):
    result = cli(*args, "--markdown")
    assert result.exit_code == 0, result.stderr
    assert result.stdout.startswith("# ") and "|---" in result.stdout


def test_lint_markdown_is_its_own_format(cli, tmp_path):
    (tmp_path / "train.py").write_text("import torch\nstate = torch.load('x.pt')\n")
    result = cli("lint", str(tmp_path), "--markdown", "--format", "sarif")
    assert result.exit_code == 2 and "--markdown and --format sarif" in result.stderr
    shown = cli("lint", str(tmp_path), "--markdown")
    assert (
        shown.exit_code == 1 and "torch_load_unsafe" in shown.stdout and "torch.load('x.pt')" in shown.stdout
    )


def test_plan_with_measured_evidence_charts_prediction_against_measurement(cli, tmp_path):
    evidence = tmp_path / "trace.json"
    traced = cli("trace", "tests/data/traces/hand_rank0.json", "--json")
    assert traced.exit_code == 0, traced.stderr
    evidence.write_text(traced.stdout)
    page = tmp_path / "plan.html"
    result = cli("plan", "examples/llama-3-8b-lora.yaml", "--evidence", str(evidence), "--html", str(page))
    assert result.exit_code == 0, result.stderr
    titles = re.findall(r"<svg[^>]*><title>([^<]*)</title>", page.read_text())
    assert titles == [
        "Hardware options: cost against time",
        "Step time: predicted and measured",
        "Peak memory per GPU: predicted and measured",
    ]


def test_every_command_takes_html_and_markdown():
    import typer.main

    from gpuwise.cli import app as app_module

    def leaves(command, path=()):
        subs = getattr(command, "commands", {})
        if not subs:
            yield " ".join(path), {o for p in command.params for o in getattr(p, "opts", [])}
        for name, sub in subs.items():
            yield from leaves(sub, (*path, name))

    commands = dict(leaves(typer.main.get_command(app_module.app)))
    assert len(commands) >= 13, sorted(commands)
    missing = {name: {"--html", "--markdown"} - opts for name, opts in commands.items()}
    assert {name: flags for name, flags in missing.items() if flags} == {}


def test_a_document_includes_another_as_a_section():
    cost = Document("Cost").add(Paragraph("a"))
    cost.include(Document("Buy vs rent").add(Paragraph("b")))
    assert [type(b).__name__ for b in cost.blocks] == ["Paragraph", "Heading", "Paragraph"]
    assert "## Buy vs rent" in markdown.render(cost)
