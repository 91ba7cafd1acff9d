"""Shared pieces of every kernel timeline: waves with busy and lazy SMs, phases, and the correction.

A kernel's analytical timeline has three phases (EnergAIzer section IV-B):

- prologue: the exposed pipeline fill (memory latency plus the first stage's load), per round of
  threadblocks on the busiest SM;
- mainloop: the pipelined iterations, each exposing the slowest of its overlapped actions; it carries all
  the compulsory operand traffic and all the math, so it alone is at least the roofline time of the inputs;
- epilogue: the stores (and split-K / split-KV reductions), not overlapped.

The fitted correction is `lambda_pro * t_pro + lambda_main * t_main + lambda_epi * t_epi + eps`. The
fit constrains `lambda_main >= 1`, `lambda_epi >= 1`, `lambda_pro >= 0`, `eps >= 0` (see
`dse.calibrate.fit.latency`): since the mainloop and the epilogue carry all compulsory work at ideal
rates, the corrected latency can never drop below the roofline bound.

Module busy times are kept per phase as a `[3, len(MODULES), N]` array (phase, module, row); a module's
utilization is the lambda-weighted sum of its busy times over the latency, as in the paper (IV-B3). Busy
times of SM-local modules are averaged over all SMs, so lazy SMs count with their idle tail.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from dse.perf.rates import DRAM_LATENCY_S as _LATENCY_S
from dse.perf.rates import Rates
from dse.perf.types import MODULES, KernelEstimate

PHASES: tuple[str, ...] = ("prologue", "mainloop", "epilogue")
MODULE_INDEX: dict[str, int] = {name: i for i, name in enumerate(MODULES)}
NUM_MODULES = len(MODULES)
_BYTES_IN_FLIGHT_PER_THREAD = 64.0  # 4 outstanding 16-byte vector loads per thread


def vmax(*arrays: np.ndarray | float) -> np.ndarray:
    """Elementwise maximum of several broadcastable arrays."""
    out = np.maximum(arrays[0], arrays[1])
    for a in arrays[2:]:
        out = np.maximum(out, a)
    return out


def float_rows(x: Any, num: int) -> np.ndarray:
    """`x` as a new float array of `num` rows (a scalar or [1] is repeated): what
    `np.broadcast_to(np.asarray(x, dtype=float), (num,)).astype(float)` gives, without broadcast_to's
    fixed cost (tens of microseconds, many times per kernel-model call) when `x` has its rows already."""
    a = np.asarray(x, dtype=float)
    return a.astype(float) if a.shape == (num,) else np.broadcast_to(a, (num,)).astype(float)


def bool_rows(x: Any, num: int) -> np.ndarray:
    """`x` as a bool array of `num` rows, as `np.broadcast_to(np.asarray(x, dtype=bool), (num,))` (read
    it only), without broadcast_to's fixed cost when `x` has its rows already."""
    a = np.asarray(x, dtype=bool)
    return a if a.shape == (num,) else np.broadcast_to(a, (num,))


def lookup_rows(table: Mapping[Any, Any], keys: Sequence[Any]) -> np.ndarray:
    """`np.array([table[key] for key in keys])`: one lookup and `np.full` when every key is the first (a
    call's rows mostly share one dtype: eager attention's 256 decode-step GEMMs look their dtype up ~10
    times each)."""
    if isinstance(keys, list | tuple) and keys and keys.count(keys[0]) == len(keys):
        return np.full(len(keys), table[keys[0]])
    return np.array([table[key] for key in keys])


def select(conds: list[np.ndarray], values: list[float], default: float) -> np.ndarray:
    """`np.select(conds, values, default)` (the first true condition's value) as nested `np.where`s,
    which cost a fraction of np.select's fixed overhead on arrays of tens of rows."""
    out = np.where(conds[-1], values[-1], default)
    for cond, value in zip(conds[-2::-1], values[-2::-1], strict=True):
        out = np.where(cond, value, out)
    return out


def cdiv(a: np.ndarray, b: np.ndarray | float) -> np.ndarray:
    """Ceiling division of positive float arrays holding integers."""
    return np.ceil(a / b)


