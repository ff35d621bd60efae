"""The bench's share of peak: GFLOP/s above the measured matmul peak are a bench error, never a figure."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))

from common import isa_extensions, machine_line, peak_share, share_text


@pytest.mark.parametrize(
    ("gflops", "peak", "share"), [(100.0, 400.0, 0.25), (400.0, 400.0, 1.0), (0.0, 5.0, 0.0)]
)
def test_share_within_the_peak_is_a_figure(gflops, peak, share) -> None:
    assert peak_share(gflops, peak) == pytest.approx(share)
    assert f"{100 * share:.0f}% of {peak:.0f}" in share_text(gflops, peak)


@pytest.mark.parametrize(("gflops", "peak"), [(323.0, 207.0), (400.1, 400.0)])
def test_share_above_the_peak_is_a_bench_error(gflops, peak) -> None:
    assert peak_share(gflops, peak) is None
    text = share_text(gflops, peak)
    assert "BENCH ERROR" in text and "%" not in text


@pytest.mark.parametrize("peak", [0.0, -1.0, math.nan])
def test_no_peak_gives_no_share(peak) -> None:
    assert peak_share(10.0, peak) is None
    assert "no peak" in share_text(10.0, peak)


def test_machine_line_names_cpu_isa_and_blas(monkeypatch) -> None:
    from fmm_fast.core import machine

    monkeypatch.setattr(machine, "cpu_flags", lambda: frozenset({"avx2", "avx512f", "avx512_bf16"}))
    assert isa_extensions() == ["AVX2", "AVX-512", "AVX512_BF16"]
    line = machine_line()
    assert "AVX512_BF16" in line and "AMX" not in line and "torch BLAS" in line
