"""The CPU peak from the microarchitecture table, on /proc/cpuinfo texts of several CPUs (written here from
public facts: vendor, family/model numbers and flags as Linux prints them for these parts), the band that
judges a figure (failing too low and too high), and the median headline of the CPU sweep."""

from __future__ import annotations

import pytest

from gpuwise.bench import matmul
from gpuwise.bench.cpu_info import parse_cpuinfo
from gpuwise.bench.cpu_uarch import TURBO_ALLOWANCE, lookup, table
from gpuwise.bench.plausibility import matmul_in_band, matmul_verdict
from gpuwise.bench.timing import Samples
from gpuwise.bench.types import MatmulFigure

AVX2 = "fpu sse sse2 ht avx fma avx2"
AVX512 = AVX2 + " avx512f avx512dq avx512cd avx512bw avx512vl avx512_vnni"


def x86(
    vendor: str, family: int, model: int, name: str, flags: str, cores: int = 4, mhz: float = 2000.0
) -> str:
    return (
        f"processor\t: 0\nvendor_id\t: {vendor}\ncpu family\t: {family}\nmodel\t\t: {model}\n"
        f"model name\t: {name}\ncpu MHz\t\t: {mhz}\nsiblings\t: {2 * cores}\ncpu cores\t: {cores}\n"
        f"flags\t\t: {flags}\n\nprocessor\t: 1\n"
    )


def arm(part: str, features: str) -> str:
    return (
        "processor\t: 0\nBogoMIPS\t: 243.75\n"
        f"Features\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics {features}\n"
        f"CPU implementer\t: 0x41\nCPU architecture: 8\nCPU variant\t: 0x1\nCPU part\t: {part}\n\n"
    )


# (cpuinfo text, family expected, fp32 FLOP/cycle/core, bf16 FLOP/cycle/core or None)
CPUS = {
    "EPYC 9654 (Zen 4)": (
        x86("AuthenticAMD", 25, 17, "AMD EPYC 9654 96-Core Processor", AVX512 + " avx512_bf16"),
        "AMD Zen 4", 32, 64,
    ),
    "Ryzen 9 7950X (Zen 4)": (
        x86("AuthenticAMD", 25, 97, "AMD Ryzen 9 7950X 16-Core Processor", AVX512 + " avx512_bf16"),
        "AMD Zen 4", 32, 64,
    ),
    "EPYC 7763 (Zen 3)": (x86("AuthenticAMD", 25, 1, "AMD EPYC 7763", AVX2), "AMD Zen 3", 32, None),
    "EPYC 7742 (Zen 2)": (x86("AuthenticAMD", 23, 49, "AMD EPYC 7742", AVX2), "AMD Zen 2", 32, None),
    "EPYC 7601 (Zen)": (x86("AuthenticAMD", 23, 1, "AMD EPYC 7601", AVX2), "AMD Zen / Zen+", 16, None),
    "EPYC 9755 (Zen 5)": (
        x86("AuthenticAMD", 26, 2, "AMD EPYC 9755 128-Core Processor", AVX512 + " avx512_bf16"),
        "AMD Zen 5", 64, 128,
    ),
    "Xeon Gold 6148 (Skylake-SP)": (
        x86("GenuineIntel", 6, 85, "Intel(R) Xeon(R) Gold 6148 CPU @ 2.40GHz", AVX512),
        "Intel Skylake-SP / Cascade Lake / Cooper Lake", 64, None,
    ),
    "Xeon Platinum 8380 (Ice Lake-SP)": (
        x86("GenuineIntel", 6, 106, "Intel(R) Xeon(R) Platinum 8380 CPU @ 2.30GHz", AVX512),
        "Intel Ice Lake-SP", 64, None,
    ),
    "Cloud VM, generic name (Ice Lake-SP)": (
        x86("GenuineIntel", 6, 106, "Intel(R) Xeon(R) Processor @ 2.80GHz", AVX512),
        "Intel Ice Lake-SP", 64, None,
    ),
    "Xeon Platinum 8480+ (Sapphire Rapids)": (
        x86("GenuineIntel", 6, 143, "Intel(R) Xeon(R) Platinum 8480+", AVX512 + " avx512_bf16 amx_bf16"),
        "Intel Sapphire Rapids / Emerald Rapids", 64, 1024,
    ),
    "Core i7-6700 (Skylake client)": (
        x86("GenuineIntel", 6, 94, "Intel(R) Core(TM) i7-6700 CPU @ 3.40GHz", AVX2),
        "Intel Haswell / Broadwell / Skylake client", 32, None,
    ),
    "Graviton2 (Neoverse N1)": (arm("0xd0c", "asimdhp cpuid asimdrdm asimddp"), "Arm Neoverse N1", 16, None),
    "Graviton3 (Neoverse V1)": (arm("0xd40", "sve bf16 i8mm svebf16"), "Arm Neoverse V1", 32, 64),
    "Grace (Neoverse V2)": (arm("0xd4f", "sve sve2 bf16 i8mm svebf16"), "Arm Neoverse V2", 32, 64),
}  # fmt: skip


