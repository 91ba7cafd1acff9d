"""DVFS: clock grids, voltage and idle power at any clock, and the effective clock under a power cap.

Any SM clock in the GPU's range is allowed; V(f) and P_idle(f) are the GPU's tables, linearly interpolated
and clamped at their ends (`GpuSpec.power.core_v`, `.idle_power_w`). The kernel model decides how latency
responds to the clock (SM-side rates scale with f, DRAM bandwidth does not), so compute-bound time scales
with 1/f and DRAM-bound time stays put.

Power cap (DESIGN.md section 5). A GPU over its power limit lowers its clock. Per kernel, the effective
clock is the highest clock on the GPU's clock grid (`sm_clock_step_hz`) at or below the requested one
whose predicted power fits the cap:

1. estimate every kernel at the requested clock; kernels within the cap are done (one kernel-model call);
2. the others are estimated on a coarse grid (every `COARSE_STEPS` grid steps, one vectorized call per
   clock over those kernels only); for each kernel the highest coarse clock that fits and the next one up
   bracket the answer;
3. bisection on the fine grid inside each bracket, one call per distinct clock per round (the brackets
   sit on the coarse grid, so a round has at most as many distinct clocks as there are coarse intervals).

This assumes power is non-decreasing in clock for a fixed kernel, which the model satisfies (tested) up
to tile-choice switches of the kernel model. A kernel that exceeds the cap even at the minimum clock runs
at the minimum clock and is flagged (`cap_exceeded`); caps below the GPU's minimum settable limit are
rejected.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from dse.errors import ConfigError
from dse.hardware.spec import GpuSpec
from dse.perf.power import GpuPowerTerms, PowerCoeffs, estimate_arrays, power_parts_w
from dse.perf.types import KernelEstimate, OperatingPoint

Estimator = Callable[[Sequence[Any], GpuSpec, OperatingPoint, Any], list[KernelEstimate]]

COARSE_STEPS = 8  # coarse cap-search grid: every 8th clock of the GPU's grid (120 MHz at 15 MHz steps)


def default_estimator() -> Estimator:
    """The kernel model's `estimate_ops` (imported lazily: the registry is a separate module)."""
    from dse.perf.registry import estimate_ops

    return estimate_ops  # type: ignore[return-value]


def requested_clock_hz(gpu: GpuSpec, point: OperatingPoint) -> float:
    """The requested SM clock (default: the GPU's boost clock), clamped to the GPU's range."""
    f = gpu.clocks.boost_clock_hz if point.sm_clock_hz is None else float(point.sm_clock_hz)
    return float(np.clip(f, gpu.clocks.sm_clock_min_hz, gpu.clocks.sm_clock_max_hz))


def power_cap_w(gpu: GpuSpec, point: OperatingPoint) -> float:
    """The cap in force: the operating point's, else the GPU's TDP (its default power limit).

    Raises:
        ConfigError: a cap that is not positive or lies below the GPU's minimum settable limit.
    """
    cap = gpu.power.tdp_w if point.power_cap_w is None else float(point.power_cap_w)
    lowest = gpu.power.power_cap_min_w
    if not cap > 0 or (lowest is not None and cap < lowest - 1e-9):
        floor = f" (the minimum settable limit of {gpu.name} is {lowest:g} W)" if lowest else ""
        raise ConfigError(f"power cap {cap:g} W is not allowed{floor}")
    return cap


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


def estimate_at_clocks(
    ops: Sequence[Any],
    gpu: GpuSpec,
    sm_clock_hz: np.ndarray,
    coeffs: Any,
    estimator: Estimator,
) -> list[KernelEstimate]:
    """Estimates of `ops[i]` at `sm_clock_hz[i]`: one kernel-model call per distinct clock."""
    f = np.asarray(sm_clock_hz, dtype=float)
    out: list[KernelEstimate | None] = [None] * len(ops)
    for clock in np.unique(f):
        idx = np.nonzero(f == clock)[0]
        ests = estimator([ops[i] for i in idx], gpu, OperatingPoint(sm_clock_hz=float(clock)), coeffs)
        for i, e in zip(idx, ests, strict=True):
            out[i] = e
    return out  # type: ignore[return-value]


@dataclass(frozen=True, slots=True)
class CappedEstimates:
    """Kernel estimates at their effective clocks, with the arrays the power model uses."""

    estimates: list[KernelEstimate]
    arrays: dict[str, np.ndarray]  # util [n, M], latency_s, dram_bytes, sm_clock_hz (effective)
    power: dict[str, np.ndarray]  # power_parts_w at the effective clocks
    requested_clock_hz: float
    power_cap_w: float
    cap_exceeded: np.ndarray  # [n] bool: over the cap even at the minimum clock


def _power_total(ests: list[KernelEstimate], terms: GpuPowerTerms, pc: PowerCoeffs) -> np.ndarray:
    a = estimate_arrays(ests)
    return power_parts_w(a["util"], a["latency_s"], a["dram_bytes"], a["sm_clock_hz"], terms, pc)["total"]


