"""Typed per-row inputs and intermediates of the vectorized kernel estimators.

Frozen dataclasses of numpy arrays (one entry per row, or per candidate) and scalars that the estimators
in `dse.perf.attention` and `dse.perf.gemm` pass between their helpers, so that every field access is
checked. Field names carry their unit (`_bytes`, `_hz`, `_per_s`, ...); counts have none.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Any

import numpy as np

from dse.perf.pipeline import Timeline
from dse.perf.rates import DTYPE_BYTES, Rates
from dse.workload.ops import AttentionOp


@dataclass(frozen=True, slots=True)
class AttentionInputs:
    """What `_common` gathers: broadcast shape arrays [N], rates, tiles, compute rate and occupancy."""

    batch: np.ndarray
    seq_q: np.ndarray  # query positions per sequence
    seq_kv: np.ndarray  # keys per sequence
    heads: np.ndarray
    kv_heads: np.ndarray
    head_dim: np.ndarray
    kv_elem_bytes: np.ndarray  # prefill: never narrower than the activation (the fresh K/V)
    act_elem_bytes: np.ndarray
    sm_clock_hz: np.ndarray
    arch: str
    rates: Rates
    block_q: np.ndarray
    block_kv: np.ndarray
    rows: np.ndarray  # query rows a tile computes (flash: set by `_flash_shape`)
    threads: int
    tc_flop_per_s_per_sm: np.ndarray
    conc: np.ndarray  # resident threadblocks per SM
    kv_f8: np.ndarray  # fp8 KV cache
    mma_elem_bytes: np.ndarray  # element size of the matmul operands in shared memory

    def take(self, idx: np.ndarray) -> AttentionInputs:
        """Rows `idx`: what `_common` gives for those rows' inputs (each of its quantities is elementwise in
        the rows), without computing them again."""
        return replace(self, rates=_take(self.rates, idx), **_taken(self, idx, skip="rates"))


@dataclass(frozen=True, slots=True)
class FlashShape:
    """Grid and K/V blocks per tile of the flash kernel (`_flash_shape`)."""

    rows: np.ndarray  # query rows a tile computes (64-row slices)
    rows_seq: np.ndarray  # query rows of one (sequence, tile head)
    nq: np.ndarray  # query tiles per (sequence, tile head)
    grid: np.ndarray
    n_full: np.ndarray  # K/V blocks of a whole sequence
    pairs: np.ndarray  # (query, key) pairs per (sequence, head)
    n_mean: np.ndarray  # K/V blocks per tile, on average
    units: np.ndarray  # K/V block iterations of all threadblocks


@dataclass(frozen=True, slots=True)
class Traffic:
    dram_bytes: np.ndarray
    l2_bytes: np.ndarray
    smem_bytes: np.ndarray


@dataclass(frozen=True, slots=True)
class DecodeEval:
    """One split count's flash-decoding timeline (`_decode_timeline`)."""

    timeline: Timeline
    grid: np.ndarray
    dram_bytes: np.ndarray
    l2_bytes: np.ndarray
    valid: np.ndarray  # at most one split per K/V block

    def take(self, idx: np.ndarray) -> DecodeEval:
        """Rows `idx` (a timeline's rows are independent)."""
        return DecodeEval(self.timeline.take(idx), **_taken(self, idx, skip="timeline"))


@dataclass(frozen=True, slots=True)
class AttentionShapes:
    """The shapes of a list of attention ops (keyword arguments of the `dse.perf.attention` `*_arrays`)."""

    batch: np.ndarray
    seq_len_q: np.ndarray
    seq_len_kv: np.ndarray
    num_heads: np.ndarray
    num_kv_heads: np.ndarray
    head_dim: np.ndarray
    act_bytes: np.ndarray  # element size of the activations (queries, outputs, fresh K/V)
    kv_bytes: np.ndarray  # element size of the KV cache

    @classmethod
    def of(cls, ops: list[AttentionOp]) -> AttentionShapes:
        return cls(
            batch=np.array([o.batch for o in ops], dtype=float),
            seq_len_q=np.array([o.seq_len_q for o in ops], dtype=float),
            seq_len_kv=np.array([o.seq_len_kv for o in ops], dtype=float),
            num_heads=np.array([o.num_heads for o in ops], dtype=float),
            num_kv_heads=np.array([o.num_kv_heads for o in ops], dtype=float),
            head_dim=np.array([o.head_dim for o in ops], dtype=float),
            act_bytes=np.array([DTYPE_BYTES[o.dtype] for o in ops]),
            kv_bytes=np.array([DTYPE_BYTES[o.cache_dtype] for o in ops]),
        )


def uniform_cut(v: Any) -> Any:
    """An array cut to its first row when all its rows are equal (it broadcasts to the same values); a
    scalar as it is."""
    if not np.ndim(v):
        return v
    return v[:1] if v.shape[0] > 1 and bool((v == v[0]).all()) else v


