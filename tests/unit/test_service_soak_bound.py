"""The service soak (bench/service_soak.py) measures growth after its warm-up."""

from __future__ import annotations

from bench.service_soak import growth


def test_growth_is_the_peak_after_the_warm_up_less_the_warm_up_peak() -> None:
    samples = [(1.0, 300.0), (50.0, 340.0), (61.0, 330.0), (120.0, 410.0), (180.0, 400.0)]
    assert growth(samples, 60.0) == (340.0, 70.0)


def test_flat_memory_after_the_warm_up_is_no_growth() -> None:
    samples = [(1.0, 300.0), (30.0, 350.0), (90.0, 345.0), (150.0, 349.0)]
    baseline, grown = growth(samples, 60.0) or (0.0, 1.0)
    assert (baseline, grown) == (350.0, -1.0)


def test_no_sample_after_the_warm_up_measures_nothing() -> None:
    assert growth([(1.0, 300.0), (30.0, 310.0)], 60.0) is None
