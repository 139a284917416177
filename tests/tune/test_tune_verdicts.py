"""Issue 27 item 4: verdicts that repeat. A winner only when its interval clears the baseline's spread;
a "not certain" candidate never ranks above a certain one; a candidate measured once is repeated while
it could still win; the snippet is in the script's own terms (no DataLoader for a script without one).
The trials here are built from measured rates (the ranking logic is what is tested; real sessions are in
test_tune_trials.py and benchmarks/tune_gain.py --no-gain)."""

from __future__ import annotations

from gpuwise.diagnose import Evidence
from gpuwise.profile.analysis import ProfileRun
from gpuwise.profile.types import LoaderInfo, RunSummary
from gpuwise.tune.frameworks import render
from gpuwise.tune.result import Config
from gpuwise.tune.search import _certain, _could_win, _judge, _outrun, _winner
from gpuwise.tune.trial import Trial, TrialSpec


def config(key: str, rates: list[float], *, loader: bool = True) -> Config:
    trials = []
    for i, rate in enumerate(rates):
        summary = RunSummary(steps_per_s=rate, measured_steps=10, loader=LoaderInfo() if loader else None)
        spec = TrialSpec(i + 1, "baseline" if key == "base" else "knobs", ["python", "train.py"], {}, {})
        trials.append(Trial(spec, "ok", run=ProfileRun(summary, Evidence(source="profile"))))
    return Config(key, key, trials)


def judged(base: Config, *others: Config) -> list[Config]:
    configs = [base, *others]
    for c in configs:
        _judge(c, base, "steps_per_s", base.median("steps_per_s"), base.spread("steps_per_s"))
    return configs


def test_a_median_gain_inside_the_baselines_spread_names_no_winner():
    base = config("base", [10.0, 11.0, 9.6])
    lucky = config("batch 24", [10.6, 9.9, 11.2])  # nanoGPT's 1.056x "winner": inside the spread
    judged(base, lucky)
    assert lucky.verdict == "faster"
    assert _winner([lucky, base], base, "steps_per_s", None) is None


def test_a_certain_candidate_ranks_above_a_faster_but_uncertain_one_and_wins():
    base = config("base", [10.0, 10.4, 10.1, 9.9])
    clear = config("workers 2", [15.0, 15.5, 14.9, 15.2])  # slowest beats the baseline's fastest
    wild = config("workers 8", [8.4, 40.0, 11.8])  # 2.30x by median of a wide range: not certain
    judged(base, clear, wild)
    assert _certain(clear, base, "steps_per_s") and not _certain(wild, base, "steps_per_s")
    ranked = sorted(
        [wild, clear],
        key=lambda c: (not _certain(c, base, "steps_per_s"), -(c.median("steps_per_s") or 0.0)),
    )
    assert ranked[0] is clear
    winner = _winner(ranked, base, "steps_per_s", None)
    assert winner is not None and winner.config is clear and winner.beats_spread


def test_a_candidate_measured_once_is_repeated_unless_clearly_slower():
    base = config("base", [10.0])
    assert _could_win(config("once slow by luck", [5.6]), "steps_per_s", base) is True  # 0.56x once
    assert _could_win(config("far slower", [3.0]), "steps_per_s", base) is False
    base2 = config("base", [10.0, 10.5])
    assert _could_win(config("overlaps", [10.2, 11.0]), "steps_per_s", base2) is True
    # ahead so far but measured twice: repeated until it has the trials a certain winner needs
    assert _could_win(config("ahead", [12.0, 12.5]), "steps_per_s", base2) is True
    assert not _certain(config("ahead", [12.0, 12.5]), base2, "steps_per_s")
    base4 = config("base", [10.0, 10.5, 10.2, 10.1])
    assert _could_win(config("separated", [12.0, 12.5, 12.2, 12.1]), "steps_per_s", base4) is False
    assert _could_win(config("slower", [8.0, 8.5, 8.2, 8.1]), "steps_per_s", base4) is False


def test_a_candidate_a_certain_winner_has_outrun_is_not_repeated_any_more():
    base = config("base", [10.0, 10.5, 10.2, 10.1])
    leader = config("workers 4", [20.0, 21.0, 19.5, 20.5])  # certain: its slowest beats the base's fastest
    behind = config("workers 2", [14.0, 15.0, 14.5])  # ahead of the baseline, but below the leader
    close = config("workers 3", [15.0, 19.8, 16.0])  # its fastest reaches into the leader's interval
    configs = [base, leader, behind, close]
    assert _certain(leader, base, "steps_per_s") and _could_win(behind, "steps_per_s", base)
    assert _outrun(behind, configs, base, "steps_per_s") is True
    assert _outrun(close, configs, base, "steps_per_s") is False  # could still overtake: repeated
    assert _outrun(leader, configs, base, "steps_per_s") is False
    # a leader that is ahead but not yet certain outruns nothing: the one behind may still win
    unsure = config("workers 4", [20.0, 21.0, 19.5])
    assert _outrun(behind, [base, unsure, behind], base, "steps_per_s") is False
    # nor does a leader whose interval reaches into the baseline's spread
    lucky = config("workers 4", [20.0, 21.0, 10.3, 20.5])
    assert _outrun(config("x", [9.0, 10.2, 9.9]), [base, lucky], base, "steps_per_s") is False


def test_the_batch_snippet_uses_the_scripts_own_setting_and_no_dataloader_without_one():
    nanogpt = render(None, {}, 24, None, batch_flag="--batch_size", uses_loader=False)
    assert "DataLoader" not in nanogpt and nanogpt.startswith("batch_size = 24")
    plain = render(None, {"num_workers": 2}, None, None)
    assert plain.startswith("DataLoader(") and "num_workers=2" in plain
