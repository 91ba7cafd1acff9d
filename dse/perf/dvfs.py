"""DVFS: clock grids, voltage and idle power at any clock, and the effective clock under a power cap.

Any SM clock in the GPU's range is allowed; V(f) and P_idle(f) are the GPU's tables, linearly interpolated
and clamped at their ends (`GpuSpec.power.core_v`, `.idle_power_w`). The kernel model decides how latency
responds to the clock (SM-side rates scale with f, DRAM bandwidth does not), so compute-bound time scales
with 1/f and DRAM-bound time stays put.

Power cap (DESIGN.md section 5). A GPU over its power limit lowers its clock. Workloads (`dse.perf.predict`)
hold each pass's mean power under the cap (`dse.perf.pass_cap`); `capped_rows` here is the rule for a kernel
timed in a loop (a pass of one kernel: the kernel tables' fits and validations). Per kernel, the effective
clock is the highest clock on the GPU's clock grid (`sm_clock_step_hz`) at or below the requested one
whose predicted power fits the cap:

1. estimate every kernel at the requested clock; kernels within the cap are done (one kernel-model call);
2. for the others, guess the answer from their power at the requested clock as if they were
   compute-bound (work per second, and so on-chip and DRAM power, scale with f; `_guess_index`), and
   estimate them, in one call, at the guess, one grid step above it and `WINDOW` steps below it: the highest
   of these that fits, with the step above it over, is the answer (most kernels: a DRAM-bound part only
   makes the guess too high, by a step or two);
3. a window of `WINDOW` clocks above a guess that was too low, then every clock still inside the brackets
   in one call when they are few (`MAX_TABLE_ROWS`), else bisection rounds (`_CapSearch`), each round one
   call for all kernels at their own clocks (`dse.perf.multiclock` evaluates a clock per op).

This assumes power is non-decreasing in clock for a kernel, which the model satisfies for a fixed kernel; a
throttled GEMM runs the tile best at its clock, as at a locked clock (`dse.perf.pass_cap`). A kernel
that exceeds the cap even at the minimum clock runs at the minimum clock and is flagged (`cap_exceeded`);
caps below the GPU's minimum settable limit (or its idle power, where none is published) are rejected.
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

WINDOW = 3  # grid clocks the cap search probes next to a missed guess
MAX_ROWS_PER_CALL = 20_000  # (op, clock) pairs per kernel-model call in clock_table
MAX_TABLE_ROWS = 512  # (op, clock) pairs the cap search probes at once to close every bracket


def row_estimator(estimator: Estimator | None = None) -> RowEstimator:
    """The kernel model as a row estimator: `multiclock.op_rows` (the registry's families) by default, or
    an adapter around another `KernelEstimate`-returning estimator (tests inject stand-ins)."""
    return op_rows if estimator is None else estimator_rows(estimator)


def clock_outside_range(gpu: GpuSpec, clock_mhz: float) -> tuple[float, float] | None:
    """The GPU's SM clock range (min, max MHz) when `clock_mhz` lies outside it (with a rounding guard of
    1e-6 MHz), else None: the model clamps such a clock (`requested_clock_hz`), so a caller asked for it
    says so."""
    lo_mhz, hi_mhz = gpu.clocks.sm_clock_min_hz / 1e6, gpu.clocks.sm_clock_max_hz / 1e6
    return None if lo_mhz - 1e-6 <= clock_mhz <= hi_mhz + 1e-6 else (lo_mhz, hi_mhz)


def requested_clock_hz(gpu: GpuSpec, point: OperatingPoint) -> float:
    """The requested SM clock (default: the GPU's boost clock), clamped to the GPU's range."""
    f = gpu.clocks.boost_clock_hz if point.sm_clock_hz is None else float(point.sm_clock_hz)
    return float(np.clip(f, gpu.clocks.sm_clock_min_hz, gpu.clocks.sm_clock_max_hz))


def power_cap_w(gpu: GpuSpec, point: OperatingPoint) -> float:
    """The cap in force: the operating point's, else the GPU's TDP (its default power limit).

    Raises:
        ConfigError: a cap that is not positive or lies below the GPU's minimum settable limit (or, where
            none is given, below its idle power at the minimum clock). A cap above the TDP (the largest
            limit the driver accepts) is the TDP.
    """
    cap = gpu.power.tdp_w if point.power_cap_w is None else float(point.power_cap_w)
    lowest = gpu.power.power_cap_min_w
    what = "TDP" if point.power_cap_w is None else "power cap"
    if not cap > 0 or (lowest is not None and cap < lowest - 1e-9):
        floor = f" (the minimum settable limit of {gpu.name} is {lowest:g} W)" if lowest else ""
        raise ConfigError(f"{what} {cap:g} W is not allowed{floor}")
    # Without a published minimum limit, a cap below the board's idle power at its lowest clock is one no
    # clock can meet.
    idle_w = float(idle_power_w(gpu, gpu.clocks.sm_clock_min_hz))
    if lowest is None and cap < idle_w:
        raise ConfigError(
            f"{what} {cap:g} W is below {gpu.name}'s idle power ({idle_w:.0f} W at its minimum clock): "
            "no clock meets it"
        )
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


def rows_power(rows: dict[str, np.ndarray], terms: GpuPowerTerms, pc: PowerCoeffs) -> dict[str, np.ndarray]:
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
    parts = rows_power(rows, terms, power_coeffs)
    over = np.nonzero(parts["total"] > cap)[0]
    exceeded = np.zeros(n, dtype=bool)
    if over.size:
        fine = clock_grid_hz(gpu, hi_hz=f_req)
        fine = fine[fine < f_req - 1e-3]  # f_req itself is known to be over the cap
        if fine.size == 0:
            sub, sub_exceeded = take_rows(rows, over), np.ones(over.size, dtype=bool)
        else:
            guess = _guess_index(fine, f_req, cap, take_rows(parts, over), terms, power_coeffs)
            search = _CapSearch([ops[i] for i in over.tolist()], gpu, fine, cap, coeffs, rows_fn)
            sub, sub_exceeded = search.run(guess, terms, power_coeffs)
        put_rows(rows, over, sub)
        exceeded[over] = sub_exceeded
        parts = rows_power(rows, terms, power_coeffs)
    return CappedRows(
        rows=rows, power=parts, requested_clock_hz=f_req, power_cap_w=cap, cap_exceeded=exceeded
    )


def _guess_index(
    fine: np.ndarray, f_req: float, cap: float, parts: dict[str, np.ndarray], terms: GpuPowerTerms,
    pc: PowerCoeffs,
) -> np.ndarray:  # fmt: skip
    """[n] the highest index of `fine` at which each op would fit the cap were it compute-bound: its work
    per second, and so its on-chip and DRAM power at `f_req` (`parts`), then scales with f (on-chip also
    with V^2). Time that does not scale with the clock (DRAM-bound) makes an op draw more than that at a
    lower clock, so the guess lies at or above the answer, and mostly on it (module docstring)."""
    f = fine[None, :]
    v2 = terms.v2(f)
    onchip = parts["onchip"].sum(axis=-1)[:, None] * (f / f_req) * v2 / terms.v2(np.asarray(f_req))
    dram = parts["dram"][:, None] * (f / f_req)
    active = pc.active_j_per_sm_cycle * terms.num_sms * f * v2  # as `power_parts_w`
    fits = terms.idle_power_w(f) + active + onchip + dram <= cap
    top = fine.size - 1 - np.argmax(fits[:, ::-1], axis=1)
    return np.where(fits.any(axis=1), top, 0)


def _ranges(op_idx: np.ndarray, start: np.ndarray, count: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(op, fine index) pairs of the index ranges [start, start + count) of the ops `op_idx`."""
    count = np.maximum(count, 0)
    total = int(count.sum())
    first = np.cumsum(count) - count
    offset = np.arange(total) - np.repeat(first, count)
    return np.repeat(op_idx, count), np.repeat(start, count) + offset


