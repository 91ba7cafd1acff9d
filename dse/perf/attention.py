"""Attention: FlashAttention forward (prefill), flash-decoding over a KV cache, and eager attention.

Flash (`flash_arrays`, backend `flash`): one fused kernel. Threadblocks own a block of `block_q` queries
of one head (grid = batch x heads x ceil(seq_len_q / block_q)); the K/V blocks of `block_kv` keys are the
inner loop, as K is in a GEMM (EnergAIzer Fig. 4c). Per K/V block: load K and V (double-buffered), two
matmuls (4 * block_q * block_kv * head_dim FLOP), block_q * block_kv exponentials on the SFU and about four
CUDA-core FLOP per score. FlashAttention-3 (Hopper) overlaps the softmax with the matmuls (warpgroup
ping-pong), so a step takes the slowest of them; FlashAttention-2 runs them one after the other.
Causal: a query block visits only the key blocks up to its diagonal; threadblocks of unequal length are
scheduled longest-first, so the busiest SM does max(longest, average share) iterations. GQA: the K/V of a
KV head is read from DRAM once and from L2 by all its query heads; on Hopper FA3 packs the query heads of
a KV head into the rows of one tile (PackGQA, always on for variable-length batches as vLLM runs them),
so short prompts fill whole tiles. Each tile also pays work no pipelining hides (the first block's
softmax, the last block's PV, the rescale and store of O). A prefill attends to its fresh 16-bit K/V
(an fp8 cache is written beside them), so its matmuls are 16-bit whatever the KV-cache dtype; only
decode, reading an fp8 cache on Hopper, multiplies in fp8 (FA3 fp8). Queries, outputs and K/V are read /
written once from / to DRAM.

Decode (`decode_arrays`, backend `decode`): flash-decoding. The query heads of a GQA group are packed in
one 64-row block, so each KV block is read once. When batch x KV heads cannot fill the GPU the KV sequence
is split across threadblocks (1 to 128 splits, the one the model predicts fastest, as FlashAttention's
`num_splits_heuristic` aims for full waves) and a combine kernel reduces the fp32 partial outputs (in the
epilogue). It is KV-cache-bandwidth-bound.

Eager (`dse.perf.attention_eager.eager_arrays`, backend `eager`): the unfused kernels (QK^T GEMM,
softmax, PV GEMM, GQA repeat copies), summed into one estimate per op.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from dse.hardware.spec import GpuSpec
from dse.perf.arrays import AttentionInputs, AttentionShapes, DecodeEval, FlashShape, Traffic
from dse.perf.attention_eager import eager_arrays, eager_tiles
from dse.perf.gpu_rows import GpuRows, rows_rates
from dse.perf.pipeline import (
    MODULE_INDEX,
    Timeline,
    bool_rows,
    build_estimates,
    correct,
    empty_busy,
    float_rows,
    machine_rates,
    select,
    streaming_timeline,
    sum_timelines,
    vmax,
    wave_schedule,
)
from dse.perf.rates import (
    DRAM_LATENCY_S,
    arch_family,
    effective_sm_clock_hz,
    rates_at,
    tensor_flop_per_clk,
)
from dse.perf.tiles import flash_tile_arrays, occupancy
from dse.perf.types import CoeffTable, KernelEstimate, OperatingPoint, coeff_table
from dse.workload.ops import AttentionOp

HEAD_DIM_CLASSES: tuple[str, ...] = ("d64", "d128", "d192", "d256", "dbig")
DTYPE_CLASSES: tuple[str, ...] = ("f16", "f8")
FLASH_GROUPS: tuple[str, ...] = tuple(
    f"attention_flash/{d}/{h}/{k}/{t}"
    for d in DTYPE_CLASSES
    for h in HEAD_DIM_CLASSES
    for k in ("mha", "gqa")
    for t in ("short", "long")
)
_SHORT_TILE_BLOCKS = 4.0  # tiles of fewer K/V blocks cannot amortize their pipeline fill
DECODE_GROUPS: tuple[str, ...] = tuple(
    f"attention_decode/{d}/{h}/{s}"
    for d in DTYPE_CLASSES
    for h in HEAD_DIM_CLASSES
    for s in ("single", "split")
)
# K/V loads run two blocks ahead (K and V double-buffered, and the producer warp prefetches the next
# tile), so a step exposes at most half a DRAM latency.
_KV_LATENCY_S = DRAM_LATENCY_S / 2.0
_SCORE_FLOP = 4.0  # scale, running max, subtract, sum per score (CUDA cores)
_SPLIT_CANDIDATES: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64, 128)


def _head_dim_class(d: np.ndarray) -> np.ndarray:
    return select([d <= 64, d <= 128, d <= 192, d <= 256], [0, 1, 2, 3], 4)


def _common(
    batch, sq, skv, heads, kv_heads, d, kv_b, act_b, gpu: GpuSpec, f, decode: bool,
    gpu_rows: GpuRows | None = None,
) -> AttentionInputs:  # fmt: skip
    """Shared inputs: broadcast arrays, rates, tiles, compute rate (`gpu_rows`: each row's SM count, DRAM
    bandwidth and Tensor-Core rates, `dse.perf.gpu_rows`)."""
    num = np.asarray(batch).shape[0]
    bc = lambda x: float_rows(x, num)  # noqa: E731
    b_, sq_, skv_, h_, hkv_, d_, kv_b_, act_b_, f_ = (
        bc(v) for v in (batch, sq, skv, heads, kv_heads, d, kv_b, act_b, f)
    )
    arch = arch_family(gpu)
    rates = rows_rates(rates_at(gpu, f_), gpu_rows)
    bq, bkv, threads = flash_tile_arrays(arch, d_, decode)
    # fp8 KV cache: Hopper runs the matmuls in fp8 (FA3), older GPUs convert to 16 bit first.
    f8 = kv_b_ <= 1.0
    if not decode:  # prefill reads the fresh K/V (never narrower than the cache)
        kv_b_ = np.maximum(act_b_, kv_b_)
    # Prefill attends over the fresh bf16 K/V (the fp8 cache is written beside it): 16-bit matmuls; decode
    # reads the fp8 cache and, on Hopper, multiplies in fp8 (FA3).
    f8_mma = f8 & (arch == "hopper") & decode
    tc_clk = np.where(f8_mma, *(_tensor_rate(gpu, gpu_rows, dtype) for dtype in ("fp8", "bf16")))
    consumers = threads - 128.0 if arch == "hopper" else threads
    acc = (bq * d_ + bq * bkv) / consumers  # fp32 accumulators (O and S) per consumer thread
    regs = np.minimum(255.0, acc + 40.0)
    mma_b = np.where(f8_mma, 1.0, act_b_)
    smem_b = bq * d_ * mma_b + 2.0 * 2.0 * bkv * d_ * kv_b_ + 2048.0
    return AttentionInputs(
        batch=b_,
        seq_q=sq_,
        seq_kv=skv_,
        heads=h_,
        kv_heads=hkv_,
        head_dim=d_,
        kv_elem_bytes=kv_b_,
        act_elem_bytes=act_b_,
        sm_clock_hz=f_,
        arch=arch,
        rates=rates,
        block_q=bq,
        block_kv=bkv,
        rows=bq,
        threads=threads,
        tc_flop_per_s_per_sm=tc_clk * f_,
        # Shared memory only lowers occupancy: FlashAttention shrinks its tiles to fit it (FA2's sm86
        # traits), these fixed tiles do not. The accumulators must fit the registers, at most 255 a thread
        # (`regs`' cap, which the FA4-style tiles of head dims above 256 reach).
        conc=occupancy(
            rates,
            threads=threads,
            smem_bytes=smem_b,
            regs_per_thread=regs,
            min_regs=consumers * np.minimum(255.0, acc),
            min_smem_bytes=0.0,
        ),
        kv_f8=f8,
        mma_elem_bytes=mma_b,
    )


def _tensor_rate(gpu: GpuSpec, gpu_rows: GpuRows | None, dtype: str) -> np.ndarray | float:
    """Tensor-Core FLOP per clock per SM in `dtype`: `gpu`'s, or each row's GPU's."""
    return tensor_flop_per_clk(gpu, dtype) if gpu_rows is None else gpu_rows.tensor_rate(dtype)


