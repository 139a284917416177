"""Make the README's report screenshots with gpuwise's own commands and Playwright (Debian's chromium).

python docs/img/screenshots.py        # writes docs/img/report-trace.png and docs/img/report-memory.png
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

from PIL import Image
from playwright.sync_api import sync_playwright

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests"))
from third_party import data_dir  # noqa: E402  (HTA's traces live outside the repo: tests/README.md)

OUT = REPO / "docs" / "img"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run"]  # fmt: skip
REPORTS = {
    "report-trace": ["trace", str(data_dir() / "hta" / "trace_filter")],
    "report-memory": ["memory", "examples/llama-3-8b-lora.yaml"],
}


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp, sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=FLAGS)
        page = browser.new_page(viewport={"width": 980, "height": 900})
        for name, args in REPORTS.items():
            html = Path(tmp) / f"{name}.html"
            subprocess.run(
                [sys.executable, "-m", "gpuwise", *args, "--html", str(html)],
                cwd=REPO,
                check=True,
                stdout=subprocess.DEVNULL,
            )
            page.goto(html.as_uri())
            shot = Path(tmp) / f"{name}.png"
            page.screenshot(path=str(shot))
            Image.open(shot).convert("RGB").quantize(colors=128).save(OUT / f"{name}.png", optimize=True)
            print(OUT / f"{name}.png", (OUT / f"{name}.png").stat().st_size, "bytes")
        browser.close()


if __name__ == "__main__":
    main()
