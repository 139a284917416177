"""Serving: the workload's serving section, the continuous-batching simulator, goodput and prices."""

import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuwise.catalog import get_gpu, get_model
from gpuwise.errors import GpuwiseError
from gpuwise.perf.inference import StepModel, max_concurrency
from gpuwise.perf.kv_capacity import kv_capacity
from gpuwise.perf.numerics import resolve
from gpuwise.serving.demand import draw_requests, request_rate
from gpuwise.serving.economics import token_prices
from gpuwise.serving.goodput import effective_slo, meets, search_goodput
from gpuwise.serving.simulator import Replica, simulate
from gpuwise.workload import load_workload, workload_from_mapping


def serving(gpu="h100-sxm", **section):
    section.setdefault("rate", 10)
    section.setdefault("slo", {"ttft_p99": "500ms"})
    return workload_from_mapping(
        {
            "model": "llama-3-8b",
            "task": "serving",
            "gpu": gpu,
            "seq_len": 1500,
            "output_len": 250,
            "serving": section,
        }
    )


def replica(w):
    return Replica(w, get_gpu(w.gpu))


# --- the workload's serving section ----------------------------------------------------------------


def test_serving_section_parses_units_aliases_and_round_trips():
    w = serving(rate=50, slo={"ttft_p99": "500ms", "itl_p90": 0.04}, engine="trtllm", block_size=32)
    s = w.serving
    assert s.rate_rps == 50 and s.engine == "tensorrt-llm" and s.kv_block_size == 32
    assert {t.key: t.seconds for t in s.slo} == {"ttft_p99": 0.5, "tpot_p90": 0.04}
    again = workload_from_mapping(w.to_dict())
    assert again == w


def test_flat_keys_from_flags_fold_into_the_section():
    w = workload_from_mapping(
        {"model": "llama-3-8b", "task": "serving", "serving_rate": 7, "serving.slo": "ttft_p99=1s,e2e_p50=4s"}
    )
    assert request_rate(w) == 7
    assert [t.key for t in w.serving.slo] == ["ttft_p99", "e2e_p50"]


def test_tokens_per_day_becomes_a_rate_over_the_mean_request():
    w = serving(rate=None, tokens_per_day=86_400 * 1750 * 3)
    assert request_rate(w) == pytest.approx(3.0)


@pytest.mark.parametrize(
    "section, message",
    [
        ({"rate": -1}, "serving.rate must be positive"),
        ({"slo": {"ttft_p97": 1}}, "unknown SLO 'ttft_p97'"),
        ({"slo": {"ttft_p99": "fast"}}, "must be seconds"),
        ({"engine": "vllmx"}, "unknown serving engine"),
        ({"raet": 3}, "did you mean 'rate'"),
        ({"prefix_hit_rate": 1.5}, "prefix_hit_rate must be in [0, 1)"),
        ({"rate": 1, "tokens_per_day": 5}, "not both"),
    ],
)
def test_bad_serving_input_is_one_clear_line(section, message):
    with pytest.raises(GpuwiseError) as err:
        serving(**section)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_a_length_distribution_that_contradicts_seq_len_is_refused():
    with pytest.raises(GpuwiseError, match="contradicts"):
        serving(prompt_len=900)


def test_length_draws_follow_the_percentiles_and_are_seeded():
    w = serving(prompt_len={"p50": 1500, "p99": 6000})
    a, b = draw_requests(w, 2000), draw_requests(w, 2000)
    assert a == b  # same seed, same draws
    prompts = sorted(a.prompts)
    assert prompts[1000] == pytest.approx(1500, rel=0.08)
    assert prompts[1980] == pytest.approx(6000, rel=0.25)
    assert set(a.outputs) == {250}  # a mean alone: every request has it


def test_histogram_lengths_are_sampled_from_the_file_and_set_the_mean(tmp_path):
    (tmp_path / "lengths.csv").write_text("tokens,count\n100,1\n900,3\n")
    spec = tmp_path / "w.yaml"
    spec.write_text(
        "model: llama-3-8b\ntask: serving\nserving:\n  rate: 2\n  prompt_len: {histogram: lengths.csv}\n"
    )
    w = load_workload(spec)  # the path is relative to the workload file
    assert w.seq_len == 700  # (100·1 + 900·3) / 4: memory, cost and plan size this sequence
    assert set(draw_requests(w, 200).prompts) == {100, 900}
    (tmp_path / "lengths.csv").write_text("tokens,count\nlots,1\n")
    with pytest.raises(GpuwiseError, match="expected 'tokens,count'"):
        load_workload(spec)


