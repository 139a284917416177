"""Every command's HTML report, opened in a real browser (Debian's Chromium driven by Playwright).

The inputs carry XSS probes and bidi controls where a user's strings enter a report: the model name (a
config.json path), kernel names and file names (traces), the script's path (profile), source lines and
paths (lint). Each page must load with no console error and no request, draw every chart (an SVG with
its title and axis labels), run nothing, and show the probes as text. Screenshots are saved as artifacts
(GPUWISE_TEST_ARTIFACTS, else a temporary directory; the path is printed).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import sys
import textwrap
from pathlib import Path

import pytest
from test_monitor_finops import recorded

from conftest import REPO, TINY_LLAMA_CONFIG, TRACES
from gpuwise.cli.app import main

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
PROBE_DIR = 'x"><img src=x onerror=alert(1)>\u202ecod'  # a directory name: no "/" allowed
KERNEL = "<script>alert(2)</script>javascript:alert(3)\u202eMAL"
SOURCE = 'state = torch.load("<script>alert(4)</script>")'
MAX_BYTES = 2 * 1024 * 1024

SCRIPT = textwrap.dedent(
    """
    import sys, time, torch
    model = torch.nn.Linear(32, 32)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(40):
        if step % 5 == 4:
            time.sleep(0.03)  # a slow step now and then: outliers in the step-time chart
        loss = model(torch.randn(64, 32)).pow(2).mean()
        opt.zero_grad(); loss.backward(); opt.step()
    """
)
LINT_SOURCE = (
    f"import torch\nfrom torch.utils.data import DataLoader\nloader = DataLoader(range(8))\n{SOURCE}\n"
    "for x in loader:\n    print(x.cuda().item())\n"
)

# report name -> (command line, [(chart title contains, an axis label it has)])
REPORTS: dict[str, tuple[list[str], list[tuple[str, str]]]] = {}


def _cli(*args: str) -> None:
    """Run the real command in-process (one interpreter: matplotlib and torch load once)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        try:
            main(list(args))
        except SystemExit as done:
            assert done.code in (0, None, 1), (args, done.code, out.getvalue()[-2000:])


def _hostile_traces(folder: Path) -> Path:
    traces = folder / "traces"
    traces.mkdir()
    for rank in (0, 1):
        doc = json.loads((TRACES / f"hand_rank{rank}.json").read_text())
        for event in doc["traceEvents"]:
            if event.get("name") == "volta_sgemm_128x64_nn":
                event["name"] = KERNEL
        (traces / f"rank{rank}<svg onload=alert(5)>.json").write_text(json.dumps(doc))
    return traces


@pytest.fixture(scope="module")
def reports(tmp_path_factory) -> dict[str, Path]:
    """Every command's HTML report, made by the commands themselves from hostile inputs."""
    root = tmp_path_factory.mktemp("reports")
    probe = root / PROBE_DIR
    probe.mkdir()
    (probe / "config.json").write_text(json.dumps(TINY_LLAMA_CONFIG))
    model = str(probe / "config.json")
    traces = _hostile_traces(probe)
    rank0, rank1 = sorted(traces.iterdir())
    script = probe / "train<svg onload=alert(6)>.py"
    script.write_text(SCRIPT)
    (probe / "lint").mkdir()
    (probe / "lint" / "train.py").write_text(LINT_SOURCE)
    store = str(root / "runs.sqlite")
    (root / "history").mkdir()
    history, _ = recorded(root / "history", "healthy_and_idle", hours=2.0)  # faked NVML, real recorder
    profile = ["profile", "--steps", "8", "--warmup", "1", "--stop", "--store", store]
    REPORTS.update(
        {
            "memory": (
                ["memory", model, "-t", "lora"],
                [("Memory by component", "GiB"), ("peak adds up", "GiB")],
            ),
            "memory_traced": (
                ["memory", model, "--traced", "-b", "2", "-s", "64"],
                [("Memory by component", "GiB"), ("by phase and category", "phase")],
            ),
            "fit": (["fit", model, "-t", "lora"], [("Headroom per GPU", "free memory (%)")]),
            "cost": (["cost", model, "-t", "lora", "--all-gpus"], [("cost against time", "$ per 1B tokens")]),
            "plan": (
                ["plan", str(REPO / "examples" / "llama-3-8b-lora.yaml")],
                [("cost against time", "$ per 1M tokens")],
            ),
            "gpus": (["gpus"], [("memory bandwidth against", "memory bandwidth (TB/s)")]),
            "models": (["models"], []),
            "trace": (
                ["trace", str(traces)],
                [("per rank", "share of the device span (%)"), ("Top", "device time (ms)")],
            ),
            "trace_compare": (
                ["trace", "--compare", str(rank0), str(rank1)],
                [("Before and after", "share (%)")],
            ),
            "profile": (
                [*profile, "--", sys.executable, str(script), "--tag", "<script>alert(7)</script>"],
                [("mean step", "time per step (ms)"), ("Step time, step by step", "step time (ms)")],
            ),
            "profile_again": ([*profile, "--", sys.executable, str(script)], []),
            "runs_list": (["runs", "list", "--store", store], []),
            "runs_show": (["runs", "show", "last", "--store", store], [("Step time", "step")]),
            "runs_compare": (
                ["runs", "compare", "1", "2", "--store", store],
                [("before and after", "time per step (ms)")],
            ),
            "lint": (["lint", str(probe / "lint")], [("Findings by rule", "findings")]),
            "monitor_report": (
                ["monitor", "report", "--store", str(history), "--since", "1d"],
                [
                    ("Busy-time distribution", "GPU-hours"),
                    ("Busy % over", "busy %"),
                    ("Idle $ by user", "idle $"),
                ],
            ),
        }
    )
    pages = {}
    for name, (args, _) in REPORTS.items():
        page = root / f"{name}.html"
        cut = args.index("--") if "--" in args else len(args)  # options go before the script's command
        _cli(*args[:cut], "--html", str(page), *args[cut:])
        pages[name] = page
    return pages


