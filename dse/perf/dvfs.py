"""DVFS: clock grids, voltage and idle power at any clock, and the effective clock under a power cap.

Any SM clock in the GPU's range is allowed; V(f) and P_idle(f) are the GPU's tables, linearly interpolated
and clamped at their ends (`GpuSpec.power.core_v`, `.idle_power_w`). The kernel model decides how latency
responds to the clock (SM-side rates scale with f, DRAM bandwidth does not), so compute-bound time scales
with 1/f and DRAM-bound time stays put.

Power cap (DESIGN.md section 5). A GPU over its power limit lowers its clock. Per kernel, the effective
clock is the highest clock on the GPU's clock grid (`sm_clock_step_hz`) at or below the requested one
whose predicted power fits the cap:

1. estimate every kernel at the requested clock; kernels within the cap are done (one kernel-model call);
2. the others are estimated on a coarse grid (every `COARSE_STEPS` grid steps), all of them at all coarse
   clocks in one call; for each kernel the highest coarse clock that fits and the next one up bracket the
   answer;
3. bisection on the fine grid inside each bracket, one call per round for all kernels at their own
   midpoints (`dse.perf.multiclock` evaluates a clock per op).

This assumes power is non-decreasing in clock for a fixed kernel, which the model satisfies (tested) up
to tile-choice switches of the kernel model. A kernel that exceeds the cap even at the minimum clock runs
at the minimum clock and is flagged (`cap_exceeded`); caps below the GPU's minimum settable limit are
rejected.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from dse.errors import ConfigError
from dse.hardware.spec import GpuSpec
from dse.perf.coeffs import PowerCoeffs
from dse.perf.multiclock import Estimator, RowEstimator, estimator_rows, op_rows, put_rows, take_rows
from dse.perf.power import GpuPowerTerms, power_parts_w
from dse.perf.types import OperatingPoint

COARSE_STEPS = 8  # coarse cap-search grid: every 8th clock of the GPU's grid (120 MHz at 15 MHz steps)
MAX_ROWS_PER_CALL = 20_000  # (op, clock) pairs per kernel-model call in clock_table
MAX_TABLE_ROWS = 512  # (op, clock) pairs of the cap search's bracket table (`_bracket_table`)


def row_estimator(estimator: Estimator | None = None) -> RowEstimator:
    """The kernel model as a row estimator: `multiclock.op_rows` (the registry's families) by default, or
    an adapter around another `KernelEstimate`-returning estimator (tests inject stand-ins)."""
    return op_rows if estimator is None else estimator_rows(estimator)


def requested_clock_hz(gpu: GpuSpec, point: OperatingPoint) -> float:
    """The requested SM clock (default: the GPU's boost clock), clamped to the GPU's range."""
    f = gpu.clocks.boost_clock_hz if point.sm_clock_hz is None else float(point.sm_clock_hz)
    return float(np.clip(f, gpu.clocks.sm_clock_min_hz, gpu.clocks.sm_clock_max_hz))


def power_cap_w(gpu: GpuSpec, point: OperatingPoint) -> float:
    """The cap in force: the operating point's, else the GPU's TDP (its default power limit).

    Raises:
        ConfigError: a cap that is not positive or lies below the GPU's minimum settable limit. A cap above
            the TDP (the largest limit the driver accepts) is the TDP.
    """
    cap = gpu.power.tdp_w if point.power_cap_w is None else float(point.power_cap_w)
    lowest = gpu.power.power_cap_min_w
    what = "TDP" if point.power_cap_w is None else "power cap"
    if not cap > 0 or (lowest is not None and cap < lowest - 1e-9):
        floor = f" (the minimum settable limit of {gpu.name} is {lowest:g} W)" if lowest else ""
        raise ConfigError(f"{what} {cap:g} W is not allowed{floor}")
    # The TDP is the default and the largest power limit the driver accepts (nvidia-smi -pl): a cap above
    # it is the TDP (in a sweep or a comparison it simply does not bind; `dse predict` refuses one).
    return min(cap, float(gpu.power.tdp_w))


def clock_grid_hz(gpu: GpuSpec, lo_hz: float | None = None, hi_hz: float | None = None) -> np.ndarray:
    """Clocks of the GPU's grid (min clock + k * step) within [lo_hz, hi_hz] (default: the whole range).

    The maximum clock is always included when it lies in the interval, even if off the step grid.
    """
    c = gpu.clocks
    lo = c.sm_clock_min_hz if lo_hz is None else max(lo_hz, c.sm_clock_min_hz)
    hi = c.sm_clock_max_hz if hi_hz is None else min(hi_hz, c.sm_clock_max_hz)
    k0 = np.ceil((lo - c.sm_clock_min_hz) / c.sm_clock_step_hz - 1e-9)
    k1 = np.floor((hi - c.sm_clock_min_hz) / c.sm_clock_step_hz + 1e-9)
    grid = c.sm_clock_min_hz + np.arange(k0, k1 + 1) * c.sm_clock_step_hz
    if hi == c.sm_clock_max_hz and (grid.size == 0 or grid[-1] < hi - 1e-3):
        grid = np.append(grid, hi)
    return grid


def snap_down_hz(gpu: GpuSpec, sm_clock_hz: np.ndarray | float) -> np.ndarray:
    """The grid clock at or below each clock (the minimum clock for anything below it)."""
    c = gpu.clocks
    f = np.asarray(sm_clock_hz, dtype=float)
    k = np.floor((f - c.sm_clock_min_hz) / c.sm_clock_step_hz + 1e-9)
    snapped = c.sm_clock_min_hz + np.maximum(k, 0.0) * c.sm_clock_step_hz
    return np.where(f >= c.sm_clock_max_hz - 1e-3, np.minimum(f, c.sm_clock_max_hz), snapped)


def core_v(gpu: GpuSpec, sm_clock_hz: np.ndarray | float) -> np.ndarray | float:
    """Supply voltage at the clock(s), interpolated from the GPU's V-f table."""
    return gpu.power.core_v.at(sm_clock_hz)


def idle_power_w(gpu: GpuSpec, sm_clock_hz: np.ndarray | float) -> np.ndarray | float:
    """Idle board power at the clock(s), interpolated from the GPU's table."""
    return gpu.power.idle_power_w.at(sm_clock_hz)


@dataclass(frozen=True, slots=True)
class CappedRows:
    """Kernel-model rows at the effective clocks, the power terms there, and what was asked for."""

    rows: dict[str, np.ndarray]  # util [n, M], latency_s, dram_bytes, sm_clock_hz (effective)
    power: dict[str, np.ndarray]  # power_parts_w at the effective clocks
    requested_clock_hz: float
    power_cap_w: float
    cap_exceeded: np.ndarray  # [n] bool: over the cap even at the minimum clock


def _power(rows: dict[str, np.ndarray], terms: GpuPowerTerms, pc: PowerCoeffs) -> dict[str, np.ndarray]:
    return power_parts_w(
        rows["util"],
        rows["latency_s"],
        rows["dram_bytes"],
        rows["sm_clock_hz"],
        terms,
        pc,
        tensor_flop=rows.get("tensor_flop"),
    )


def capped_rows(
    ops: Sequence[Any],
    gpu: GpuSpec,
    point: OperatingPoint,
    coeffs: Any,
    power_coeffs: PowerCoeffs,
    terms: GpuPowerTerms,
    rows_fn: RowEstimator = op_rows,
) -> CappedRows:
    """Every op at the highest grid clock <= requested whose power fits the cap (module docstring)."""
    f_req = requested_clock_hz(gpu, point)
    cap = power_cap_w(gpu, point)
    n = len(ops)
    rows = rows_fn(ops, gpu, np.full(n, f_req), coeffs)
    parts = _power(rows, terms, power_coeffs)
    over = np.nonzero(parts["total"] > cap)[0]
    exceeded = np.zeros(n, dtype=bool)
    if over.size:
        sub, sub_exceeded = _search(
            [ops[i] for i in over.tolist()], gpu, f_req, cap, coeffs, power_coeffs, terms, rows_fn
        )
        put_rows(rows, over, sub)
        exceeded[over] = sub_exceeded
        parts = _power(rows, terms, power_coeffs)
    return CappedRows(
        rows=rows, power=parts, requested_clock_hz=f_req, power_cap_w=cap, cap_exceeded=exceeded
    )


def _search(
    ops: list[Any],
    gpu: GpuSpec,
    f_req: float,
    cap: float,
    coeffs: Any,
    pc: PowerCoeffs,
    terms: GpuPowerTerms,
    rows_fn: RowEstimator,
) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Coarse grid then bisection for ops known to exceed the cap at f_req."""
    n = len(ops)
    fine = clock_grid_hz(gpu, hi_hz=f_req)
    fine = fine[fine < f_req - 1e-3]  # f_req itself is known to be over the cap
    if fine.size == 0:
        return rows_fn(ops, gpu, np.full(n, f_req), coeffs), np.ones(n, dtype=bool)
    coarse = np.unique(np.concatenate([np.arange(fine.size - 1, -1, -COARSE_STEPS), [0]]))  # ascending
    c = coarse.size
    grid_rows = rows_fn(ops * c, gpu, np.repeat(fine[coarse], n), coeffs)  # [c * n], clock-major
    fits = (_power(grid_rows, terms, pc)["total"] <= cap).reshape(c, n)
    # highest coarse index that fits (monotone power: everything below it fits too)
    any_fit = np.asarray(fits.any(axis=0))
    top = c - 1 - np.argmax(fits[::-1], axis=0)
    lo_ok = np.where(any_fit, coarse[top], -1)  # index into fine
    hi_bad = np.where(any_fit, np.where(top + 1 < c, coarse[np.minimum(top + 1, c - 1)], fine.size), 0)
    best = take_rows(grid_rows, np.where(any_fit, top, 0) * n + np.arange(n))
    brackets = np.nonzero(any_fit & (hi_bad - lo_ok > 1))[0]
    table = _bracket_table(ops, brackets, lo_ok, hi_bad, fine, rows_fn, gpu, coeffs)
    while True:
        active = np.nonzero(any_fit & (hi_bad - lo_ok > 1))[0]
        if active.size == 0:
            break
        mid = (lo_ok[active] + hi_bad[active]) // 2
        if table is None:
            sub = rows_fn([ops[i] for i in active], gpu, fine[mid], coeffs)
        else:
            sub = take_rows(table[0], table[1][active] + mid)
        ok = _power(sub, terms, pc)["total"] <= cap
        lo_ok[active] = np.where(ok, mid, lo_ok[active])
        hi_bad[active] = np.where(ok, hi_bad[active], mid)
        put_rows(best, active[ok], take_rows(sub, np.nonzero(ok)[0]))
    return best, ~any_fit


def _bracket_table(
    ops: list[Any],
    active: np.ndarray,
    lo_ok: np.ndarray,
    hi_bad: np.ndarray,
    fine: np.ndarray,
    rows_fn: RowEstimator,
    gpu: GpuSpec,
    coeffs: Any,
) -> tuple[dict[str, np.ndarray], np.ndarray] | None:
    """Every fine clock strictly inside the `active` ops' coarse brackets, in one kernel-model call: the
    bisection visits only those clocks, so reading its rounds from this table gives the same clocks and
    rows (each row depends on its op and clock alone) for one call's fixed cost instead of one per round.
    Returns (rows, offset) with the row of (op i, fine index j) at `offset[i] + j`; None when the table
    would hold more than MAX_TABLE_ROWS rows (per-row work then outweighs the calls it saves)."""
    inner = hi_bad[active] - lo_ok[active] - 1  # clocks strictly inside each bracket
    total = int(inner.sum())
    if active.size == 0 or total > MAX_TABLE_ROWS:
        return None
    first = np.cumsum(inner) - inner  # table row of each active op's lowest inner clock
    fine_idx = np.repeat(lo_ok[active] + 1 - first, inner) + np.arange(total)
    offset = np.zeros(len(ops), dtype=np.int64)
    offset[active] = first - (lo_ok[active] + 1)
    table_ops = [ops[i] for i in np.repeat(active, inner).tolist()]
    return rows_fn(table_ops, gpu, fine[fine_idx], coeffs), offset


def clock_table(
    ops: Sequence[Any],
    gpu: GpuSpec,
    clocks_hz: np.ndarray,
    coeffs: Any,
    rows_fn: RowEstimator = op_rows,
) -> dict[str, np.ndarray]:
    """Every op at every clock: util [C, N, M], latency_s [C, N], dram_bytes [C, N], sm_clock_hz [C].

    One kernel-model call for all (op, clock) pairs; what DVFS curves and the power fits' cap search read.
    """
    clocks = np.asarray(clocks_hz, dtype=float)
    c, n = clocks.size, len(ops)
    per_call = max(1, MAX_ROWS_PER_CALL // max(n, 1))  # clocks per kernel-model call (bounded memory)
    parts = [
        rows_fn(list(ops) * len(chunk), gpu, np.repeat(chunk, n), coeffs)
        for chunk in np.array_split(clocks, int(np.ceil(c / per_call)))
    ]
    rows = {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}
    out = {
        "util": rows["util"].reshape(c, n, -1),
        "latency_s": rows["latency_s"].reshape(c, n),
        "dram_bytes": rows["dram_bytes"].reshape(c, n),
        "sm_clock_hz": clocks,
    }
    if "tensor_flop" in rows:
        out["tensor_flop"] = rows["tensor_flop"].reshape(c, n)
    return out


def highest_fitting_index(
    power_w: np.ndarray, clocks_hz: np.ndarray, f_req: float, cap_w: float
) -> np.ndarray:
    """[N] index into ascending `clocks_hz` of the highest clock <= f_req whose power [C, N] fits the cap.

    Rows that fit at no clock get index 0 (the lowest clock).
    """
    ok = (power_w <= cap_w) & (np.asarray(clocks_hz)[:, None] <= f_req + 1e-3)
    c = ok.shape[0]
    idx = c - 1 - np.argmax(ok[::-1], axis=0)
    return np.where(ok.any(axis=0), idx, 0)
