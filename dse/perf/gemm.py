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
- shared memory: the stage writes plus the warp-level reads (`(tile_m / warp_m) (tile_n / warp_n)
  (warp_m + warp_n) K` elements per stage).

Timeline per round of threadblocks (`conc` per SM, `active` device-wide):
- load of one stage: max(DRAM share, L2 slice, shared-memory write, latency / (stages - 1));
- MMA of one stage: max(Tensor-Core time of the padded tile, shared-memory reads);
- prologue = DRAM latency + one stage load; mainloop = K steps x max(load, MMA); epilogue = C store.
"""

from __future__ import annotations

import numpy as np

from dse.hardware.spec import GpuSpec
from dse.perf.pipeline import (
    MODULE_INDEX,
    Timeline,
    add_to_prologue,
    build_estimates,
    correct,
    empty_busy,
    merge_timelines,
    scale_timeline,
    streaming_timeline,
    sum_timelines,
    vmax,
    wave_schedule,
)
from dse.perf.rates import (
    DRAM_LATENCY_S,
    DTYPE_BYTES,
    Rates,
    arch_family,
    effective_sm_clock_hz,
    rates_at,
    tensor_flop_per_clk,
)
from dse.perf.tiles import LIBRARIES, STREAM_K, GemmTile, gemm_library, gemm_tiles, occupancy
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
TILE_CLASSES: tuple[str, ...] = ("small", "medium", "large", "splitk", "streamk", "simt")
GROUPS: tuple[str, ...] = tuple(f"gemm/{d}/{t}" for d in DTYPE_CLASSES for t in TILE_CLASSES)

_SPLIT_REDUCE_BYTES = 4.0  # split-K partials are fp32
_QUANT_SRC_BYTES = 2.0  # fp8 GEMMs quantize a 16-bit activation
_QUANT_ELEMS_PER_THREAD = 2.0  # elements a quantization thread handles per pass over its row


def _candidates(tiles: tuple[GemmTile, ...], rates: Rates) -> dict[str, np.ndarray]:
    """Per-candidate constants, shape [1, C] (C = tiles x splits)."""
    rows = []
    for ti, t in enumerate(tiles):
        conc = occupancy(
            rates,
            smem_bytes=t.smem_bytes(rates.smem_bytes_per_sm),
            threads=t.threads,
            regs_per_thread=t.regs_per_thread(),
        )
        stages = t.stage_count(rates.smem_bytes_per_sm)
        for s in t.splits:
            cls = t.tile_class if t.simt or s == 1 else ("streamk" if s == STREAM_K else "splitk")
            rows.append(
                (
                    ti,
                    t.tile_m,
                    t.tile_n,
                    t.k_step_bytes,
                    t.warp_m,
                    t.warp_n,
                    stages,
                    conc,
                    s,
                    t.multicast,
                    t.multicast_a,
                    t.m_dispatch[0],
                    t.m_dispatch[1],
                    TILE_CLASSES.index(cls),
                )
            )
    arr = np.array(rows, dtype=float).T
    names = (
        "tile_idx",
        "tm",
        "tn",
        "kb",
        "wm",
        "wn",
        "stages",
        "conc",
        "split",
        "mcast",
        "mcast_a",
        "m_lo",
        "m_hi",
        "cls",
    )
    return {name: arr[i][None, :] for i, name in enumerate(names)}


def _activation_quant(col: dict[str, np.ndarray], rates: Rates, n: int) -> tuple[Timeline, np.ndarray]:
    """vLLM's dynamic per-tensor fp8 quantization of the activation A before the CUTLASS fp8 GEMM.

    Two kernels with one 1024-thread threadblock per row of A: an abs-max reduction (reads A in 16 bit,
    then folds the row's maximum into the single scale with an atomic) and the scaled conversion (reads
    A again, writes it in fp8). Each thread takes two elements per pass, so a row of K elements costs
    ceil(K / 2048) dependent passes (the measured fp8 latencies step up by one DRAM round trip per pass
    and per kernel at K = 2048, 4096, ...), plus the atomic's round trip in the reduction. Returns their
    summed streaming timeline and DRAM bytes.
    """
    rows = (col["m"] * col["batch"]).ravel()
    k = col["k"].ravel()
    threads = np.full(n, 1024.0)
    conc = np.full(n, float(max(1, rates.max_threads_per_sm // 1024)))
    a_b = rows * k * _QUANT_SRC_BYTES
    common = dict(
        rates_num_sms=rates.num_sms,
        dram_bw_bytes_per_s=rates.dram_bw_bytes_per_s,
        l2_sm=col["l2_sm"].ravel(),
        l2_tot=col["l2_tot"].ravel(),
        smem_sm=col["smem_sm"].ravel(),
        fp32_sm=col["fp32_sm"].ravel(),
        sfu_sm=col["fp32_sm"].ravel(),
        grid=rows,
        conc=conc,
        threads=threads,
        smem_b=np.full(n, 8192.0),
        sfu_op=np.zeros(n),
    )
    passes = np.ceil(k / (1024.0 * _QUANT_ELEMS_PER_THREAD))
    # The reduction then folds each row's maximum into the one scale with an atomic: one more round trip.
    amax = streaming_timeline(
        dram_b=k * _QUANT_SRC_BYTES, l2_b=k * _QUANT_SRC_BYTES, flop=k, passes=passes + 1.0, **common
    )
    conv = streaming_timeline(
        dram_b=k * (_QUANT_SRC_BYTES + 1.0),
        l2_b=k * (_QUANT_SRC_BYTES + 1.0),
        flop=2.0 * k,
        passes=passes,
        **common,
    )
    return sum_timelines(amax, conv), 2.0 * a_b + rows * k


def _evaluate(
    r: dict[str, np.ndarray], c: dict[str, np.ndarray], rates: Rates, simt: bool, full: bool, persistent: bool
) -> dict:
    """Timeline of candidates `c` for rows `r` (rows [N, 1], candidates [1, C] or [N, 1], broadcast)."""
    m, n, k, batch, in_b, out_b = r["m"], r["n"], r["k"], r["batch"], r["in_b"], r["out_b"]
    sms = rates.num_sms
    bw_dram = rates.dram_bw_bytes_per_s
    l2_sm = r["l2_sm"]
    l2_tot = r["l2_tot"]
    smem_sm = r["smem_sm"]
    math_sm = r["fp32_sm"] if simt else r["tc_sm"]
    tm, tn, conc, stages = c["tm"], c["tn"], c["conc"], c["stages"]
    stream_k = c["split"] == STREAM_K
    s = np.where(stream_k, 1.0, c["split"])
    slots = sms * conc

    kt = c["kb"] / in_b
    tiles_m = np.ceil(m / tm)
    tiles_n = np.ceil(n / tn)
    k_split = np.ceil(k / s)
    nk = np.ceil(k_split / kt)
    plane = tiles_m * tiles_n
    g = plane * s * batch
    units = g * nk  # K iterations of all threadblocks
    valid = stream_k | (s == 1) | (k_split >= 2 * kt)
    mp2 = np.maximum(32.0, 2.0 ** np.ceil(np.log2(m)))
    valid &= (c["m_hi"] == 0) | ((mp2 > c["m_lo"]) & (mp2 <= c["m_hi"]))
    mt_avg = m / tiles_m
    nt_avg = n / tiles_n
    kt_avg = k_split / nk
    step_b = (mt_avg + nt_avg) * kt_avg * in_b  # what one threadblock stages per K step
    # L2 reads per K step: B is multicast to the threadblocks of a cluster (only when they exist).
    mcast = np.minimum(c["mcast"], tiles_m)
    mcast_a = np.minimum(c["mcast_a"], tiles_n)
    step_l2 = (mt_avg / mcast_a + nt_avg / mcast) * kt_avg * in_b

    # DRAM traffic of A and B: ideal reuse when they fit in L2, per-wave re-reads of the rest.
    l2_ab = units * step_l2
    b_batches = np.where(r["b_shared"], 1.0, batch)
    ideal = batch * m * k * in_b + b_batches * k * n * in_b
    w = np.minimum(slots, plane)
    a_blk = np.clip(np.sqrt(w), 1.0, tiles_m)  # continuous, so that traffic never grows with more SMs
    b_blk = np.clip(w / a_blk, 1.0, tiles_n)
    wave_b = (a_blk * mt_avg + b_blk * nt_avg) * k_split * in_b
    per_wave = (plane / w) * wave_b * s * batch
    fit = np.clip(rates.l2_bytes / ideal, 0.0, 1.0)
    dram_ab = np.minimum(fit * ideal + (1.0 - fit) * np.maximum(per_wave, ideal), l2_ab)
    dram_ab = np.maximum(dram_ab, ideal)
    ratio = dram_ab / l2_ab

    # Data-parallel (and split-K) rounds of the busiest SM; stream-K deals the K iterations evenly.
    sched = wave_schedule(g, conc, sms)
    rounds = sched["rounds"]
    sk_iters = np.ceil(units / slots)  # K iterations of the busiest slot
    sk_tiles = np.ceil(g / slots)  # output tiles a slot finishes
    sk_fix = 1.0  # a partial tile fixed up through the workspace (charged even when tiles divide evenly)
    sk_act = units / sk_iters  # threadblocks active per K iteration, on average
    sk_cc = np.ceil(units / sms) / sk_iters  # per SM, on average
    # Threadblocks per SM for the per-tile costs (fill, fix-up, store): the smooth share, so that these
    # never grow with the SM count (the rounded one above does, between its steps).
    sk_cc_tile = np.minimum(conc, units / sms)
    cc = np.where(stream_k, sk_cc, sched["conc_avg"])
    cc_tile = np.where(stream_k, sk_cc_tile, sched["conc_avg"])
    act = np.where(stream_k, sk_act, sched["active_avg"])

    flop_step = 2.0 * tm * tn * kt
    smem_rd = (tm / c["wm"]) * (tn / c["wn"]) * (c["wm"] + c["wn"]) * kt * in_b
    t_math = np.maximum(flop_step / math_sm, smem_rd / smem_sm)
    lat_floor = DRAM_LATENCY_S / np.maximum(stages - 1.0, 1.0)
    out_cta_b = mt_avg * nt_avg * np.where(s > 1, _SPLIT_REDUCE_BYTES, out_b)
    fix_b = 2.0 * mt_avg * nt_avg * _SPLIT_REDUCE_BYTES
    # Split-K partials stay in L2 when they fit in half of it: then only C reaches DRAM.
    part_in_l2 = (s > 1) & (batch * m * n * s * _SPLIT_REDUCE_BYTES <= 0.5 * rates.l2_bytes)
    out_dram = np.where(part_in_l2, 0.0, 1.0)

    def load(cc: np.ndarray, act: np.ndarray) -> np.ndarray:
        return vmax(
            act * step_l2 * ratio / bw_dram,
            act * step_l2 / l2_tot,
            cc * step_l2 / l2_sm,
            cc * step_b / smem_sm,
            lat_floor,
        )

    def fill(cc: np.ndarray) -> np.ndarray:
        # Exposed pipeline fill: the latency plus this SM's first stage (its DRAM / L2 share is already
        # in the mainloop, which carries every load).
        return DRAM_LATENCY_S + vmax(cc * step_l2 / l2_sm, cc * step_b / smem_sm)

    def store_shared(act: np.ndarray, nbytes: np.ndarray) -> np.ndarray:  # DRAM and L2 shares
        return np.maximum(act * nbytes * out_dram / bw_dram, act * nbytes / l2_tot)

    def store_local(cc: np.ndarray, nbytes: np.ndarray) -> np.ndarray:  # this SM's port and smem
        return np.maximum(cc * nbytes / l2_sm, cc * nbytes / smem_sm)

    ld = load(cc, act)
    mm = cc * t_math
    # Stores: a data-parallel round stores its tiles; stream-K stores g / sk_tiles tiles per store round.
    cc_st = np.where(stream_k, np.minimum(conc, g / sms), cc)  # tiles stored per SM per store round
    n_st = np.where(stream_k, sk_tiles, rounds)  # store rounds
    act_st = g / n_st
    # stream-K only: the partial tile goes through the (L2-resident) workspace
    e_fix = np.where(stream_k, sk_fix * sk_cc_tile * fix_b / l2_sm, 0.0)
    red_b = np.where(s > 1, batch * m * n * (s * _SPLIT_REDUCE_BYTES + out_b), 0.0)
    red_dram_b = np.where(part_in_l2, batch * m * n * out_b, red_b)
    t_red = np.where(s > 1, DRAM_LATENCY_S + np.maximum(red_dram_b / bw_dram, red_b / l2_tot), 0.0)
    w = np.where(stream_k, sk_iters, rounds * nk)
    if persistent:
        # One threadblock per slot loops over its tiles: the pipeline fills once, and the producer keeps
        # loading the next tile while the previous tile's C drains, so earlier stores only add traffic to
        # the mainloop steps; only the last tile's store (and any fix-up or split-K reduction) is exposed.
        # The stores' DRAM / L2 traffic joins the mainloop, which thus carries every compulsory byte;
        # the last store is exposed only through this SM's port.
        t_pro = fill(cc_tile)
        ld = ld + n_st * store_shared(act_st, out_cta_b) / w
        t_epi = store_local(cc_st, out_cta_b) + e_fix + t_red
    else:
        t_pro = np.where(stream_k, sk_tiles + sk_fix, rounds) * fill(cc_tile)
        t_epi = (
            n_st * np.maximum(store_shared(act_st, out_cta_b), store_local(cc_st, out_cta_b)) + e_fix + t_red
        )
    if not full:
        return {"valid": valid, "t_pro": t_pro, "t_epi": t_epi, "w": w, "ld": ld, "mm": mm, "grid": g}

    shape = np.broadcast_shapes(np.shape(t_pro), np.shape(t_epi), np.shape(ld), np.shape(w))
    flat = lambda x: np.broadcast_to(x, shape).ravel()  # noqa: E731
    n_rows = flat(t_pro).shape[0]
    busy = empty_busy(n_rows)
    w_b = g * out_cta_b  # C (or split-K partials)
    fix_total_b = np.where(stream_k, sk_fix * sk_act * fix_b, 0.0)  # stream-K fix-ups, L2-resident
    smem_total = units * (step_b + smem_rd)
    busy[1, MODULE_INDEX["dram"]] = flat(dram_ab / bw_dram)
    busy[1, MODULE_INDEX["l2"]] = flat(l2_ab / l2_tot)
    busy[1, MODULE_INDEX["smem"]] = flat(smem_total / (smem_sm * sms))
    busy[1, MODULE_INDEX["cuda" if simt else "tensor"]] = flat(units * flop_step / (math_sm * sms))
    busy[2, MODULE_INDEX["dram"]] = flat((w_b * out_dram + red_dram_b) / bw_dram)
    busy[2, MODULE_INDEX["l2"]] = flat((w_b + red_b + fix_total_b) / l2_tot)
    busy[2, MODULE_INDEX["smem"]] = flat(w_b / (smem_sm * sms))
    busy[2, MODULE_INDEX["cuda"]] = flat(g * mt_avg * nt_avg * 2.0 / (r["fp32_sm"] * sms))
    timeline = Timeline(
        t_pro=flat(t_pro),
        t_epi=flat(t_epi),
        main_w=flat(w)[None, :],
        main_load=flat(ld)[None, :],
        main_math=flat(mm)[None, :],
        busy=busy,
        sm_active_frac=flat(np.where(stream_k, 1.0, np.minimum(1.0, g / sms))),
    )
    return {
        "timeline": timeline,
        "dram_bytes": flat(dram_ab + w_b * out_dram + red_dram_b),
        "l2_bytes": flat(l2_ab + w_b + red_b + fix_total_b),
        "smem_bytes": flat(smem_total + w_b),
        "grid": flat(np.where(stream_k, np.minimum(slots, g), g)),
    }


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
) -> dict[str, np.ndarray]:
    """Vectorized GEMM model over N shapes (and per-row SM clocks).

    `act_quant` (bool per row, default none): the 8-bit GEMMs whose estimate includes vLLM's dynamic
    per-tensor quantization of the activation (`_activation_quant`), as the aiconfigurator fp8 tables
    measured it; a graph that quantizes in an op of its own leaves it False.

    Returns: latency_s, analytical_s, util [6, N], flop, dram_bytes, l2_bytes, smem_bytes, group (index
    into GROUPS), tile_idx, split, simt, grid (arrays) and timeline (the uncorrected `Timeline`).
    """
    m = np.asarray(m, dtype=float)
    num = m.shape[0]
    bc = lambda x: np.broadcast_to(np.asarray(x, dtype=float), (num,)).astype(float)  # noqa: E731
    n, k, batch = bc(n), bc(k), bc(batch)
    f = bc(sm_clock_hz)
    shared = np.broadcast_to(np.asarray(b_shared, dtype=bool), (num,))
    quantized = np.zeros(num, dtype=bool) if act_quant is None else np.broadcast_to(act_quant, (num,))
    dtype = list(dtype)
    in_b = np.array([DTYPE_BYTES[d] for d in dtype])
    out_b = np.array([DTYPE_BYTES[o] for o in out_dtype])
    tc_clk = np.array([tensor_flop_per_clk(gpu, d) for d in dtype])
    simt = tc_clk <= 0.0
    rates = rates_at(gpu, f)
    sms = rates.num_sms
    arch = arch_family(gpu)
    rows = {
        "m": m,
        "n": n,
        "k": k,
        "batch": batch,
        "in_b": in_b,
        "out_b": out_b,
        "b_shared": shared,
        "clock": f,
        "l2_sm": rates.l2_bw_per_sm_bytes_per_s,
        "l2_tot": rates.l2_bw_bytes_per_s,
        "smem_sm": rates.smem_bw_per_sm_bytes_per_s,
        "fp32_sm": rates.fp32_flop_per_s_per_sm,
        "tc_sm": np.maximum(tc_clk, 1.0) * f,
    }
    res = {
        key: np.zeros(num) for key in ("dram_bytes", "l2_bytes", "smem_bytes", "grid", "tile_idx", "split")
    }
    parts = []
    group = np.zeros(num, dtype=int)
    table = coeff_table(coeffs).matrix(GROUPS)
    dcls = np.array([DTYPE_CLASSES.index(DTYPE_CLASS[d]) for d in dtype])
    eight_bit = dcls == DTYPE_CLASSES.index("f8")
    lib = np.array(
        [LIBRARIES.index(gemm_library(arch, bool(a), bool(b))) for a, b in zip(simt, eight_bit, strict=True)]
    )
    for li in np.unique(lib):
        sel = np.nonzero(lib == li)[0]
        is_simt = LIBRARIES[li] == "simt"
        cands = _candidates(gemm_tiles(LIBRARIES[li]), rates)
        col = {key: (v[sel] if np.ndim(v) else v)[:, None] for key, v in rows.items()}
        cand_group = dcls[sel, None] * len(TILE_CLASSES) + cands["cls"].astype(int)  # [n, C]
        persistent = LIBRARIES[li] == "hopper_tc"
        ev = _evaluate(col, cands, rates, is_simt, full=False, persistent=persistent)
        cf = table[cand_group]  # [n, C, 6]
        dm = 1.0 + (cf[..., 4] - 1.0) * np.where(
            cands["split"] == STREAM_K, 1.0, np.minimum(1.0, ev["grid"] / sms)
        )
        dl = cf[..., 5]
        t_main = ev["w"] * np.maximum(dl * ev["ld"], dm * ev["mm"])
        pred = cf[..., 0] * ev["t_pro"] + cf[..., 1] * t_main + cf[..., 2] * ev["t_epi"] + cf[..., 3]
        # The fastest predicted candidate; exact ties go to the earlier one (larger tile, no split).
        best = np.argmin(np.where(ev["valid"], pred, np.inf), axis=1)
        chosen = {key: v[0, best][:, None] for key, v in cands.items()}
        ev = _evaluate(col, chosen, rates, is_simt, full=True, persistent=persistent)
        timeline = ev["timeline"]
        aq = (quantized[sel] & eight_bit[sel]).astype(float)
        if aq.any():
            quant, quant_b = _activation_quant(col, rates, sel.size)
            timeline = add_to_prologue(timeline, scale_timeline(quant, aq))
            ev["dram_bytes"] = ev["dram_bytes"] + quant_b * aq
            ev["l2_bytes"] = ev["l2_bytes"] + quant_b * aq
        for key in ("dram_bytes", "l2_bytes", "smem_bytes", "grid"):
            res[key][sel] = ev[key]
        parts.append((sel, timeline))
        res["tile_idx"][sel] = chosen["tile_idx"].ravel()
        res["split"][sel] = chosen["split"].ravel()
        group[sel] = cand_group[np.arange(sel.size), best]
    timeline = parts[0][1] if len(parts) == 1 else merge_timelines(parts, num)
    latency_s, util = correct(timeline, table[group])
    res.update(
        latency_s=latency_s,
        analytical_s=timeline.analytical_s(),
        util=util,
        timeline=timeline,
        flop=2.0 * batch * m * n * k,
        group=group,
        simt=simt,
        library=lib,
    )
    return res


def tile_name(out: dict, i: int) -> str:
    """Name of the kernel configuration chosen for row i of a `gemm_arrays` result."""
    return _tile_name(int(out["library"][i]), out["tile_idx"][i], out["split"][i])


def _tile_name(library: int, tile_idx: float, split: float) -> str:
    name = gemm_tiles(LIBRARIES[library])[int(tile_idx)].name
    if split == STREAM_K:
        return f"{name}_streamk"
    return name if split <= 1 else f"{name}_splitk{int(split)}"


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
    )
    tiles = [tile_name(out, i) for i in range(len(ops))]
    groups = [GROUPS[g] for g in out["group"]]
    return build_estimates(ops, ["gemm"] * len(ops), out, np.full(len(ops), clock_hz), tiles, groups)


def estimate(
    op: GemmOp, gpu: GpuSpec, point: OperatingPoint, coeffs: CoeffTable | object | None = None
) -> KernelEstimate:
    """One GEMM at one operating point (the scalar view of `gemm_arrays`)."""
    return estimate_many([op], gpu, point, coeffs)[0]