def _iteration(
    c: AttentionInputs,
    cc: np.ndarray,
    act: np.ndarray,
    kv_step_b: np.ndarray,
    extra_b: np.ndarray,
    ratio: np.ndarray,
    overlap: bool,
    latency_s: float = _KV_LATENCY_S,
) -> tuple[np.ndarray, np.ndarray]:
    """(load, math) time of one K/V block for `cc` threadblocks per SM and `act` device-wide."""
    r = c.rates
    step_b = kv_step_b + extra_b
    load = vmax(
        act * (kv_step_b * ratio + extra_b) / r.dram_bw_bytes_per_s,
        act * step_b / r.l2_bw_bytes_per_s,
        cc * step_b / r.l2_bw_per_sm_bytes_per_s,
        cc * step_b / r.smem_bw_per_sm_bytes_per_s,
        latency_s + 0.0 * cc,
    )
    rows, bkv, d = c.rows, c.block_kv, c.head_dim
    t_mma = cc * 4.0 * rows * bkv * d / c.tc_flop_per_s_per_sm
    t_sfu = cc * rows * bkv / r.sfu_op_per_s_per_sm
    t_cuda = cc * _SCORE_FLOP * rows * bkv / r.fp32_flop_per_s_per_sm
    smem_rd = (rows / 64.0) * (64.0 * d + 2.0 * bkv * d) * c.mma_elem_bytes
    t_smem = cc * smem_rd / r.smem_bw_per_sm_bytes_per_s
    math = np.where(overlap, vmax(t_mma, t_sfu, t_cuda, t_smem), np.maximum(t_mma, t_smem) + t_sfu + t_cuda)
    return load, math


