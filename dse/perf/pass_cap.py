"""The power cap on a pass's mean power: one clock per pass (DESIGN.md section 5).

A GPU's power limit is a controller on a moving average (about a second on our H100, `dse/calibrate/measured`
README): it lowers the clock of the whole GPU until the mean power over its window fits the cap. A workload
that repeats a pass shorter than the window (an eager forward pass, a training step) is seen as its mean:
hot GEMMs, cool elementwise kernels and host gaps together. So the rule here is one clock per pass, the
highest grid clock at or below the requested one at which the pass's mean power (its kernels' energy plus
the gaps' energy, over its wall time) fits the cap. A loop of one kernel (a kernel benchmark) is a pass of
one kernel, for which this is the per-kernel rule of `dse.perf.dvfs.capped_rows` (tested equal).

Where it applies: whole graphs (`dse predict --kernels`, `--model --phase`; `predict_graph`), each its own
pass; a training step (its microbatches and optimizer update as one pass, `dse.training.step`); a static
serving batch's prefill and its decode steps, one pass each (`dse.serving.static`); each engine step of
the serving load model, as its own pass (`dse.serving.step_table.capped_steps` computes the same rule from
two clocks instead of searching). `rule="kernel"` puts each kernel under the cap on its own (a kernel timed
in a loop; kept for comparisons).

Evidence: our H100 eager whole models whose GEMMs alone would draw over 700 W ran at 1980 MHz averaging
600-690 W (the per-kernel rule throttled those GEMMs: predicted power 15.3% off, 10.0% with this rule),
while the same GEMMs in a loop settled at the cap at 1360-1470 MHz; the held-out EnergAIzer A100 PCIe DVFS
runs, predicted at their requested clock under the card's 250 W cap, read 5.1% power error instead of 5.5%.

Search, per pass over the cap at the requested clock (all passes at once, one kernel-model call per round):
a guess from the pass's power at the requested clock as if it were compute-bound (`_guess`: dynamic power
scales with f V^2, idle with the GPU's table), the clock above it and the clocks under it, in one call: the
guess is often a few steps high, where some of the power falls slower than f V^2 (DRAM-bound time, DRAM
energy), and probing the clocks below it too closes such a bracket at once. How many below depends on the
pass's size (`PROBE_ROWS`): a few rows more cost far less than another call, so a static batch's prefill
pass probes eight (one kernel-model round instead of two or three), a decode pass of ~270 kernels one.
Then two rounds of a pair from the bracket (the mean interpolated between its ends); then bisection. Each
GEMM runs the kernel that is best at the clock probed, as at a locked clock (`--clock-mhz`), so a capped
pass is the pass locked at its effective clock and no lower clock whose pass fits is faster. (Keeping the
kernel chosen at the requested clock, as a library that does not watch the clock would, made a capped
pass slower than a lower locked clock that fits: the model's best tile at boost can be far from its best at
a low clock, while real decode kernels keep their DRAM-bound speed as the clock falls; session 35.) A
pass's mean power then need not be exactly monotone in its clock; the bracket's answer was checked
against an exhaustive search of locked clocks (tests). A pass over the cap even at the minimum clock runs
there, flagged.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from dse.hardware.spec import GpuSpec
from dse.perf.coeffs import PowerCoeffs
from dse.perf.dvfs import capped_rows, clock_grid_hz, power_cap_w, requested_clock_hz, rows_power
from dse.perf.multiclock import RowEstimator, op_rows, take_rows
from dse.perf.power import GpuPowerTerms
from dse.perf.types import OperatingPoint

CapRule = Literal["pass", "kernel"]
# The first probe's clocks under the guess, per pass: up to PROBE_BELOW_MAX while the pass's members times
# its clocks stay within PROBE_ROWS rows. A kernel-model call costs mostly its fixed numpy work (~2 ms on
# the 2-core VM; a 15-kernel prefill pass at 12 clocks costs about what it does at 3), while a decode
# pass's ~270 rows cost ~1 ms per clock. Over 462 searched passes of random `studies/llm_serving.yaml`
# points the answer lay 0-1 clocks under the guess in 42%, 2-8 in 57%, 9-16 in 2%.
PROBE_ROWS = 256
PROBE_BELOW_MAX = 8

# (pass index, rows of that pass's members, their power parts) -> (energy_j, wall_s) of one run of the pass.
PassEnergy = Callable[[int, dict[str, np.ndarray], dict[str, np.ndarray]], tuple[float, float]]


@dataclass(frozen=True, slots=True)
class PassRows:
    """Per pass: the kernel-model rows of its members at the pass's clock and their power parts."""

    rows: list[dict[str, np.ndarray]]  # util [n, M], latency_s, dram_bytes, sm_clock_hz, ...
    power: list[dict[str, np.ndarray]]  # power_parts_w of those rows
    exceeded: list[np.ndarray]  # per pass, per member: over the cap even at the lowest clock (runs there)
    requested_clock_hz: float
    power_cap_w: float


