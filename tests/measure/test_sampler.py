"""Trace integration and alignment on synthetic traces with analytic integrals; the sampler thread."""

from __future__ import annotations

import math
import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dse.errors import MeasurementError
from dse.measure.sampler import PowerSampler, attribute_energy, trapezoid_energy_j


def piecewise_power(t):
    """100 W on [0, 1), 300 W on [1, 2.5), 50 W after: 575 J over [0, 3]."""
    return np.where(t < 1.0, 100.0, np.where(t < 2.5, 300.0, 50.0))


def test_piecewise_constant_power_integrates_to_the_known_energy():
    t = np.arange(0.0, 3.0 + 1e-12, 1e-3)
    energy = trapezoid_energy_j(t, piecewise_power(t))
    assert energy == pytest.approx(575.0, rel=1e-3)  # two steps, each off by at most dP * dt / 2


def test_sinusoidal_power_integrates_to_the_analytic_energy():
    period, a, b = 0.7, 0.13, 2.9

    def power(t):
        return 300.0 + 100.0 * np.sin(2 * np.pi * t / period)

    exact = 300.0 * (b - a) - 100.0 * period / (2 * np.pi) * (
        np.cos(2 * np.pi * b / period) - np.cos(2 * np.pi * a / period)
    )
    t = np.arange(0.0, 3.0, 0.01)  # the sampler's 10 ms
    assert trapezoid_energy_j(t, power(t), a, b) == pytest.approx(exact, rel=1e-4)


def test_window_edges_between_samples_are_interpolated():
    t = np.array([0.0, 1.0, 2.0, 3.0])
    p = 200.0 + 100.0 * t  # linear: the trapezoid rule is exact
    assert trapezoid_energy_j(t, p, 0.25, 2.6) == pytest.approx(200 * 2.35 + 50 * (2.6**2 - 0.25**2))
    # outside the samples, power is held at the end values
    assert trapezoid_energy_j(t, p, -1.0, 0.0) == pytest.approx(200.0)
    assert trapezoid_energy_j(t, p, 3.0, 4.0) == pytest.approx(500.0)


def test_unsorted_and_empty_traces():
    assert trapezoid_energy_j([2.0, 0.0, 1.0], [10.0, 10.0, 10.0]) == pytest.approx(20.0)
    with pytest.raises(MeasurementError, match="empty power trace"):
        trapezoid_energy_j([], [])
    with pytest.raises(ValueError):
        trapezoid_energy_j([0.0, 1.0], [1.0, 1.0], 1.0, 0.5)


@settings(max_examples=50, deadline=None)
@given(
    st.lists(st.floats(0.0, 1000.0), min_size=2, max_size=40),
    st.floats(0.0, 1.0),
    st.floats(0.0, 1.0),
)
def test_integration_is_additive_over_adjacent_windows(powers, f1, f2):
    t = np.linspace(0.0, 5.0, len(powers))
    a, c = 5.0 * min(f1, f2), 5.0 * max(f1, f2)
    b = 0.5 * (a + c)
    whole = trapezoid_energy_j(t, powers, a, c)
    assert trapezoid_energy_j(t, powers, a, b) + trapezoid_energy_j(t, powers, b, c) == pytest.approx(
        whole, rel=1e-9, abs=1e-9
    )


def test_attribution_of_an_operator_timeline_matches_the_integrals():
    t = np.linspace(0.0, 3.0, 7)  # coarse samples of a linear trace: exact
    p = 200.0 + 100.0 * t
    timeline = [("A", 0.0, 1.0), ("B", 1.5, 2.0), ("A", 2.0, 3.0)]
    result = attribute_energy(t, p, timeline, window=(0.0, 3.0))
    assert result.by_name["A"] == pytest.approx(250.0 + 450.0)  # int_0^1 + int_2^3 of 200 + 100 t
    assert result.by_name["B"] == pytest.approx(187.5)
    assert result.unattributed_j == pytest.approx(162.5)  # the gap 1.0 .. 1.5
    assert result.total_j == pytest.approx(1050.0)
    assert sum(result.by_name.values()) + result.unattributed_j == pytest.approx(result.total_j)
    assert result.busy_s == {"A": pytest.approx(2.0), "B": pytest.approx(0.5)}