# --- one KV truth ------------------------------------------------------------------------------------


def test_kv_capacity_is_the_perf_models_concurrency_and_counts_blocks():
    w = serving(gpu="l4")
    gpu, arch = get_gpu("l4"), get_model("llama-3-8b")
    cap = kv_capacity(w, gpu)
    assert max_concurrency(w, gpu, arch, resolve(w, gpu))[0] == cap.max_sequences
    per_seq_blocks = math.ceil(1750 / cap.block_size)
    assert cap.max_sequences == cap.blocks // per_seq_blocks
    assert cap.blocks * cap.block_size * cap.bytes_per_token_per_gpu <= cap.budget_bytes_per_gpu
    lower = kv_capacity(serving(gpu="l4", gpu_memory_utilization=0.8), gpu)
    assert lower.budget_bytes_per_gpu == pytest.approx(cap.budget_bytes_per_gpu - 0.1 * 24 * 2**30)


# --- the simulator ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "gpu, tp, pp", [("h100-sxm", 1, 1), ("a10g", 4, 1), ("l4", 2, 1), ("a100-40gb-sxm", 2, 2)]
)
def test_iteration_time_is_the_perf_models_step(gpu, tp, pp):
    """Decodes split into pp micro-batches, a prefill chunk crossing every stage whole."""
    w = serving(gpu=gpu).with_changes(tp=tp, pp=pp, num_gpus=tp * pp)
    r = replica(w)
    g = get_gpu(gpu)
    model = StepModel(w, g, get_model(w.model), resolve(w, g))
    for seqs, ctx, pre, pctx in [(64, 1600.0, 0, 0.0), (10, 900.0, 1000, 1800.0), (0, 0.0, 8000, 4000.0)]:
        step = model.step(
            seqs / pp + pre,
            decode_seqs=seqs / pp,
            decode_context=ctx,
            prefill_tokens=pre,
            prefill_context=pctx,
        )
        assert r.iteration_s(seqs, ctx, pre, pctx) == pytest.approx(pp * step.time_s, rel=1e-9)


def test_at_low_load_ttft_is_one_prefill_and_tpot_one_small_decode_step():
    w = serving()
    r = replica(w)
    run = simulate(r, draw_requests(w, 200), 0.05)
    assert run.completed == 200 and not run.cut_off and run.preemptions == 0
    prefill = r.iteration_s(0, 0.0, 1500, 1500.0)
    assert run.percentile("ttft", 50) == pytest.approx(prefill, rel=0.05)
    assert run.percentile("tpot", 50) == pytest.approx(r.iteration_s(1, 1625.0, 0, 0.0), rel=0.1)
    assert run.throughput_rps == pytest.approx(0.05, rel=0.3)


def test_latency_grows_with_the_rate_and_saturates():
    w = serving()
    r, draws = replica(w), draw_requests(w, 300)
    runs = [simulate(r, draws, rate) for rate in (1, 4, 8, 11, 1e6)]
    ttft = [x.percentile("ttft", 99) for x in runs]
    assert ttft == sorted(ttft)
    batch = [x.mean_decode_batch for x in runs]
    assert batch == sorted(batch)
    flat_out = runs[-1].throughput_rps
    assert (
        runs[2].throughput_rps < flat_out < 1.5 * runs[3].throughput_rps
    )  # flat out ≈ the busiest stable rate


def test_a_small_kv_cache_preempts_and_caps_the_batch():
    w = serving(gpu_memory_utilization=0.3)  # leaves room for a handful of sequences on an H100
    r = replica(w)
    run = simulate(r, draw_requests(w, 150), 1e6)
    assert 1 <= r.capacity.max_sequences < 40
    assert run.preemptions > 0 and run.completed == 150
    assert run.mean_decode_batch <= r.capacity.tokens / 1500


