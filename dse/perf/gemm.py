"""GEMM on Tensor Cores (per dtype) and on CUDA cores (fp32): tiles, waves, traffic and timeline.

`C[batch, m, n] = A[batch, m, k] @ B[batch or 1, k, n]`. For each candidate (tile, split-K) of
`dse.perf.tiles` the model builds the per-threadblock timeline and picks the candidate with the lowest
analytical latency (the selection rule documented in `tiles`).

Traffic (per execution):
- L2 -> SM: every threadblock loads its A rows and B columns for its K range (partial edge tiles load only
  their real rows: TMA / predicated loads do not fetch out-of-bounds data).
- DRAM: ideal swizzling reads A and B once. When A and B together exceed the L2, the fraction that does not
  fit is re-read once per wave: a wave covers a near-square block of `a x b` output tiles and loads
  `a` row panels of A and `b` column panels of B. DRAM traffic is always at least the compulsory bytes.
- C is written once (split-K: each slice writes fp32 partials, a reduction kernel reads them and writes C).
- shared memory: the stage writes plus the MMA instructions' operand reads, per warp (Ampere), warpgroup
  (Hopper) or CTA (Blackwell's tcgen05; a 2-SM CTA pair splits B): `dse.perf.gemm_steps`.

Timeline per round of threadblocks (`conc` per SM, `active` device-wide):
- load of one stage: max(DRAM share, L2 slice, shared-memory write, latency / (stages - 1));
- MMA of one stage: max(Tensor-Core time of the padded tile, shared-memory reads, and for weight-only
  GEMMs the CUDA-core dequantization of the stage's B tile, `gemm_steps.DEQUANT_SM_CYCLES_PER_WEIGHT`,
  whose work the power model charges to the CUDA cores);
- prologue = DRAM latency + one stage load; mainloop = K steps x max(load, MMA); epilogue = C store.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from dse.hardware.spec import GpuSpec
from dse.perf import moe
from dse.perf.arrays import (
    CandidatePlan,
    GemmCandidates,
    GemmChoice,
    GemmRows,
    OperandTraffic,
    PhaseTimes,
    RoundSchedule,
    TileGeometry,
    uniform_cut,
)
from dse.perf.gemm_quant import activation_quant
from dse.perf.gemm_result import SK_FIX_TILES, KeptScores, ResultInputs, full_result, result_inputs
from dse.perf.gemm_rows import ChoiceMemo, ChoiceProblems, choice_rows, row_inputs
from dse.perf.gemm_steps import step_costs
from dse.perf.gpu_rows import GpuRows, tensor_rates
from dse.perf.pipeline import (
    Timeline,
    add_to_prologue,
    bool_rows,
    build_estimates,
    correct,
    float_rows,
    lookup_rows,
    merge_timelines,
    scale_timeline,
    vmax,
    wave_schedule,
)
from dse.perf.rates import DRAM_LATENCY_S, Rates, effective_sm_clock_hz, rates_at, tensor_dtype_used
from dse.perf.tiles import (
    LIBRARIES,
    PERSISTENT_LIBRARIES,
    STREAM_K,
    TILE_CLASSES,
    dispatch_valid,
    gemm_candidates,
    gemm_library,
    kernel_name,
    valid_grid,
)
from dse.perf.types import CoeffTable, KernelEstimate, OperatingPoint, coeff_table
from dse.workload.ops import GemmOp

# Coefficient groups: gemm/<dtype class>/<tile class>.
DTYPE_CLASS: dict[str, str] = {
    "bf16": "f16",
    "fp16": "f16",
    "fp8": "f8",
    "int8": "f8",
    "tf32": "tf32",
    "fp32": "fp32",
    "fp4": "f4",
}
DTYPE_CLASSES: tuple[str, ...] = ("f16", "f8", "tf32", "fp32", "f4")
GROUPS: tuple[str, ...] = tuple(f"gemm/{d}/{t}" for d in DTYPE_CLASSES for t in TILE_CLASSES)

# `_best_candidate` scores the valid (row, candidate) pairs only from this many rows x candidates, when at
# most this share of them is valid (below, gathering the pairs costs more than it saves).
_PAIRS_MIN_GRID = 2048
_PAIRS_MAX_FRAC = 0.6


def _tile_geometry(r: GemmRows, c: GemmCandidates, sms: np.ndarray | float) -> TileGeometry:
    """Output tiles, K steps and per-step staging bytes of candidates `c` for rows `r` (broadcast)."""
    m, n, k, batch, in_b, b_b = r.m, r.n, r.k, r.batch, r.in_elem_bytes, r.b_elem_bytes
    tm, tn, pair = c.tile_m, c.tile_n, c.cta_pair
    stream_k = c.split == STREAM_K
    s = np.where(stream_k, 1.0, c.split)
    kt = c.k_step_bytes / in_b
    tiles_m = np.ceil(m / (tm * pair)) * pair  # a 2-SM MMA's pair of CTAs covers 2 tile_m rows
    tiles_n = np.ceil(n / tn)
    k_split = np.ceil(k / s)
    nk = np.ceil(k_split / kt)
    plane = tiles_m * tiles_n
    g = plane * s * batch
    valid = dispatch_valid(m, c, stream_k, s, k_split, kt)
    mt_avg = m / tiles_m
    nt_avg = n / tiles_n
    kt_avg = k_split / nk
    # L2 reads per K step: B is multicast to the threadblocks of a cluster (only when they exist); a CTA of
    # a 2-SM MMA pair loads and stages only its half of B.
    mcast = np.minimum(c.multicast, tiles_m)
    mcast_a = np.minimum(c.multicast_a, tiles_n)
    nt_own = nt_avg / pair
    return TileGeometry(
        stream_k=stream_k,
        splits=s,
        k_tile=kt,
        tiles_m=tiles_m,
        tiles_n=tiles_n,
        k_split=k_split,
        nk=nk,
        plane=plane,
        grid=g,
        units=g * nk,  # K iterations of all threadblocks
        slots=sms * c.conc,
        valid=valid,
        mt_avg=mt_avg,
        nt_avg=nt_avg,
        step_bytes=(mt_avg * in_b + nt_own * b_b) * kt_avg,  # what one threadblock stages per K step
        step_l2_bytes=(mt_avg / mcast_a * in_b + nt_own / mcast * b_b) * kt_avg,
    )


def _operand_traffic(r: GemmRows, v: TileGeometry, l2_bytes: float) -> OperandTraffic:
    """DRAM traffic of A and B: ideal reuse when they fit in L2, per-wave re-reads of the rest."""
    m, n, k, batch, in_b, b_b = r.m, r.n, r.k, r.batch, r.in_elem_bytes, r.b_elem_bytes
    tiles_m, tiles_n, plane, mt_avg, nt_avg = v.tiles_m, v.tiles_n, v.plane, v.mt_avg, v.nt_avg
    l2_ab = v.units * v.step_l2_bytes
    b_batches = np.where(r.b_shared, 1.0, batch)
    ideal = batch * m * k * in_b + b_batches * k * n * b_b
    w = np.minimum(v.slots, plane)
    a_blk = np.sqrt(w).clip(1.0, tiles_m)  # continuous, so that traffic never grows with more SMs
    b_blk = (w / a_blk).clip(1.0, tiles_n)
    wave_b = (a_blk * mt_avg * in_b + b_blk * nt_avg * b_b) * v.k_split
    per_wave = (plane / w) * wave_b * v.splits * batch
    fit = (l2_bytes / ideal).clip(0.0, 1.0)
    dram_ab = np.minimum(fit * ideal + (1.0 - fit) * np.maximum(per_wave, ideal), l2_ab)
    dram_ab = np.maximum(dram_ab, ideal)
    return OperandTraffic(l2_bytes=l2_ab, dram_bytes=dram_ab, dram_ratio=dram_ab / l2_ab)


def _round_schedule(v: TileGeometry, conc: np.ndarray, sms: np.ndarray | float) -> RoundSchedule:
    """Data-parallel (and split-K) rounds of the busiest SM; stream-K deals the K iterations evenly.

    The rounds, the stream-K counts and the threadblocks per SM (`cc`, `cc_tile`) and device-wide (`act`).
    """
    g, units, slots, stream_k = v.grid, v.units, v.slots, v.stream_k
    sched = wave_schedule(g, conc, sms)
    sk_iters = np.ceil(units / slots)  # K iterations of the busiest slot
    sk_act = units / sk_iters  # threadblocks active per K iteration, on average
    sk_cc = np.ceil(units / sms) / sk_iters  # per SM, on average
    # Threadblocks per SM for the per-tile costs (fill, fix-up, store): the smooth share, so that these
    # never grow with the SM count (the rounded one above does, between its steps).
    sk_cc_tile = np.minimum(conc, units / sms)
    return RoundSchedule(
        rounds=sched["rounds"],
        sk_iters=sk_iters,
        sk_tiles=np.ceil(g / slots),  # output tiles a slot finishes
        sk_act=sk_act,
        sk_cc_tile=sk_cc_tile,
        cc=np.where(stream_k, sk_cc, sched["conc_avg"]),
        cc_tile=np.where(stream_k, sk_cc_tile, sched["conc_avg"]),
        act=np.where(stream_k, sk_act, sched["active_avg"]),
    )


def _phase_times(
    r: GemmRows, c: GemmCandidates, p: CandidatePlan, rates: Rates, persistent: bool
) -> PhaseTimes:
    """Prologue, epilogue and mainloop (`steps` of `load_s` load and `math_s` math) of the candidates."""
    bw_dram = r.dram_bw_bytes_per_s
    l2_sm, l2_tot, smem_sm = r.l2_bw_per_sm_bytes_per_s, r.l2_bw_bytes_per_s, r.smem_bw_per_sm_bytes_per_s
    v, sc, co = p.geo, p.sched, p.costs
    stream_k, step_l2, step_b, g, conc = v.stream_k, v.step_l2_bytes, v.step_bytes, v.grid, c.conc
    lat_floor = DRAM_LATENCY_S / np.maximum(c.stages - 1.0, 1.0)
    out_cta_b, out_dram = co.out_cta_bytes, co.out_dram

    def fill(cc: np.ndarray) -> np.ndarray:
        # Exposed pipeline fill: the latency plus this SM's first stage (its DRAM / L2 share is already
        # in the mainloop, which carries every load).
        return DRAM_LATENCY_S + vmax(cc * step_l2 / l2_sm, cc * step_b / smem_sm)

    def store_shared(act: np.ndarray, nbytes: np.ndarray) -> np.ndarray:  # DRAM and L2 shares
        return np.maximum(act * nbytes * out_dram / bw_dram, act * nbytes / l2_tot)

    def store_local(cc: np.ndarray, nbytes: np.ndarray) -> np.ndarray:  # this SM's port and smem
        return np.maximum(cc * nbytes / l2_sm, cc * nbytes / smem_sm)

    cc, act = sc.cc, sc.act
    ld = vmax(
        act * step_l2 * p.traffic.dram_ratio / bw_dram,
        act * step_l2 / l2_tot,
        cc * step_l2 / l2_sm,
        cc * step_b / smem_sm,
        lat_floor,
    )
    mm = cc * co.t_math_s
    # Stores: a data-parallel round stores its tiles; stream-K stores g / sk_tiles tiles per store round.
    cc_st = np.where(stream_k, np.minimum(conc, g / r.num_sms), cc)  # tiles stored per SM per round
    n_st = np.where(stream_k, sc.sk_tiles, sc.rounds)  # store rounds
    act_st = g / n_st
    # stream-K only: the partial tile goes through the (L2-resident) workspace
    e_fix = np.where(stream_k, SK_FIX_TILES * sc.sk_cc_tile * co.fix_bytes / l2_sm, 0.0)
    w = np.where(stream_k, sc.sk_iters, sc.rounds * v.nk)
    if persistent:
        # One threadblock per slot loops over its tiles: the pipeline fills once, and the producer keeps
        # loading the next tile while the previous tile's C drains, so earlier stores only add traffic to
        # the mainloop steps; only the last tile's store (and any fix-up or split-K reduction) is exposed.
        # The stores' DRAM / L2 traffic joins the mainloop, which thus carries every compulsory byte;
        # the last store is exposed only through this SM's port.
        t_pro = fill(sc.cc_tile)
        ld = ld + n_st * store_shared(act_st, out_cta_b) / w
        t_epi = store_local(cc_st, out_cta_b) + e_fix + co.t_red_s
    else:
        t_pro = np.where(stream_k, sc.sk_tiles + SK_FIX_TILES, sc.rounds) * fill(sc.cc_tile)
        t_epi = (
            n_st * np.maximum(store_shared(act_st, out_cta_b), store_local(cc_st, out_cta_b))
            + e_fix
            + co.t_red_s
        )
    return PhaseTimes(t_pro_s=t_pro, t_epi_s=t_epi, steps=w, load_s=ld, math_s=mm)


def _evaluate(r: GemmRows, c: GemmCandidates, rates: Rates, library: str) -> tuple[CandidatePlan, PhaseTimes]:
    """Plan and phase times of candidates `c` for rows `r` (rows [N, 1], candidates [1, C] or [N, 1],
    broadcast): what the candidate choice needs, and `gemm_result.full_result` turns into a timeline."""
    v = _tile_geometry(r, c, r.num_sms)
    p = CandidatePlan(
        geo=v,
        traffic=_operand_traffic(r, v, rates.l2_bytes),
        sched=_round_schedule(v, c.conc, r.num_sms),
        costs=step_costs(r, c, v, rates, library),
    )
    return p, _phase_times(r, c, p, rates, library in PERSISTENT_LIBRARIES)


def _best_candidate(
    col: GemmRows,
    cands: GemmCandidates,
    cand_group: np.ndarray,
    rates: Rates,
    table: np.ndarray,
    library: str,
    math_factor: np.ndarray,
    kept: list[KeptScores] | None = None,
) -> np.ndarray:
    """Per row, the index of the candidate with the lowest corrected latency (math time x `math_factor`;
    it and the groups `cand_group` may have one row for all).

    Only candidates valid for some row are scored (eager attention's decode GEMMs admit a third of the
    splits, vLLM's fp8 kernels one tile per M); large calls whose valid (row, candidate) pairs are a
    minority of that grid score the pairs alone, flattened. Every value is elementwise in its row and
    candidate, so the scores, and the first lowest one per row, are those of the full grid.
    `kept` (a list): receives the evaluation behind the scores (`gemm_result.KeptScores`).
    """
    num, num_c = col.m.shape[0], cands.tile_m.shape[-1]
    small = num * num_c < _PAIRS_MIN_GRID  # numpy's fixed cost dominates: the whole grid, no selection
    # the same values broadcast, fewer operations
    grid_rows = col if small else col.uniform_collapsed()
    valid = np.ones((1, num_c), dtype=bool) if small else valid_grid(grid_rows, cands, num)
    cols = np.arange(num_c) if small else np.nonzero(valid.any(axis=0))[0]
    if not cols.size:  # nothing valid: every row takes the first candidate, as a full grid's argmin does
        return np.zeros(num, dtype=np.intp)
    if small or np.count_nonzero(valid) > _PAIRS_MAX_FRAC * num * cols.size:
        some = cols.size < num_c
        sub, sub_group = (cands.at_columns(cols), cand_group[:, cols]) if some else (cands, cand_group)
        pred, p, t = _scores(grid_rows, sub, sub_group, rates, table, library, math_factor[:, None])
        pred = pred if pred.shape[0] == num else np.broadcast_to(pred, (num, pred.shape[1]))
        if kept is not None:
            col_of = np.full(num_c, -1, dtype=np.intp)
            col_of[cols] = np.arange(cols.size)
            kept.append(KeptScores(p, t, pred.shape, None, col_of if some else None))
        best = np.where(p.geo.valid, pred, np.inf).argmin(axis=1)
        return np.where(valid.any(axis=1), cols[best], 0) if some else best  # no valid: the first, as above
    ri, ci = np.nonzero(valid)
    grid = np.full((num, num_c), np.inf)
    pair_rows, pair_cands = col.at_pairs(ri), cands.at_pairs(ci)
    pair_group = np.broadcast_to(cand_group, (num, num_c))[ri, ci]
    pair_factor = np.broadcast_to(math_factor, (num,))[ri]
    pred, p, t = _scores(pair_rows, pair_cands, pair_group, rates, table, library, pair_factor)
    grid[ri, ci] = pred
    if kept is not None:
        pos = np.full((num, num_c), -1, dtype=np.intp)
        pos[ri, ci] = np.arange(ri.size)
        kept.append(KeptScores(p, t, pred.shape, pos, None))
    # The fastest predicted candidate; exact ties go to the earlier one (larger tile, no split).
    return grid.argmin(axis=1)


def _scores(
    r: GemmRows,
    c: GemmCandidates,
    group: np.ndarray,
    rates: Rates,
    table: np.ndarray,
    library: str,
    math_factor: np.ndarray,
) -> tuple[np.ndarray, CandidatePlan, PhaseTimes]:
    """Corrected latency of candidates `c` for rows `r` (broadcast), the math time stretched by
    `math_factor` (broadcast like the rows), and the evaluation behind it (`p.geo.valid`: which are valid)."""
    p, t = _evaluate(r, c, rates, library)
    # Each coefficient gathered on its own: contiguous arrays (`table[group][..., j]` reads with a stride,
    # half the speed on eager attention's [rows, candidates] grids).
    cf = [column[group] for column in table.T]
    dm = 1.0 + (cf[4] - 1.0) * np.where(c.split == STREAM_K, 1.0, np.minimum(1.0, p.geo.grid / r.num_sms))
    t_main = t.steps * np.maximum(cf[5] * t.load_s, dm * t.math_s * math_factor)
    pred = cf[0] * t.t_pro_s + cf[1] * t_main + cf[2] * t.t_epi_s + cf[3]
    return pred, p, t


def _problem_choices(
    library: str, cands: GemmCandidates, rates: Rates, table: np.ndarray,
    problems: ChoiceProblems, own: np.ndarray, memo: ChoiceMemo,
) -> tuple[np.ndarray, KeptScores | None]:  # fmt: skip
    """For each problem `own[j]` of `problems` (all run by `library`), the index of its chosen candidate
    among `cands`: `_best_candidate`'s (at the problem's choice clock), scored only for the problems not
    in `memo` yet (then added to it), as each row's choice is its own. Also the evaluation behind the
    scores when every problem of `own` was scored here (`KeptScores`, problems in `own`'s order)."""
    known = np.full(own.size, -1, dtype=np.intp)  # each problem's memo entry, -1 where it has none
    keys = problems.keys  # of `own`'s problems (when it is every problem, they are in order)
    if memo is not None:
        keys = keys if own.size == len(keys) else [keys[j] for j in own.tolist()]
        known = np.fromiter((memo.get(key, -1) for key in keys), dtype=np.intp, count=own.size)
    unknown = known < 0
    todo = own[unknown]
    best = np.zeros(0, dtype=np.intp)
    kept: list[KeptScores] = []
    if todo.size:
        # one dtype class or math factor for every problem (most calls): [1, C] coefficient gathers
        dcls = uniform_cut(problems.dcls[todo])
        group = dcls[:, None] * len(TILE_CLASSES) + cands.tile_class.astype(int)
        col, factor = problems.pick_rows(todo), uniform_cut(problems.math_factor[todo])
        keep = kept if todo.size == own.size else None
        best = _best_candidate(col, cands, group, rates, table, library, factor, kept=keep)
    scored = kept[0] if kept else None
    if memo is None:
        return best, scored
    if todo.size:  # `todo` in the order of `own`: each unknown key's new choice
        fresh = keys if todo.size == own.size else [keys[i] for i in np.nonzero(unknown)[0].tolist()]
        memo.update(zip(fresh, best.tolist(), strict=True))
        known[unknown] = best
    return known, scored


def _library_rows(
    library: str, col: GemmRows, dcls: np.ndarray, aq: np.ndarray, rates: Rates, chosen: GemmCandidates,
    scored: ResultInputs | None = None,
) -> GemmChoice:  # fmt: skip
    """Rows `col` (all run by `library`'s kernels) at their chosen candidates `chosen` [N, 1]:
    `gemm_result.full_result` plus tile_idx, split and group. `aq` (1.0 / 0.0 per row) adds the
    activation quantization. `scored`: the choice's own evaluation of those candidates, when the rows run
    at their choice clock (the same values as evaluating them again)."""
    if scored is None:
        scored = result_inputs(*_evaluate(col, chosen, rates, library))
    ev = full_result(col, scored, library == "simt")
    if aq.any():
        quant, quant_b = activation_quant(col, rates, aq.size)
        ev = replace(
            ev,
            timeline=add_to_prologue(ev.timeline, scale_timeline(quant, aq)),
            dram_bytes=ev.dram_bytes + quant_b * aq,
            l2_bytes=ev.l2_bytes + quant_b * aq,
        )
    return GemmChoice(
        result=ev,
        tile_idx=chosen.tile_idx.ravel(),
        split=chosen.split.ravel(),
        group=dcls * len(TILE_CLASSES) + chosen.tile_class.ravel().astype(int),
    )


def _by_library(
    rows: GemmRows, lib: np.ndarray, dcls: np.ndarray, aq: np.ndarray, rates: Rates, table: np.ndarray,
    problems: ChoiceProblems, memo: ChoiceMemo,
) -> tuple[dict[str, np.ndarray], Timeline, np.ndarray]:  # fmt: skip
    """Every row at its library's chosen candidate (`_library_rows`): traffic, grid, tile and split arrays,
    the merged timeline and the coefficient groups. `problems` is `gemm_rows.choice_rows`' output (the
    choice is made there, once per distinct problem: shape and choice clock); `memo` as `gemm_arrays`'
    `choice_memo`."""
    num = lib.size
    first, problem = problems.first, problems.problem
    keys = ("dram_bytes", "l2_bytes", "smem_bytes", "grid", "tile_idx", "split")
    res = {key: np.zeros(num) for key in keys}
    parts = []
    group = np.zeros(num, dtype=int)
    libs = np.unique(lib)
    for li in libs:
        # one library (most calls): every row, as views rather than gathered copies
        sel: np.ndarray | slice = slice(None) if libs.size == 1 else np.nonzero(lib == li)[0]
        own = np.nonzero(lib[first] == li)[0]  # this library's distinct problems
        slot = np.empty(first.size, dtype=np.int64)
        slot[own] = np.arange(own.size)
        cands = gemm_candidates(LIBRARIES[li], rates)
        best, scored = _problem_choices(LIBRARIES[li], cands, rates, table, problems, own, memo)
        pick = slot[problem[sel]]
        chosen = cands.chosen(best[pick])
        # rows at their choice clock (the cap search's first pass): the choice evaluated their candidates
        at_choice = scored is not None and bool((rates.sm_clock_hz[sel] == problems.choice_hz[sel]).all())
        x = scored.inputs(pick, best[pick]) if scored is not None and at_choice else None
        ch = _library_rows(LIBRARIES[li], rows.column(sel), dcls[sel], aq[sel], rates, chosen, x)
        ev = ch.result
        vals = (ev.dram_bytes, ev.l2_bytes, ev.smem_bytes, ev.grid, ch.tile_idx, ch.split)
        for key, val in zip(keys, vals, strict=True):
            res[key][sel] = val
        parts.append((sel, ev.timeline))
        group[sel] = ch.group
    return res, parts[0][1] if len(parts) == 1 else merge_timelines(parts, num), group


def _library_index(gpu: GpuSpec, dtype: str, simt: bool, eight_bit: bool) -> int:
    """Index in LIBRARIES of the kernel library that runs a `dtype` GEMM on `gpu` (`tiles.gemm_library`)."""
    fp4_mma = tensor_dtype_used(gpu, dtype) == "fp4"  # Blackwell's block-scaled fp4 MMA
    return LIBRARIES.index(gemm_library(gpu.architecture, simt, eight_bit, fp4_mma))


def _coefficient_rows(table: CoeffTable, gpu: GpuSpec) -> np.ndarray:
    """[len(GROUPS), 6]: each group's corrections. No shipped set measured an fp4 Tensor-Core GEMM: on a GPU
    that multiplies fp4 (Blackwell), a set without f4 groups lends f8's to them (the same tcgen05 tiles and
    stage bytes, half the operand bits), rather than leaving fp4 uncorrected beside corrected fp8 kernels."""
    rows = table.matrix(GROUPS)
    own_f4 = any(g == "gemm/f4" or g.startswith("gemm/f4/") for g in table.groups)
    if own_f4 or "fp4" not in gpu.sm.tensor_flop_per_clk:
        return rows
    width, f4, f8 = len(TILE_CLASSES), DTYPE_CLASSES.index("f4"), DTYPE_CLASSES.index("f8")
    lent = rows.copy()
    lent[f4 * width : (f4 + 1) * width] = rows[f8 * width : (f8 + 1) * width]
    return lent


def gemm_arrays(
    *,
    m: np.ndarray,
    n: np.ndarray,
    k: np.ndarray,
    batch: np.ndarray,
    dtype: list[str] | tuple[str, ...],
    out_dtype: list[str] | tuple[str, ...],
    b_shared: np.ndarray,
    gpu: GpuSpec,
    sm_clock_hz: np.ndarray,
    coeffs: CoeffTable | object | None = None,
    act_quant: np.ndarray | None = None,
    b_dtype: list[str | None] | tuple[str | None, ...] | None = None,
    grouped: np.ndarray | None = None,
    choice_clock_hz: np.ndarray | float | None = None,
    choice_memo: ChoiceMemo = None,
    gpu_rows: GpuRows | None = None,
) -> dict[str, Any]:
    """Vectorized GEMM model over N shapes (and per-row SM clocks; `gpu_rows`: per-row GPUs differing
    from `gpu` in SM count, DRAM bandwidth and Tensor-Core rates, each row as on its own: `gpu_rows`).

    `choice_clock_hz` (per row, default each row's own clock): the clock at which the kernel (tile,
    split) is chosen; it then runs at `sm_clock_hz`. The power-cap search chooses at each clock it probes
    (as a locked clock does; `dse.perf.pass_cap`) and passes the requested clock explicitly to its first
    call, whose choices a prefetch may hold (`dse.perf.first_pass`). `choice_memo` (a
    dict): choices kept for later calls with the same `gpu` and `coeffs` (the power-cap search's probes).

    `act_quant` (bool per row, default none): the 8-bit GEMMs whose estimate includes vLLM's dynamic
    per-tensor quantization of the activation (`gemm_quant.activation_quant`), as the aiconfigurator fp8
    tables measured it; a graph that quantizes in an op of its own leaves it False.
    `b_dtype` (per row, None = `dtype`): B's storage dtype, `grouped`: fused-MoE grouped GEMMs, corrected
    by the MoE set that `coeffs` carries (both: `GemmOp`, `dse.perf.moe`).

    Returns: latency_s, analytical_s, util [6, N], flop, dram_bytes, l2_bytes, smem_bytes, group (index
    into GROUPS), tile_idx, split, simt, grid (arrays) and timeline (the uncorrected `Timeline`).
    """
    m = np.asarray(m, dtype=float)
    num = m.shape[0]
    bc = lambda x: float_rows(x, num)  # noqa: E731
    n, k, batch, f = bc(n), bc(k), bc(batch), bc(sm_clock_hz)
    quantized = np.zeros(num, dtype=bool) if act_quant is None else bool_rows(act_quant, num)
    dtype, stored = moe.operand_dtypes(gpu, dtype, b_dtype)
    tc_of, tc_clk, per_gpu = tensor_rates(gpu, gpu_rows, dtype)
    dcls_of = {d: DTYPE_CLASSES.index(DTYPE_CLASS[d]) for d in tc_of}
    simt = tc_clk <= 0.0  # the GPUs of `gpu_rows` have Tensor Cores for the same dtypes
    rates = rates_at(gpu, f)
    rows = row_inputs(num, (m, n, k, batch, f), dtype, stored, out_dtype, b_shared, tc_clk, rates, per_gpu)
    table = _coefficient_rows(coeff_table(coeffs), gpu)
    dcls = lookup_rows(dcls_of, dtype)
    f8 = DTYPE_CLASSES.index("f8")
    lib_of = {d: _library_index(gpu, d, tc_of[d] <= 0.0, dcls_of[d] == f8) for d in tc_of}
    lib = lookup_rows(lib_of, dtype)
    choice_hz = f if choice_clock_hz is None else bc(choice_clock_hz)
    is_grouped = grouped is not None and bool(np.asarray(grouped).any())
    math_factor, expert_s = np.ones(num), np.zeros(num)
    if is_grouped:  # a grouped MoE kernel's math runs at its fitted efficiency: its tile is chosen at it too
        wo = rows.b_elem_bytes < rows.in_elem_bytes  # weight-only: B stored narrower than the MMA inputs
        mc = moe.moe_coeffs_of(coeffs)
        math_factor, expert_s = moe.grouped_factors(np.asarray(grouped, dtype=bool), dcls, wo, mc)
    choice = choice_rows(rows, f, tc_clk, lib, dcls, gpu, (dtype, stored, out_dtype), choice_hz, math_factor)
    aq = (quantized & (dcls == f8)).astype(float)
    res, timeline, group = _by_library(rows, lib, dcls, aq, rates, table, choice, choice_memo)
    if is_grouped:
        latency_s, util = moe.correct_grouped(timeline, table[group], batch, math_factor, expert_s)
    else:
        latency_s, util = correct(timeline, table[group])
    out: dict[str, Any] = dict(res)
    out.update(
        latency_s=latency_s,
        analytical_s=timeline.analytical_s(),
        util=util,
        timeline=timeline,
        flop=2.0 * batch * m * n * k,
        group=group,
        simt=simt,
        library=lib,
    )
    return out


def tile_name(out: dict, i: int) -> str:
    """Name of the kernel configuration chosen for row i of a `gemm_arrays` result."""
    return kernel_name(LIBRARIES[int(out["library"][i])], out["tile_idx"][i], out["split"][i])


def estimate_many(
    ops: list[GemmOp], gpu: GpuSpec, point: OperatingPoint, coeffs: CoeffTable | object | None = None
) -> list[KernelEstimate]:
    """Estimates for many GEMMs at one operating point, vectorized."""
    if not ops:
        return []
    clock_hz = effective_sm_clock_hz(gpu, point)
    out = gemm_arrays(
        m=np.array([o.m for o in ops], dtype=float),
        n=np.array([o.n for o in ops], dtype=float),
        k=np.array([o.k for o in ops], dtype=float),
        batch=np.array([o.batch for o in ops], dtype=float),
        dtype=[o.dtype for o in ops],
        out_dtype=[o.c_dtype for o in ops],
        b_shared=np.array([o.b_shared for o in ops]),
        gpu=gpu,
        sm_clock_hz=np.full(len(ops), clock_hz),
        coeffs=coeffs,
        b_dtype=[o.b_dtype for o in ops],
        grouped=np.array([o.grouped for o in ops], dtype=bool),
    )
    tiles = [tile_name(out, i) for i in range(len(ops))]
    groups = [GROUPS[g] for g in out["group"]]
    return build_estimates(ops, ["gemm"] * len(ops), out, np.full(len(ops), clock_hz), tiles, groups)


def estimate(
    op: GemmOp, gpu: GpuSpec, point: OperatingPoint, coeffs: CoeffTable | object | None = None
) -> KernelEstimate:
    """One GEMM at one operating point (the scalar view of `gemm_arrays`)."""
    return estimate_many([op], gpu, point, coeffs)[0]
