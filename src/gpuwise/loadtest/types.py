"""What one request measured, what one load level summarizes, and the whole load test's result."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

# Why a request failed; a failed request is counted, never fatal.
ErrorKind = Literal["timeout", "connect", "http_status", "malformed_sse", "dropped", "cancelled"]
ERROR_KINDS: tuple[ErrorKind, ...] = (
    "timeout",
    "connect",
    "http_status",
    "malformed_sse",
    "dropped",
    "cancelled",
)
# Where a request's token counts came from: the server's `usage`, the --tokenizer on the text, or one
# output token per streamed chunk.
TokenSource = Literal["usage", "tokenizer", "chunks"]
# How requests are issued: N in flight at all times, or arrivals at a rate (Poisson or evenly spaced).
LoadMode = Literal["concurrency", "poisson", "constant"]
LOAD_MODES: tuple[LoadMode, ...] = ("concurrency", "poisson", "constant")
Endpoint = Literal["completions", "chat"]


def level_label(mode: LoadMode, target: float) -> str:
    """'concurrency 8' or 'poisson 5 req/s': one wording for the progress bar and the evidence."""
    return f"concurrency {target:g}" if mode == "concurrency" else f"{mode} {target:g} req/s"


@dataclass
class RequestRecord:
    """One request's timeline, in seconds from the start of the load level (send time = ``start_s``)."""

    start_s: float
    sent_at: float = 0.0  # time.perf_counter() at send (CLOCK_MONOTONIC: comparable across processes)
    e2e_s: float | None = None
    ttft_s: float | None = None
    itl_s: list[float] = field(default_factory=list)  # gaps between consecutive content chunks
    input_tokens: int | None = None
    output_tokens: int = 0
    token_source: TokenSource = "chunks"
    error: ErrorKind | None = None
    error_detail: str = ""
    streamed: bool = True  # False: one JSON reply, so TTFT = e2e and there is no TPOT
    index: int = -1  # which request body (position in the level's list)
    text: str = ""  # the generated text (for --tokenizer counts; never stored)

    @property
    def ok(self) -> bool:
        """True when the request did not fail and produced a first token."""
        return self.error is None and self.ttft_s is not None

    @property
    def tpot_s(self) -> float | None:
        """(e2e - TTFT) / (output tokens - 1): vLLM benchmark_serving's and genai-perf's definition."""
        if (
            not self.ok
            or not self.streamed
            or self.e2e_s is None
            or self.ttft_s is None
            or self.output_tokens < 2
        ):
            return None
        return (self.e2e_s - self.ttft_s) / (self.output_tokens - 1)


@dataclass
class Slo:
    """Limits on percentiles, e.g. {('ttft', 99): 0.5, ('tpot', 99): 0.05}, in seconds."""

    limits: dict[tuple[str, int], float]

    def text(self) -> str:
        """The limits as ``--slo`` writes them (``ttft_p99=0.5,tpot_p99=0.05``, seconds)."""
        return ",".join(f"{m}_p{p}={v:g}" for (m, p), v in self.limits.items())


@dataclass
class LevelSummary:
    """One load level (a concurrency or a rate): percentiles, throughput, errors, goodput."""

    mode: LoadMode
    target: float  # concurrency (requests in flight) or rate (requests/s)
    duration_s: float
    requests_sent: int
    requests_ok: int
    errors: dict[str, int]
    input_tokens: int
    output_tokens: int
    token_source: str  # usage | chunks | mixed
    request_throughput_per_s: float
    output_token_throughput_per_s: float
    total_token_throughput_per_s: float
    latency_s: dict[str, dict[str, float | None]]  # metric -> {mean, p50, p90, p99}
    goodput_per_s: float | None = None
    slo_met: bool | None = None
    slo_failures: list[str] = field(default_factory=list)
    interrupted: bool = False
    # Rate modes: the rate the seeded schedule actually offered (requests sent - 1 over the span of their
    # scheduled send times, requests/s), which a short Poisson schedule puts off the nominal target.
    offered_rate_per_s: float | None = None
    seed: int | None = None  # the arrival seed of this level (repeated probes use seed, seed + 1, …)

    def pct(self, metric: str, p: int) -> float | None:
        """The ``p``-th percentile of ``metric`` (``ttft``, ``tpot``, ``itl``, ``e2e``) in seconds; None when
        not measured.
        """
        return self.latency_s.get(metric, {}).get(f"p{p}")

    def to_dict(self) -> dict[str, Any]:
        """The level as JSON: the target becomes ``concurrency`` or ``rate_per_s`` and every latency statistic
        a flat ``{metric}_{stat}_s`` key.
        """
        out = asdict(self)
        out.pop("latency_s")
        target = out.pop("target")  # the unit depends on the mode: say it in the name
        out["concurrency"] = target if self.mode == "concurrency" else None
        out["rate_per_s"] = None if self.mode == "concurrency" else target
        for metric, stats in self.latency_s.items():
            for stat, value in stats.items():
                out[f"{metric}_{stat}_s"] = value
        return out


