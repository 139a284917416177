"""`gpuwise tune`'s measured gain on the starved reference script, and what the tuning itself cost.

Runs the tuner (the CLI's defaults: findings' candidates, 2 repeats of the baseline and the best two)
on benchmarks/real_scripts/starved_loader.py, nothing saved. Prints each trial, then the speed-up of
the winner (median of its repeats over the baseline's median) and the tuner's overhead: its wall time,
and how many samples the tuned run must train before the time saved per sample has paid it back.
Last line: {"speedup_x": ..., "beats_spread": ..., "trials": N, "tuner_wall_s": ..., "best_trial_wall_s": ...,
"payback_samples": ..., "payback_s": ...}
Usage: python benchmarks/tune_gain.py [--steps 20] [--repeats 2]
       python benchmarks/tune_gain.py --no-gain [--sessions 10] [--max-trials 10]
With --no-gain: SESSIONS sessions on real_scripts/no_gain.py with two candidates that change nothing
(threads=1, num_workers=0, both as the script already runs): every session must name no winner. Prints
each session's verdict and, last, {"sessions": N, "winners": K, ...}.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from gpuwise.tune.search import TuneOptions, run_tune

SCRIPT = Path(__file__).resolve().parent / "real_scripts" / "starved_loader.py"
NO_GAIN = Path(__file__).resolve().parent / "real_scripts" / "no_gain.py"


def no_gain(sessions: int, steps: int, repeats: int, max_trials: int) -> None:
    """Sessions on a script whose candidates change nothing: count the ones that name a winner."""
    winners, rows = 0, []
    for i in range(1, sessions + 1):
        options = TuneOptions(
            steps=steps,
            repeats=repeats,
            max_trials=max_trials,
            auto=False,
            knobs=[("threads", [1]), ("num_workers", [0])],
        )
        result = run_tune([sys.executable, str(NO_GAIN)], options)
        base = result.baseline_value or 0.0
        ratios = {
            c.label: round((c.median(result.metric) or 0.0) / base, 3)
            for c in result.configs
            if base and c is not result.baseline
        }
        named = result.winner.config.label if result.winner is not None else None
        winners += named is not None
        rows.append({"session": i, "winner": named, "trials": len(result.trials), "ratios": ratios})
        print(f"session {i}: winner {named or 'none'}; {len(result.trials)} trials; median/baseline {ratios}")
    print(json.dumps({"sessions": sessions, "winners": winners, "rows": rows}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--no-gain", action="store_true", help="sessions on a script with no real gain")
    parser.add_argument("--sessions", type=int, default=10)
    parser.add_argument("--max-trials", type=int, default=10)
    args = parser.parse_args()
    if args.no_gain:
        no_gain(args.sessions, args.steps, args.repeats, args.max_trials)
        return
    result = run_tune([sys.executable, str(SCRIPT)], TuneOptions(steps=args.steps, repeats=args.repeats))
    for t in result.trials:
        rate = f"{t.samples_per_s:,.0f} samples/s" if t.samples_per_s else "-"
        print(
            f"trial {t.spec.index} {t.spec.role:8} {t.spec.label:55} {t.status:8} {rate:>16} "
            f"{t.wall_s:5.1f} s"
        )
    w, base = result.winner, result.baseline_value
    figures: dict[str, object] = {"trials": len(result.trials), "tuner_wall_s": round(result.tuner_wall_s, 1)}
    if w is not None and base:
        best = w.config.median(result.metric) or 0.0
        saved_per_sample_s = 1 / base - 1 / best  # the tuned run's time saved on every sample
        payback = result.tuner_wall_s / saved_per_sample_s
        print(
            f"{w.config.label}: {best:,.0f} vs {base:,.0f} samples/s = {w.speedup_x:.2f}x "
            f"({'beats' if w.beats_spread else 'within'} the baseline's spread); the tuner took "
            f"{result.tuner_wall_s:.0f} s for {len(result.trials)} trials, paid back after "
            f"{payback:,.0f} samples "
            f"({payback / best:.0f} s of tuned training)"
        )
        figures |= {
            "speedup_x": round(w.speedup_x, 3),
            "beats_spread": w.beats_spread,
            "best_trial_wall_s": round(result.best_trial_wall_s or 0.0, 1),
            "payback_samples": round(payback),
            "payback_s": round(payback / best, 1),
        }
    else:
        print("no configuration beat the script as written")
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