@dataclass(frozen=True, slots=True)
class GemmRows:
    """Per-row GEMM inputs (`dse.perf.gemm_rows.row_inputs`): shapes, element sizes and module rates."""

    m: np.ndarray
    n: np.ndarray
    k: np.ndarray
    batch: np.ndarray
    in_elem_bytes: np.ndarray  # A, and the MMA operands' K step
    b_elem_bytes: np.ndarray  # B as stored (weight-only quantization reads fewer bytes than A's)
    out_elem_bytes: np.ndarray
    b_shared: np.ndarray
    l2_bw_per_sm_bytes_per_s: np.ndarray
    l2_bw_bytes_per_s: np.ndarray
    smem_bw_per_sm_bytes_per_s: np.ndarray
    fp32_flop_per_s_per_sm: np.ndarray
    tc_flop_per_s_per_sm: np.ndarray
    # The GPU's SM count and DRAM bandwidth: one float for a call on one GPU, per row for a call over
    # several (`dse.perf.gpu_rows.GpuRows`: design points of a search).
    num_sms: np.ndarray | float
    dram_bw_bytes_per_s: np.ndarray | float

    def at_pairs(self, rows: np.ndarray) -> GemmRows:
        """From a column [n, 1]: row `rows[j]` for each (row, candidate) pair j, shape [P]."""

        def pairs(v: Any) -> Any:  # a field, or one GPU's float
            return v[rows, 0] if np.ndim(v) else v

        return GemmRows(**{f.name: pairs(getattr(self, f.name)) for f in fields(self)})

    def uniform_collapsed(self) -> GemmRows:
        """A column [n, 1] with each field whose n values are all equal cut to its first row [1, 1]: what
        broadcasts against candidates [1, C] to the same values, with the candidate-only arithmetic done
        on [1, C] instead of [n, C] (eager decode attention's rows differ in one dimension only)."""

        return GemmRows(**{f.name: uniform_cut(getattr(self, f.name)) for f in fields(self)})

    def column(self, sel: np.ndarray | slice) -> GemmRows:
        """Rows `sel` as a column [len(sel), 1] (to broadcast against candidates [1, C])."""

        def col(v: np.ndarray) -> np.ndarray:
            return (v[sel] if np.ndim(v) else v)[:, None]

        def per_gpu(v: Any) -> Any:  # one GPU's value stays a float
            return v[sel][:, None] if np.ndim(v) else v

        return GemmRows(
            m=col(self.m),
            n=col(self.n),
            k=col(self.k),
            batch=col(self.batch),
            in_elem_bytes=col(self.in_elem_bytes),
            b_elem_bytes=col(self.b_elem_bytes),
            out_elem_bytes=col(self.out_elem_bytes),
            b_shared=col(self.b_shared),
            l2_bw_per_sm_bytes_per_s=col(self.l2_bw_per_sm_bytes_per_s),
            l2_bw_bytes_per_s=col(self.l2_bw_bytes_per_s),
            smem_bw_per_sm_bytes_per_s=col(self.smem_bw_per_sm_bytes_per_s),
            fp32_flop_per_s_per_sm=col(self.fp32_flop_per_s_per_sm),
            tc_flop_per_s_per_sm=col(self.tc_flop_per_s_per_sm),
            num_sms=per_gpu(self.num_sms),
            dram_bw_bytes_per_s=per_gpu(self.dram_bw_bytes_per_s),
        )


@dataclass(frozen=True, slots=True)
class GemmCandidates:
    """Per-candidate GEMM constants (tile x split), shape [1, C]; or one chosen per row, [N, 1]."""

    tile_idx: np.ndarray
    tile_m: np.ndarray
    tile_n: np.ndarray
    k_step_bytes: np.ndarray  # A or B bytes per row or column of one K step
    warp_m: np.ndarray
    warp_n: np.ndarray
    stages: np.ndarray
    conc: np.ndarray  # resident threadblocks per SM
    split: np.ndarray  # split-K slices, or `STREAM_K`
    multicast: np.ndarray
    multicast_a: np.ndarray
    m_lo: np.ndarray  # m dispatch range (0, 0: any m)
    m_hi: np.ndarray
    tile_class: np.ndarray  # index into `dse.perf.tiles.TILE_CLASSES`
    cta_pair: np.ndarray  # 2: one CTA of a Blackwell 2-SM MMA, which holds half of B (`tiles.GemmTile`)

    def at_pairs(self, cands: np.ndarray) -> GemmCandidates:
        """Candidate `cands[j]` for each (row, candidate) pair j, shape [P]."""
        return GemmCandidates(**{f.name: getattr(self, f.name)[0, cands] for f in fields(self)})

    def at_columns(self, cols: np.ndarray) -> GemmCandidates:
        """Candidates `cols` only, shape [1, len(cols)]."""
        return GemmCandidates(**{f.name: getattr(self, f.name)[:, cols] for f in fields(self)})

    def chosen(self, best: np.ndarray) -> GemmCandidates:
        """Candidate `best[i]` for row i, shape [N, 1]."""

        def pick(v: np.ndarray) -> np.ndarray:
            return v[0, best][:, None]

        return GemmCandidates(
            tile_idx=pick(self.tile_idx),
            tile_m=pick(self.tile_m),
            tile_n=pick(self.tile_n),
            k_step_bytes=pick(self.k_step_bytes),
            warp_m=pick(self.warp_m),
            warp_n=pick(self.warp_n),
            stages=pick(self.stages),
            conc=pick(self.conc),
            split=pick(self.split),
            multicast=pick(self.multicast),
            multicast_a=pick(self.multicast_a),
            m_lo=pick(self.m_lo),
            m_hi=pick(self.m_hi),
            tile_class=pick(self.tile_class),
            cta_pair=pick(self.cta_pair),
        )


