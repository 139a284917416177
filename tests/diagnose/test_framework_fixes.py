"""Findings in the run's framework (issue 31, item 3): a JAX or TensorFlow run gets JAX/TensorFlow fixes,
from evidence built by hand and from an XLA profile whose producer is JAX; PyTorch runs keep the rules'
own fixes."""

from __future__ import annotations

from gpuwise.diagnose import Evidence, diagnose
from gpuwise.diagnose.framework_fixes import FRAMEWORK_FIXES
from gpuwise.trace.analyze import build_report
from gpuwise.trace.rank import analyze_file
from xla_lookalike import gpu_profile

TORCH_WORDS = ("torch", "DataLoader", "pin_memory", "num_workers")


def _input_bound(framework: str | None) -> dict:
    ev = Evidence.flat(
        source="profile", step_time_s=0.1, phase_s={"data_wait": 0.05}, loader_num_workers=0, cpu_count=8
    )
    ev.context.framework = framework
    return {f.id: f for f in diagnose(ev)}


def test_pytorch_keeps_the_rules_fix():
    found = _input_bound(None)
    assert "num_workers=7" in found["input_bound"].fix_snippet


def test_jax_and_tensorflow_get_their_own_fix():
    jax = _input_bound("jax")["input_bound"]
    assert "jax.device_put" in jax.fix_snippet and "prefetch" in jax.fix
    tf = _input_bound("tensorflow")["input_bound"]
    assert "tf.data.AUTOTUNE" in tf.fix_snippet
    for f in (jax, tf):
        assert not any(w in f.fix + f.fix_snippet + " ".join(f.tools) for w in TORCH_WORDS), f
    assert jax.summary == _input_bound(None)["input_bound"].summary  # the numbers are the rule's own


def test_every_framework_fix_names_no_pytorch_api():
    for framework, fixes in FRAMEWORK_FIXES.items():
        for finding_id, (fix, snippet) in fixes.items():
            assert fix and not any(w.lower() in (fix + snippet).lower() for w in TORCH_WORDS), (
                framework,
                finding_id,
            )


def test_a_jax_profile_gets_jax_fixes(tmp_path):
    """The producer of an XPlane (its /host:metadata plane: jax_version) sets the run's framework."""
    r = analyze_file(gpu_profile().write_xplane(tmp_path / "gpu.xplane.pb"))
    assert r.framework == "jax"
    findings = {f.id: f for f in build_report([r]).findings}
    assert "pageable_copies" in findings
    copies = findings["pageable_copies"]
    assert "jax.device_put" in copies.fix + copies.fix_snippet
    for f in findings.values():
        assert not any(w in f.fix + f.fix_snippet for w in TORCH_WORDS), (f.id, f.fix, f.fix_snippet)


def test_a_real_jax_profile_names_its_framework_in_both_files(tmp_path):
    """A jitted loop profiled by jax.profiler here: the XPlane (/host:metadata jax_version) and the JSON
    (PjitFunction host events) both make the rank a JAX run, whose findings speak JAX."""
    import pytest

    pytest.importorskip("jax")
    from test_trace_xla import JAX_LOOP, _record

    run = _record(JAX_LOOP, tmp_path)
    for path in (next(run.glob("*.xplane.pb")), next(run.glob("*.trace.json.gz"))):
        r = analyze_file(path)
        assert r.framework == "jax", (path.name, r.warnings)
        for f in build_report([r]).findings:
            assert not any(w in f.fix + f.fix_snippet for w in TORCH_WORDS), (f.id, f.fix)