def wave_schedule(
    num_ctas: np.ndarray, conc: np.ndarray, num_sms: np.ndarray | float
) -> dict[str, np.ndarray]:
    """Rounds of threadblocks on the busiest SM.

    Threadblocks are dealt round-robin to the SMs: `busy` SMs get one more than `lazy` ones, and the busiest
    SM holds `per_sm = ceil(G / S)` threadblocks, run `conc` at a time in `rounds = ceil(per_sm / conc)`
    rounds. The timeline treats the rounds as equal, with `conc_avg = per_sm / rounds` threadblocks per SM
    and `active_avg = G / rounds` device-wide (they share DRAM and L2): this keeps the exact totals (the
    busiest SM's work, every byte once) and makes the time non-increasing in the SM count.
    """
    g = np.maximum(num_ctas, 1.0)
    per_sm = np.ceil(g / num_sms)
    rounds = np.ceil(per_sm / conc)
    return {"rounds": rounds, "per_sm": per_sm, "conc_avg": per_sm / rounds, "active_avg": g / rounds}


@dataclass(frozen=True, slots=True)
class Timeline:
    """Ideal (uncorrected) phase structure of N kernels.

    The mainloop is a sum of J kinds of steps:
    `sum_j main_w[j] * max(dl * main_load[j], dm' * main_math[j])` where dl is the fitted load derate and
    dm' = 1 + (dm - 1) * sm_active_frac the fitted math derate weighed by the fraction of SMs the kernel
    occupies (1 for the analytical model): the shortfall of the math pipes grows with the number of busy
    SMs (shared L2 and memory bandwidth, power delivery); the cap's throttling itself is the cap rule's.
    `busy` is [3, M, N]: the ideal busy time of each module in each phase; in the mainloop the math modules
    (Tensor / CUDA cores, SFU) stretch with dm' and the memory modules (DRAM, L2, shared memory) with dl.
    """

    t_pro: np.ndarray
    t_epi: np.ndarray
    main_w: np.ndarray
    main_load: np.ndarray
    main_math: np.ndarray
    busy: np.ndarray
    sm_active_frac: np.ndarray

    def math_derate_eff(self, math_derate: np.ndarray | float) -> np.ndarray:
        return 1.0 + (np.asarray(math_derate) - 1.0) * self.sm_active_frac

    def t_main(
        self, math_derate: np.ndarray | float = 1.0, load_derate: np.ndarray | float = 1.0
    ) -> np.ndarray:
        return self._main_sum(self.math_derate_eff(math_derate), load_derate)

    def _main_sum(self, dm: np.ndarray | float, load_derate: np.ndarray | float) -> np.ndarray:
        """The mainloop time at the effective math derate `dm` (`math_derate_eff`)."""
        steps = self.main_w * np.maximum(load_derate * self.main_load, dm * self.main_math)
        # One kind of step (most kernels): np.sum over one row is that row, without its fixed cost.
        return steps[0] if steps.shape[0] == 1 else np.sum(steps, axis=0)

    def analytical_s(self) -> np.ndarray:
        return self.t_pro + self.t_main() + self.t_epi

    def take(self, idx: np.ndarray) -> Timeline:
        """The kernels `idx`."""
        return Timeline(
            t_pro=self.t_pro[idx],
            t_epi=self.t_epi[idx],
            main_w=self.main_w[:, idx],
            main_load=self.main_load[:, idx],
            main_math=self.main_math[:, idx],
            busy=self.busy[:, :, idx],
            sm_active_frac=self.sm_active_frac[idx],
        )

    def features(
        self, math_derate: np.ndarray | float = 1.0, load_derate: np.ndarray | float = 1.0
    ) -> np.ndarray:
        """[N, 3] phase times (prologue, mainloop at these derates, epilogue): the fit's design matrix."""
        return np.stack([self.t_pro, self.t_main(math_derate, load_derate), self.t_epi], axis=1)


def merge_timelines(parts: list[tuple[np.ndarray | slice, Timeline]], n: int) -> Timeline:
    """One timeline of n rows from timelines of row subsets (index arrays); J is padded with zeros."""
    j = max(tl.main_w.shape[0] for _, tl in parts)
    out = Timeline(
        t_pro=np.zeros(n),
        t_epi=np.zeros(n),
        main_w=np.zeros((j, n)),
        main_load=np.zeros((j, n)),
        main_math=np.zeros((j, n)),
        busy=empty_busy(n),
        sm_active_frac=np.zeros(n),
    )
    for sel, tl in parts:
        out.t_pro[sel] = tl.t_pro
        out.t_epi[sel] = tl.t_epi
        jj = tl.main_w.shape[0]
        out.main_w[:jj, sel] = tl.main_w
        out.main_load[:jj, sel] = tl.main_load
        out.main_math[:jj, sel] = tl.main_math
        out.busy[:, :, sel] = tl.busy
        out.sm_active_frac[sel] = tl.sm_active_frac
    return out


