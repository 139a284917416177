"""JSON field names carry their units (schema 2), and runs saved under schema 1 still read."""

from gpuwise.diagnose import Evidence
from gpuwise.profile.analysis import ProfileRun
from gpuwise.profile.saved_runs import save_run
from gpuwise.profile.types import RunSummary
from gpuwise.store.runs import RunStore


def test_memory_json_names_bytes(cli):
    doc = cli("memory", "examples/llama-3-8b-lora.yaml", "--json").json()
    assert doc["schema_version"] == 2 and "breakdown" not in doc
    assert sum(doc["breakdown_bytes"].values()) == doc["device_total_bytes"]
    assert all("components_bytes" in phase for phase in doc["phases"])


def test_plan_outcome_names_speed_and_price_units(cli):
    training = cli("plan", "examples/llama-3-8b-lora.yaml", "--json").json()["plan"]["config"]["outcome"]
    serving = cli("plan", "examples/inference-7b.yaml", "--json").json()["plan"]["current"]
    for outcome in (training, serving):
        assert "throughput" not in outcome and "usd_per_1m" not in outcome
        assert outcome["throughput_per_s"] > 0 and outcome["usd_per_million"] > 0
    assert training["usd_per_million_of"] == "training tokens"
    assert serving["usd_per_million_of"] == "output tokens"


def test_a_run_saved_with_schema_1_names_shows_the_new_names(cli, tmp_path):
    store = tmp_path / "runs.sqlite"
    old = {"label": "saved before schema 2", "status": "completed", "started_at": 1_700_000_000.5}
    with RunStore.open(store) as runs:
        save_run(runs, ProfileRun(RunSummary.from_dict(old), Evidence(source="profile")))
    shown = cli("runs", "show", "last", "--store", str(store), "--json")
    assert shown.exit_code == 0, shown.stderr
    run = shown.json()
    assert run["started_at_unix_s"] == 1_700_000_000.5 and "started_at" not in run