@pytest.fixture(scope="module")
def browser():
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is in the dev extra")
    if not Path(CHROMIUM).exists():
        pytest.skip(
            f"no Chromium at {CHROMIUM}: .ci/run installs Debian's chromium (apt-get install chromium)"
        )
    with sync_api.sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        yield chromium
        chromium.close()


@pytest.fixture(scope="module")
def artifacts(tmp_path_factory) -> Path:
    folder = Path(os.environ.get("GPUWISE_TEST_ARTIFACTS") or tmp_path_factory.mktemp("browser-artifacts"))
    folder.mkdir(parents=True, exist_ok=True)
    print(f"screenshots in {folder}")
    return folder


_NO_ACTIVE_CONTENT = """() => {
  const all = [...document.querySelectorAll('*')];
  return {
    active: document.querySelectorAll('script, img, iframe, object, embed, link, base, form').length,
    handlers: all.filter(e => [...e.attributes].some(a => a.name.toLowerCase().startsWith('on'))).length,
    jsLinks: [...document.querySelectorAll('a[href]')]
      .filter(a => !a.getAttribute('href').startsWith('#')).length,
  };
}"""

_CHARTS = """() => [...document.querySelectorAll('figure.chart svg')].map(svg => ({
  title: svg.querySelector('title')?.textContent || '',
  label: svg.getAttribute('aria-label') || '',
  desc: svg.querySelector('desc')?.textContent || '',
  texts: [...svg.querySelectorAll('text')].map(t => t.textContent),
  shapes: svg.querySelectorAll('path, rect, use').length,
  width: svg.getBoundingClientRect().width,
  height: svg.getBoundingClientRect().height,
}))"""


@pytest.mark.slow
def test_every_report_opens_clean_draws_its_charts_and_runs_nothing(reports, browser, artifacts):
    for name, path in reports.items():
        assert path.stat().st_size <= MAX_BYTES, (name, path.stat().st_size)
        page = browser.new_page(viewport={"width": 1200, "height": 900})
        errors: list[str] = []
        requests: list[str] = []
        dialogs: list[str] = []
        page.on("console", lambda m, errors=errors: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e, errors=errors: errors.append(str(e)))
        page.on("request", lambda r, requests=requests: requests.append(r.url))
        page.on("dialog", lambda d, dialogs=dialogs: (dialogs.append(d.message), d.dismiss()))
        url = path.as_uri()
        page.goto(url)
        page.screenshot(path=str(artifacts / f"{name}.png"), full_page=True)
        assert errors == [], (name, errors)
        assert requests == [url], (name, requests)  # the page itself, nothing else
        assert dialogs == [], (name, dialogs)
        assert page.evaluate(_NO_ACTIVE_CONTENT) == {"active": 0, "handlers": 0, "jsLinks": 0}, name
        charts = page.evaluate(_CHARTS)
        for chart in charts:
            assert chart["title"] and chart["label"] == chart["title"] and chart["desc"], (
                name,
                chart["title"],
            )
            assert chart["shapes"] > 3 and chart["width"] > 300 and chart["height"] > 80, (name, chart)
        for title_part, axis in REPORTS[name][1]:
            drawn = [c for c in charts if title_part in c["title"]]
            assert drawn, (name, title_part, [c["title"] for c in charts])
            assert any(axis in c["texts"] for c in drawn), (name, title_part, axis)
        page.close()


@pytest.mark.slow
def test_probes_are_shown_as_text(reports, browser):
    expected = {
        "memory": ['"><img src=x onerror=alert(1)>', "<U+202E>cod"],
        # kernel names are shortened (template and argument lists dropped), then shown as text
        "trace": ["alertjavascript:alert<U+202E>MAL", "<svg onload=alert(5)>"],
        "profile": ["train<svg onload=alert(6)>.py"],
        "lint": [SOURCE, '"><img src=x onerror=alert(1)>'],
    }
    page = browser.new_page()
    for name, needles in expected.items():
        page.goto(reports[name].as_uri())
        text = page.inner_text("body")
        for needle in needles:
            assert needle in text, (name, needle)
        assert "\u202e" not in text
    page.close()


@pytest.mark.slow
def test_dark_mode_print_and_contents(reports, browser):
    page = browser.new_page()
    page.goto(reports["trace"].as_uri())
    assert page.locator("nav.toc a").count() >= 4  # a long report has a table of contents
    light = page.evaluate("getComputedStyle(document.body).backgroundColor")
    page.emulate_media(color_scheme="dark")
    dark = page.evaluate("getComputedStyle(document.body).backgroundColor")
    assert light == "rgb(255, 255, 255)" and dark != light
    page.emulate_media(media="print")
    assert page.evaluate("getComputedStyle(document.querySelector('nav.toc')).display") == "none"
    page.close()