def test_prefix_hits_cut_ttft_and_speculation_cuts_tpot_at_low_load():
    base = serving()
    draws = draw_requests(base, 100)
    plain = simulate(replica(base), draws, 0.2)
    cached = simulate(replica(serving(prefix_hit_rate=0.8)), draws, 0.2)
    spec = simulate(replica(serving(speculative_tokens=3, acceptance_rate=0.8)), draws, 0.2)
    assert cached.percentile("ttft", 50) < 0.4 * plain.percentile("ttft", 50)
    assert spec.percentile("tpot", 50) < 0.6 * plain.percentile("tpot", 50)


def test_without_chunked_prefill_prompts_stall_the_decodes():
    chunked, whole = serving(), serving(chunked_prefill=False)
    draws = draw_requests(chunked, 200)
    a = simulate(replica(chunked), draws, 8)
    b = simulate(replica(whole), draws, 8)
    assert b.percentile("tpot", 99) > a.percentile("tpot", 99)


def test_a_sequence_longer_than_the_kv_cache_never_finishes_and_is_cut_off():
    w = serving(gpu_memory_utilization=0.18)  # the weights take ~17 % of an H100: almost no cache
    r = replica(w)
    assert r.capacity.max_sequences == 0
    run = simulate(r, draw_requests(w, 20), 1.0)
    assert run.cut_off and run.completed == 0


# --- goodput and prices ------------------------------------------------------------------------------


def test_goodput_meets_the_slo_and_a_higher_rate_does_not():
    w = serving(slo={"ttft_p99": "300ms"})
    r, draws = replica(w), draw_requests(w, 300)
    slo = effective_slo(w.serving.slo)
    good = search_goodput(r, draws, slo)
    assert 0 < good.rate_rps < good.saturation_rps
    assert meets(simulate(r, draws, good.rate_rps), slo)
    assert not meets(simulate(r, draws, good.rate_rps * 1.15), slo)
    assert good.binding == "ttft_p99"


def test_an_slo_no_rate_can_meet_gives_zero_goodput():
    w = serving(gpu="l4", slo={"ttft_p99": "20ms"})  # one 1,500-token prefill on an L4 takes longer
    good = search_goodput(replica(w), draw_requests(w, 100), effective_slo(w.serving.slo))
    assert good.rate_rps == 0 and good.binding == "ttft_p99"


def test_token_prices_split_the_bill_and_blend_to_it():
    p = token_prices(2.0, 4, 10.0, 1500, 250, input_share=0.4)
    assert p.monthly_usd == pytest.approx(2.0 * 4 * 730)
    billed = (
        p.usd_per_million_input * p.input_tokens_per_month
        + p.usd_per_million_output * p.output_tokens_per_month
    )
    assert billed / 1e6 == pytest.approx(p.monthly_usd)
    assert p.usd_per_million_blended * (
        p.input_tokens_per_month + p.output_tokens_per_month
    ) / 1e6 == pytest.approx(p.monthly_usd)


def test_queueing_is_diagnosed_when_overloaded_not_at_low_load():
    from gpuwise.serving.evaluate import diagnose

    w = serving()
    r, draws = replica(w), draw_requests(w, 300)
    good = search_goodput(r, draws, effective_slo(w.serving.slo))
    busy = simulate(r, draws, 1.3 * good.saturation_rps)  # overloaded: requests wait for a slot
    idle = simulate(r, draws, 0.5)
    assert "queueing" in diagnose(r, busy, good)
    assert "queueing" not in diagnose(r, idle, good)
    assert max(idle.queue_s) < 0.05 < busy.percentile("queue", 99)