def _fill(c: AttentionInputs, cc: np.ndarray, step_b: np.ndarray) -> np.ndarray:
    """Exposed fill of a tile: DRAM latency plus this SM's first K/V block through its L2 port."""
    r = c.rates
    return DRAM_LATENCY_S + vmax(
        cc * step_b / r.l2_bw_per_sm_bytes_per_s, cc * step_b / r.smem_bw_per_sm_bytes_per_s
    )


def _cache_write(c: AttentionInputs) -> tuple[Timeline, np.ndarray]:
    """vLLM's `reshape_and_cache_flash`: one threadblock per new token copies its K and V rows (read in
    the activation dtype) into the cache pages (written in the cache dtype). Returns its streaming
    timeline and its DRAM bytes."""
    r = c.rates
    tokens = c.batch * c.seq_q
    row = 2.0 * c.kv_heads * c.head_dim  # K and V elements of one token
    threads = np.minimum(512.0, c.kv_heads * c.head_dim)
    cache_b = np.where(c.kv_f8, 1.0, c.kv_elem_bytes)
    nbytes = row * (c.act_elem_bytes + cache_b)
    tl = streaming_timeline(
        **machine_rates(r),
        grid=tokens,
        conc=np.floor(r.max_threads_per_sm / threads),
        threads=threads,
        dram_b=nbytes,
        l2_b=nbytes,
        smem_b=np.zeros_like(tokens),
        flop=row,
        sfu_op=np.zeros_like(tokens),
        passes=np.ones_like(tokens),
    )
    return tl, tokens * nbytes


def _tile_serial(c: AttentionInputs, cc: np.ndarray, o_b: np.ndarray, overlap: bool) -> np.ndarray:
    """Per-tile work that no pipelining hides: FA3 overlaps a block's softmax with the next block's
    QK^T, so the first block's softmax and the last block's PV run alone; then O is rescaled and stored
    through shared memory. (FA2 runs softmax serially already: only the store is added.)"""
    r = c.rates
    rows, bkv, d = c.rows, c.block_kv, c.head_dim
    soft = cc * rows * bkv * (1.0 / r.sfu_op_per_s_per_sm + _SCORE_FLOP / r.fp32_flop_per_s_per_sm)
    pv = cc * 2.0 * rows * bkv * d / c.tc_flop_per_s_per_sm
    store = cc * o_b / r.smem_bw_per_sm_bytes_per_s + cc * rows * d / r.fp32_flop_per_s_per_sm
    return np.where(overlap, soft + pv, 0.0) + store