def pass_capped_rows(
    ops: Sequence[Any],
    members: Sequence[np.ndarray],
    gpu: GpuSpec,
    point: OperatingPoint,
    coeffs: Any,
    power_coeffs: PowerCoeffs,
    terms: GpuPowerTerms,
    pass_energy: PassEnergy,
    rows_fn: RowEstimator = op_rows,
    *,
    rule: CapRule = "pass",
) -> PassRows:
    """Each pass at the highest grid clock <= requested whose mean power fits the cap (module docstring).

    `members[p]` are the indices into `ops` of pass p's kernels (an op may belong to several passes, which
    may run at different clocks); `pass_energy` gives a pass's energy and wall time from its members' rows
    (the caller's repeat counts, host queue and gap power). `rule="kernel"`: each kernel on its own
    (`dse.perf.dvfs.capped_rows`)."""
    if rule == "kernel":
        each = capped_rows(ops, gpu, point, coeffs, power_coeffs, terms, rows_fn)
        return PassRows(
            [take_rows(each.rows, m) for m in members], [take_rows(each.power, m) for m in members],
            [each.cap_exceeded[m] for m in members], each.requested_clock_hz, each.power_cap_w,
        )  # fmt: skip
    f_req = requested_clock_hz(gpu, point)
    cap = power_cap_w(gpu, point)
    first_fn = rows_fn
    if rows_fn is op_rows:  # each GEMM's kernel is the best at the clock it runs at, as at a locked clock
        # (module docstring); the choices are kept for probes at the same clocks
        memo: dict = {}
        first_fn = functools.partial(op_rows, choice_clock_hz=f_req, choice_memo=memo)  # a prefetched share's
        rows_fn = functools.partial(op_rows, choice_memo=memo)
    rows = first_fn(ops, gpu, np.full(len(ops), f_req), coeffs)
    parts = rows_power(rows, terms, power_coeffs)
    out_rows = [take_rows(rows, m) for m in members]
    out_parts = [take_rows(parts, m) for m in members]
    mean_w = np.array([_mean_w(pass_energy(p, out_rows[p], out_parts[p])) for p in range(len(members))])
    over = np.nonzero(mean_w > cap)[0]
    exceeded = np.zeros(len(members), dtype=bool)
    fine = clock_grid_hz(gpu, hi_hz=f_req)
    fine = fine[fine < f_req - 1e-3]  # f_req itself is over the cap for these passes
    if over.size and fine.size == 0:  # requested at the grid's bottom: the passes run there, flagged
        exceeded[over] = True
    elif over.size:
        search = _PassSearch(ops, [members[p] for p in over.tolist()], over, gpu, fine, cap, coeffs, rows_fn)
        search.run(mean_w[over], f_req, terms, power_coeffs, pass_energy)
        for k, p in enumerate(over.tolist()):
            out_rows[p], out_parts[p] = search.best[k], search.best_parts[k]
            exceeded[p] = search.lo[k] < 0
    return PassRows(
        out_rows, out_parts, [np.full(m.size, e) for m, e in zip(members, exceeded, strict=True)], f_req, cap
    )


def pass_groups(
    passes: Sequence[Sequence[int]] | None, runs: Sequence[float] | None, n: int, rule: str
) -> tuple[list[list[int]], np.ndarray]:
    """(graph indices of each pass, runs of each graph per run of its pass) with their defaults (each
    graph its own pass, run once). ValueError unless every graph is in exactly one non-empty pass, `runs`
    has a finite non-negative value per graph (0: a graph that does not run, nor counts towards its pass's
    mean) and `rule` is a CapRule."""
    if rule not in ("pass", "kernel"):
        raise ValueError(f"cap rule {rule!r} is not 'pass' or 'kernel'")
    groups = [list(p) for p in passes] if passes is not None else [[i] for i in range(n)]
    if sorted(i for p in groups for i in p) != list(range(n)) or not all(groups):
        raise ValueError("passes must hold every graph index exactly once, in non-empty groups")
    weight = np.ones(n) if runs is None else np.asarray(runs, dtype=float)
    if weight.shape != (n,) or not np.all(np.isfinite(weight) & (weight >= 0.0)):
        raise ValueError(f"runs must be {n} finite values >= 0, one per graph")
    return groups, weight


