"""One K step of a GEMM mainloop per architecture: math, the MMA instruction's shared-memory operand reads,
and the stores and split-K reduction that follow the mainloop (`step_costs`, used by `dse.perf.gemm`).

Shared-memory reads per K step follow what each generation's MMA instruction reads (`smem_read_bytes`,
`tiles.LIBRARY_MMA` names the instruction of each kernel library):

- mma.sync (Ampere) and FFMA (SIMT): every warp loads its own A and B fragments from shared memory
  (ldmatrix / shared loads), so a threadblock reads `(tile_m / warp_m) (tile_n / warp_n)
  (warp_m + warp_n)` elements per K element.
- wgmma (Hopper): a warpgroup's MMA reads B from shared memory through a matrix descriptor, and A from
  shared memory or registers (NVIDIA PTX ISA, `wgmma.mma_async` operands); CUTLASS's mainloops keep A in
  shared memory, so each warpgroup tile reads its A rows and B columns: the same per-tile count, with
  `warp_m x warp_n` the warpgroup's tile.
- tcgen05.mma (Blackwell): one thread issues the MMA for the whole CTA tile; A comes from shared memory
  (or tensor memory), B from shared memory, and the accumulator stays in tensor memory (NVIDIA PTX ISA,
  `tcgen05.mma` operands). Each CTA thus reads its A and B tiles once per K step.
  With `cta_group::2` the MMA spans a pair of CTAs on two SMs: each holds its M half of A and an N half
  of B, and the instruction reads each operand half from the shared memory holding it, so a CTA serves
  tile_m rows of A and tile_n / 2 columns of B (CUTLASS `SM100_MMA_*_2x1SM_SS` traits: A, B and C split
  over the two CTAs).
"""

from __future__ import annotations

import numpy as np

from dse.perf.arrays import GemmCandidates, GemmRows, StepCosts, TileGeometry
from dse.perf.pipeline import vmax
from dse.perf.rates import DRAM_LATENCY_S, Rates
from dse.perf.tiles import LIBRARY_MMA, simt_ffma_rate_factor

SPLIT_REDUCE_BYTES = 4.0  # split-K partials are fp32
# Weight-only GEMMs (B stored narrower than the MMA operands: MXFP4 experts on GPUs without fp4 Tensor
# Cores) dequantize every B element a threadblock loads, on the CUDA cores, before the MMA. Marlin's
# e2m1 -> bf16 sequence takes about three integer ops (mask, shift, merge) per bf16x2 pair and one packed
# bf16 multiply that applies the exponent bias and the e8m0 block scale: per weight 1.5 ops on the INT32
# pipe (64 lanes per SM since Volta) and 0.5 on the packed-half pipe (128 lanes): SM cycles per weight.
# As CUDA-core work it is those cycles times the SM's fp32 FLOP per clock: 7 FLOP on Hopper (256 per
# clock), 3.5 on the A100 (128).
DEQUANT_SM_CYCLES_PER_WEIGHT = 1.5 / 64.0 + 0.5 / 128.0


def smem_read_bytes(mma: str, r: GemmRows, c: GemmCandidates, k_tile: np.ndarray) -> np.ndarray:
    """Shared-memory bytes the MMA instructions of one threadblock read in one K step of `k_tile`
    elements (B as stored: weight-only kernels dequantize after the read), by MMA instruction `mma`."""
    a_b, b_b = r.in_elem_bytes, r.b_elem_bytes
    if mma == "tcgen05":  # once per CTA: its A rows and its share of the B columns
        return (c.tile_m * a_b + c.tile_n / c.cta_pair * b_b) * k_tile
    # mma.sync / FFMA per warp, wgmma per warpgroup: each MMA tile reads its own A rows and B columns
    tile_b = c.warp_m * a_b + c.warp_n * b_b
    return (c.tile_m / c.warp_m) * (c.tile_n / c.warp_n) * tile_b * k_tile


def step_costs(r: GemmRows, c: GemmCandidates, v: TileGeometry, rates: Rates, library: str) -> StepCosts:
    """Math and shared-memory time of one K step of `library`'s candidates `c`, and the store / split-K
    reduction bytes."""
    m, n, batch, out_b = r.m, r.n, r.batch, r.out_elem_bytes
    tm, tn, kt, s, mt_avg, nt_avg = c.tile_m, c.tile_n, v.k_tile, v.splits, v.mt_avg, v.nt_avg
    flop_step = 2.0 * tm * tn * kt
    smem_rd = smem_read_bytes(LIBRARY_MMA[library], r, c, kt)
    if library == "simt":  # FFMA issue slots shared with the mainloop's other instructions on 128-lane SMs
        math_sm = r.fp32_flop_per_s_per_sm * simt_ffma_rate_factor(
            c.warp_m, c.warp_n, tm, tn, kt, rates.fp32_flop_per_clk
        )
    else:
        math_sm = r.tc_flop_per_s_per_sm
    # CUDA-core dequantization of the B tile of weight-only GEMMs (DEQUANT_SM_CYCLES_PER_WEIGHT), as FLOP
    deq_flop_per_weight = DEQUANT_SM_CYCLES_PER_WEIGHT * rates.fp32_flop_per_clk
    deq_step = np.where(r.b_elem_bytes < r.in_elem_bytes, deq_flop_per_weight * tn * kt, 0.0)
    # Split-K partials stay in L2 when they fit in half of it: then only C reaches DRAM.
    part_in_l2 = (s > 1) & (batch * m * n * s * SPLIT_REDUCE_BYTES <= 0.5 * rates.l2_bytes)
    red_b = np.where(s > 1, batch * m * n * (s * SPLIT_REDUCE_BYTES + out_b), 0.0)
    red_dram_b = np.where(part_in_l2, batch * m * n * out_b, red_b)
    bw_dram, l2_tot = r.dram_bw_bytes_per_s, r.l2_bw_bytes_per_s
    return StepCosts(
        flop_step=flop_step,
        smem_rd_bytes=smem_rd,
        math_flop_per_s_per_sm=math_sm,
        dequant_flop_step=deq_step,
        t_math_s=vmax(
            flop_step / math_sm, smem_rd / r.smem_bw_per_sm_bytes_per_s, deq_step / r.fp32_flop_per_s_per_sm
        ),
        out_cta_bytes=mt_avg * nt_avg * np.where(s > 1, SPLIT_REDUCE_BYTES, out_b),
        fix_bytes=2.0 * mt_avg * nt_avg * SPLIT_REDUCE_BYTES,
        out_dram=np.where(part_in_l2, 0.0, 1.0),
        red_bytes=red_b,
        red_dram_bytes=red_dram_b,
        t_red_s=np.where(s > 1, DRAM_LATENCY_S + np.maximum(red_dram_b / bw_dram, red_b / l2_tot), 0.0),
    )
