"""Energy coefficients by non-negative least squares (cvxpy): arrays in, `PowerCoeffs` out.

The power model is linear in its coefficients (`dse.perf.power`): for a measured run i (one kernel in a
loop, or a whole forward pass) at clock f_i with predicted wall time T_i,

    P_pred_i = P_idle(f_i) + (X_i . c) / T_i

where X_i (J per unit of each coefficient, `PowerCoeffs.coeff_names()` order) sums the kernels' work
features and the host-gap feature. With measured power P_i the relative error is linear in c:

    r_i = (X_i / (T_i P_i)) . c - (P_i - P_idle(f_i)) / P_i

and the fit solves (EnergAIzer IV-C, with relative rather than absolute errors so that small and large
runs weigh alike)

    minimize   sum_i w_i r_i^2 + ridge * sum_j ((c_j - prior_j) / scale_j)^2
    subject to lower_j <= c_j <= upper_j,   lower_j >= 0

Columns are scaled by their typical magnitude before solving (coefficients span 1e-13 to 1), so the
problem is well conditioned; `scale_j` is that magnitude, which makes the ridge dimensionless. The ridge
(default tiny) only pins coefficients the data cannot see (an all-zero column) to their prior.

Pure: no file or dataset access here; `dse.calibrate.validate_power` assembles the rows.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dse.errors import CalibrationError

try:
    import cvxpy as cp
except ImportError as exc:  # pragma: no cover - cvxpy is a declared dependency
    raise ImportError("dse.calibrate.fit_power needs cvxpy: pip install cvxpy") from exc


@dataclass(frozen=True, slots=True, kw_only=True)
class PowerRows:
    """The linear system of a power fit: one row per measured run.

    features_j: [N, K] energy per unit coefficient; wall_s: [N] predicted wall time; idle_w: [N] idle power
    at the run's clock; power_w: [N] measured average power; weight: [N] (default 1).
    """

    features_j: np.ndarray
    wall_s: np.ndarray
    idle_w: np.ndarray
    power_w: np.ndarray
    weight: np.ndarray | None = None

    def __post_init__(self) -> None:
        n = self.features_j.shape[0]
        for name in ("wall_s", "idle_w", "power_w"):
            if getattr(self, name).shape != (n,):
                raise CalibrationError(
                    f"PowerRows: {name} has shape {getattr(self, name).shape}, expected ({n},)"
                )
        if not (np.all(self.wall_s > 0) and np.all(self.power_w > 0)):
            raise CalibrationError("PowerRows: wall times and measured powers must be positive")

    def predict_w(self, c: np.ndarray) -> np.ndarray:
        return self.idle_w + self.features_j @ c / self.wall_s

    @staticmethod
    def stack(parts: list[PowerRows]) -> PowerRows:
        return PowerRows(
            features_j=np.vstack([p.features_j for p in parts]),
            wall_s=np.concatenate([p.wall_s for p in parts]),
            idle_w=np.concatenate([p.idle_w for p in parts]),
            power_w=np.concatenate([p.power_w for p in parts]),
            weight=np.concatenate(
                [p.weight if p.weight is not None else np.ones(len(p.wall_s)) for p in parts]
            ),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class PowerFit:
    """Fitted coefficient vector and how well it fits its own rows."""

    coeffs: np.ndarray
    predicted_w: np.ndarray
    mape: float
    status: str


def fit_power_rows(
    rows: PowerRows,
    *,
    lower: np.ndarray | None = None,
    upper: np.ndarray | None = None,
    prior: np.ndarray | None = None,
    ridge: float = 1e-6,
) -> PowerFit:
    """Solve the bounded, ridge-regularized relative least squares of the module docstring.

    Args:
        rows: the linear system.
        lower, upper: [K] bounds (default 0 and +inf); equal bounds fix a coefficient.
        prior: [K] values the ridge pulls towards (default 0).
        ridge: weight of the ridge, relative to one row's squared relative error.

    Raises:
        CalibrationError: negative lower bounds, lower > upper, or a solver failure.
    """
    x = np.asarray(rows.features_j, dtype=float)
    n, k = x.shape
    lower = np.zeros(k) if lower is None else np.asarray(lower, dtype=float)
    upper = np.full(k, np.inf) if upper is None else np.asarray(upper, dtype=float)
    prior = np.zeros(k) if prior is None else np.asarray(prior, dtype=float)
    if np.any(lower < 0) or np.any(lower > upper):
        raise CalibrationError(
            f"fit_power_rows: bounds must satisfy 0 <= lower <= upper, got {lower}, {upper}"
        )
    a = x / (rows.wall_s * rows.power_w)[:, None]
    b = (rows.power_w - rows.idle_w) / rows.power_w
    w = np.ones(n) if rows.weight is None else np.asarray(rows.weight, dtype=float)
    sw = np.sqrt(w / w.sum())
    # Columns the data never exercise keep their prior (clipped to the bounds); the rest are solved for.
    c = np.clip(prior, lower, upper)
    seen = np.nonzero(np.abs(a).sum(axis=0) > 0)[0]
    status = "optimal"
    if seen.size:
        c[seen], status = _solve(a[:, seen], b, sw, lower[seen], upper[seen], prior[seen], ridge)
    pred = rows.predict_w(c)
    mape = float(np.mean(np.abs(pred - rows.power_w) / rows.power_w))
    return PowerFit(coeffs=c, predicted_w=pred, mape=mape, status=status)


def _solve(
    a: np.ndarray,
    b: np.ndarray,
    sw: np.ndarray,
    lower: np.ndarray,
    upper: np.ndarray,
    prior: np.ndarray,
    ridge: float,
) -> tuple[np.ndarray, str]:
    k = a.shape[1]
    # Column scale: the coefficient value that would explain all dynamic power by that column alone.
    scale = np.abs(b).mean() / np.abs(a).mean(axis=0)
    z = cp.Variable(k)  # c = scale * z
    objective = cp.sum_squares(cp.multiply(sw, (a * scale) @ z - b)) + ridge * cp.sum_squares(
        z - prior / scale
    )
    cons = [z >= lower / scale]
    finite = np.isfinite(upper)
    if finite.any():
        cons.append(z[np.nonzero(finite)[0]] <= upper[finite] / scale[finite])
    problem = cp.Problem(cp.Minimize(objective), cons)
    try:
        problem.solve(solver=cp.CLARABEL)
    except cp.error.SolverError:
        problem.solve()
    if z.value is None or problem.status not in ("optimal", "optimal_inaccurate"):
        raise CalibrationError(f"power fit failed: solver status {problem.status}")
    return np.clip(np.asarray(z.value) * scale, lower, upper), str(problem.status)


def mape(predicted: np.ndarray, measured: np.ndarray) -> float:
    """Mean absolute percentage error, as a fraction."""
    predicted, measured = np.asarray(predicted, dtype=float), np.asarray(measured, dtype=float)
    return float(np.mean(np.abs(predicted - measured) / np.abs(measured)))
