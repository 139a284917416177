"""What `make test` needs beyond Python and PyPI: Debian's chromium, prometheus (with promtool) and openssl.

Why: without them the browser and fleet tests skip, and `make test` (GPUWISE_STRICT_SKIPS=1) fails only
after the whole suite ran. The Makefile runs this file before anything is installed, and tests/conftest.py
says the same on the first line of every pytest run, so what is missing is known before time is spent.

    python3 tests/system_tools.py          # exit 1 and one line per missing tool when any is missing
"""

from __future__ import annotations

import shutil
import sys

__all__ = ["INSTALL", "TOOLS", "USERS", "missing", "summary"]

# tool on PATH -> the Debian package that provides it
TOOLS = {"chromium": "chromium", "prometheus": "prometheus", "promtool": "prometheus", "openssl": "openssl"}
# tool -> the test helpers or modules that need it (what skips, or fails in strict mode, without it)
USERS = {
    "chromium": "tests/report/test_browser_reports.py (HTML reports opened in a browser)",
    "prometheus": "tests/prometheus_server.py (fleet and exporter tests against a real Prometheus)",
    "promtool": "tests/exporter/test_deploy_rules.py (promtool check/test rules on deploy/prometheus) and "
    "benchmarks/monitor_fleet_speed.py (`make bench`: a week backfilled into a TSDB)",
    "openssl": "tests/self_signed.py (TLS certificates for the exporter tests)",
}
INSTALL = (
    "apt-get install chromium prometheus openssl (.ci/run installs chromium and prometheus when run as root)"
)


def missing() -> list[str]:
    """The tools of TOOLS not found on PATH, in TOOLS order."""
    return [tool for tool in TOOLS if shutil.which(tool) is None]


def summary(tools: list[str]) -> str:
    """One line: which tools are missing, which packages provide them, and how to install them."""
    packages = sorted({TOOLS[tool] for tool in tools})
    return (
        f"gpuwise tests: missing {', '.join(tools)} (Debian package(s) {', '.join(packages)}); "
        f"the tests that use them skip, and `make test` (strict skips) fails. Install: {INSTALL}"
    )


def main() -> int:
    absent = missing()
    if not absent:
        print("gpuwise tests: chromium, prometheus, promtool and openssl found")
        return 0
    print(summary(absent))
    for tool in absent:
        print(f"  {tool}: needed by {USERS[tool]}")
    return 1


if __name__ == "__main__":
    sys.exit(main())
