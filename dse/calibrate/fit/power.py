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
problem is well conditioned. By default `scale_j` is that magnitude (the coefficient that would explain all
dynamic power alone), which makes the ridge dimensionless but weighs a change in every column by its share
of all the power: at a tiny ridge it only pins coefficients the data cannot see (an all-zero column) to
their prior, and leaves free those it cannot tell apart from others. `prior_scale = prior` makes it a
penalty on each coefficient's relative change instead (`dse.calibrate.fit.samples`), under which a
coefficient moves in proportion to its share of the rows' power.

The second half builds those rows from the kernel model: `workload_run` (a whole graph at a measured
clock, for the EnergAIzer forward passes, with host gaps) and `kernel_table` / `fit_through_cap` (single
kernels measured under a power cap at an unknown throttled clock, for the aiconfigurator H200 tables; that
problem is not convex and is searched with scipy, see `fit_through_cap`).

Pure: no file or dataset access here; `dse.calibrate.validate.power` loads the data and assembles rows.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from dse.errors import CalibrationError
from dse.hardware.spec import GpuSpec
from dse.perf.coeffs import PowerCoeffs
from dse.perf.dvfs import clock_table, highest_fitting_index
from dse.perf.host import HostCoeffs, LaunchPlan, launch_plan, schedule
from dse.perf.multiclock import RowEstimator, op_rows
from dse.perf.power import gap_feature, gpu_power_terms, power_features
from dse.workload.energaizer import as_precision as as_precision  # re-exported: fits re-type lists
from dse.workload.graph import WorkloadGraph

try:
    import cvxpy as cp