def capped_estimates(
    ops: Sequence[Any],
    gpu: GpuSpec,
    point: OperatingPoint,
    coeffs: Any,
    power_coeffs: PowerCoeffs,
    terms: GpuPowerTerms,
    estimator: Estimator,
) -> CappedEstimates:
    """Every op at the highest grid clock <= requested whose power fits the cap (module docstring)."""
    f_req = requested_clock_hz(gpu, point)
    cap = power_cap_w(gpu, point)
    ests = list(estimator(list(ops), gpu, OperatingPoint(sm_clock_hz=f_req), coeffs))
    a = estimate_arrays(ests)
    parts = power_parts_w(a["util"], a["latency_s"], a["dram_bytes"], a["sm_clock_hz"], terms, power_coeffs)
    over = np.nonzero(parts["total"] > cap)[0]
    exceeded = np.zeros(len(ops), dtype=bool)
    if over.size:
        clocks, sub_ests, sub_exceeded = _search(
            [ops[i] for i in over], gpu, f_req, cap, coeffs, power_coeffs, terms, estimator
        )
        for j, i in enumerate(over):
            ests[i] = sub_ests[j]
        exceeded[over] = sub_exceeded
        a = estimate_arrays(ests)
        parts = power_parts_w(
            a["util"], a["latency_s"], a["dram_bytes"], a["sm_clock_hz"], terms, power_coeffs
        )
    return CappedEstimates(
        estimates=ests,
        arrays=a,
        power=parts,
        requested_clock_hz=f_req,
        power_cap_w=cap,
        cap_exceeded=exceeded,
    )


def _search(
    ops: list[Any],
    gpu: GpuSpec,
    f_req: float,
    cap: float,
    coeffs: Any,
    pc: PowerCoeffs,
    terms: GpuPowerTerms,
    estimator: Estimator,
) -> tuple[np.ndarray, list[KernelEstimate], np.ndarray]:
    """Coarse grid then bisection for ops known to exceed the cap at f_req."""
    fine = clock_grid_hz(gpu, hi_hz=f_req)
    fine = fine[fine < f_req - 1e-3]  # f_req itself is known to be over the cap
    n = len(ops)
    if fine.size == 0:
        return (
            np.full(n, f_req),
            estimator(ops, gpu, OperatingPoint(sm_clock_hz=f_req), coeffs),
            np.ones(n, bool),
        )
    # Coarse indices into `fine`, from the top down, always including the lowest clock.
    top = fine.size - 1
    coarse_idx = np.unique(np.concatenate([np.arange(top, -1, -COARSE_STEPS), [0]]))[::-1]
    lo_ok = np.full(n, -1)  # index into fine of the highest clock known to fit (-1: none yet)
    hi_bad = np.full(n, fine.size)  # index of the lowest clock known to exceed (fine.size: f_req)
    best: list[KernelEstimate | None] = [None] * n
    open_ = np.arange(n)
    for ci in coarse_idx:
        if open_.size == 0:
            break
        sub = estimator([ops[i] for i in open_], gpu, OperatingPoint(sm_clock_hz=float(fine[ci])), coeffs)
        fits = _power_total(sub, terms, pc) <= cap
        for j, i in enumerate(open_):
            if fits[j]:
                lo_ok[i] = ci
                best[i] = sub[j]
            else:
                hi_bad[i] = ci
        open_ = open_[~fits]
    # Bisection inside (lo_ok, hi_bad) on the fine grid.
    while True:
        active = np.nonzero((lo_ok >= 0) & (hi_bad - lo_ok > 1))[0]
        if active.size == 0:
            break
        mid = (lo_ok[active] + hi_bad[active]) // 2
        sub = estimate_at_clocks([ops[i] for i in active], gpu, fine[mid], coeffs, estimator)
        fits = _power_total(sub, terms, pc) <= cap
        for j, i in enumerate(active):
            if fits[j]:
                lo_ok[i] = mid[j]
                best[i] = sub[j]
            else:
                hi_bad[i] = mid[j]
    exceeded = lo_ok < 0
    if exceeded.any():
        idx = np.nonzero(exceeded)[0]
        sub = estimator([ops[i] for i in idx], gpu, OperatingPoint(sm_clock_hz=float(fine[0])), coeffs)
        for j, i in enumerate(idx):
            best[i] = sub[j]
    clocks = np.where(exceeded, fine[0], fine[np.maximum(lo_ok, 0)])
    return clocks, best, exceeded  # type: ignore[return-value]


def clock_table(
    ops: Sequence[Any],
    gpu: GpuSpec,
    clocks_hz: np.ndarray,
    coeffs: Any,
    estimator: Estimator,
) -> dict[str, np.ndarray]:
    """Every op at every clock: util [C, N, M], latency_s [C, N], dram_bytes [C, N], sm_clock_hz [C].

    One vectorized kernel-model call per clock; what DVFS curves and the power fits' cap search read.
    """
    clocks = np.asarray(clocks_hz, dtype=float)
    per = [
        estimate_arrays(estimator(list(ops), gpu, OperatingPoint(sm_clock_hz=float(f)), coeffs))
        for f in clocks
    ]
    return {
        "util": np.stack([p["util"] for p in per]),
        "latency_s": np.stack([p["latency_s"] for p in per]),
        "dram_bytes": np.stack([p["dram_bytes"] for p in per]),
        "sm_clock_hz": clocks,
    }


def highest_fitting_index(
    power_w: np.ndarray, clocks_hz: np.ndarray, f_req: float, cap_w: float
) -> np.ndarray:
    """[N] index into ascending `clocks_hz` of the highest clock <= f_req whose power [C, N] fits the cap.

    Rows that fit at no clock get index 0 (the lowest clock).
    """
    ok = (power_w <= cap_w) & (np.asarray(clocks_hz)[:, None] <= f_req + 1e-3)
    c = ok.shape[0]
    # last True along axis 0
    rev = np.argmax(ok[::-1], axis=0)
    idx = c - 1 - rev
    return np.where(ok.any(axis=0), idx, 0)