def sum_timelines(a: Timeline, b: Timeline) -> Timeline:
    """Two kernels run one after the other, as one timeline (their steps side by side)."""
    return Timeline(
        t_pro=a.t_pro + b.t_pro,
        t_epi=a.t_epi + b.t_epi,
        main_w=np.concatenate([a.main_w, b.main_w]),
        main_load=np.concatenate([a.main_load, b.main_load]),
        main_math=np.concatenate([a.main_math, b.main_math]),
        busy=a.busy + b.busy,
        sm_active_frac=np.maximum(a.sm_active_frac, b.sm_active_frac),
    )


def scale_timeline(tl: Timeline, factor: np.ndarray) -> Timeline:
    """`tl` with every kernel's times scaled by `factor` [N] (0 removes a kernel, 1 keeps it)."""
    return Timeline(
        t_pro=tl.t_pro * factor,
        t_epi=tl.t_epi * factor,
        main_w=tl.main_w * factor,
        main_load=tl.main_load,
        main_math=tl.main_math,
        busy=tl.busy * factor,
        sm_active_frac=tl.sm_active_frac,
    )


def add_to_prologue(tl: Timeline, pre: Timeline) -> Timeline:
    """A kernel that runs before `tl` (e.g. an input conversion): its whole ideal time joins the
    prologue, and its module busy times the prologue's."""
    busy = tl.busy.copy()
    busy[0] += pre.busy.sum(axis=0)
    return Timeline(
        t_pro=tl.t_pro + pre.analytical_s(),
        t_epi=tl.t_epi,
        main_w=tl.main_w,
        main_load=tl.main_load,
        main_math=tl.main_math,
        busy=busy,
        sm_active_frac=tl.sm_active_frac,
    )


def _rows_of(names: tuple[str, ...]) -> slice | list[int]:
    """The rows of `names` in a busy array: a slice where they are contiguous (in-place scaling through a
    slice skips fancy indexing's gather and scatter), else their indices."""
    idx = sorted(MODULE_INDEX[name] for name in names)
    return slice(idx[0], idx[-1] + 1) if idx == list(range(idx[0], idx[-1] + 1)) else idx


_MATH_MODULES = _rows_of(("tensor", "cuda", "sfu"))
_MEMORY_MODULES = _rows_of(("dram", "l2", "smem"))