@dataclass
class RateSearch:
    """The bounded bisection for the highest rate meeting the SLO."""

    max_rate_per_s: float | None  # None: even the lowest probed rate misses the SLO
    low_per_s: float
    high_per_s: float
    probes: list[LevelSummary]
    bounded_by_high: bool = False  # the highest rate tried still met it: the true max is higher
    interrupted: bool = False  # Ctrl-C before the search ended: max_rate_per_s is what finished probes showed
    repeats: int = 1  # probes per rate (seeds seed … seed + repeats - 1); a rate meets the SLO if all do
    offered_rate_per_s: float | None = None  # mean offered rate of the answer's repeats (requests/s)
    # 95 % interval of the max rate (requests/s): from the answer's offered rates (t-interval over its
    # repeats, low side) to the first failing rate's (high side); None where unknown (one repeat, no bound).
    ci_low_per_s: float | None = None
    ci_high_per_s: float | None = None


@dataclass
class LoadtestResult:
    """The whole load test: the server and model, one summary per level, the SLO and the max-rate search when
    asked, the run-store id once saved, and the measured-versus-predicted comparison.
    """

    url: str
    endpoint: Endpoint
    model: str
    stream: bool
    levels: list[LevelSummary]
    slo: Slo | None = None
    search: RateSearch | None = None
    interrupted: bool = False
    run_id: int | None = None
    settings: dict[str, Any] = field(default_factory=dict)
    prediction: dict[str, Any] | None = None  # measured vs gpuwise's model (loadtest/prediction.py)
    warnings: list[str] = field(default_factory=list)  # what may skew the figures (token counts by chunk)

    def to_dict(self) -> dict[str, Any]:
        """The result as JSON (the ``gpuwise loadtest --json`` schema), with the evidence the rules judge."""
        search = None
        if self.search is not None:
            s = self.search
            search = {
                "max_rate_per_s": s.max_rate_per_s,
                "low_per_s": s.low_per_s,
                "high_per_s": s.high_per_s,
                "bounded_by_high": s.bounded_by_high,
                "interrupted": s.interrupted,
                "repeats": s.repeats,
                "offered_rate_per_s": s.offered_rate_per_s,
                "ci_low_per_s": s.ci_low_per_s,
                "ci_high_per_s": s.ci_high_per_s,
                "probes": [p.to_dict() for p in s.probes],
            }
        return {
            "url": self.url,
            "endpoint": self.endpoint,
            "model": self.model,
            "stream": self.stream,
            "slo": None if self.slo is None else {f"{m}_p{p}_s": v for (m, p), v in self.slo.limits.items()},
            "levels": [lv.to_dict() for lv in self.levels],
            "search": search,
            "interrupted": self.interrupted,
            "run_id": self.run_id,
            "settings": self.settings,
            "prediction": self.prediction,
            "warnings": self.warnings,
            "evidence": self._evidence(),
        }

    def _evidence(self) -> dict[str, Any] | None:
        """The load test as rule-engine evidence, so `plan --evidence FILE` reads this JSON."""
        from gpuwise.loadtest.evidence import loadtest_evidence

        ev = loadtest_evidence(self)
        return ev.to_dict() if ev is not None else None


__all__ = [
    "ERROR_KINDS",
    "LOAD_MODES",
    "Endpoint",
    "ErrorKind",
    "LevelSummary",
    "LoadMode",
    "LoadtestResult",
    "RateSearch",
    "RequestRecord",
    "Slo",
    "TokenSource",
    "level_label",
]
