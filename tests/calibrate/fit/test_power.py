"""The power-coefficient QP: recovers known coefficients, honours bounds, rejects bad input."""

from __future__ import annotations

import numpy as np
import pytest

from dse.calibrate.fit.power import PowerRows, fit_power_rows, mape
from dse.errors import CalibrationError

TRUE = np.array([8e-12, 3e-12, 0.4e-12, 2e-12, 0.0, 1.1, 3e-10, 1e-10])


def _rows(n=60, noise=0.0, seed=0):
    rng = np.random.default_rng(seed)
    wall = rng.uniform(1e-3, 1e-1, n)
    # Features: work-like magnitudes per coefficient over the wall time (J per unit coefficient).
    mags = np.array([1e13, 1e13, 3e14, 1e12, 1e11, 50.0, 2e11, 5e10])
    x = rng.uniform(0.0, 1.0, (n, 8)) * mags * wall[:, None]
    x[:, 4] = 0.0  # an unseen column (no SFU work)
    idle = rng.uniform(40, 120, n)
    power = idle + x @ TRUE / wall
    power *= 1.0 + noise * rng.standard_normal(n)
    return PowerRows(features_j=x, wall_s=wall, idle_w=idle, power_w=power)


def test_recovers_known_coefficients():
    rows = _rows()
    fit = fit_power_rows(rows, ridge=1e-9)
    seen = np.arange(8) != 4
    np.testing.assert_allclose(fit.coeffs[seen], TRUE[seen], rtol=1e-3)
    assert fit.coeffs[4] == pytest.approx(0.0, abs=1e-15)
    assert fit.mape < 1e-4
    assert fit.status.startswith("optimal")


def test_unseen_column_goes_to_its_prior_and_bounds_hold():
    rows = _rows(noise=0.02)
    prior = TRUE.copy()
    prior[4] = 5e-12
    lower = np.zeros(8)
    upper = np.full(8, np.inf)
    lower[5] = upper[5] = 1.0  # fix dram_scale
    fit = fit_power_rows(rows, lower=lower, upper=upper, prior=prior, ridge=1e-4)
    assert fit.coeffs[4] == pytest.approx(5e-12, rel=1e-3)
    assert fit.coeffs[5] == 1.0
    assert np.all(fit.coeffs >= 0)
    assert fit.mape == pytest.approx(mape(fit.predicted_w, rows.power_w))


def test_non_negative_even_when_least_squares_wants_negative():
    rows = _rows()
    neg = PowerRows(
        features_j=rows.features_j, wall_s=rows.wall_s, idle_w=rows.idle_w + 200.0, power_w=rows.power_w + 1.0
    )
    fit = fit_power_rows(neg)
    assert np.all(fit.coeffs >= 0)


def test_stack_and_validation():
    a, b = _rows(10), _rows(5, seed=1)
    s = PowerRows.stack([a, b])
    assert s.features_j.shape == (15, 8) and s.weight.shape == (15,)
    with pytest.raises(CalibrationError, match="shape"):
        PowerRows(features_j=np.ones((3, 8)), wall_s=np.ones(2), idle_w=np.ones(3), power_w=np.ones(3))
    with pytest.raises(CalibrationError, match="positive"):
        PowerRows(
            features_j=np.ones((2, 8)), wall_s=np.ones(2), idle_w=np.ones(2), power_w=np.array([1.0, 0.0])
        )
    with pytest.raises(CalibrationError, match="bounds"):
        fit_power_rows(a, lower=-np.ones(8))


def test_a_relative_prior_keeps_an_energy_the_rows_barely_exercise():
    """Two columns the rows cannot tell apart (proportional features), one making 99% of the dynamic power at
    the prior and one 1%, and rows asking for 10% more. The cheapest change in relative terms moves each
    coefficient in proportion to its share of the power (minimize sum (d_j / p_j)^2 subject to
    sum a_j d_j = delta gives d_j / p_j proportional to a_j p_j): the small one stays within 0.2% of its prior
    while the large one takes the 10%. Scaled only by the column magnitudes (the default), both move by the
    same share of the power, which is +10% on the large column's value but +10x on the small one's."""
    rng = np.random.default_rng(0)
    n = 40
    wall = rng.uniform(1e-3, 1e-2, n)
    work = rng.uniform(0.5, 1.0, n) * wall
    x = np.zeros((n, 8))
    x[:, 0], x[:, 1] = work * 99.0, work * 1.0  # J per unit coefficient; prior 1 each: 99% and 1%
    prior = np.zeros(8)
    prior[:2] = 1.0
    idle = np.full(n, 50.0)
    power = idle + 1.1 * (x @ prior) / wall
    rows = PowerRows(features_j=x, wall_s=wall, idle_w=idle, power_w=power)
    relative = fit_power_rows(rows, prior=prior, ridge=1e-6, prior_scale=prior).coeffs
    assert relative[1] == pytest.approx(1.0, abs=2e-3)
    assert relative[0] == pytest.approx(1.0 + 0.1 * 100 / 99, rel=2e-3)
    default = fit_power_rows(rows, prior=prior, ridge=1e-6).coeffs
    assert default[1] > 5.0  # what a GEMM suite did to the L2 and CUDA-core energies (8x, 46x)
