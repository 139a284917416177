"""`gpuwise trace` on XLA profiles: real JAX and TensorFlow CPU profiles recorded here by small training loops
(jax.profiler / tf.profiler, in a subprocess), and look-alike GPU and TPU profiles (tests/xla_lookalike.py:
no accelerator on this machine) as XPlane and as JAX's Perfetto/Chrome JSON."""

from __future__ import annotations

import gzip
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from gpuwise.trace.analyze import build_report
from gpuwise.trace.formats import describe, sniff
from gpuwise.trace.rank import analyze_file
from xla_lookalike import gpu_profile, tpu_profile

JAX_LOOP = """
import sys, jax, jax.numpy as jnp
def loss(w, x, y):
    return jnp.mean((jnp.tanh(x @ w["w1"]) @ w["w2"] - y) ** 2)
@jax.jit
def step(w, x, y):
    return jax.tree.map(lambda a, g: a - 0.01 * g, w, jax.grad(loss)(w, x, y))
k = jax.random.PRNGKey(0)
w = {"w1": jax.random.normal(k, (64, 128)), "w2": jax.random.normal(k, (128, 1))}
x, y = jax.random.normal(k, (256, 64)), jnp.ones((256, 1))
w = step(w, x, y)
with jax.profiler.trace(sys.argv[1]):
    for i in range(5):
        with jax.profiler.StepTraceAnnotation("train", step_num=i):
            w = jax.block_until_ready(step(w, jax.device_put(x + i), y))
"""

TF_LOOP = """
import os, sys
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
import tensorflow as tf
data = (tf.random.normal((256, 16)), tf.random.normal((256, 1)))
ds = tf.data.Dataset.from_tensor_slices(data).map(lambda x, y: (x * 2.0, y)).batch(32).prefetch(1)
w = tf.Variable(tf.random.normal((16, 1)))
opt = tf.keras.optimizers.SGD(0.01)
@tf.function
def step(x, y):
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean((tf.matmul(x, w) - y) ** 2)
    opt.apply_gradients([(tape.gradient(loss, w), w)])
    return loss
it = iter(ds)
step(*next(it))
tf.profiler.experimental.start(sys.argv[1])
for i in range(5):
    with tf.profiler.experimental.Trace("train", step_num=i, _r=1):
        step(*next(it))
tf.profiler.experimental.stop()
"""


def _record(script: str, out: Path) -> Path:
    """Run a training loop under its profiler in a fresh interpreter; return the run's directory."""
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script), str(out)], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    runs = sorted(out.glob("plugins/profile/*"))
    assert runs, f"no profile written under {out}"
    return runs[-1]


@pytest.fixture(scope="module")
def jax_run(tmp_path_factory) -> Path:
    pytest.importorskip("jax")
    return _record(JAX_LOOP, tmp_path_factory.mktemp("jax"))


def test_jax_cpu_profile_is_named_an_xla_profile_in_both_formats(jax_run):
    xplane = next(jax_run.glob("*.xplane.pb"))
    trace = next(jax_run.glob("*.trace.json.gz"))
    assert (sniff(xplane), sniff(trace)) == ("xplane", "xla-json")
    a, b = analyze_file(xplane), analyze_file(trace)
    for r in (a, b):
        assert r.device.kind == "cpu"
        assert any(w.startswith("an XLA profile (JAX") for w in r.warnings), r.warnings
        assert any("XLA CPU backend" in w and "not a CPU-only PyTorch trace" in w for w in r.warnings)
        assert r.steps.count == 5 and r.steps.numbers == [0, 1, 2, 3, 4]
    assert any("JAX 0.10" in w or "JAX" in w for w in a.warnings)  # XPlane carries the jax version
    # the two files of one run hold the same events: same steps to the ns the JSON keeps
    assert a.steps.step_times_s == pytest.approx(b.steps.step_times_s, abs=1e-6)
    assert a.events == b.events


def test_jax_cpu_profile_through_the_cli(cli, jax_run):
    res = cli("trace", str(next(jax_run.glob("*.xplane.pb"))), "--json")
    assert res.exit_code == 0, res.stderr
    assert res.json()["ranks"][0]["steps"]["count"] == 5


def _gpu_checks(r) -> None:
    assert r.device.kind == "cuda"
    assert not any("no GPU activity" in w for w in r.warnings)
    cats = r.kernels.categories
    # per device and step: GEMM 700 µs, loop fusion 300 µs, NCCL all-reduce 400 µs, H2D copy 200 µs
    assert (cats["gemm"]["count"], cats["communication"]["count"], cats["memcpy"]["count"]) == (4, 4, 4)
    assert cats["gemm"]["time_us"] == pytest.approx(4 * 700)
    assert r.kernels.precision_us == {"bf16": pytest.approx(4 * 700)}
    assert r.steps.count == 3 and r.steps.mean_ms == pytest.approx(2.0)
    assert r.dropped_last_step and r.steps_in_window == 2
    assert r.copies.directions["HtoD"]["pageable_count"] == 2  # step 0, both devices; step 1 is pinned
    assert r.copies.pageable_copy_pct == pytest.approx(50.0)
    assert r.comm.kernels == 4
    assert r.temporal is not None and r.temporal.span_us > 0