def group_slices(group: list[int], graphs: Sequence[Any]) -> list[tuple[int, slice]]:
    """(graph index, its slice of the pass's rows) for the graphs of a pass, in the pass's order."""
    out, start = [], 0
    for i in group:
        out.append((i, slice(start, start + len(graphs[i].ops))))
        start += len(graphs[i].ops)
    return out


def sliced_rows(rows: dict[str, np.ndarray], sl: slice) -> dict[str, np.ndarray]:
    return {k: v[sl] for k, v in rows.items()}


def _mean_w(energy_wall: tuple[float, float]) -> float:
    energy_j, wall_s = energy_wall
    return energy_j / wall_s if wall_s > 0 else 0.0


def _guess(
    fine: np.ndarray, f_req: float, cap: float, mean_w: np.ndarray, terms: GpuPowerTerms
) -> np.ndarray:
    """[passes over] the highest index of `fine` at which each pass would fit were its power above idle
    all clock-driven work (compute-bound: dynamic power scales with f V^2); at or above the answer for a
    pass with DRAM-bound time, whose power falls less."""
    idle_req = float(terms.idle_power_w(np.asarray(f_req)))
    dyn = np.maximum(mean_w - idle_req, 0.0)[:, None]
    f = fine[None, :]
    scale = (f / f_req) * terms.v2(f) / terms.v2(np.asarray(f_req))
    fits = terms.idle_power_w(f) + dyn * scale <= cap
    top = fine.size - 1 - fits[:, ::-1].argmax(axis=1)
    return np.where(fits.any(axis=1), top, 0)


def _copies(*rows: dict[str, np.ndarray]) -> tuple[dict[str, np.ndarray], ...]:
    """New arrays of row dicts: what the prediction keeps of a probe. Not views of the probe's call, whose
    offsets would change the bits of the totals that BLAS's dot sums from them (its order follows the
    alignment of its operands)."""
    return tuple({key: v.copy() for key, v in r.items()} for r in rows)


