"""The latency QP: recovers known coefficients, respects its bounds, handles degenerate groups."""

from __future__ import annotations

import numpy as np
import pytest

from dse.calibrate.fit.latency import fit_group, fit_phase_coeffs
from dse.errors import CalibrationError


def _synthetic(n=200, seed=0):
    rng = np.random.default_rng(seed)
    features = np.stack(
        [rng.uniform(1e-6, 5e-6, n), rng.uniform(5e-6, 5e-3, n), rng.uniform(1e-7, 1e-5, n)], 1
    )
    return features


def test_recovers_exact_coefficients():
    f = _synthetic()
    truth = np.array([0.7, 1.3, 1.1])
    y = f @ truth + 4e-6
    fit = fit_phase_coeffs(f, y, ridge=0.0)
    got = fit.coeffs
    assert got.lambda_pro == pytest.approx(0.7, rel=1e-3)
    assert got.lambda_main == pytest.approx(1.3, rel=1e-4)
    assert got.lambda_epi == pytest.approx(1.1, rel=1e-3)
    assert got.eps_s == pytest.approx(4e-6, rel=1e-3)
    assert fit.mape < 1e-4


def test_bounds_hold_when_data_wants_less():
    f = _synthetic()
    y = f @ np.array([0.0, 0.6, 0.3])  # faster than ideal: infeasible for the bounds
    c = fit_phase_coeffs(f, y).coeffs
    assert c.lambda_main >= 1.0 and c.lambda_epi >= 1.0 and c.lambda_pro >= 0.0 and c.eps_s >= 0.0


def test_unused_phase_stays_neutral():
    f = _synthetic()
    f[:, 2] = 0.0  # a group that never runs an epilogue
    y = f[:, :2] @ np.array([1.0, 1.5]) + 1e-6
    assert fit_phase_coeffs(f, y).coeffs.lambda_epi == pytest.approx(1.0, abs=0.01)


def test_huber_resists_outliers():
    f = _synthetic()
    y = f @ np.array([1.0, 1.2, 1.0]) + 2e-6
    y[:10] *= 5.0  # 5 % gross outliers
    robust = fit_phase_coeffs(f, y, huber_m=0.05).coeffs
    plain = fit_phase_coeffs(f, y).coeffs
    assert abs(robust.lambda_main - 1.2) < abs(plain.lambda_main - 1.2)
    assert robust.lambda_main == pytest.approx(1.2, rel=0.02)


def test_derate_grid_picks_the_generating_derate():
    rng = np.random.default_rng(1)
    load, math = rng.uniform(1e-5, 1e-3, 300), rng.uniform(1e-5, 1e-3, 300)

    def features(dm, dl):
        return np.stack([np.zeros(300), np.maximum(dl * load, dm * math), np.zeros(300)], 1)

    y = features(1.3, 1.0) @ np.array([1.0, 1.1, 1.0]) + 1e-6
    fit = fit_group(features, y)
    assert fit.coeffs.math_derate == pytest.approx(1.3)
    assert fit.coeffs.load_derate == pytest.approx(1.0)
    assert fit.mape < 1e-3


def test_bad_input_is_rejected():
    with pytest.raises(CalibrationError):
        fit_phase_coeffs(np.ones((3, 2)), np.ones(3))
    with pytest.raises(CalibrationError):
        fit_phase_coeffs(np.ones((3, 3)), np.array([1.0, -1.0, 1.0]))