def _busy(
    c: AttentionInputs,
    units: np.ndarray,
    kv_l2_b: np.ndarray,
    dram_main_b: np.ndarray,
    q_o_l2_b: np.ndarray,
    epi_dram_b: np.ndarray,
) -> np.ndarray:
    r, sms = c.rates, c.rates.num_sms
    rows, bkv, d = c.rows, c.block_kv, c.head_dim
    busy = empty_busy(units.shape[0])
    busy[1, MODULE_INDEX["dram"]] = dram_main_b / r.dram_bw_bytes_per_s
    busy[1, MODULE_INDEX["l2"]] = (kv_l2_b + q_o_l2_b) / r.l2_bw_bytes_per_s
    smem_rd = (rows / 64.0) * (64.0 * d + 2.0 * bkv * d) * c.mma_elem_bytes
    busy[1, MODULE_INDEX["smem"]] = (kv_l2_b + units * smem_rd) / (r.smem_bw_per_sm_bytes_per_s * sms)
    busy[1, MODULE_INDEX["tensor"]] = units * 4.0 * rows * bkv * d / (c.tc_flop_per_s_per_sm * sms)
    busy[1, MODULE_INDEX["sfu"]] = units * rows * bkv / (r.sfu_op_per_s_per_sm * sms)
    busy[1, MODULE_INDEX["cuda"]] = units * _SCORE_FLOP * rows * bkv / (r.fp32_flop_per_s_per_sm * sms)
    busy[2, MODULE_INDEX["dram"]] = epi_dram_b / r.dram_bw_bytes_per_s
    busy[2, MODULE_INDEX["l2"]] = epi_dram_b / r.l2_bw_bytes_per_s
    return busy


def _flash_shape(c: AttentionInputs, causal: np.ndarray) -> FlashShape:
    """Grid, K/V blocks per tile and rows per tile of the flash kernel (PackGQA, causal triangle)."""
    b, sq, skv, h, hkv = c.batch, c.seq_q, c.seq_kv, c.heads, c.kv_heads
    bq, bkv = c.block_q, c.block_kv
    # PackGQA (FA3 with variable-length batches, as vLLM calls it): the query heads sharing a KV head are
    # packed into the rows of one tile (position-major), so a tile of bq rows covers bq / grp positions.
    grp = np.where((c.arch == "hopper") & (h > hkv), h / hkv, 1.0)
    rows_seq = sq * grp  # query rows of one (sequence, tile head)
    bq_pos = bq / grp  # query positions per tile
    nq = np.ceil(rows_seq / bq)
    g = b * (h / grp) * nq
    # Warpgroup MMAs are 64 rows tall: a tile with few queries computes only the 64-row slices it needs.
    rows = np.minimum(bq, 64.0 * np.ceil(rows_seq / nq / 64.0))
    n_full = np.ceil(skv / bkv)
    # Causal: query block i sees keys [0, off + min((i + 1) bq_pos, sq)), off = skv - sq.
    off = skv - sq
    pairs = np.where(causal, sq * off + sq * (sq + 1.0) / 2.0, sq * skv)
    tri = nq * off / bkv + (bq_pos / bkv) * nq * (nq + 1.0) / 2.0 - (nq * bq_pos - sq) / bkv + 0.5 * nq
    tri = tri.clip(pairs / (bq_pos * bkv), nq * n_full)
    n_mean = np.where(causal, np.maximum(tri / nq, 1.0), n_full)
    return FlashShape(
        rows=rows,
        rows_seq=rows_seq,
        nq=nq,
        grid=g,
        n_full=n_full,
        pairs=pairs,
        n_mean=n_mean,
        units=g * n_mean,
    )


