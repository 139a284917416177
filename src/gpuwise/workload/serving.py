"""The workload's optional ``serving:`` section: demand (request rate, length distributions,
prefix reuse), the latency SLO, and the serving engine with its scheduler knobs.

Kept apart from ``spec.py`` because it is a nested, typed section that only serving commands read;
``Workload.serving`` is ``None`` for every other workload. Parsing happens once, here, with one
clear line per problem.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any, Literal, get_args

from gpuwise.errors import GpuwiseError
from gpuwise.workload.limits import SERVING_LIMITS, Limit, first_problem

__all__ = [
    "ENGINES",
    "FLAT_PREFIX",
    "SECONDS_PER_DAY",
    "SLO_METRICS",
    "SLO_PERCENTILES",
    "Engine",
    "LengthDist",
    "ServingSpec",
    "SloMetric",
    "SloTarget",
    "fold_flat_keys",
    "mean_lengths",
    "parse_seconds",
    "parse_serving",
    "parse_slo_item",
    "read_histogram",
]


Engine = Literal["vllm", "sglang", "tensorrt-llm", "tgi", "llama.cpp"]
ENGINES: tuple[Engine, ...] = get_args(Engine)
SloMetric = Literal["ttft", "tpot", "e2e"]
SLO_METRICS: tuple[SloMetric, ...] = get_args(SloMetric)
SLO_PERCENTILES = (50, 90, 99)
_ENGINE_ALIASES = {"trtllm": "tensorrt-llm", "trt-llm": "tensorrt-llm", "llamacpp": "llama.cpp"}
_METRIC_ALIASES = {"itl": "tpot", "latency": "e2e", "end_to_end": "e2e"}
SECONDS_PER_DAY = 86_400.0


@dataclass(frozen=True)
class LengthDist:
    """Token lengths of prompts or outputs: a mean, optional percentiles, or a histogram file.

    With only a mean every request has that length (as fixed-length benchmarks do); with p50 and a
    tail percentile lengths are log-normal through them; a histogram file (CSV ``tokens,count``)
    is sampled as given.
    """

    mean: float
    p50: float | None = None
    p90: float | None = None
    p99: float | None = None
    histogram: str = ""

    def to_dict(self) -> dict[str, Any]:
        """JSON form: only the fields given."""
        return {k: v for k, v in asdict(self).items() if v not in (None, "")}


@dataclass(frozen=True)
class SloTarget:
    """One latency objective: ``percentile`` of ``metric`` must stay at or under ``seconds``."""

    metric: SloMetric
    percentile: int
    seconds: float

    @property
    def key(self) -> str:
        """The target's name as written in YAML: ``ttft_p99``…"""
        return f"{self.metric}_p{self.percentile}"


@dataclass(frozen=True)
class ServingSpec:
    """Demand, SLO and engine of a serving workload (``serving:`` in YAML)."""

    rate_rps: float | None = None  # requests per second, whole service
    tokens_per_day: float | None = None  # alternative demand: prompt + output tokens per day
    prompt_len: LengthDist | None = None  # None: the workload's seq_len, fixed
    output_len: LengthDist | None = None  # None: the workload's output_len, fixed
    prefix_hit_rate: float = 0.0  # share of prompt tokens found in the prefix cache
    slo: tuple[SloTarget, ...] = ()
    engine: Engine = "vllm"
    max_num_seqs: int | None = None  # None: the engine's default
    max_num_batched_tokens: int | None = None
    chunked_prefill: bool | None = None
    kv_block_size: int | None = None
    gpu_memory_utilization: float | None = None
    speculative_tokens: int = 0  # draft tokens proposed per step (0: off)
    acceptance_rate: float = 0.7  # per draft token, when speculative_tokens > 0
    seed: int = 0  # arrivals and lengths are drawn from this seed
    # every engine iteration's time × this (None: 1): a load test's measured / predicted speed, which
    # `plan --evidence RUN` sets (docs/serving.md, "Calibrating from a load test")
    step_time_factor: float | None = None

    def to_dict(self) -> dict[str, Any]:
        """Set keys only (a unset knob means the engine's default), in the shape ``serving:`` takes."""
        data = {f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) is not None}
        for key in ("prompt_len", "output_len"):
            if key in data:
                data[key] = data[key].to_dict()
        data["slo"] = {t.key: t.seconds for t in self.slo}
        return data