def test_gpu_lookalike_xplane_is_a_gpu_profile(tmp_path):
    r = analyze_file(gpu_profile().write_xplane(tmp_path / "gpu.xplane.pb"))
    _gpu_checks(r)
    assert r.launches.launches == 12  # cuLaunchKernel on /host:CUPTI, linked by correlation_id
    assert any("2 device plane(s)" in w for w in r.warnings)
    assert r.device.name == "GPU (compute capability 9.0, 80 GiB)"
    ids = {f.id for f in build_report([r]).findings}
    assert "pageable_copies" in ids


def test_gpu_lookalike_json_matches_the_xplane(tmp_path):
    profile = gpu_profile()
    x = analyze_file(profile.write_xplane(tmp_path / "gpu.xplane.pb"))
    j = analyze_file(profile.write_json(tmp_path / "gpu.trace.json.gz"))
    _gpu_checks(j)
    assert j.kernels.to_dict() == x.kernels.to_dict()
    assert j.temporal.to_dict() == x.temporal.to_dict()
    assert j.copies.to_dict() == x.copies.to_dict()


def test_tpu_lookalike_ops_categories_and_steps(tmp_path):
    r = analyze_file(tpu_profile().write_xplane(tmp_path / "tpu.xplane.pb"))
    assert r.device.kind == "tpu"
    cats = r.kernels.categories
    # HTA's window leaves the last of the 3 steps out, as on every trace with steps: 2 of each op
    assert r.dropped_last_step and r.steps_in_window == 2
    assert cats["convolution"]["count"] == 2  # fusion.7 [XLA convolution fusion]
    assert cats["gemm"]["count"] == 2  # dot.3 [XLA matmul: gemm]
    assert cats["communication"]["count"] == 2  # all-reduce.2 [XLA collective: AllReduce]
    assert cats["memcpy"]["count"] == 2  # infeed.1 as a host-to-device transfer
    assert cats["gemm"]["time_us"] == pytest.approx(2 * 250)
    assert r.steps.count == 3 and any("Steps line" in w for w in r.warnings)
    top = {k.name for k in r.kernels.top}
    assert "all-reduce.2 [XLA collective: AllReduce]" in top


@pytest.fixture(scope="module")
def tf_run(tmp_path_factory) -> Path:
    pytest.importorskip("tensorflow")
    return _record(TF_LOOP, tmp_path_factory.mktemp("tf"))


def test_tensorflow_cpu_profile_steps_and_tf_data_wait(tf_run):
    r = analyze_file(next(tf_run.glob("*.xplane.pb")))
    assert r.device.kind == "cpu"
    assert any(w.startswith("a TensorFlow profile") for w in r.warnings), r.warnings
    assert r.steps.count == 5
    # tf.data's Iterator::Root on the training thread is the time next(it) waited for a batch
    assert r.steps.input_wait_pct is not None and r.steps.input_wait_pct > 0


@pytest.mark.parametrize(
    "content, expected",
    [
        (b"\x08\x96\x01\x12\x07testing\x1a\x03abc", "a protobuf that is not an XPlane"),
        (gzip.compress(b"\x89PNG\r\n\x1a\n" + b"\x00" * 64, mtime=0), "gzip of a PNG image"),
        (b"PK\x03\x04" + b"\x00" * 40, "a ZIP archive"),
        (bytes(range(256)) * 4, "binary data of no known profiler format"),
    ],
)
def test_unknown_binary_files_are_named(cli, tmp_path, content, expected):
    path = tmp_path / "mystery.pb"
    path.write_bytes(content)
    assert sniff(path) in ("unknown", "kineto")
    assert expected in describe(path)
    res = cli("trace", str(path))
    assert res.exit_code == 2
    assert expected in res.stderr and len(res.stderr.strip().splitlines()) == 1


def test_xla_json_with_its_plane_names_at_the_end_is_still_xla(tmp_path):
    """A converted trace may list its metadata events last: the content decides, not the first 64 KiB."""
    import json

    path = gpu_profile().write_json(tmp_path / "gpu.trace.json.gz")
    doc = json.loads(gzip.decompress(path.read_bytes()))
    events = doc["traceEvents"]
    events.sort(key=lambda e: e["ph"] == "M")  # complete events first, process/thread names last
    events[:0] = [{"ph": "X", "pid": 99, "tid": 1, "ts": 0, "dur": 1, "name": "pad " + "x" * 200}] * 400
    late = tmp_path / "late.json"
    late.write_text(json.dumps(doc))
    assert sniff(late) == "kineto"  # nothing in the head says XLA
    r = analyze_file(late)
    assert r.device.kind == "cuda" and r.kernels.categories["gemm"]["count"] == 4


@pytest.mark.parametrize("which", ["xplane", "json"])
def test_damaged_xla_files_get_one_line(cli, tmp_path, which):
    profile = gpu_profile()
    path = (
        profile.write_xplane(tmp_path / "p.xplane.pb")
        if which == "xplane"
        else profile.write_json(tmp_path / "p.trace.json.gz")
    )
    data = path.read_bytes()
    path.write_bytes(data[: len(data) * 2 // 3])
    res = cli("trace", str(path))
    assert res.exit_code == 2, res.stdout[-500:]
    assert len(res.stderr.strip().splitlines()) == 1 and str(path) in res.stderr