def _flash_timeline(c: AttentionInputs, sh: FlashShape, causal: np.ndarray) -> tuple[Timeline, Traffic]:
    """The flash kernel's timeline for the tiles `sh` of `_flash_shape`, and its traffic in bytes."""
    r, sms = c.rates, c.rates.num_sms
    d, bq, conc = c.head_dim, c.block_q, c.conc
    g, nq, n_full, n_mean, units = sh.grid, sh.nq, sh.n_full, sh.n_mean, sh.units
    kv_b = c.kv_elem_bytes
    kv_step_b = 2.0 * (c.seq_kv / n_full) * d * kv_b  # K and V rows of one block (only real keys load)
    kv_dram = 2.0 * c.batch * c.kv_heads * c.seq_kv * d * kv_b
    kv_l2 = units * kv_step_b
    ratio = np.minimum(1.0, kv_dram / kv_l2)
    # per threadblock, read Q + write O
    q_o_b = 2.0 * bq * d * c.act_elem_bytes * np.minimum(1.0, sh.rows_seq / bq)
    extra_b = q_o_b / n_mean
    overlap = c.arch == "hopper"

    sched = wave_schedule(g, conc, sms)
    balanced = causal & (nq > 1)
    # Causal tiles of unequal length run longest-first: the busiest SM does max(longest tile, its share).
    cc_b = (g / sms).clip(1.0, conc)  # a lone threadblock still has its SM to itself
    iters_busy = np.maximum(n_full, units / (sms * cc_b))
    w = np.where(balanced, iters_busy, sched["rounds"] * n_mean)
    cc = np.where(balanced, cc_b, sched["conc_avg"])
    act = units / w  # threadblocks active per K/V step, on average
    ld, mm = _iteration(c, cc, act, kv_step_b, extra_b, ratio, overlap)
    # Every output tile pays a fill it cannot hide (load Q and the first K/V block, then rescale and
    # store O): the prologue counts the tiles the busiest SM runs one after the other.
    tiles_seq = np.where(balanced, np.ceil(g / (sms * conc)), sched["rounds"])
    o_b = 0.5 * q_o_b
    t_pro = tiles_seq * (_fill(c, cc, kv_step_b + extra_b) + _tile_serial(c, cc, o_b, overlap))
    # The last output store, exposed through this SM's port (its DRAM bytes are in the mainloop).
    t_epi = vmax(cc * o_b / r.l2_bw_per_sm_bytes_per_s, cc * o_b / r.smem_bw_per_sm_bytes_per_s)
    q_o_total = g * q_o_b
    busy = _busy(c, units, kv_l2, kv_dram + q_o_total * 0.5, q_o_total * 0.5, q_o_total * 0.5)
    tl = Timeline(
        t_pro=t_pro,
        t_epi=t_epi,
        main_w=w[None, :],
        main_load=ld[None, :],
        main_math=mm[None, :],
        busy=busy,
        sm_active_frac=np.minimum(1.0, g / sms),
    )
    smem_b = busy[1, MODULE_INDEX["smem"]] * r.smem_bw_per_sm_bytes_per_s * sms
    return tl, Traffic(dram_bytes=kv_dram + q_o_total, l2_bytes=kv_l2 + q_o_total, smem_bytes=smem_b)