def correct(tl: Timeline, coeffs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Apply per-row coefficients [N, 6] (`PhaseCoeffs.as_tuple()` rows).

    Returns latency_s [N] and utilization [M, N] in [0, 1].
    """
    # t_main weighs the math derate by the busy-SM fraction itself (as the fit's features do): pass it raw.
    load_derate = coeffs[:, 5]
    math_derate = tl.math_derate_eff(coeffs[:, 4])
    lam = coeffs[:, :3].T  # [3, N]
    # The phases added in order, as np.sum(axis=0) of their stack does (the same bits, less numpy overhead).
    t_main = tl._main_sum(math_derate, load_derate)
    latency_s = lam[0] * tl.t_pro + lam[1] * t_main + lam[2] * tl.t_epi + coeffs[:, 3]
    busy = tl.busy.copy()
    busy[1, _MATH_MODULES] *= math_derate
    busy[1, _MEMORY_MODULES] *= load_derate
    active_s = np.einsum("pn,pmn->mn", lam, busy)
    util = (active_s / np.maximum(latency_s, 1e-30)).clip(0.0, 1.0)  # np.clip without its wrapper's cost
    return latency_s, util


def empty_busy(n: int) -> np.ndarray:
    return np.zeros((3, NUM_MODULES, n))


def build_estimates(
    ops: list,
    kinds: list[str],
    out: dict[str, np.ndarray],
    sm_clock_hz: np.ndarray,
    tiles: list[str],
    groups: list[str],
) -> list[KernelEstimate]:
    """KernelEstimate values from a family's output arrays (one per op, in order)."""
    lat = out["latency_s"]
    util = out["util"]
    result = []
    for i, op in enumerate(ops):
        result.append(
            KernelEstimate(
                name=op.name,
                kind=kinds[i],
                count=op.count,
                latency_s=float(lat[i]),
                sm_clock_hz=float(sm_clock_hz[i]),
                flop=float(out["flop"][i]),
                dram_bytes=float(out["dram_bytes"][i]),
                l2_bytes=float(out["l2_bytes"][i]),
                smem_bytes=float(out["smem_bytes"][i]),
                util={m: float(util[j, i]) for j, m in enumerate(MODULES)},
                tile=tiles[i],
                group=groups[i],
                analytical_s=float(out["analytical_s"][i]),
            )
        )
    return result


def machine_rates(rates: Rates) -> dict[str, Any]:
    """The machine keywords of `streaming_timeline` from a GPU's `Rates` at one clock."""
    return {
        "rates_num_sms": rates.num_sms,
        "dram_bw_bytes_per_s": rates.dram_bw_bytes_per_s,
        "l2_sm": rates.l2_bw_per_sm_bytes_per_s,
        "l2_tot": rates.l2_bw_bytes_per_s,
        "smem_sm": rates.smem_bw_per_sm_bytes_per_s,
        "fp32_sm": rates.fp32_flop_per_s_per_sm,
        "sfu_sm": rates.sfu_op_per_s_per_sm,
    }


def streaming_timeline(
    *,
    rates_num_sms: np.ndarray | float,
    dram_bw_bytes_per_s: np.ndarray | float,
    l2_sm: np.ndarray,
    l2_tot: np.ndarray,
    smem_sm: np.ndarray,
    fp32_sm: np.ndarray,
    sfu_sm: np.ndarray,
    grid: np.ndarray,
    conc: np.ndarray,
    threads: np.ndarray,
    dram_b: np.ndarray,
    l2_b: np.ndarray,
    smem_b: np.ndarray,
    flop: np.ndarray,
    sfu_op: np.ndarray,
    passes: np.ndarray,
    in_flight_b: np.ndarray | None = None,
) -> Timeline:
    """Timeline of a streaming kernel (elementwise, softmax, norms): no software pipeline.

    Per threadblock: DRAM bytes `dram_b`, L2 -> SM bytes `l2_b`, shared-memory bytes `smem_b`, CUDA-core
    FLOP and SFU ops. Threadblocks start as soon as a slot frees, so the kernel takes the slowest of its
    bottlenecks: the DRAM and L2 totals at full bandwidth; the busiest SM's share through its L2 port, its
    shared memory, its CUDA cores and SFUs; a Little's-law limit (each thread keeps `in_flight_b` bytes of
    loads in flight, 64 by default, so an SM moves at most `resident threads * in_flight_b` per DRAM
    latency); and the dependent DRAM
    round trips, one per pass over the data for each round of resident threadblocks (a threadblock cannot
    finish before its loads return, a reduction must finish before it is applied). The prologue is the
    exposed latency of those passes once more (launch and ramp).
    """
    sms = rates_num_sms
    in_flight = _BYTES_IN_FLIGHT_PER_THREAD if in_flight_b is None else in_flight_b
    per_sm = np.ceil(grid / sms)  # threadblocks of the busiest SM
    resident = np.minimum(conc, per_sm)
    rounds = np.ceil(per_sm / conc)
    load = vmax(
        grid * dram_b / dram_bw_bytes_per_s,
        grid * l2_b / l2_tot,
        per_sm * l2_b / l2_sm,
        per_sm * smem_b / smem_sm,
        per_sm * l2_b * _LATENCY_S / (resident * threads * in_flight),
        rounds * passes * _LATENCY_S,
    )
    math = vmax(per_sm * flop / fp32_sm, per_sm * sfu_op / sfu_sm)
    n = np.shape(load)[0]
    busy = empty_busy(n)
    busy[1, MODULE_INDEX["dram"]] = grid * dram_b / dram_bw_bytes_per_s
    busy[1, MODULE_INDEX["l2"]] = grid * l2_b / l2_tot
    busy[1, MODULE_INDEX["smem"]] = grid * smem_b / (smem_sm * sms)
    busy[1, MODULE_INDEX["cuda"]] = grid * flop / (fp32_sm * sms)
    busy[1, MODULE_INDEX["sfu"]] = grid * sfu_op / (sfu_sm * sms)
    return Timeline(
        t_pro=passes * _LATENCY_S + np.zeros(n),
        t_epi=np.zeros(n),
        main_w=np.ones((1, n)),
        main_load=load[None, :],
        main_math=math[None, :],
        busy=busy,
        sm_active_frac=np.minimum(1.0, grid / sms),
    )