_SPEC_FIELDS = {f.name: f for f in fields(ServingSpec)}
_SPEC_ALIASES = {
    "rate": "rate_rps",
    "requests_per_s": "rate_rps",
    "qps": "rate_rps",
    "prefix_share": "prefix_hit_rate",
    "cache_hit_rate": "prefix_hit_rate",
    "block_size": "kv_block_size",
    "num_speculative_tokens": "speculative_tokens",
}
FLAT_PREFIX = "serving_"  # CLI flags and --set keys: serving_rate=50 or serving.rate=50


def fold_flat_keys(data: dict[str, Any]) -> dict[str, Any]:
    """Move ``serving_x`` / ``serving.x`` keys (CLI flags, --set) into the ``serving`` mapping."""
    flat = {k: v for k, v in data.items() if isinstance(k, str) and re.match(r"serving[._]", k)}
    if not flat:
        return data
    out = {k: v for k, v in data.items() if k not in flat}
    section = dict(out.get("serving") or {})
    for key, value in flat.items():
        if value is not None:
            section[key[len(FLAT_PREFIX) :]] = value
    out["serving"] = section
    return out


def parse_serving(data: Any, where: str = "", base: Path | None = None) -> ServingSpec | None:
    """The ``serving:`` mapping -> ServingSpec (None or an empty mapping: no section).

    ``base``: the workload file's folder, against which a relative histogram path is resolved."""
    if data is None or data == {}:
        return None
    if isinstance(data, ServingSpec):
        return data
    if not isinstance(data, dict):
        raise GpuwiseError(f"{where}serving must be a mapping (rate: 50, slo: {{ttft_p99: 0.5}}, ...)")
    values: dict[str, Any] = {}
    for raw, value in data.items():
        if value is None:
            continue
        key = str(raw).strip().lower().replace("-", "_")
        key = _SPEC_ALIASES.get(key, key)
        if key not in _SPEC_FIELDS:
            close = difflib.get_close_matches(key, list(_SPEC_FIELDS) + list(_SPEC_ALIASES), n=1)
            hint = f": did you mean {close[0]!r}?" if close else f" (known: {', '.join(_SPEC_FIELDS)})"
            raise GpuwiseError(f"{where}unknown serving key {raw!r}{hint}")
        values[key] = _parse_value(key, value, where, base)
    spec = ServingSpec(**values)
    problem = _problem(spec)
    if problem:
        raise GpuwiseError(where + problem)
    return spec


def _parse_value(key: str, value: Any, where: str, base: Path | None) -> Any:
    if key in ("prompt_len", "output_len"):
        return _length(key, value, where, base)
    if key == "slo":
        return _slo(value, where)
    if key == "engine":
        name = _ENGINE_ALIASES.get(str(value).strip().lower(), str(value).strip().lower())
        if name not in ENGINES:
            raise GpuwiseError(f"{where}unknown serving engine {value!r}: choose one of {', '.join(ENGINES)}")
        return name
    if key == "chunked_prefill":
        if isinstance(value, str):
            return value.strip().lower() in {"1", "true", "yes", "on"}
        return bool(value)
    kind = _SPEC_FIELDS[key].type
    try:
        if isinstance(value, bool):
            raise ValueError
        if "int" in str(kind):
            number = float(value)
            if not number.is_integer():
                raise ValueError
            return int(number)
        return float(value)
    except (TypeError, ValueError):
        raise GpuwiseError(f"{where}serving.{key} must be a number, got {value!r}") from None


def _number(value: Any, what: str, where: str) -> float:
    try:
        if isinstance(value, bool):
            raise ValueError
        return float(value)
    except (TypeError, ValueError):
        raise GpuwiseError(f"{where}{what} must be a number, got {value!r}") from None


