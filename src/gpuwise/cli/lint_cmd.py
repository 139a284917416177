"""`gpuwise lint PATH...`: static checks of training code. The logic is in `gpuwise.lint`; this
module only turns flags into a `LintConfig`, prints the result and sets the exit code."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal, get_args

import typer

from gpuwise.cli.output import HtmlFlag, MarkdownFlag, emit, one_format, to_json_bytes, write_html
from gpuwise.errors import GpuwiseError

if TYPE_CHECKING:
    from gpuwise.lint.config import LintConfig
    from gpuwise.lint.types import LintResult

__all__ = ["FORMATS", "OutputFormat", "lint"]

OutputFormat = Literal["terminal", "json", "sarif", "flake8"]
FORMATS: tuple[OutputFormat, ...] = get_args(OutputFormat)


def lint(
    paths: Annotated[list[Path], typer.Argument(help="Files, directories or notebooks (.ipynb) to check.")],
    output_format: Annotated[
        str, typer.Option("--format", "-f", help="terminal | json | sarif | flake8")
    ] = "terminal",
    as_json: Annotated[bool, typer.Option("--json", help="Same as --format json.")] = False,
    fail_on: Annotated[
        str | None,
        typer.Option("--fail-on", help="Exit 1 if a finding has this severity or higher (default: low)."),
    ] = None,
    select: Annotated[
        list[str] | None,
        typer.Option("--select", help="Only these rules (or shared finding ids); a,b or repeated."),
    ] = None,
    ignore: Annotated[list[str] | None, typer.Option("--ignore", help="Skip these rules.")] = None,
    config: Annotated[
        Path | None,
        typer.Option("--config", help="pyproject.toml to read [tool.gpuwise.lint] from (default: nearest)."),
    ] = None,
    fix: Annotated[bool, typer.Option("--fix", help="Apply the safe fixes to the files.")] = False,
    diff: Annotated[
        bool, typer.Option("--diff", help="Show the safe fixes as a diff; write nothing.")
    ] = False,
    unsafe_fixes: Annotated[
        bool,
        typer.Option("--unsafe-fixes", help="With --fix/--diff, also the fixes that may change behaviour."),
    ] = False,
    show_source: Annotated[
        bool,
        typer.Option(
            "--show-source", help="Print each finding's source line under it (always in --html/--markdown)."
        ),
    ] = False,
    as_markdown: MarkdownFlag = False,
    html: HtmlFlag = None,
) -> None:
    """Check training code for slow or unsafe patterns before it runs: [bold]gpuwise lint train.py[/bold]

    Data loading, host syncs every step, precision, distributed correctness, unsafe torch.load.
    Exit 1 when a finding reaches --fail-on, 0 otherwise, 2 on usage errors."""
    from gpuwise.lint import fix as lint_fix
    from gpuwise.lint.runner import lint_paths

    chosen = _output_format(output_format, as_json, as_markdown)
    if fix and diff:
        raise GpuwiseError("--fix writes the fixes and --diff only shows them: give one of them")
    settings = _settings(paths, config, select, ignore, fail_on)
    result = lint_paths(paths, settings)
    if diff:
        patch = lint_fix.unified_diff(lint_fix.fixed_texts(result, unsafe_fixes))
        sys.stdout.write(patch)
        if not patch:
            typer.echo(lint_fix.nothing_to_fix(result, unsafe_fixes), err=True)
        return
    if fix:
        changes = lint_fix.fixed_texts(result, unsafe_fixes)
        for path, (_, new) in changes.items():
            lint_fix.write_atomically(path, new)
        result = lint_paths(paths, settings)  # report what is left
        result.fixed = sum(1 for _ in changes)
    _show(result, chosen, as_markdown, html, show_source)
    if result.at_or_above(settings.fail_on):
        raise typer.Exit(1)


def _output_format(output_format: str, as_json: bool, as_markdown: bool) -> OutputFormat:
    """The one output format asked for (``--json`` is ``--format json``); conflicting flags exit 2."""
    if as_json and output_format not in ("terminal", "json"):
        raise GpuwiseError(f"--json and --format {output_format} are exclusive: choose one output format")
    chosen = "json" if as_json else output_format
    one_format(chosen == "json", as_markdown)
    if as_markdown and chosen != "terminal":
        raise GpuwiseError(f"--markdown and --format {chosen} are exclusive: choose one output format")
    if chosen not in FORMATS:
        raise GpuwiseError(f"unknown --format {chosen!r} (one of {', '.join(FORMATS)})")
    return chosen


def _settings(
    paths: list[Path],
    config: Path | None,
    select: list[str] | None,
    ignore: list[str] | None,
    fail_on: str | None,
) -> LintConfig:
    """The `[tool.gpuwise.lint]` settings nearest the first path (or ``--config``), with the flags on top."""
    from gpuwise.lint import config as lint_config

    missing = [str(p) for p in paths if not p.exists() and not p.is_symlink()]
    if missing:
        raise GpuwiseError(f"no such file or directory: {', '.join(missing)}")
    if config is not None and not config.is_file():
        raise GpuwiseError(f"config file {config} does not exist")
    first = paths[0] if paths[0].is_dir() else paths[0].parent
    settings = lint_config.load_config(config, start=first)
    both = sorted({s.strip().lower() for s in select or []} & {i.strip().lower() for i in ignore or []})
    if both:
        raise GpuwiseError(f"--select and --ignore both name {both[0]!r}: keep it in one of them")
    if select:
        settings = dataclasses.replace(settings, select=lint_config.expand(select, "--select"))
    if ignore:
        settings = dataclasses.replace(
            settings, select=settings.select - lint_config.expand(ignore, "--ignore")
        )
    if fail_on is not None:
        settings = dataclasses.replace(settings, fail_on=lint_config.severity_of(fail_on, "--fail-on"))
    return settings


def _show(
    result: LintResult, chosen: OutputFormat, as_markdown: bool, html: Path | None, show_source: bool = False
) -> None:
    """JSON and the report go through `emit` like every command; SARIF and flake8 lines are the two
    formats other tools parse (code scanning, editors), printed as they are."""
    from gpuwise.lint import formats
    from gpuwise.report.lint_view import lint_document

    if chosen in ("json", "terminal"):
        emit(
            result.to_dict(),
            "lint",
            chosen == "json",
            as_markdown=as_markdown,
            html=html,
            document=lambda: lint_document(result, show_source or as_markdown or html is not None),
        )
        return
    if html is not None:
        write_html(lint_document(result, show_source=True), html)
    if chosen == "sarif":
        sys.stdout.buffer.write(to_json_bytes(formats.sarif(result)) + b"\n")
    else:
        sys.stdout.write("".join(line + "\n" for line in formats.flake8_lines(result)))
    sys.stdout.flush()