except ImportError as exc:  # pragma: no cover - cvxpy is a declared dependency
    raise ImportError("dse.calibrate.fit.power needs cvxpy: pip install cvxpy") from exc


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
    prior_scale: np.ndarray | None = None,
) -> PowerFit:
    """Solve the bounded, ridge-regularized relative least squares of the module docstring.

    Args:
        rows: the linear system.
        lower, upper: [K] bounds (default 0 and +inf); equal bounds fix a coefficient.
        prior: [K] values the ridge pulls towards (default 0).
        ridge: weight of the ridge, relative to one row's squared relative error.
        prior_scale: [K] the distance from the prior (in each coefficient's unit) that costs one ridge
            unit; entries that are not positive fall back to the column scale (default: all do).

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
        tol = None if prior_scale is None else np.asarray(prior_scale, dtype=float)[seen]
        c[seen], status = _solve(a[:, seen], b, sw, lower[seen], upper[seen], prior[seen], ridge, tol)
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
    prior_scale: np.ndarray | None,
) -> tuple[np.ndarray, str]:
    k = a.shape[1]
    # Column scale: the coefficient value that would explain all dynamic power by that column alone.
    scale = np.abs(b).mean() / np.abs(a).mean(axis=0)
    tol = scale if prior_scale is None else np.where(prior_scale > 0, prior_scale, scale)
    z = cp.Variable(k)  # c = scale * z
    objective = cp.sum_squares(cp.multiply(sw, (a * scale) @ z - b)) + ridge * cp.sum_squares(
        cp.multiply(scale / tol, z - prior / scale)
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


# ------------------------------------------------------------------------------------- rows from the model


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkloadRun:
    """One graph estimated at one clock: per-op arrays the fit and the validation need.

    latency_s and features_j ([n, K], `PowerCoeffs.coeff_names()` order) are per execution; count says how
    many times each op runs; plan is the graph's launch plan (`dse.perf.host.launch_plan`; None: no host).
    gap_j_per_s_unit is the gap feature per second of gap (num_sms * f * V^2).
    """

    sm_clock_hz: float
    count: np.ndarray
    latency_s: np.ndarray
    features_j: np.ndarray
    idle_w: float
    gap_j_per_s_unit: float
    plan: LaunchPlan | None = None

    @property
    def busy_s(self) -> float:
        return float(np.dot(self.count, self.latency_s))

    def wall_s(self, host: HostCoeffs | None) -> float:
        """Wall time under eager launches with `host` costs (`dse.perf.host`); None: GPU time only."""
        if host is None or self.plan is None:
            return self.busy_s
        return schedule(self.latency_s, self.plan, "eager", host, self.sm_clock_hz).wall_s

    def totals(self, host: HostCoeffs | None) -> tuple[float, np.ndarray]:
        """(wall_s, features_j [K]) of the whole graph with eager launches (`wall_s`)."""
        wall = self.wall_s(host)
        gap_total_s = wall - self.busy_s
        x = self.count @ self.features_j
        x[GAP_COLUMN] += gap_total_s * self.gap_j_per_s_unit
        return wall, x


GAP_COLUMN = PowerCoeffs.coeff_names().index("gap_j_per_sm_cycle")


def workload_run(
    graph: WorkloadGraph, gpu: GpuSpec, sm_clock_hz: float, coeffs: Any, rows_fn: RowEstimator = op_rows
) -> WorkloadRun:
    """Estimate `graph` at one clock (no power cap: the clock is the measured one)."""
    terms = gpu_power_terms(gpu)
    ops = list(graph.ops)
    a = rows_fn(ops, gpu, np.full(len(ops), float(sm_clock_hz)), coeffs)
    f = a["sm_clock_hz"]
    f0 = np.array(float(f.mean()))
    return WorkloadRun(
        sm_clock_hz=float(f0),
        count=np.array([op.count for op in ops], dtype=float),
        latency_s=a["latency_s"],
        features_j=power_features(
            a["util"], a["latency_s"], a["dram_bytes"], f, terms, tensor_flop=a.get("tensor_flop")
        ),
        idle_w=float(terms.idle_power_w(f0)),
        gap_j_per_s_unit=float(gap_feature(np.array(1.0), f0, terms)),
        plan=launch_plan(ops),
    )


def rows_from_runs(runs: list[WorkloadRun], power_w: np.ndarray, host: HostCoeffs | None) -> PowerRows:
    """The fit's linear system for whole-workload runs with measured average power (eager launches)."""
    tot = [r.totals(host) for r in runs]
    return PowerRows(
        features_j=np.array([x for _, x in tot]),
        wall_s=np.array([w for w, _ in tot]),
        idle_w=np.array([r.idle_w for r in runs]),
        power_w=np.asarray(power_w, dtype=float),
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class KernelTable:
    """Single kernels (measured in a loop) estimated on a clock grid, for fits through a power cap.

    features_j [C, N, K] per execution, latency_s [C, N], idle_w [C] on ascending clocks_hz.
    """

    clocks_hz: np.ndarray
    latency_s: np.ndarray
    features_j: np.ndarray
    idle_w: np.ndarray

    def power_w(self, c: np.ndarray) -> np.ndarray:
        """[C, N] predicted power at every clock."""
        return self.idle_w[:, None] + self.features_j @ c / self.latency_s

    def effective_index(self, c: np.ndarray, f_req: float, cap_w: float) -> np.ndarray:
        return highest_fitting_index(self.power_w(c), self.clocks_hz, f_req, cap_w)

    def rows(self, idx: np.ndarray, power_w: np.ndarray) -> PowerRows:
        """The fit's linear system with each kernel at clock index `idx`."""
        n = np.arange(idx.size)
        return PowerRows(
            features_j=self.features_j[idx, n],
            wall_s=self.latency_s[idx, n],
            idle_w=self.idle_w[idx],
            power_w=np.asarray(power_w, dtype=float),
        )


def kernel_table(
    ops: list[Any], gpu: GpuSpec, clocks_hz: np.ndarray, coeffs: Any, rows_fn: RowEstimator = op_rows
) -> KernelTable:
    terms = gpu_power_terms(gpu)
    t = clock_table(ops, gpu, clocks_hz, coeffs, rows_fn)
    f = t["sm_clock_hz"][:, None]
    feats = power_features(
        t["util"], t["latency_s"], t["dram_bytes"], f, terms, tensor_flop=t.get("tensor_flop")
    )
    return KernelTable(
        clocks_hz=t["sm_clock_hz"],
        latency_s=t["latency_s"],
        features_j=feats,
        idle_w=terms.idle_power_w(t["sm_clock_hz"]),
    )


def fit_through_cap(
    table: KernelTable,
    power_w: np.ndarray,
    f_req: float,
    cap_w: float,
    *,
    starts: list[np.ndarray],
    free: np.ndarray,
    lower: np.ndarray,
    upper: np.ndarray,
    weight: np.ndarray | None = None,
) -> tuple[PowerFit, np.ndarray]:
    """Coefficients for kernels measured under a power cap at an unknown, throttled clock.

    The model's own cap rule picks each kernel's clock (`KernelTable.effective_index`), so the predicted
    power is a non-convex, piecewise function of the coefficients: a convex fit at fixed clocks settles on
    the uncapped fixed point whenever the kernels under the cap (all reading about the cap) are
    indifferent to the coefficients. So the weighted mean absolute relative error of the capped model
    itself is minimized, over the logarithm of the `free` coefficients (others fixed at their `starts[0]`
    values; positivity by construction), with scipy's Powell method from each start; the best wins.
    The absolute (not squared) error follows MAPE, the reported metric, and is robust to the table's
    readings that miss the kernel (README: 1 s NVML averaging).

    Returns the fit and the effective clock index of every kernel.
    """
    from scipy.optimize import minimize

    p_meas = np.asarray(power_w, dtype=float)
    w = np.ones(p_meas.size) if weight is None else np.asarray(weight, dtype=float)
    w = w / w.sum()
    free = np.asarray(free, dtype=int)
    base = np.clip(np.asarray(starts[0], dtype=float), lower, upper)
    n = np.arange(p_meas.size)

    def coeffs(z: np.ndarray) -> np.ndarray:
        c = base.copy()
        c[free] = np.clip(np.exp(z), lower[free], upper[free])
        return c

    def objective(z: np.ndarray) -> float:
        c = coeffs(z)
        p = table.power_w(c)
        idx = highest_fitting_index(p, table.clocks_hz, f_req, cap_w)
        return float(np.sum(w * np.abs(p[idx, n] / p_meas - 1.0)))

    best: tuple[float, np.ndarray] | None = None
    for start in starts:
        z0 = np.log(np.maximum(np.clip(np.asarray(start, dtype=float), lower, upper)[free], 1e-30))
        res = minimize(objective, z0, method="Powell", options={"maxiter": 20000, "xtol": 1e-3, "ftol": 1e-7})
        if best is None or res.fun < best[0]:
            best = (float(res.fun), coeffs(res.x))
    assert best is not None
    c = best[1]
    idx = table.effective_index(c, f_req, cap_w)
    rows = table.rows(idx, p_meas)
    pred = rows.predict_w(c)
    return PowerFit(coeffs=c, predicted_w=pred, mape=mape(pred, rows.power_w), status="powell"), idx


# ------------------------------------------------------------------------------------ measured workloads