@pytest.mark.parametrize("name", CPUS)
def test_the_table_row_is_picked_from_cpuinfo(name):
    text, family, fp32, bf16 = CPUS[name]
    cpu = parse_cpuinfo(text, usable_cpus=8, max_khz=3_000_000)
    assert cpu.uarch is not None and cpu.uarch.family == family
    assert cpu.cores == (8 if "Neoverse" in family else 4)  # x86 texts have SMT 2, Arm has none
    peak, how = cpu.peak_tflops("fp32")
    assert peak == pytest.approx(cpu.cores * 3.0e9 * fp32 / 1e12) and family in how
    assert "3.00 GHz (cpufreq cpuinfo_max_freq, the boost clock)" in how
    bf16_peak = cpu.peak_tflops("bf16")[0]
    assert bf16_peak == (None if bf16 is None else pytest.approx(cpu.cores * 3.0e9 * bf16 / 1e12))


def test_zen4_avx512_is_not_counted_as_512_bit_fma():
    text = CPUS["EPYC 9654 (Zen 4)"][0]
    cpu = parse_cpuinfo(text, 8, max_khz=3_700_000)
    assert cpu.fp32_flops_per_cycle() == 64  # what the flags alone would claim (the old, wrong peak)
    assert cpu.per_cycle("fp32")[0] == 32 and "2 x 256-bit FMA" in cpu.per_cycle("fp32")[1]


def test_without_cpufreq_the_current_clock_is_used_and_said():
    cpu = parse_cpuinfo(CPUS["Cloud VM, generic name (Ice Lake-SP)"][0], 2, max_khz=None)
    assert cpu.clock_ghz == pytest.approx(2.0) and not cpu.clock_is_boost
    assert "/proc/cpuinfo cpu MHz (current)" in cpu.peak_tflops("fp32")[1]
    low, high, why = cpu.plausible_pct()
    assert (low, high) == (50.0, 100.0 * TURBO_ALLOWANCE) and "boost clock is not visible" in why
    boosted = parse_cpuinfo(CPUS["Cloud VM, generic name (Ice Lake-SP)"][0], 2, max_khz=3_500_000)
    assert boosted.plausible_pct()[:2] == (50.0, 100.0)


def test_an_unknown_core_falls_back_to_the_flags_and_says_so():
    cpu = parse_cpuinfo(x86("GenuineIntel", 6, 999, "Future Xeon", AVX512), 4, max_khz=2_000_000)
    assert cpu.uarch is None and cpu.identity == "GenuineIntel:6:999"
    assert "unknown core (GenuineIntel:6:999)" in cpu.peak_tflops("fp32")[1]
    assert lookup("HygonGenuine:24:1") is None and lookup("GenuineIntel:x:1") is None


def test_every_row_is_consistent_and_sourced():
    for row in table():
        assert row.fp32_flop_per_cycle == row.fma_units * row.vector_bits // 32 * 2, row.family
        assert row.source and 0 < row.blas_low_pct < row.blas_high_pct <= 100


def figure(median_tflops: float, peak_tflops: float | None = 1.0) -> MatmulFigure:
    return MatmulFigure("fp32", median_tflops * 1.2, (64, 64, 64), median_tflops, 1, peak_tflops, "test peak")


@pytest.mark.parametrize(
    ("median", "ok", "word"),
    [(0.07, False, "NOT plausible: below"), (0.45, False, "NOT plausible: below"), (0.8, True, "plausible"),
     (1.6, False, "NOT plausible: above")],
)  # fmt: skip
def test_the_band_fails_too_low_and_too_high(median, ok, word):
    band = (50.0, 100.0, "test band")
    assert matmul_in_band(figure(median), band) is ok
    note = matmul_verdict(figure(median), band)
    assert word in note and f"median {median * 100:.0f} % of peak" in note
    assert matmul_in_band(figure(0.5, None), band) is None


def test_the_cpu_headline_is_the_median_shape_with_its_quartiles():
    # shape A has one lucky call (best-of would pick it); shape B is faster in the median
    calls = {
        (100, 100, 100): Samples([0.001, 0.01, 0.01, 0.01, 0.01]),
        (200, 100, 100): Samples([0.004, 0.004, 0.005, 0.006, 0.006]),
    }
    shapes = list(calls)
    mamf = matmul.best_of_sweep("fp32", shapes, calls.__getitem__, None, "-")
    assert mamf.best_shape_mnk == (100, 100, 100)
    cpu = matmul.best_of_sweep("fp32", shapes, calls.__getitem__, None, "-", rank_by_median=True)
    assert cpu.best_shape_mnk == (200, 100, 100) and cpu.calls == 5
    flops = 2 * 200 * 100 * 100
    assert cpu.median_tflops_at_best_shape == pytest.approx(flops / 0.005 / 1e12)
    assert cpu.spread_tflops == pytest.approx((flops / 0.006 / 1e12, flops / 0.004 / 1e12))