def flash_arrays(
    *,
    batch,
    seq_len_q,
    seq_len_kv,
    num_heads,
    num_kv_heads,
    head_dim,
    causal,
    act_bytes,
    kv_bytes,
    gpu: GpuSpec,
    sm_clock_hz,
    coeffs: CoeffTable | object | None = None,
    cache_write: bool = False,
    gpu_rows: GpuRows | None = None,
) -> dict[str, Any]:
    """Vectorized FlashAttention forward over N shapes (see the module docstring; `gpu_rows`: rows on GPUs
    differing from `gpu` in SM count, DRAM bandwidth and Tensor-Core rates, `dse.perf.gpu_rows`).

    `cache_write`: the op also writes the new K/V into the paged KV cache first (vLLM's attention layer
    runs `reshape_and_cache_flash` before the kernel, as the aiconfigurator context-attention table
    measures it); workload graphs model that copy as its own op and leave this off.
    """
    shape = (batch, seq_len_q, seq_len_kv, num_heads, num_kv_heads, head_dim, kv_bytes, act_bytes)
    c = _common(*shape, gpu, sm_clock_hz, decode=False, gpu_rows=gpu_rows)
    b, h, hkv, d = c.batch, c.heads, c.kv_heads, c.head_dim
    causal = bool_rows(causal, b.shape[0])
    sh = _flash_shape(c, causal)
    c = replace(c, rows=sh.rows)
    tl, traffic = _flash_timeline(c, sh, causal)
    copy_b = np.zeros_like(b)
    if cache_write:
        copy_tl, copy_b = _cache_write(c)
        tl = sum_timelines(tl, copy_tl)
    # MHA and GQA differ in K/V reuse (a GQA K/V block serves several query heads from L2).
    group = ((np.where(c.kv_f8, 1, 0) * len(HEAD_DIM_CLASSES) + _head_dim_class(d)) * 2 + (h > hkv)) * 2 + (
        sh.n_mean >= _SHORT_TILE_BLOCKS
    )
    latency_s, util = correct(tl, coeff_table(coeffs).matrix(FLASH_GROUPS)[group])
    return {
        "latency_s": latency_s,
        "analytical_s": tl.analytical_s(),
        "util": util,
        "timeline": tl,
        "flop": 4.0 * b * h * d * sh.pairs,
        "dram_bytes": traffic.dram_bytes + copy_b,
        "l2_bytes": traffic.l2_bytes + copy_b,
        "smem_bytes": traffic.smem_bytes,
        "group": group,
        "grid": sh.grid,
        "block_q": c.block_q,
        "block_kv": c.block_kv,
    }


def _decode_timeline(c: AttentionInputs, splits: np.ndarray) -> DecodeEval:
    r, sms = c.rates, c.rates.num_sms
    b, sq, skv, h, hkv, d = c.batch, c.seq_q, c.seq_kv, c.heads, c.kv_heads, c.head_dim
    bq, bkv, conc, kv_b, act_b = c.block_q, c.block_kv, c.conc, c.kv_elem_bytes, c.act_elem_bytes
    rows = (h / hkv) * sq
    m_blocks = np.ceil(rows / bq)
    n_blocks = np.ceil(skv / bkv)
    iters = np.ceil(n_blocks / splits)
    g = b * hkv * m_blocks * splits
    units = g * iters
    kv_step_b = 2.0 * bkv * d * kv_b  # a whole K/V block per step (paged cache: full pages)
    kv_dram = 2.0 * b * hkv * skv * d * kv_b
    kv_l2 = np.maximum(units * kv_step_b * np.minimum(1.0, skv / (n_blocks * bkv)), kv_dram)
    ratio = np.minimum(1.0, kv_dram / (units * kv_step_b))
    q_b = np.minimum(rows, bq * m_blocks) / m_blocks * d * act_b
    part_b = np.where(splits > 1, q_b / act_b * 4.0 + 8.0 * rows / m_blocks, q_b)  # fp32 O + LSE, or O
    extra_b = q_b / iters
    sched = wave_schedule(g, conc, sms)
    rounds, cc, act = sched["rounds"], sched["conc_avg"], sched["active_avg"]
    # One tile per threadblock: nothing to prefetch across tiles, a full DRAM latency per K/V step.
    ld, mm = _iteration(c, cc, act, kv_step_b, extra_b, ratio, c.arch == "hopper", DRAM_LATENCY_S)
    t_pro = rounds * _fill(c, cc, kv_step_b + extra_b)
    store = vmax(
        act * part_b / r.dram_bw_bytes_per_s,
        act * part_b / r.l2_bw_bytes_per_s,
        cc * part_b / r.l2_bw_per_sm_bytes_per_s,
    )
    comb_b = np.where(splits > 1, g * part_b + b * h * sq * d * act_b, 0.0)
    t_comb = np.where(splits > 1, DRAM_LATENCY_S + comb_b / r.dram_bw_bytes_per_s, 0.0)
    t_epi = rounds * store + t_comb
    q_total = g * q_b
    busy = _busy(c, units, kv_l2, kv_dram + q_total, q_total, g * part_b + comb_b)
    tl = Timeline(
        t_pro=t_pro,
        t_epi=t_epi,
        main_w=(rounds * iters)[None, :],
        main_load=ld[None, :],
        main_math=mm[None, :],
        busy=busy,
        sm_active_frac=np.minimum(1.0, g / sms),
    )
    return DecodeEval(
        timeline=tl,
        grid=g,
        dram_bytes=kv_dram + q_total + g * part_b + comb_b,
        l2_bytes=kv_l2 + q_total + g * part_b + comb_b,
        valid=splits <= np.maximum(n_blocks, 1.0),
    )


