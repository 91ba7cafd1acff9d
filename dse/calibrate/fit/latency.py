"""Latency corrections by quadratic programs (cvxpy): arrays in, coefficients out.

For one kernel group with phase times `F[i] = (t_pro, t_main, t_epi)` (from the analytical timeline)
and measured latencies `y[i]`, find `c = (lambda_pro, lambda_main, lambda_epi, eps_s)` minimizing the
squared relative error (EnergAIzer eq. 4, divided by y so that short and long kernels weigh alike)

    sum_i ((F[i] . lambda + eps - y[i]) / y[i])^2 + ridge * |lambda - 1|^2

subject to explicit bounds `lambda_pro >= 0`, `lambda_main >= 1`, `lambda_epi >= 1`, `eps >= 0`. The
bounds make the corrected model an upper bound of its ideal mainloop + epilogue, which carry all the
compulsory work: so it can never fall below the roofline (see `dse.perf.pipeline`). The small ridge
keeps coefficients of phases that a group never exercises (all-zero columns) at 1.

The math and load derates (>= 1, `PhaseCoeffs`) enter the mainloop non-linearly (inside a max), so
`fit_group` scans a short grid (one derate at a time, the other at 1), solves one QP per value, and
keeps the best.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from dse.errors import CalibrationError
from dse.perf.types import PhaseCoeffs

try:
    import cvxpy as cp
except ImportError as exc:  # pragma: no cover - cvxpy is a declared dependency
    raise ImportError("dse.calibrate.fit.latency needs cvxpy: pip install cvxpy") from exc

LOWER_BOUNDS: tuple[float, float, float] = (0.0, 1.0, 1.0)  # lambda_pro, lambda_main, lambda_epi
DERATE_GRID: tuple[float, ...] = (1.0, 1.05, 1.1, 1.15, 1.2, 1.3, 1.4, 1.6, 1.8, 2.0)
_EPS_SCALE_S = 1e-6  # eps is solved in microseconds for conditioning
_RIDGE = 1e-4
_SOLVERS = ("CLARABEL", "OSQP", "SCS")  # tried in order


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupFit:
    """One group's fitted coefficients and how well they fit their own samples."""

    coeffs: PhaseCoeffs
    num_samples: int
    mape: float
    status: str


def _huber_loss(resid: cp.Expression, m: float) -> cp.Expression:
    # cvxpy annotates the Huber threshold M as int, but it takes any positive number.
    return 2.0 * m * cp.sum(cp.huber(resid, m))  # type: ignore[arg-type]


def fit_phase_coeffs(
    features_s: np.ndarray,
    latency_s: np.ndarray,
    *,
    lower: tuple[float, float, float] = LOWER_BOUNDS,
    ridge: float = _RIDGE,
    math_derate: float = 1.0,
    load_derate: float = 1.0,
    huber_m: float | None = None,
) -> GroupFit:
    """Solve the QP for one group.

    Args:
        features_s: [N, 3] ideal prologue, mainloop (at `math_derate`) and epilogue times.
        latency_s: [N] measured latencies (> 0).
        lower: lower bounds of the three lambdas.
        ridge: weight of the pull of the lambdas towards 1.
        math_derate, load_derate: recorded in the result (the features must already include them).

    Raises:
        CalibrationError: on empty or non-finite input, or when the solver fails.
    """
    f = np.asarray(features_s, dtype=float)
    y = np.asarray(latency_s, dtype=float)
    if f.ndim != 2 or f.shape[1] != 3 or f.shape[0] != y.shape[0] or y.size == 0:
        raise CalibrationError(f"fit needs [N, 3] features and N latencies, got {f.shape} and {y.shape}")
    if not (np.all(np.isfinite(f)) and np.all(np.isfinite(y)) and np.all(y > 0)):
        raise CalibrationError("fit inputs must be finite and latencies positive")
    x = np.concatenate([f, np.full((y.size, 1), _EPS_SCALE_S)], axis=1) / y[:, None]
    coef = cp.Variable(4)
    resid = x @ coef - 1.0
    loss = cp.sum_squares(resid) if huber_m is None else _huber_loss(resid, huber_m)
    objective = loss / y.size + ridge * cp.sum_squares(coef[:3] - 1.0)
    constraints = [coef[0] >= lower[0], coef[1] >= lower[1], coef[2] >= lower[2], coef[3] >= 0.0]
    problem = cp.Problem(cp.Minimize(objective), constraints)
    errors = []
    for solver in _SOLVERS:
        try:
            problem.solve(solver=solver)
        except (cp.SolverError, ValueError) as exc:
            errors.append(f"{solver}: {exc}")
            continue
        if coef.value is not None and problem.status in (cp.OPTIMAL, cp.OPTIMAL_INACCURATE):
            break
        errors.append(f"{solver}: status {problem.status}")
    else:
        raise CalibrationError(f"latency fit did not converge ({'; '.join(errors)})")
    c = np.maximum(np.asarray(coef.value, dtype=float), [lower[0], lower[1], lower[2], 0.0])
    pred = x @ c
    return GroupFit(
        coeffs=PhaseCoeffs(
            lambda_pro=float(c[0]),
            lambda_main=float(c[1]),
            lambda_epi=float(c[2]),
            eps_s=float(c[3] * _EPS_SCALE_S),
            math_derate=float(math_derate),
            load_derate=float(load_derate),
        ),
        num_samples=int(y.size),
        mape=float(np.mean(np.abs(pred - 1.0))),
        status=str(problem.status),
    )


def fit_group(
    features_at: Callable[[float, float], np.ndarray],
    latency_s: np.ndarray,
    *,
    derates: tuple[float, ...] = DERATE_GRID,
    lower: tuple[float, float, float] = LOWER_BOUNDS,
    huber_m: float | None = None,
) -> GroupFit:
    """Fit one group, scanning the math derate.

    Args:
        features_at: (math derate, load derate) -> [N, 3] phase times (`Timeline.features` restricted
            to the group's rows).
        latency_s: [N] measured latencies.
    """
    best: GroupFit | None = None
    pairs = [(d, 1.0) for d in derates] + [(1.0, d) for d in derates if d != 1.0]
    failures = []
    for math_derate, load_derate in pairs:
        try:
            fit = fit_phase_coeffs(
                features_at(math_derate, load_derate),
                latency_s,
                lower=lower,
                math_derate=math_derate,
                load_derate=load_derate,
                huber_m=huber_m,
            )
        except CalibrationError as exc:
            failures.append(str(exc))
            continue
        if best is None or fit.mape < best.mape - 1e-9:
            best = fit
    if best is None:
        raise CalibrationError(f"no derate gave a converged fit: {failures[0]}")
    return best