def test_concurrent_operators_share_energy_and_intervals_are_clipped_to_the_window():
    t = np.array([0.0, 4.0])
    p = np.array([100.0, 100.0])
    result = attribute_energy(t, p, [("B", 1.0, 2.0), ("C", 1.5, 3.0), ("D", -1.0, 0.5)], window=(0.0, 3.0))
    assert result.by_name["B"] == pytest.approx(50.0 + 25.0)
    assert result.by_name["C"] == pytest.approx(25.0 + 100.0)
    assert result.by_name["D"] == pytest.approx(50.0)
    assert result.unattributed_j == pytest.approx(50.0)  # 0.5 .. 1.0
    assert result.total_j == pytest.approx(300.0)


def test_attribution_on_a_sampled_piecewise_trace():
    t = np.arange(0.0, 3.0 + 1e-12, 1e-3)
    ops = [("low", 0.0, 1.0), ("high", 1.0, 2.5), ("tail", 2.5, 3.0)]
    result = attribute_energy(t, piecewise_power(t), ops, window=(0.0, 3.0))
    assert result.by_name["low"] == pytest.approx(100.0, rel=2e-3)
    assert result.by_name["high"] == pytest.approx(450.0, rel=2e-3)
    assert result.by_name["tail"] == pytest.approx(25.0, rel=1e-2)
    assert result.total_j == pytest.approx(trapezoid_energy_j(t, piecewise_power(t)))


def test_sampler_thread_records_a_trace_synchronized_to_a_window():
    origin = time.perf_counter()

    def read_power_w() -> float:  # linear in time: any sample spacing integrates exactly
        return 100.0 + 400.0 * (time.perf_counter() - origin)

    aux_calls = []

    def read_aux() -> dict[str, float]:
        aux_calls.append(1)
        return {"sm_clock_hz": 1.41e9, "temp_c": 50.0}

    sampler = PowerSampler(read_power_w, period_s=0.002, read_aux=read_aux, aux_every=5)
    sampler.start()
    time.sleep(0.02)
    t0 = time.perf_counter()
    time.sleep(0.2)
    t1 = time.perf_counter()
    time.sleep(0.02)
    trace = sampler.stop()
    assert trace.t_s[0] < t0 and trace.t_s[-1] > t1
    assert trace.num_samples(t0, t1) >= 20
    assert np.all(np.diff(trace.t_s) > 0)
    exact = 100.0 * (t1 - t0) + 200.0 * ((t1 - origin) ** 2 - (t0 - origin) ** 2)
    # each sample is stamped at its read's midpoint; the read takes microseconds here
    assert trace.energy_j(t0, t1) == pytest.approx(exact, rel=1e-3)
    assert trace.aux_mean("sm_clock_hz", t0, t1) == pytest.approx(1.41e9)
    assert len(aux_calls) == trace.aux_t_s.size and trace.aux_t_s.size >= 5
    assert sampler.stop() is trace  # idempotent


def test_sampler_errors_surface_on_stop_and_context_manager_keeps_the_trace():
    calls = {"n": 0}

    def flaky() -> float:
        calls["n"] += 1
        if calls["n"] > 3:
            raise OSError("sensor gone")
        return 1.0

    sampler = PowerSampler(flaky, period_s=0.001)
    sampler.start()
    time.sleep(0.05)
    with pytest.raises(MeasurementError, match="power sampler failed: sensor gone"):
        sampler.stop()
    with PowerSampler(lambda: 5.0, period_s=0.001) as ok:
        time.sleep(0.01)
    assert ok.trace is not None and math.isclose(ok.trace.power_w.mean(), 5.0)
