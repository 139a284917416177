"""The serving plan, and one truth across `memory`, `cost` and `plan` for a serving workload."""

import json
from pathlib import Path

import pytest

from gpuwise.catalog import get_gpu
from gpuwise.plan.serving import plan_serving
from gpuwise.workload import load_workload, workload_from_mapping

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
FEW_GPUS = ["h100-sxm", "a100-80gb-sxm", "a10g", "gh200"]  # gh200: the cheapest of the full catalog


def chat(**changes):
    base = load_workload(EXAMPLES / "serving-chat-50rps.yaml").to_dict()
    return workload_from_mapping({**base, **changes})


@pytest.fixture(scope="module")
def chat_plan():
    return plan_serving(chat(), gpus=[get_gpu(g) for g in FEW_GPUS])


def test_the_cheapest_deployment_meets_the_slo_and_is_the_cheapest_that_does(chat_plan):
    best = chat_plan.cheapest
    assert best is not None and best.meets_slo
    assert best.replicas * best.goodput_rps_per_replica >= chat_plan.rate_rps
    assert best.latency.ttft_s[99] <= 0.5 and best.latency.tpot_s[99] <= 0.06
    assert all(best.monthly_usd <= o.monthly_usd for o in chat_plan.options)
    assert best.prices.monthly_usd == pytest.approx(best.total_gpus * best.usd_per_gpu_hour * 730)


def test_no_technique_that_breaks_the_slo_is_recommended(chat_plan):
    by_id = {t.id: t for t in chat_plan.techniques}
    for t in chat_plan.techniques:
        if t.verdict in ("recommended", "optional") and t.best is not None:
            assert t.best.meets_slo and t.saving_pct > 0
    assert by_id["prefix_off"].verdict == "in-use"  # the 30 % hit rate is worth keeping
    assert by_id["kv_fp8"].goodput_gain_pct > 0  # more sequences fit the cache
    combo = chat_plan.combined  # the recommended changes together still meet the SLO, for less
    assert combo is not None and combo.best.meets_slo
    recommended = [t for t in chat_plan.techniques if t.verdict == "recommended" and t.monthly_usd]
    assert combo.monthly_usd <= min(t.monthly_usd for t in recommended)


def test_goal_fit_does_not_quantize_a_model_that_already_fits():
    p = plan_serving(chat(goal="fit"), gpus=[get_gpu("h100-sxm")])
    by_id = {t.id: t for t in p.techniques}
    assert by_id["weight_fp8"].verdict == "not-needed" and by_id["weight_int4"].verdict == "not-needed"


def test_an_slo_nothing_meets_gives_no_cheapest_and_says_why():
    w = chat().with_changes(gpu="a10g")
    tight = workload_from_mapping({**w.to_dict(), "serving.slo": {"ttft_p99": "30ms"}})
    p = plan_serving(tight, gpus=[get_gpu("a10g")])
    assert p.cheapest is None and not p.current.meets_slo
    assert "cannot meet the SLO" in p.diagnosis[0]


def test_bad_serving_flags_exit_2_without_a_traceback(cli):
    result = cli("plan", "llama-3-8b", "--task", "serving", "--rate", "5", "--slo", "ttft_p97=1")
    assert result.exit_code == 2 and "unknown SLO" in result.stderr and "Traceback" not in result.stderr


@pytest.mark.slow
def test_memory_cost_and_plan_agree_on_kv_capacity_and_token_prices(cli, tmp_path):
    """One truth: the same KV capacity and $ per 1M tokens in all three commands' JSON."""
    spec = EXAMPLES / "serving-chat-50rps.yaml"
    memory = json.loads(cli("memory", str(spec), "--json").stdout)
    cost = json.loads(cli("cost", str(spec), "--json").stdout)
    plan = json.loads(cli("plan", str(spec), "--json").stdout)["plan"]
    kv = memory["serving"]["kv_capacity"]
    assert kv == cost["serving"]["kv_capacity"] == plan["current"]["kv"]
    assert kv["max_sequences"] == cost["cost"]["perf"]["inference"]["max_concurrency"]
    at_cost, at_plan = cost["serving"]["at_demand"], plan["current"]
    assert at_cost["prices"] == at_plan["prices"] == memory["serving"]["at_demand"]["prices"]
    assert at_cost["replicas"] == at_plan["replicas"] and at_cost["latency"] == at_plan["latency"]
    for key in ("usd_per_million_input", "usd_per_million_output", "usd_per_million_blended"):
        assert at_plan["prices"][key] > 0
    best = plan["cheapest"]
    assert best["meets_slo"] and best["replicas"] >= 1 and best["prices"]["monthly_usd"] > 0


@pytest.mark.slow
def test_plan_on_the_70b_example_prints_replicas_cheapest_gpu_and_monthly_cost(cli):
    result = cli("plan", str(EXAMPLES / "serving-70b-10rps.yaml"))
    assert result.exit_code == 0, result.stderr
    out = result.stdout
    assert "Cheapest meeting the SLO:" in out and "replica(s)" in out and "/month" in out
    assert "per 1M input tokens" in out and "per 1M output tokens" in out


