"""One set of physical energies shared by every generation, fitted on kernel tables and whole runs at once.

DESIGN.md section 12. The fitted vector `c` (`PowerCoeffs.coeff_names()` order) holds the energies of a
TSMC N7 die at 1 V (Ampere GA100); a generation's set is `c * generation_scale(arch)`:

- on-die terms (L2, shared memory, Tensor Cores, CUDA cores, SFU, clock tree, gap) are switched
  capacitance x V^2 per unit of work. V^2 is already in the model (each GPU's V(f) table, `dse.perf.power`),
  so between generations only the node's switched capacitance per unit of work changes
  (`NODE_CAPACITANCE`, E: TSMC quotes N5 at ~30% less power than N7 at iso speed, 4N a few percent
  below N5, hence 0.7; Samsung 8N taken equal to N7);
- DRAM energy is each GPU's catalog e_bit (its memory technology), so `dram_scale` (the GPU-side PHY and
  controller share on top of the device energy) is shared unchanged.

Rows (`dse.calibrate.fit.power.PowerRows`): EnergAIzer A100 whole forward passes (Ampere, scale 1),
aiconfigurator H200 kernels (Hopper, on-die columns x the ratio), ML.ENERGY H100 serving runs and our own H100
kernels and whole models (`dse/calibrate/measured`, at their recorded clocks). Given our H100 rows, Hopper's
ratio is fitted on `NODE_GRID` (the 0.7 prior from TSMC's claim left H100 GEMMs at the 700 W cap 28% short of
their measured power and the H100 whole models 17% off at their measured clocks): it then stands for node
capacitance x the unpublished H100 V(f) curve against our estimate of it. The objective is the weighted mean
absolute relative error (the reported metric, robust to the tables' misread rows) plus a ridge towards
`JOINT_PRIOR`, subject to `PHYSICAL_BOUNDS` and `RATIO_BOUNDS`: a convex problem (cvxpy) at fixed clocks. The
H200 clock is not recorded (700 W cap, default boost). Where a kernel's model latency depends on the clock
(compute-bound: `CLOCK_SENSITIVE_RATIO`), its measured latency says at which clock it ran
(`latency_clock_index`); elsewhere the capped model picks it from the current coefficients, and the fit
alternates clocks and convex fit `ITERATIONS` times. (With the cap rule everywhere the fit settles at a fixed
point where the GEMMs throttle too little: held-out H200 GEMM latency under the cap 11.5% -> 16.2%.)

NVML window of the H200 tables (`NVML_VARIANTS`; data README section 2: a 100 ms poller of a 1 s average
over a loop of about 1 s): `"downweight"` keeps kernels >= 1 ms and gives context attention weight 0 (its
readings do not follow its work); `"window"` instead models each reading as the 1 s average over the loop
plus the idle set-up before it (`window_idle_share`) and fits every family, context attention included.
Pure: arrays in, coefficients out; `power_sets` loads the data.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dse.calibrate.fit.power import KernelTable, PowerRows, mape
from dse.errors import CalibrationError
from dse.perf.coeffs import PowerCoeffs

try:
    import cvxpy as cp
except ImportError as exc:  # pragma: no cover - cvxpy is a declared dependency
    raise ImportError("dse.calibrate.fit.power_joint needs cvxpy: pip install cvxpy") from exc

NAMES = PowerCoeffs.coeff_names()
# Switched capacitance per unit of work relative to TSMC N7 (module docstring).
NODE_CAPACITANCE: dict[str, float] = {"ampere": 1.0, "hopper": 0.7}
ON_DIE: tuple[str, ...] = tuple(n for n in NAMES if n != "dram_scale")

# Bounds of the shared energies (N7, 1 V; hardware-facts sections 2-3):
# - l2: a 1 MB SRAM read 12.8 pJ/B at 45 nm (Horowitz), an LLC word 12.5 pJ/B (Dally 2019); +25% for the
#   crossbar: 2-16 pJ/B.  smem: a 32 KB read 2.5 pJ/B at 45 nm, an L1 word 1.25 pJ/B: 0.3-5 pJ/B.
# - tensor: at least 0.1 (the 7 nm FP16 FMA is ~0.25 pJ/FLOP), at most 2 pJ: the board-level energy per
#   FLOP of our H100 bf16 GEMMs at the 700 W cap (694 W at 674 TFLOP/s: 1.03 pJ, idle and memory included, at
#   1381 MHz, V^2 = 0.59 in the H100 table), moved to 1 V and to N7 at the 0.7 prior: 2.5 pJ, rounded down.
#   (The earlier bound, the A100 PCIe's TDP over its dense peak, 0.8 pJ, assumed a GPU runs its peak within
#   its TDP; neither does: both throttle under dense GEMMs.)  cuda: FP32 5-15x a tensor FLOP, at most 12.8 pJ.
# - sfu: not a physical estimate (an SFU op is a few FP32 ops); left loose, 1-500 pJ.
# - dram_scale: the catalog device e_bit plus a PHY/controller share of up to ~50%: 1.0-1.5.
# - active, gap: 0-2 nJ per SM cycle (the clock tree and uncore of a 108-SM chip: up to ~300 W at 1.4 GHz).
PHYSICAL_BOUNDS: dict[str, tuple[float, float]] = {
    "l2_j_per_byte": (2e-12, 16e-12),
    "smem_j_per_byte": (0.3e-12, 5e-12),
    "tensor_j_per_flop": (0.1e-12, 2.0e-12),
    "cuda_j_per_flop": (0.5e-12, 12.8e-12),
    "sfu_j_per_op": (1e-12, 5e-10),
    "dram_scale": (1.0, 1.5),
    "active_j_per_sm_cycle": (0.0, 2e-9),
    "gap_j_per_sm_cycle": (0.0, 2e-9),
}
# What the H200 kernel tables cannot identify (little CUDA-core and SFU work, no host gaps in CUDA-graph
# loops): a fit on them alone keeps these at the prior.
KERNEL_TABLE_BLIND: tuple[str, ...] = ("sfu_j_per_op", "gap_j_per_sm_cycle")
# Energy ratios (numerator, denominator, low, high), hardware-facts 3.2: an FP32 CUDA-core FLOP costs 5-15x
# a bf16 Tensor-Core FLOP. Where the data cannot see the CUDA cores (kernel tables alone), the middle, 10x.
RATIO_BOUNDS: tuple[tuple[str, str, float, float], ...] = (
    ("cuda_j_per_flop", "tensor_j_per_flop", 5.0, 15.0),
)
BLIND_RATIOS: tuple[tuple[str, str, float, float], ...] = (
    ("cuda_j_per_flop", "tensor_j_per_flop", 10.0, 10.0),
)
# Priors (N7, 1 V): `dse.calibrate.fit.power_sets.PRIOR` (hardware-facts 3.1-3.2), except the gap term at
# 0: between kernels the GPU sits in the state its idle table was measured in (clock locked, nothing
# running), so the idle power already covers it. (With PRIOR's 0.3 nJ the H200-only fit predicted the A100
# whole models at 10.8% instead of 8.5%; the joint fit puts it at ~0 either way.)
JOINT_PRIOR = np.array([5e-12, 1e-12, 0.3e-12, 1.5e-12, 5e-12, 1.0, 3e-10, 0.0])
NVML_VARIANTS: tuple[str, ...] = ("downweight", "window")
# Row weights of each dataset (its rows sum to this): whole models as much as both kernel families.
DATASET_WEIGHT: dict[str, float] = {
    "a100": 2.0,
    "gemm": 0.5,
    "attention_generation": 0.5,
    "attention_context": 0.0,
    "serving": 1.0,  # H100 serving runs (`dse.calibrate.fit.power_serving`), where given
    # Our H100 measurements (dse/calibrate/measured): kernels at their recorded clocks (energy counter over
    # >= 1 s windows, no NVML-window bias) and whole models by the EnergAIzer protocol.
    "h100_kernels": 1.0,
    "h100_models": 1.0,
}
WINDOW_CONTEXT_WEIGHT = 0.25  # context attention's weight under the "window" variant
JOINT_RIDGE = 3e-2
ITERATIONS = 4


# Hopper's capacitance ratio where clean Hopper measurements are given (fit_joint's `hopper` rows): the
# ratio on this grid whose fit has the lowest weighted error. It also absorbs the H100 V(f) curve, which is
# unpublished (our ridge estimate, hardware-facts 4.1): the data fix the product ratio x V(f)^2.
NODE_GRID: tuple[float, ...] = (0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95, 1.0, 1.05, 1.1)


def generation_scale(arch: str, node: float | None = None) -> np.ndarray:
    """[K] factor from the shared (N7) energies to `arch`'s: node capacitance on-die (`node`, or the
    NODE_CAPACITANCE prior), 1 for DRAM."""
    ratio = (NODE_CAPACITANCE[arch] if node is None else node) / NODE_CAPACITANCE["ampere"]
    return np.array([ratio if n in ON_DIE else 1.0 for n in NAMES])


def window_idle_share(latency_s: np.ndarray, window_s: float = 1.0, period_s: float = 0.1) -> np.ndarray:
    """Share of each H200 reading that averages the idle set-up before the loop (data README section 2).

    The loop runs min(3000, ceil(target / latency)) calls, target 1 s (0.3 s below 0.1 ms per call); a
    thread samples a `window_s` trailing average every `period_s` during the loop; the reading is the mean
    sample. A sample at time t into the loop holds max(0, 1 - t / window_s) of set-up.
    """
    lat = np.asarray(latency_s, dtype=float)
    target = np.where(lat < 1e-4, 0.3, 1.0)
    loop_s = np.minimum(np.ceil(target / lat), 3000) * lat
    out = np.empty(lat.size)
    for i, loop in enumerate(loop_s):
        t = period_s * np.arange(1, max(1, int(np.floor(loop / period_s + 1e-9))) + 1)
        out[i] = np.mean(np.clip(1.0 - t / window_s, 0.0, 1.0))
    return out


def h200_rows(
    table: KernelTable,
    power_w: np.ndarray,
    latency_s: np.ndarray,
    c_shared: np.ndarray,
    nvml: str,
    node: float | None = None,
) -> PowerRows:
    """H200 kernels on the shared (N7) coefficients, at inferred or capped clocks (module docstring), with
    Hopper's capacitance ratio `node` (default: the prior).

    Under "window", a reading is (1 - g) * P_kernel + g * P_idle, so the dynamic features scale by 1 - g.
    """
    scale = generation_scale("hopper", node)
    idx = table.effective_index(c_shared * scale, table.clocks_hz[-1], _H200_CAP_W)
    if CLOCK_FROM == "latency":
        sensitive = table.latency_s[0] / table.latency_s[-1] > CLOCK_SENSITIVE_RATIO
        idx = np.where(sensitive, latency_clock_index(table, latency_s), idx)
    r = table.rows(idx, power_w)
    x = r.features_j * scale
    if nvml == "window":
        x = x * (1.0 - window_idle_share(latency_s))[:, None]
    return PowerRows(features_j=x, wall_s=r.wall_s, idle_w=r.idle_w, power_w=r.power_w)


_H200_CAP_W = 700.0
CLOCK_FROM = "latency"  # "cap": the cap rule for every kernel (the variant described in the docstring)
# Model latency at the grid's lowest clock (1005 MHz) over that at boost above which the clock is inferred
# from the measured latency (compute-bound kernels: ~2; memory-bound decode attention: ~1).
CLOCK_SENSITIVE_RATIO = 1.5


def latency_clock_index(table: KernelTable, latency_s: np.ndarray) -> np.ndarray:
    """[N] clock of each kernel inferred from its measured latency: the grid clock whose model latency is
    nearest (in ratio) to the measured one."""
    err = np.abs(np.log(table.latency_s / np.asarray(latency_s, dtype=float)[None, :]))
    return np.argmin(err, axis=0)


def solve_relative_l1(
    rows: PowerRows,
    lower: np.ndarray,
    upper: np.ndarray,
    prior: np.ndarray,
    ridge: float,
    ratios: tuple[tuple[str, str, float, float], ...] = (),
) -> tuple[np.ndarray, str]:
    """Minimize sum_i w_i |r_i| + ridge * sum_j ((c_j - prior_j) / scale_j)^2 within the bounds (cvxpy).

    r_i is the relative power error of `dse.calibrate.fit.power` (linear in c); columns are scaled by
    the value that would explain all dynamic power alone; unexercised columns keep the prior. `ratios`
    bound c[num] / c[den] (linear constraints) where both columns are solved for.
    """
    a = rows.features_j / (rows.wall_s * rows.power_w)[:, None]
    b = (rows.power_w - rows.idle_w) / rows.power_w
    w = np.ones(b.size) if rows.weight is None else np.asarray(rows.weight, dtype=float)
    w = w / w.sum()
    c = np.clip(prior, lower, upper)
    seen = np.nonzero((np.abs(a).sum(axis=0) > 0) & (upper > lower))[0]
    if seen.size == 0:
        return c, "fixed"
    a = a[:, seen]
    scale = np.abs(b).mean() / np.abs(a).mean(axis=0)
    z = cp.Variable(seen.size)  # c = scale * z
    obj = cp.sum(cp.multiply(w, cp.abs((a * scale) @ z - b))) + ridge * cp.sum_squares(
        z - prior[seen] / scale
    )
    cons = [z >= lower[seen] / scale, z <= upper[seen] / scale]
    pos = {NAMES[j]: i for i, j in enumerate(seen)}
    for num, den, lo, hi in ratios:
        if num in pos and den in pos:
            # in z units (c = scale * z), so that the solver's absolute tolerance means something
            k = float(scale[pos[den]] / scale[pos[num]])
            cons += [z[pos[num]] >= lo * k * z[pos[den]], z[pos[num]] <= hi * k * z[pos[den]]]
    problem = cp.Problem(cp.Minimize(obj), cons)
    problem.solve(solver=cp.CLARABEL)
    if z.value is None or problem.status not in ("optimal", "optimal_inaccurate"):
        raise CalibrationError(f"joint power fit failed: solver status {problem.status}")
    c[seen] = np.clip(np.asarray(z.value) * scale, lower[seen], upper[seen])
    return c, str(problem.status)


@dataclass(frozen=True, slots=True, kw_only=True)
class H200Family:
    """One H200 kernel family's training rows: its clock table, measured power and measured latency."""

    table: KernelTable
    power_w: np.ndarray
    latency_s: np.ndarray


