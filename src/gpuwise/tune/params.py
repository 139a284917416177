"""Settings the script owns, passed through its own flags: ``--param batch_size=--batch-size:8,16,32``.

The batch is special: a larger micro-batch with the same gradient-accumulation steps trains another
model (the effective batch, micro-batch × accumulation, sets the noise of each update and the
learning-rate schedule's meaning). So with ``--accum=--grad-accum`` each batch trial gets the
accumulation that keeps the effective batch of the command as given; a batch that cannot keep it
(48 from 16 × 3 with a batch of 32) is skipped and said so. Lightning's ``BatchSizeFinder`` and
accelerate's ``find_executable_batch_size`` change the effective batch silently; ``--accum none``
states that the user accepts it, and every such trial is labelled.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gpuwise.errors import GpuwiseError

BATCH = "batch_size"


@dataclass(frozen=True)
class Param:
    """One ``--param``: the setting's name, the script's flag that sets it, the values to try (as text)."""

    name: str
    flag: str
    values: tuple[str, ...]


@dataclass(frozen=True)
class BatchPlan:
    """What a batch value becomes: the accumulation that keeps the effective batch, or why not."""

    batch: int
    accum: int | None
    skipped: str | None = None


@dataclass(frozen=True)
class ParamSpace:
    """The checked ``--param``/``--accum`` options and the batch and accumulation the command runs with.

    ``accum_flag`` is the script's accumulation flag, ``"none"`` when the user accepts a changed effective
    batch, None when no batch param was given. ``base_batch``/``base_accum`` are the values in the command
    as written (accumulation 1 when the command gives none).
    """

    params: tuple[Param, ...] = ()
    accum_flag: str | None = None  # None: no accumulation flag given; "none": effective batch may change
    base_batch: int | None = None
    base_accum: int = 1
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def batch(self) -> Param | None:
        """The ``batch_size`` param, or None when the batch is not searched."""
        return next((p for p in self.params if p.name == BATCH), None)

    @property
    def keeps_effective_batch(self) -> bool:
        """True when each batch trial adjusts the accumulation to keep the effective batch."""
        return self.accum_flag not in (None, "none")

    @property
    def effective_batch(self) -> int | None:
        """Samples per optimizer step as written (batch × accumulation); None without a batch."""
        return self.base_batch * self.base_accum if self.base_batch else None

    def batch_plans(self) -> list[BatchPlan]:
        """One plan per batch value, ascending: the accumulation that keeps the effective batch (None when it
        is not kept), or the reason the value is skipped (the effective batch is not a whole multiple of
        it). Empty when the batch is not searched.
        """
        batch = self.batch
        if batch is None:
            return []
        plans = []
        for value in sorted({int(v) for v in batch.values}):
            if not self.keeps_effective_batch or self.effective_batch is None:
                plans.append(BatchPlan(value, None))
            elif self.effective_batch % value:
                plans.append(
                    BatchPlan(
                        value,
                        None,
                        f"a batch of {value} cannot keep the effective batch {self.effective_batch} "
                        f"({self.base_batch} × {self.base_accum}) with whole accumulation steps",
                    )
                )
            else:
                plans.append(BatchPlan(value, self.effective_batch // value))
        return plans


def parse_param(option: str) -> Param:
    """``NAME=FLAG:V1,V2`` (``batch_size=--batch-size:8,16,32``)."""
    name, sep, rest = option.partition("=")
    flag, sep2, values = rest.rpartition(":")
    name = name.strip().replace("-", "_")
    shown = [v.strip() for v in values.split(",") if v.strip()]
    if not sep or not sep2 or not name or not flag.startswith("-") or not shown:
        raise GpuwiseError(
            f"--param {option!r}: write NAME=FLAG:VALUE[,VALUE...], "
            "e.g. --param batch_size=--batch-size:16,32,64"
        )
    if name == BATCH and not all(v.isdigit() and int(v) > 0 for v in shown):
        raise GpuwiseError(f"--param {option!r}: batch sizes must be whole numbers > 0")
    return Param(name, flag, tuple(shown))


def flag_value(argv: list[str], flag: str) -> str | None:
    """The value the command gives ``flag`` (``--flag V`` or ``--flag=V``; the last one wins)."""
    value = None
    for i, arg in enumerate(argv):
        if arg == flag and i + 1 < len(argv):
            value = argv[i + 1]
        elif arg.startswith(flag + "="):
            value = arg[len(flag) + 1 :]
    return value


def with_flag(argv: list[str], flag: str, value: str) -> list[str]:
    """The command with ``flag`` set to ``value``: replaced where the command gives it, else appended."""
    out, i, found = [], 0, False
    while i < len(argv):
        arg = argv[i]
        if arg == flag and i + 1 < len(argv):
            out += [flag, value]
            i, found = i + 2, True
            continue
        if arg.startswith(flag + "="):
            out.append(f"{flag}={value}")
            found = True
        else:
            out.append(arg)
        i += 1
    return out if found else [*out, flag, value]


def param_space(argv: list[str], params: list[Param], accum: str | None) -> ParamSpace:
    """Check the params against the command and read the batch and accumulation it runs with."""
    names = [p.name for p in params]
    if len(set(names)) != len(names):
        raise GpuwiseError(f"--param names a setting twice: {', '.join(names)}")
    batch = next((p for p in params if p.name == BATCH), None)
    if batch is None:
        if accum is not None:
            raise GpuwiseError("--accum only matters with --param batch_size=FLAG:VALUES")
        return ParamSpace(tuple(params))
    if accum is None:
        raise GpuwiseError(
            "--param batch_size changes the effective batch (micro-batch × accumulation) unless gpuwise "
            "can adjust the accumulation: give the script's flag, e.g. --accum=--grad-accum, or "
            "--accum none to accept a changed effective batch"
        )
    text = flag_value(argv, batch.flag)
    base_batch = int(text) if text and text.isdigit() else None
    notes: list[str] = []
    base_accum = 1
    if accum != "none":
        if not accum.startswith("-"):
            raise GpuwiseError(f"--accum {accum!r}: give the script's flag (e.g. --grad-accum) or none")
        if base_batch is None:
            raise GpuwiseError(
                f"to keep the effective batch, the command must give its batch: add {batch.flag} N after --"
            )
        given = flag_value(argv, accum)
        if given is not None and not given.isdigit():
            raise GpuwiseError(f"the command's {accum} {given!r} is not a whole number")
        base_accum = int(given) if given else 1
        if given is None:
            notes.append(f"the command gives no {accum}: taken as 1")
    return ParamSpace(tuple(params), accum, base_batch, base_accum, tuple(notes))


__all__ = [
    "BATCH",
    "BatchPlan",
    "Param",
    "ParamSpace",
    "flag_value",
    "param_space",
    "parse_param",
    "with_flag",
]