@dataclass(frozen=True, slots=True)
class TileGeometry:
    """Output tiles, K steps and per-step staging bytes of GEMM candidates (`_tile_geometry`)."""

    stream_k: np.ndarray
    splits: np.ndarray  # split-K slices (stream-K: 1)
    k_tile: np.ndarray  # K elements per step
    tiles_m: np.ndarray
    tiles_n: np.ndarray
    k_split: np.ndarray  # K elements per slice
    nk: np.ndarray  # K steps per threadblock
    plane: np.ndarray  # output tiles per batch entry
    grid: np.ndarray
    units: np.ndarray  # K iterations of all threadblocks
    slots: np.ndarray  # resident threadblocks device-wide
    valid: np.ndarray
    mt_avg: np.ndarray  # real rows of a tile, on average
    nt_avg: np.ndarray
    step_bytes: np.ndarray  # what one threadblock stages per K step
    step_l2_bytes: np.ndarray  # what it reads from L2 per K step (B multicast)


@dataclass(frozen=True, slots=True)
class OperandTraffic:
    """L2 and DRAM traffic of A and B (`_operand_traffic`)."""

    l2_bytes: np.ndarray
    dram_bytes: np.ndarray
    dram_ratio: np.ndarray  # DRAM bytes per L2 byte


@dataclass(frozen=True, slots=True)
class RoundSchedule:
    """Rounds and threadblocks per SM / device-wide (`_round_schedule`)."""

    rounds: np.ndarray
    sk_iters: np.ndarray  # stream-K: K iterations of the busiest slot
    sk_tiles: np.ndarray  # stream-K: output tiles a slot finishes
    sk_act: np.ndarray
    sk_cc_tile: np.ndarray
    cc: np.ndarray  # threadblocks per SM
    cc_tile: np.ndarray  # threadblocks per SM for the per-tile costs
    act: np.ndarray  # threadblocks active device-wide


@dataclass(frozen=True, slots=True)
class StepCosts:
    """Math and shared-memory time of one K step, and the store / split-K reduction bytes
    (`gemm_steps.step_costs`)."""

    flop_step: np.ndarray
    smem_rd_bytes: np.ndarray
    math_flop_per_s_per_sm: np.ndarray
    dequant_flop_step: np.ndarray  # CUDA-core FLOP (issue-slot equivalents) dequantizing a weight-only B tile
    t_math_s: np.ndarray
    out_cta_bytes: np.ndarray  # C (or split-K partials) a threadblock stores
    fix_bytes: np.ndarray  # stream-K fix-up of one partial tile
    out_dram: np.ndarray  # 1.0 when the stores reach DRAM, 0.0 when split-K partials stay in L2
    red_bytes: np.ndarray
    red_dram_bytes: np.ndarray
    t_red_s: np.ndarray


@dataclass(frozen=True, slots=True)
class CandidatePlan:
    """Everything `dse.perf.gemm._evaluate` derives for candidates before the phase times."""

    geo: TileGeometry
    traffic: OperandTraffic
    sched: RoundSchedule
    costs: StepCosts


@dataclass(frozen=True, slots=True)
class PhaseTimes:
    """Prologue, epilogue and mainloop (`steps` of `load_s` load and `math_s` math) of GEMM candidates."""

    t_pro_s: np.ndarray
    t_epi_s: np.ndarray
    steps: np.ndarray
    load_s: np.ndarray
    math_s: np.ndarray


@dataclass(frozen=True, slots=True)
class GemmResult:
    """Timeline, traffic and grid of one chosen GEMM candidate per row (flattened to [N])."""

    timeline: Timeline
    dram_bytes: np.ndarray
    l2_bytes: np.ndarray
    smem_bytes: np.ndarray
    grid: np.ndarray


@dataclass(frozen=True, slots=True)
class GemmChoice:
    """Rows of one library at their chosen candidates (`dse.perf.gemm._library_rows`)."""

    result: GemmResult
    tile_idx: np.ndarray
    split: np.ndarray
    group: np.ndarray


def _taken(obj: Any, idx: np.ndarray, skip: str) -> dict[str, Any]:
    """Field name -> value of dataclass `obj` with the rows `idx` of its [N] arrays (other values as they
    are), for every field but `skip`."""
    return {
        f.name: v[idx] if isinstance(v := getattr(obj, f.name), np.ndarray) and v.ndim else v
        for f in fields(obj)
        if f.name != skip
    }


def _take(rates: Rates, idx: np.ndarray) -> Rates:
    """Rates with the rows `idx` of their per-row clocks (and the rates that scale with them)."""
    return Rates(**_taken(rates, idx, skip=""))