def _length(key: str, value: Any, where: str, base: Path | None) -> LengthDist:
    if not isinstance(value, dict):
        return LengthDist(mean=_number(value, f"serving.{key}", where))
    value = {k: v for k, v in value.items() if v not in (None, "")}
    known = {"mean", "p50", "p90", "p99", "histogram"}
    unknown = set(value) - known
    if unknown:
        raise GpuwiseError(
            f"{where}serving.{key} takes {', '.join(sorted(known))}; got {sorted(unknown)[0]!r}"
        )
    nums = {k: _number(v, f"serving.{key}.{k}", where) for k, v in value.items() if k != "histogram"}
    hist = str(value.get("histogram") or "")
    mean = nums.get("mean") or nums.get("p50")
    if mean is None and not hist:
        raise GpuwiseError(f"{where}serving.{key} needs a mean, a p50 or a histogram file")
    if hist:
        path = Path(hist)
        path = path if path.is_absolute() or base is None else base / path
        lengths, weights = read_histogram(path)
        hist = str(path)
        if mean is None:  # the histogram's mean sizes the sequence in memory, cost and plan
            mean = sum(n * c for n, c in zip(lengths, weights, strict=True)) / sum(weights)
    return LengthDist(mean or 0.0, nums.get("p50"), nums.get("p90"), nums.get("p99"), hist)


def parse_seconds(value: Any, what: str, where: str = "") -> float:
    """``0.5``, ``"500ms"`` or ``"0.5s"`` -> seconds."""
    if isinstance(value, str):
        match = re.fullmatch(r"\s*([0-9.]+)\s*(ms|s)?\s*", value.lower())
        if not match:
            raise GpuwiseError(f"{where}{what} must be seconds (0.5) or a duration (500ms), got {value!r}")
        number = float(match.group(1))
        return number / 1000 if match.group(2) == "ms" else number
    return _number(value, what, where)


def parse_slo_item(key: str, value: Any, where: str = "") -> SloTarget:
    """One SLO entry (``ttft_p99: 500ms``) as a target; the error names the accepted keys."""
    match = re.fullmatch(r"([a-z0-9_]+?)_?p(50|90|99)", key.strip().lower())
    metric = _METRIC_ALIASES.get(match.group(1), match.group(1)) if match else ""
    if not match or metric not in SLO_METRICS:
        raise GpuwiseError(
            f"{where}unknown SLO {key!r}: use ttft_p50/p90/p99, tpot_p50/p90/p99 or e2e_p50/p90/p99"
        )
    seconds = parse_seconds(value, f"SLO {key}", where)
    if seconds <= 0:
        raise GpuwiseError(f"{where}SLO {key} must be positive, got {value!r}")
    return SloTarget(metric, int(match.group(2)), seconds)


def _slo(value: Any, where: str) -> tuple[SloTarget, ...]:
    if isinstance(value, str):  # CLI: "ttft_p99=500ms,tpot_p90=50ms"
        pairs = [item.split("=", 1) for item in value.split(",") if item.strip()]
        if any(len(p) != 2 for p in pairs):
            raise GpuwiseError(f"{where}--slo expects metric=value pairs, e.g. ttft_p99=500ms,tpot_p90=50ms")
        value = {k.strip(): v.strip() for k, v in pairs}
    if not isinstance(value, dict):
        raise GpuwiseError(f"{where}serving.slo must be a mapping such as {{ttft_p99: 0.5}}")
    return tuple(parse_slo_item(str(k), v, where) for k, v in value.items())


def mean_lengths(spec: ServingSpec, values: dict[str, Any], where: str = "") -> dict[str, int]:
    """``seq_len`` / ``output_len`` from the distributions' means, so memory, cost and plan size the
    same sequence; a distribution that contradicts an explicit length is an error."""
    out: dict[str, int] = {}
    for dist, key in ((spec.prompt_len, "seq_len"), (spec.output_len, "output_len")):
        if dist is None or not dist.mean:
            continue
        mean = max(round(dist.mean), 1)
        given = values.get(key)
        if given is not None and int(given) != mean:
            raise GpuwiseError(
                f"{where}{key} {given} contradicts the serving length distribution's mean {mean}: give one"
            )
        out[key] = mean
    return out