def test_a_small_model_is_offered_mig_slices_that_meet_the_slo():
    w = workload_from_mapping(
        {
            "model": "llama-3.2-1b",
            "task": "serving",
            "gpu": "a100-80gb-sxm",
            "seq_len": 500,
            "output_len": 100,
            "serving": {"rate": 20, "slo": {"ttft_p99": "300ms", "tpot_p99": "40ms"}},
        }
    )
    p = plan_serving(w, gpus=[get_gpu("a100-80gb-sxm")])
    mig = next(t for t in p.techniques if t.id == "mig")
    assert mig.verdict == "recommended" and mig.best.meets_slo
    assert ":mig" in mig.best.gpu and mig.monthly_usd < p.cheapest.monthly_usd


def test_a_demand_on_an_encoder_model_is_refused(cli):
    result = cli("plan", "bert-base", "--rate", "5")
    assert result.exit_code == 2 and "decoder LLM" in result.stderr and "Traceback" not in result.stderr


def test_without_a_demand_the_three_commands_still_agree_on_the_kv_capacity(cli):
    """The issue's L4 case (64, 39 or 177 sequences depending on the command) now reads one number."""
    args = ["llama-3-8b", "--task", "serving", "--gpu", "l4", "--seq", "1500", "--output-len", "250"]
    memory = json.loads(cli("memory", *args, "--json").stdout)
    cost = json.loads(cli("cost", *args, "--usd-per-hour", "0.8", "--json").stdout)
    plan = json.loads(cli("plan", *args, "--json").stdout)["plan"]
    sequences = memory["serving"]["kv_capacity"]["max_sequences"]
    assert sequences == cost["serving"]["kv_capacity"]["max_sequences"]
    assert (
        sequences
        == cost["cost"]["perf"]["inference"]["max_concurrency"]
        == plan["current"]["max_concurrency"]
    )
    assert memory["serving"]["at_demand"] is None


# Flags each engine documents for its launcher (vLLM engine arguments, SGLang server arguments,
# trtllm-serve options): every flag a command uses must be one of them.
_ENGINE_FLAGS = {
    "vllm": {
        "--tensor-parallel-size", "--pipeline-parallel-size", "--enable-expert-parallel", "--quantization",
        "--kv-cache-dtype", "--max-model-len", "--max-num-seqs", "--max-num-batched-tokens",
        "--gpu-memory-utilization", "--enable-prefix-caching", "--speculative-config",
    },
    "sglang": {
        "--model-path", "--tp", "--pp-size", "--ep-size", "--quantization", "--kv-cache-dtype",
        "--context-length", "--max-running-requests", "--chunked-prefill-size", "--mem-fraction-static",
        "--disable-radix-cache",
    },
    "tensorrt-llm": {
        "--tp_size", "--pp_size", "--ep_size", "--max_batch_size", "--max_num_tokens", "--max_seq_len",
        "--kv_cache_free_gpu_memory_fraction",
    },
}  # fmt: skip


def _flags(command: str) -> dict[str, str]:
    import shlex

    words = shlex.split(" ".join(line for line in command.splitlines() if not line.startswith("#")))
    out, key = {}, ""
    for word in words:
        if word.startswith("--"):
            key, out[word] = word, ""
        elif key:
            out[key], key = word, ""
    return out


def test_the_serving_plan_has_a_vram_breakdown_engine_commands_and_tools(chat_plan):
    cfg = chat_plan.config
    combo = chat_plan.combined
    assert cfg is not None and combo is not None and combo.verdict == "recommended"
    assert cfg.where == combo.best.where and cfg.changes == combo.change
    # the parts fill the device: the engine's share (weights, context, buffers, KV) plus what it leaves
    total = sum(p.bytes_per_gpu for p in cfg.vram)
    assert total == pytest.approx(cfg.capacity_bytes_per_gpu, rel=0.02)
    assert {p.name for p in cfg.vram} >= {"weights", "kv cache", "left free by the engine"}
    assert next(iter(cfg.commands)) == "vllm"  # the planned engine first
    for engine, command in cfg.commands.items():
        flags = _flags(command)
        assert set(flags) <= _ENGINE_FLAGS[engine], (engine, set(flags) - _ENGINE_FLAGS[engine])
    vllm = _flags(cfg.commands["vllm"])
    assert vllm["--tensor-parallel-size"] == str(combo.best.tp)
    assert vllm.get("--kv-cache-dtype") == ("fp8" if cfg.changes.get("kv_cache_dtype") == "fp8" else None)
    assert int(vllm["--max-model-len"]) >= 4000 + 250  # the p99 prompt plus the output fits
    assert "--enable-prefix-caching" in vllm  # the workload's 30 % prefix hit rate assumes it
    assert [t.id for t in chat_plan.tools] == ["vllm", "gpuwise-loadtest"]
    doc = json.loads(json.dumps(chat_plan.to_dict()))
    assert doc["config"]["vram"][0]["gib_per_gpu"] > 0 and doc["tools"][1]["name"] == "gpuwise loadtest"


def test_expert_parallel_serving_is_refused_up_front_with_the_alternative(cli):
    result = cli("plan", "-m", "mixtral-8x7b", "-t", "serving", "--rate", "5", "-g", "h100-sxm", "-n", "2",
                 "--ep", "2")  # fmt: skip
    assert result.exit_code == 2
    assert "not modelled for serving" in result.stderr and "--tp 2" in result.stderr
    assert "Traceback" not in result.stderr and result.stderr.count("\n") == 1
