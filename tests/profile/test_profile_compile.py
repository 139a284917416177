"""The profiler must not change a compiled program: same graphs, no graph breaks, no recompiles.

Each case trains a small compiled CPU model for 10 steps, once bare and once under
``gpuwise.profile()``, and compares Dynamo's own counters (issue #11, item 1).
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
dynamo = pytest.importorskip("torch._dynamo")

from torch import nn  # noqa: E402
from torch._dynamo.utils import counters  # noqa: E402

import gpuwise  # noqa: E402


class _Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(16, 16)
        self.b = nn.Linear(16, 16)

    def forward(self, x):
        return self.b(torch.relu(self.a(x)))


class _Net(nn.Module):
    """Nested submodules: global forward hooks fire at each one, which is what used to break graphs."""

    def __init__(self) -> None:
        super().__init__()
        self.blocks = nn.ModuleList([_Block() for _ in range(3)])
        self.head = nn.Linear(16, 1)

    def forward(self, x):
        for block in self.blocks:
            x = x + block(x)
        return self.head(x)


def _train(*, profiled: bool, in_place: bool, backend: str):
    """Dynamo's counters for 10 compiled training steps, and the profile (None when bare)."""
    dynamo.reset()
    counters.clear()
    torch.manual_seed(0)
    model = _Net()
    prof = gpuwise.profile(warmup=2, store=False, telemetry=False) if profiled else None
    if prof is not None:
        prof.start()  # before compiling, as under ``gpuwise profile -- python train.py``
    if in_place:
        model.compile(backend=backend)
        compiled = model
    else:
        compiled = torch.compile(model, backend=backend)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(8, 16)
    for _ in range(10):
        loss = compiled(x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    run = prof.stop() if prof is not None else None
    seen = {
        "graph_breaks": sum(counters["graph_break"].values()),
        "unique_graphs": counters["stats"]["unique_graphs"],
        "recompiles": sum(v for k, v in counters["recompiles"].items()) if "recompiles" in counters else 0,
    }
    return seen, run


@pytest.mark.parametrize("in_place", [False, True], ids=["torch.compile(model)", "model.compile()"])
def test_profiling_a_compiled_model_adds_no_graph_break_nor_recompile(in_place):
    bare, _ = _train(profiled=False, in_place=in_place, backend="eager")
    profiled, run = _train(profiled=True, in_place=in_place, backend="eager")
    assert bare["graph_breaks"] == 0 and bare["unique_graphs"] == 1
    assert profiled == bare
    assert run is not None and run.summary.measured_steps == 8
    assert run.summary.phases["forward"].s_per_step > 0
    assert run.summary.phases["backward"].s_per_step > 0


def test_default_backend_compiles_once_under_the_profiler():
    """Inductor (the default backend) once: one graph, no break, the steps still measured."""
    try:
        bare, _ = _train(profiled=False, in_place=False, backend="inductor")
    except Exception as exc:  # no C compiler on this machine: inductor cannot run at all
        pytest.skip(f"inductor unavailable: {exc}")
    profiled, run = _train(profiled=True, in_place=False, backend="inductor")
    assert profiled == bare
    assert bare["graph_breaks"] == 0
    assert run is not None and run.summary.measured_steps == 8


@pytest.mark.parametrize("in_place", [False, True], ids=["torch.compile(model)", "model.compile()"])
def test_the_compiled_model_is_not_recompiled_when_the_profiler_detaches(in_place):
    """Dynamo guards on the global module hooks: removing them at detach used to recompile the model.
    torch keeps no recompile counter (``counters["recompiles"]`` stays empty): count the forward's
    cache entries, one per compilation."""
    from torch._dynamo.eval_frame import _debug_get_cache_entry_list

    dynamo.reset()
    model = _Net()
    prof = gpuwise.profile(warmup=2, store=False, telemetry=False)
    prof.start()
    if in_place:
        model.compile(backend="eager")
    compiled = model if in_place else torch.compile(model, backend="eager")
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for step in range(12):
        if step == 8:
            prof.stop()  # the script goes on after the profiler detached
        loss = compiled(torch.randn(8, 16)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert len(_debug_get_cache_entry_list(_Net.forward.__code__)) == 1