class _PassSearch:
    """Per pass over the cap, the highest index of `fine` whose pass mean fits: `lo` (highest known to fit,
    -1 while none does) and `hi` (lowest known over; `fine.size` is the requested clock) close in on it.
    Each round is one kernel-model call for the members of every pass probed, each at its pass's clock."""

    def __init__(
        self, ops: Sequence[Any], members: list[np.ndarray], over: np.ndarray, gpu: GpuSpec,
        fine: np.ndarray, cap: float, coeffs: Any, rows_fn: RowEstimator,
    ) -> None:  # fmt: skip
        self.ops, self.members, self.over = ops, members, over
        self.gpu, self.fine, self.cap, self.coeffs, self.rows_fn = gpu, fine, cap, coeffs, rows_fn
        self.lo = np.full(over.size, -1)
        self.hi = np.full(over.size, fine.size)
        self.p_lo = np.zeros(over.size)  # mean power at lo and at hi (set by `run` and `_probe`)
        self.p_hi = np.zeros(over.size)
        self.p_req = np.zeros(over.size)  # mean power at the requested clock (`run`)
        self.best: list[dict[str, np.ndarray]] = [{} for _ in range(over.size)]
        self.best_parts: list[dict[str, np.ndarray]] = [{} for _ in range(over.size)]

    def _probe(
        self,
        which: np.ndarray,
        fine_idx: np.ndarray,
        terms: GpuPowerTerms,
        pc: PowerCoeffs,
        energy: PassEnergy,
    ) -> None:
        """Evaluate pass `over[which[j]]` at `fine[fine_idx[j]]` for every j, in one kernel-model call."""
        sizes = [self.members[k].size for k in which.tolist()]
        idx = np.concatenate([self.members[k] for k in which.tolist()])
        sub = self.rows_fn(
            [self.ops[i] for i in idx.tolist()], self.gpu, np.repeat(self.fine[fine_idx], sizes), self.coeffs
        )
        sub_parts = rows_power(sub, terms, pc)
        ends = np.cumsum(sizes)
        for k, f_idx, end, size in zip(which.tolist(), fine_idx.tolist(), ends.tolist(), sizes, strict=True):
            take = slice(end - size, end)
            r, q = sliced_rows(sub, take), sliced_rows(sub_parts, take)  # views, copied only when kept
            mean_w = _mean_w(energy(int(self.over[k]), r, q))
            if mean_w <= self.cap:
                if f_idx > self.lo[k]:
                    self.lo[k], self.p_lo[k], self.best[k], self.best_parts[k] = f_idx, mean_w, *_copies(r, q)
            elif f_idx < self.hi[k]:
                self.hi[k], self.p_hi[k] = f_idx, mean_w
                if f_idx == 0 and self.lo[k] < 0:  # nothing fits: the pass runs at the lowest clock
                    self.best[k], self.best_parts[k] = _copies(r, q)

    def run(
        self, mean_w: np.ndarray, f_req: float, terms: GpuPowerTerms, pc: PowerCoeffs, energy: PassEnergy
    ) -> None:
        """Close every bracket: the compute-bound guess from the pass's mean at the requested clock
        (`mean_w`), the clock above it and those under it (module docstring); two rounds of a pair from the
        bracket (the mean power interpolated between its ends, or the guess from its upper end); then
        bisection, which ends with lo + 1 == hi, so a pass with nothing fitting was probed (and kept) at
        index 0. `fine` is not empty."""
        self.p_hi[:] = mean_w
        self.p_req = np.array(mean_w, dtype=float)
        g = _guess(self.fine, f_req, self.cap, mean_w, terms)
        # the guess, the clock above it and `below` clocks under it per pass, in one call (module docstring)
        sizes = np.array([m.size for m in self.members])
        below = np.clip(PROBE_ROWS // np.maximum(sizes, 1) - 2, 1, PROBE_BELOW_MAX)
        steps = np.arange(1, -PROBE_BELOW_MAX - 1, -1)
        at = (g[:, None] + steps[None, :]).ravel()
        which = np.repeat(np.arange(self.over.size), steps.size)
        inside = (steps[None, :] >= -below[:, None]).ravel() & (at >= 0) & (at < self.fine.size)
        self._probe(which[inside], at[inside], terms, pc, energy)
        for _ in range(2):
            active = np.nonzero(self.hi - self.lo > 1)[0]
            if not active.size:
                return
            self._pair(active, self._estimate(active, f_req, terms), terms, pc, energy)
        while (active := np.nonzero(self.hi - self.lo > 1)[0]).size:
            self._probe(active, (self.lo[active] + self.hi[active]) // 2, terms, pc, energy)

    def _estimate(self, active: np.ndarray, f_req: float, terms: GpuPowerTerms) -> np.ndarray:
        """Where each active pass's mean crosses the cap inside its bracket: interpolated between the
        bracket's ends, or (nothing fits yet) the compute-bound guess from its upper end."""
        lo, hi = self.lo[active], self.hi[active]
        out = np.empty(active.size, dtype=int)
        for j, (a, b, k) in enumerate(zip(lo.tolist(), hi.tolist(), active.tolist(), strict=True)):
            if a >= 0:
                frac = (self.cap - self.p_lo[k]) / max(self.p_hi[k] - self.p_lo[k], 1e-12)
                out[j] = a + int(frac * (b - a))
            else:  # below a missed guess: the drop the last two known-over points' slope needs, x 1.5 (a pass
                # whose DRAM-bound time does not scale falls slower as the clock drops), at most the guess's
                ref = float(self.fine[b]) if b < self.fine.size else f_req
                guess = int(_guess(self.fine[:b], ref, self.cap, self.p_hi[k : k + 1], terms)[0])
                slope = (self.p_req[k] - self.p_hi[k]) / max(self.fine.size - b, 1)
                steps = 1.5 * (self.p_hi[k] - self.cap) / slope if slope > 0 else float(b)
                out[j] = min(guess, b - 1 - int(min(steps, float(b))))
        return np.minimum(np.maximum(out, lo + 1), hi - 1)

    def _pair(
        self, which: np.ndarray, at: np.ndarray, terms: GpuPowerTerms, pc: PowerCoeffs, energy: PassEnergy
    ) -> None:
        """Probe each pass `which[j]` at `at[j]` and the clock above it (below its known-over bound)."""
        at = np.clip(at, 0, self.fine.size - 1)
        up = at + 1 < np.minimum(self.hi[which], self.fine.size)
        self._probe(np.concatenate([which, which[up]]), np.concatenate([at, at[up] + 1]), terms, pc, energy)