@dataclass(frozen=True, slots=True, kw_only=True)
class JointFit:
    """Shared (N7) energies, the per-generation sets derived from them, and the fit's own errors."""

    shared: np.ndarray
    ampere: PowerCoeffs
    hopper: PowerCoeffs
    train_mape: dict[str, float]
    status: str
    hopper_node: float


def fit_joint(
    a100: PowerRows | None,
    h200: dict[str, H200Family],
    *,
    serving: PowerRows | None = None,
    hopper: dict[str, PowerRows] | None = None,
    nvml: str = "downweight",
    start: np.ndarray,
    prior: np.ndarray = JOINT_PRIOR,
    ridge: float = JOINT_RIDGE,
    iterations: int = ITERATIONS,
) -> JointFit:
    """Fit the shared energies on whatever of `a100` (whole runs), `h200` (kernel families), `serving`
    (Hopper serving runs on the shared energies at the prior ratio, `power_serving.serving_power_rows`)
    and `hopper` (Hopper runs at their measured clocks, features in Hopper's own units, weighted by
    DATASET_WEIGHT under their key) is given.

    With `hopper` rows, Hopper's capacitance ratio is the NODE_GRID value of least weighted error;
    without them it is the NODE_CAPACITANCE prior. Columns no given dataset identifies
    (`KERNEL_TABLE_BLIND` without A100 rows) stay at `prior`.
    """
    if nvml not in NVML_VARIANTS:
        raise CalibrationError(f"fit_joint: nvml must be one of {NVML_VARIANTS}, got {nvml!r}")
    lower = np.array([PHYSICAL_BOUNDS[n][0] for n in NAMES])
    upper = np.array([PHYSICAL_BOUNDS[n][1] for n in NAMES])
    ratios = RATIO_BOUNDS if a100 is not None else BLIND_RATIOS
    if a100 is None:
        for n in KERNEL_TABLE_BLIND:
            lower[NAMES.index(n)] = upper[NAMES.index(n)] = prior[NAMES.index(n)]
    weights = dict(DATASET_WEIGHT)
    if nvml == "window":
        weights["attention_context"] = WINDOW_CONTEXT_WEIGHT
    data = _JointData(a100=a100, h200=h200, serving=serving, hopper=hopper or {}, nvml=nvml, weights=weights)
    best: tuple[float, np.ndarray, str, float] | None = None
    for node in NODE_GRID if hopper else (NODE_CAPACITANCE["hopper"],):
        c, status = np.clip(np.asarray(start, dtype=float), lower, upper), "start"
        for _ in range(iterations):
            rows = PowerRows.stack(data.parts(c, node))
            c, status = solve_relative_l1(rows, lower, upper, prior, ridge, ratios)
        rows = PowerRows.stack(data.parts(c, node))
        assert rows.weight is not None
        err = float(rows.weight @ np.abs(rows.predict_w(c) / rows.power_w - 1.0) / rows.weight.sum())
        if best is None or err < best[0]:
            best = (err, c, status, node)
    assert best is not None
    _, c, status, node = best
    prov = {"shared_n7": c.tolist(), "nvml": nvml, "node_capacitance": {**NODE_CAPACITANCE, "hopper": node}}
    return JointFit(
        shared=c,
        ampere=PowerCoeffs.from_vector("ampere", c * generation_scale("ampere"), provenance=prov),
        hopper=PowerCoeffs.from_vector("hopper", c * generation_scale("hopper", node), provenance=prov),
        train_mape=data.train_mape(c, node),
        status=status,
        hopper_node=node,
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class _JointData:
    """The datasets of one joint fit, turned into weighted rows on the shared energies for a ratio."""

    a100: PowerRows | None
    h200: dict[str, H200Family]
    serving: PowerRows | None
    hopper: dict[str, PowerRows]
    nvml: str
    weights: dict[str, float]

    def named(self, c: np.ndarray, node: float) -> dict[str, PowerRows]:
        out = {} if self.a100 is None else {"a100": self.a100}
        prior_scale = generation_scale("hopper")
        scale = generation_scale("hopper", node)
        if self.serving is not None:  # built on the prior ratio: move its on-die columns to `node`
            out["serving"] = _scaled(self.serving, scale / prior_scale)
        for fam, d in self.h200.items():
            out[fam] = h200_rows(d.table, d.power_w, d.latency_s, c, self.nvml, node)
        for name, rows in self.hopper.items():
            out[name] = _scaled(rows, scale)
        return out

    def parts(self, c: np.ndarray, node: float) -> list[PowerRows]:
        return [
            _weighted(r, self.weights.get(k, 1.0))
            for k, r in self.named(c, node).items()
            if self.weights.get(k, 1.0) > 0
        ]

    def train_mape(self, c: np.ndarray, node: float) -> dict[str, float]:
        return {k: mape(r.predict_w(c), r.power_w) for k, r in self.named(c, node).items()}


def _scaled(rows: PowerRows, scale: np.ndarray) -> PowerRows:
    return PowerRows(
        features_j=rows.features_j * scale, wall_s=rows.wall_s, idle_w=rows.idle_w, power_w=rows.power_w
    )


def _weighted(rows: PowerRows, total: float) -> PowerRows:
    n = rows.wall_s.size
    return PowerRows(
        features_j=rows.features_j,
        wall_s=rows.wall_s,
        idle_w=rows.idle_w,
        power_w=rows.power_w,
        weight=np.full(n, total / n),
    )