class _CapSearch:
    """Per op, the highest index of the clock grid `fine` whose power fits the cap: `lo` (the highest index
    known to fit, -1 while none is) and `hi` (the lowest known to be over; `fine.size` stands for the
    requested clock) close in on it. Each probe is one kernel-model call for every (op, clock) pair asked
    (`dse.perf.multiclock` takes a clock per op), and each row depends on its op and clock alone."""

    def __init__(
        self, ops: list[Any], gpu: GpuSpec, fine: np.ndarray, cap: float, coeffs: Any, rows_fn: RowEstimator
    ) -> None:
        self.ops, self.gpu, self.fine, self.cap = ops, gpu, fine, cap
        self.coeffs, self.rows_fn = coeffs, rows_fn
        self.lo = np.full(len(ops), -1)
        self.hi = np.full(len(ops), fine.size)
        self.best: dict[str, np.ndarray] = {}

    def _probe(self, op_idx: np.ndarray, fine_idx: np.ndarray, terms: GpuPowerTerms, pc: PowerCoeffs) -> None:
        if op_idx.size == 0:
            return
        sub = self.rows_fn([self.ops[i] for i in op_idx.tolist()], self.gpu, self.fine[fine_idx], self.coeffs)
        ok = rows_power(sub, terms, pc)["total"] <= self.cap
        if not self.best:
            self.best = {k: np.zeros((len(self.ops), *v.shape[1:]), v.dtype) for k, v in sub.items()}
        np.maximum.at(self.lo, op_idx[ok], fine_idx[ok])
        np.minimum.at(self.hi, op_idx[~ok], fine_idx[~ok])
        # Keep each op's highest fitting row, or its lowest clock's while nothing fits (where it then runs).
        lo = self.lo[op_idx]
        keep = np.nonzero((ok & (fine_idx == lo)) | (~ok & (fine_idx == 0) & (lo < 0)))[0]
        put_rows(self.best, op_idx[keep], take_rows(sub, keep))

    def run(
        self, guess: np.ndarray, terms: GpuPowerTerms, pc: PowerCoeffs
    ) -> tuple[dict[str, np.ndarray], np.ndarray]:
        """(rows at each op's answer, whether it fits nowhere: it then runs at the lowest clock)."""
        n, size = len(self.ops), self.fine.size
        ops = np.arange(n)
        g = np.clip(guess, 0, size - 1)
        # 1. The guess, the clock above it (the answer when the guess fits and the next one does not) and
        # the window below it (where a DRAM-bound op's too-high guess lands), in one call: a kernel-model
        # call costs mostly its fixed numpy overhead, so the extra rows cost less than a second round.
        start = np.maximum(g - WINDOW, 0)
        self._probe(*_ranges(ops, start, np.minimum(g + 2, size) - start), terms, pc)
        # 2. A window above a guess that fits with the clock above it too (a guess too low). Below needs
        # none: where the guess is over, the clock under it was probed too, so either it fits (the bracket
        # is closed) or the bracket already ends under the guess (step 3).
        above = np.nonzero((self.lo == g + 1) & (self.hi - self.lo > 1))[0]
        self._probe(
            *_ranges(above, self.lo[above] + 1, np.minimum(WINDOW, self.hi[above] - self.lo[above] - 1)),
            terms, pc,
        )  # fmt: skip
        # 3. Every clock left inside the brackets in one call when they are few, else bisection rounds.
        while (active := np.nonzero(self.hi - self.lo > 1)[0]).size:
            inner = self.hi[active] - self.lo[active] - 1
            if inner.sum() <= MAX_TABLE_ROWS:
                self._probe(*_ranges(active, self.lo[active] + 1, inner), terms, pc)
            else:
                self._probe(active, (self.lo[active] + self.hi[active]) // 2, terms, pc)
        return self.best, self.lo < 0


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