def _best_splits(
    c: AttentionInputs, table: np.ndarray, base: np.ndarray
) -> tuple[np.ndarray, DecodeEval, np.ndarray, np.ndarray]:
    """Per row, the split count of `_SPLIT_CANDIDATES` with the lowest corrected latency (ties and
    near-ties within 1e-9 go to fewer splits), and at it: the evaluation, latency and utilization.

    The valid (row, candidate) pairs (at most one split per K/V block) are evaluated in one pass over the
    rows repeated once per pair (every quantity of the timeline is elementwise in the rows, so each
    row's latency is the one a pass of its own gives), which pays the fixed numpy cost of a timeline once
    instead of once per candidate, and no work for the splits a short context cannot take; the chosen
    pairs' rows are the result (so the chosen splits are not evaluated again)."""
    n, k = c.batch.shape[0], len(_SPLIT_CANDIDATES)
    cands = np.asarray(_SPLIT_CANDIDATES, dtype=float)
    valid = cands[:, None] <= np.maximum(np.ceil(c.seq_kv / c.block_kv), 1.0)[None, :]  # [k, n]
    valid[0] = True  # one split always runs (a NaN context too: its row's result is NaN, not another row's)
    cj, ri = np.nonzero(valid)  # candidate-major, as the selection below scans them
    ev = _decode_timeline(c.take(ri), cands[cj])
    pair_lat, pair_util = correct(ev.timeline, table[base[ri] + (cands[cj] > 1)])
    lat = np.full((k, n), np.inf)
    lat[cj, ri] = pair_lat
    best_lat = np.full(n, np.inf)
    splits = np.ones(n)
    for j, s in enumerate(_SPLIT_CANDIDATES):
        better = valid[j] & (lat[j] < best_lat * (1.0 - 1e-9))
        best_lat = np.where(better, lat[j], best_lat)
        splits = np.where(better, float(s), splits)
    pair_of = np.zeros((k, n), dtype=np.intp)
    pair_of[cj, ri] = np.arange(ri.size)
    pick = pair_of[np.searchsorted(cands, splits), np.arange(n)]
    return splits, ev.take(pick), pair_lat[pick], pair_util[:, pick]


def decode_arrays(
    *,
    batch,
    seq_len_q,
    seq_len_kv,
    num_heads,
    num_kv_heads,
    head_dim,
    act_bytes,
    kv_bytes,
    gpu: GpuSpec,
    sm_clock_hz,
    coeffs: CoeffTable | object | None = None,
    gpu_rows: GpuRows | None = None,
) -> dict[str, Any]:
    """Vectorized flash-decoding over N shapes (see the module docstring; `gpu_rows` as `flash_arrays`').

    The split count is the candidate (1, 2, 4, ..., 128 splits, at most one per K/V block) with the
    lowest predicted latency, which tracks FlashAttention's wave-efficiency heuristic and keeps the
    model monotone in the SM count.
    """
    shape = (batch, seq_len_q, seq_len_kv, num_heads, num_kv_heads, head_dim, kv_bytes, act_bytes)
    c = _common(*shape, gpu, sm_clock_hz, decode=True, gpu_rows=gpu_rows)
    r, sms = c.rates, c.rates.num_sms
    table = coeff_table(coeffs).matrix(DECODE_GROUPS)
    base = (np.where(c.kv_f8, 1, 0) * len(HEAD_DIM_CLASSES) + _head_dim_class(c.head_dim)) * 2
    splits, ev, latency_s, util = _best_splits(c, table, base)
    tl = ev.timeline
    group = base + (splits > 1)
    b, sq, skv, h, d = c.batch, c.seq_q, c.seq_kv, c.heads, c.head_dim
    pairs = sq * (skv - sq) + sq * (sq + 1.0) / 2.0
    return {
        "latency_s": latency_s,
        "analytical_s": tl.analytical_s(),
        "util": util,
        "timeline": tl,
        "flop": 4.0 * b * h * d * pairs,
        "dram_bytes": ev.dram_bytes,
        "l2_bytes": ev.l2_bytes,
        "smem_bytes": tl.busy[1, MODULE_INDEX["smem"]] * r.smem_bw_per_sm_bytes_per_s * sms,
        "group": group,
        "grid": ev.grid,
        "splits": splits,
        "block_kv": c.block_kv,
    }