def _problem(s: ServingSpec) -> str | None:
    """The first impossible value of a ``serving:`` section, as one line (None: it is valid)."""
    return _demand_problem(s) or _engine_problem(s) or _length_problem(s) or _limits_problem(s)


_LENGTH_LIMIT = Limit(0, 1 << 24, "tokens")


def _limits_problem(s: ServingSpec) -> str | None:
    """Any number that is not finite or outside its range (workload/limits.py), lengths included."""
    problem = first_problem(s, SERVING_LIMITS, "serving.")
    for dist, name in ((s.prompt_len, "prompt_len"), (s.output_len, "output_len")):
        limits = dict.fromkeys(("mean", "p50", "p90", "p99"), _LENGTH_LIMIT)
        problem = problem or (first_problem(dist, limits, f"serving.{name}.") if dist else None)
    return problem


def _demand_problem(s: ServingSpec) -> str | None:
    """Demand: one positive rate (requests/s or tokens/day), a prefix hit rate in [0, 1)."""
    if s.rate_rps is not None and s.rate_rps <= 0:
        return f"serving.rate must be positive, got {s.rate_rps}"
    if s.tokens_per_day is not None and s.tokens_per_day <= 0:
        return f"serving.tokens_per_day must be positive, got {s.tokens_per_day}"
    if s.rate_rps is not None and s.tokens_per_day is not None:
        return "give serving.rate or serving.tokens_per_day, not both"
    if not 0 <= s.prefix_hit_rate < 1:
        return f"serving.prefix_hit_rate must be in [0, 1), got {s.prefix_hit_rate}"
    return None


def _engine_problem(s: ServingSpec) -> str | None:
    """Engine knobs: rates in range, counts at least 1, a sane speed factor and draft length."""
    if not 0 <= s.acceptance_rate < 1:
        return f"serving.acceptance_rate must be in [0, 1), got {s.acceptance_rate}"
    if s.gpu_memory_utilization is not None and not 0.1 <= s.gpu_memory_utilization <= 1:
        return f"serving.gpu_memory_utilization must be in [0.1, 1], got {s.gpu_memory_utilization}"
    for name in ("max_num_seqs", "max_num_batched_tokens", "kv_block_size"):
        value = getattr(s, name)
        if value is not None and value < 1:
            return f"serving.{name} must be at least 1, got {value}"
    if s.step_time_factor is not None and not 0.01 <= s.step_time_factor <= 100:
        return f"serving.step_time_factor must be between 0.01 and 100, got {s.step_time_factor}"
    if not 0 <= s.speculative_tokens <= 16:
        return f"serving.speculative_tokens must be between 0 and 16, got {s.speculative_tokens}"
    return None


def _length_problem(s: ServingSpec) -> str | None:
    """Prompt and output lengths given as a mean: at least one token."""
    for dist, name in ((s.prompt_len, "prompt_len"), (s.output_len, "output_len")):
        if dist is not None and not dist.histogram and dist.mean < 1:
            return f"serving.{name} must be at least 1 token, got {dist.mean}"
    return None


def read_histogram(path: Path) -> tuple[list[int], list[float]]:
    """A CSV of ``tokens,count`` rows (a header line is skipped)."""
    if not path.is_file():
        raise GpuwiseError(f"length histogram {path} does not exist")
    lengths: list[int] = []
    weights: list[float] = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        parts = [p.strip() for p in line.split(",")]
        if not line.strip() or (n == 1 and not parts[0].replace(".", "").isdigit()):
            continue
        try:
            length, weight = int(float(parts[0])), float(parts[1])
        except (IndexError, ValueError):
            raise GpuwiseError(f"{path}:{n}: expected 'tokens,count', got {line!r}") from None
        if length < 1 or weight < 0:
            raise GpuwiseError(f"{path}:{n}: tokens must be ≥ 1 and count ≥ 0, got {line!r}")
        lengths.append(length)
        weights.append(weight)
    if not lengths or not sum(weights):
        raise GpuwiseError(f"{path}: no 'tokens,count' rows")
    return lengths, weights
