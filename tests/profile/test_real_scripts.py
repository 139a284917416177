"""benchmarks/real_scripts.py guarded in CI on its two checks that need no timing: a manual-SGD
script (no optimizer) has its steps found, and profiling a compiled model adds no graph break nor
recompile (Dynamo's own counters, bare vs profiled). The full benchmark runs every scenario."""

from __future__ import annotations

import importlib.util
import sys

import pytest

from conftest import REPO

pytest.importorskip("torch")


def _benchmark():
    spec = importlib.util.spec_from_file_location("real_scripts", REPO / "benchmarks" / "real_scripts.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["real_scripts"] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
@pytest.mark.parametrize("name", ["manual_sgd", "compiled_model"])
def test_real_script_scenario_is_right(name, tmp_path):
    bench = _benchmark()
    scenario = next(s for s in bench.SCENARIOS if s.name == name)
    outcome = bench.run_scenario(scenario, steps=8, store=tmp_path / "runs.sqlite")
    assert outcome.finding_right, (outcome.found, outcome.notes)
    assert outcome.right