def _backend_arrays(
    backend: str,
    ops: list[AttentionOp],
    gpu: GpuSpec,
    clocks: np.ndarray,
    coeffs: CoeffTable | object | None,
) -> dict[str, Any]:
    """The `*_arrays` result of `ops`, all of one backend (`flash`, `decode` or `eager`)."""
    s = AttentionShapes.of(ops)
    shape: dict[str, Any] = {
        "batch": s.batch,
        "seq_len_q": s.seq_len_q,
        "seq_len_kv": s.seq_len_kv,
        "num_heads": s.num_heads,
        "num_kv_heads": s.num_kv_heads,
        "head_dim": s.head_dim,
    }
    machine: dict[str, Any] = {"gpu": gpu, "sm_clock_hz": clocks, "coeffs": coeffs}
    if backend == "eager":
        return eager_arrays(**shape, dtype=[o.dtype for o in ops], **machine)
    dtypes: dict[str, Any] = {"act_bytes": s.act_bytes, "kv_bytes": s.kv_bytes}
    if backend == "flash":
        return flash_arrays(**shape, causal=np.array([o.causal for o in ops]), **dtypes, **machine)
    return decode_arrays(**shape, **dtypes, **machine)


def estimate_many(
    ops: list[AttentionOp], gpu: GpuSpec, point: OperatingPoint, coeffs: CoeffTable | object | None = None
) -> list[KernelEstimate]:
    """Estimates for many attention ops at one operating point, vectorized per backend."""
    if not ops:
        return []
    clock_hz = effective_sm_clock_hz(gpu, point)
    result: list[KernelEstimate | None] = [None] * len(ops)
    for backend in ("flash", "decode", "eager"):
        idx = [i for i, o in enumerate(ops) if o.backend == backend]
        if not idx:
            continue
        sub = [ops[i] for i in idx]
        clocks = np.full(len(sub), clock_hz)
        out = _backend_arrays(backend, sub, gpu, clocks, coeffs)
        if backend == "eager":
            tiles = eager_tiles(out)
            groups = ["attention_eager"] * len(sub)
        else:
            names = FLASH_GROUPS if backend == "flash" else DECODE_GROUPS
            groups = [names[g] for g in out["group"]]
            if backend == "flash":
                tiles = [
                    f"fa_{'fa3' if arch_family(gpu) == 'hopper' else 'fa2'}_{int(out['block_q'][i])}x"
                    f"{int(out['block_kv'][i])}"
                    for i in range(len(sub))
                ]
            else:
                tiles = [
                    f"flash_decode_kv{int(out['block_kv'][i])}_splits{int(out['splits'][i])}"
                    for i in range(len(sub))
                ]
        kinds = [f"attention_{backend}"] * len(sub)
        for i, est in zip(idx, build_estimates(sub, kinds, out, clocks, tiles, groups), strict=True):
            result[i] = est
    return [e for e in result if e is not None]


def estimate(
    op: AttentionOp, gpu: GpuSpec, point: OperatingPoint, coeffs: CoeffTable | object | None = None
) -> KernelEstimate:
    """One attention op at one operating point."""
    return estimate_many([op], gpu, point, coeffs)[0]