def test_pipeline_stages_add_latency_that_tensor_parallelism_removes():
    base = workload_from_mapping(
        {
            "model": "llama-3-70b",
            "task": "serving",
            "gpu": "h100-sxm",
            "num_gpus": 4,
            "tp": 4,
            "seq_len": 2000,
            "output_len": 200,
            "serving": {"rate": 1},
        }
    )
    tp4 = replica(base)
    pp2 = replica(base.with_changes(tp=2, pp=2))
    draws = draw_requests(base, 60)
    a, b = simulate(tp4, draws, 0.2), simulate(pp2, draws, 0.2)
    assert a.completed == b.completed == 60
    assert b.percentile("ttft", 50) > 1.3 * a.percentile("ttft", 50)
    assert b.percentile("tpot", 50) > 1.3 * a.percentile("tpot", 50)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    rate=st.floats(0.05, 200.0),
    hit=st.floats(0.0, 0.9),
    spec_tokens=st.integers(0, 4),
    chunked=st.booleans(),
    engine=st.sampled_from(["vllm", "sglang", "tensorrt-llm", "tgi", "llama.cpp"]),
    max_seqs=st.integers(1, 300),
    util=st.floats(0.25, 0.95),
    seed=st.integers(0, 5),
)
def test_every_run_is_consistent(rate, hit, spec_tokens, chunked, engine, max_seqs, util, seed):
    """Whatever the knobs: every request finishes (the cache holds one), latencies are ordered, and
    no request gets its first token sooner than its own prefill could run on an idle replica."""
    w = serving(
        prefix_hit_rate=hit,
        speculative_tokens=spec_tokens,
        chunked_prefill=chunked,
        engine=engine,
        max_num_seqs=max_seqs,
        gpu_memory_utilization=util,
        seed=seed,
        prompt_len={"p50": 1500, "p99": 3000},
    )
    r = replica(w)
    draws = draw_requests(w, 40)
    run = simulate(r, draws, rate)
    fits_all = max(p + o for p, o in zip(draws.prompts, draws.outputs, strict=True)) < r.capacity.tokens
    if fits_all:
        assert run.completed == 40 and not run.cut_off
    for ttft, e2e, queue in zip(run.ttft_s, run.e2e_s, run.queue_s, strict=True):
        if e2e != math.inf:
            assert 0 <= queue <= ttft <= e2e
    fastest = min(r.iteration_s(0, 0.0, max(1, math.ceil(p * (1 - hit))), 0.0) for p in draws.prompts)
    assert min(run.ttft_s) >= 0.99 * fastest
    assert run.mean_decode_batch <= max_seqs + 1e-9


def test_engine_factors_name_their_sources_and_say_which_are_assumptions():
    from gpuwise.serving.engines import engine_data
    from gpuwise.workload.serving import ENGINES

    data = engine_data()
    assert set(data["engine"]) == set(ENGINES)
    for row in data["engine"].values():
        assert row["basis"] in {"reference", "published", "assumption"}
        assert row["source"] and row["date"] and row["figures"]
    assert data["engine"]["vllm"]["step_time_factor"] == 1.0  # the perf model's efficiencies are vLLM's
    assert data["engine"]["llama.cpp"]["basis"] == "assumption"


def test_the_draft_costs_one_layer_and_the_lm_head_of_the_target():
    """EAGLE's draft is one decoder layer reading the target's LM head: ~5 % of a step for the paper's
    32k-vocabulary 7B models, about twice that for Llama-3-8B's 128k vocabulary, little for a 70B."""
    from gpuwise.serving.engines import draft_cost_fraction

    llama2 = draft_cost_fraction(get_model("llama-2-7b"))
    assert 0.045 < llama2 < 0.055
    assert draft_cost_fraction(get_model("llama-3-8b")) > 1.8 * llama2
    assert draft_cost_fraction(get_model("llama-3-70b")) < llama2
    plain = replica(serving())
    spec = replica(serving(speculative_tokens=3))
    ratio = spec.iteration_s(8, 1000.0, 0, 0.0) / plain._raw(8 * 4, 8, 1000.0, 0, 0.0)
    assert ratio == pytest.approx(1 + 3 * spec.draft_fraction)


def test_a_step_time_factor_scales_every_iteration():
    """serving.step_time_factor (set by plan --evidence from a load test) multiplies each iteration."""
    base, slow = replica(serving()), replica(serving(step_time_factor=2.5))
    for args in ((1, 500.0, 0, 0.0), (16, 2000.0, 512, 1024.0), (0, 0.0, 2048, 4096.0)):
        assert slow.iteration_s(*args) == pytest.approx(2.5 * base.iteration_s(*args))
    with pytest.raises(GpuwiseError):
        serving(step_time_factor=0)
