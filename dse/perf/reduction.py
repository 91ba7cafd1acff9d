"""Row reductions: softmax, layernorm and rmsnorm over the last dimension of [rows, cols].

Kernel configuration (PyTorch's `cunn_SoftMaxForward*` / `vectorized_layer_norm_kernel` families):

- rows of at most 1024 elements: a warp per row, 4 rows per 128-thread threadblock, the row in registers,
  one read of the input;
- longer rows: a threadblock per row (128 to 1024 threads). The row is cached in shared memory when it
  fits the 48 KiB default carve-out (softmax `*Smem` variant), so the input is read once; otherwise every
  extra pass (softmax: max, sum-of-exp, normalize; norms: statistics, normalize) reads the row again,
  from L2 when the rows in flight fit in it and from DRAM when they do not.

Work per element: softmax 4 FLOP + 1 exp (SFU); layernorm 8 FLOP; rmsnorm 5 FLOP; norms add one rsqrt
per row. Norm weights (and the layernorm bias) are read once from DRAM, then from L2 by every row.
The timeline is the streaming one of `pipeline.streaming_timeline` (load, reduce, write per round).
"""

from __future__ import annotations

import numpy as np

from dse.hardware.spec import GpuSpec
from dse.perf.gpu_rows import GpuRows, streaming_rates
from dse.perf.pipeline import build_estimates, correct, float_rows, machine_rates, streaming_timeline
from dse.perf.rates import DTYPE_BYTES, effective_sm_clock_hz, rates_at
from dse.perf.types import CoeffTable, KernelEstimate, OperatingPoint, coeff_table
from dse.workload.ops import NormOp, SoftmaxOp

KINDS: tuple[str, ...] = ("softmax", "layernorm", "rmsnorm")
# rmsnorm falls back to `norm` (fitted on layernorm data) when it has no data of its own.
GROUPS: tuple[str, ...] = ("softmax", "norm/layernorm", "norm/rmsnorm")
_FLOP_PER_ELEMENT = np.array([4.0, 8.0, 5.0])
_SFU_PER_ELEMENT = np.array([1.0, 0.0, 0.0])
_SFU_PER_ROW = np.array([0.0, 1.0, 1.0])
_PASSES = np.array([3.0, 2.0, 2.0])  # reads of the row when it is not cached
_WEIGHTS = np.array([0.0, 2.0, 1.0])  # weight (+ bias) vectors
_SMEM_CACHE_BYTES = 48 * 1024
_WARP_ROW_MAX_COLS = 1024


def reduction_arrays(
    *,
    kind: np.ndarray,
    rows: np.ndarray,
    cols: np.ndarray,
    dtype_bytes: np.ndarray,
    gpu: GpuSpec,
    sm_clock_hz: np.ndarray,
    coeffs: CoeffTable | object | None = None,
    gpu_rows: GpuRows | None = None,
) -> dict[str, np.ndarray]:
    """Vectorized model of N reductions; `kind` holds indices into KINDS (`gpu_rows`: rows on GPUs
    differing from `gpu` in SM count and DRAM bandwidth, `dse.perf.gpu_rows`, each as on its own).

    Returns latency_s, analytical_s, util [6, N], flop, dram_bytes, l2_bytes, smem_bytes, group, grid,
    threads, rows_per_cta and timeline (as `gemm.gemm_arrays`).
    """
    kind = np.asarray(kind, dtype=int)
    num = kind.shape[0]
    bc = lambda x: float_rows(x, num)  # noqa: E731
    rows, cols, b, f = bc(rows), bc(cols), bc(dtype_bytes), bc(sm_clock_hz)
    rates = rates_at(gpu, f)
    per_row = streaming_rates(gpu_rows)
    sms = per_row.get("rates_num_sms", rates.num_sms)

    warp_rows = cols <= _WARP_ROW_MAX_COLS
    rows_per_cta = np.where(warp_rows, 4.0, 1.0)
    threads = np.where(
        warp_rows, 128.0, np.clip(2.0 ** np.ceil(np.log2(np.maximum(cols / 16.0, 1.0))), 128, 1024)
    )
    grid = np.ceil(rows / rows_per_cta)
    row_b = cols * b
    cached = warp_rows | (row_b <= _SMEM_CACHE_BYTES)
    reads = np.where(cached, 1.0, _PASSES[kind])
    conc = np.minimum(np.floor(rates.max_threads_per_sm / threads), rates.max_threadblocks_per_sm)
    smem_per_cta = np.where(cached & ~warp_rows, row_b, 0.0) + 1024.0
    conc = np.maximum(1.0, np.minimum(conc, np.floor(rates.smem_bytes_per_sm / smem_per_cta)))
    # Extra passes hit L2 while the rows in flight fit in it.
    in_flight_b = np.minimum(grid, sms * conc) * rows_per_cta * row_b
    rereads_dram = np.where(in_flight_b <= 0.5 * rates.l2_bytes, 0.0, reads - 1.0)

    cta_elems = rows_per_cta * cols
    w_b = _WEIGHTS[kind] * row_b
    dram_cta = cta_elems * b * (2.0 + rereads_dram)
    l2_cta = cta_elems * b * (1.0 + reads) + w_b
    smem_cta = np.where(cached & ~warp_rows, 2.0 * cta_elems * b * _PASSES[kind], 64.0 * threads)
    flop_cta = cta_elems * _FLOP_PER_ELEMENT[kind]
    sfu_cta = cta_elems * _SFU_PER_ELEMENT[kind] + rows_per_cta * _SFU_PER_ROW[kind]
    tl = streaming_timeline(
        **(machine_rates(rates) | per_row),
        grid=grid,
        conc=conc,
        threads=threads,
        dram_b=dram_cta,
        l2_b=l2_cta,
        smem_b=smem_cta,
        flop=flop_cta,
        sfu_op=sfu_cta,
        passes=reads + 1.0,
    )
    group = kind.copy()
    latency_s, util = correct(tl, coeff_table(coeffs).matrix(GROUPS)[group])
    return {
        "latency_s": latency_s,
        "analytical_s": tl.analytical_s(),
        "util": util,
        "timeline": tl,
        "flop": rows * cols * _FLOP_PER_ELEMENT[kind],
        "dram_bytes": grid * dram_cta + w_b,
        "l2_bytes": grid * l2_cta,
        "smem_bytes": grid * smem_cta,
        "group": group,
        "grid": grid,
        "threads": threads,
        "rows_per_cta": rows_per_cta,
        "reads": reads,
    }


def estimate_many(
    ops: list[SoftmaxOp | NormOp],
    gpu: GpuSpec,
    point: OperatingPoint,
    coeffs: CoeffTable | object | None = None,
) -> list[KernelEstimate]:
    """Estimates for many softmax / norm ops at one operating point, vectorized."""
    if not ops:
        return []
    clock_hz = effective_sm_clock_hz(gpu, point)
    kinds = ["softmax" if isinstance(o, SoftmaxOp) else o.kind for o in ops]
    out = reduction_arrays(
        kind=np.array([KINDS.index(k) for k in kinds]),
        rows=np.array([o.rows for o in ops], dtype=float),
        cols=np.array([o.cols for o in ops], dtype=float),
        dtype_bytes=np.array([DTYPE_BYTES[o.dtype] for o in ops]),
        gpu=gpu,
        sm_clock_hz=np.full(len(ops), clock_hz),
        coeffs=coeffs,
    )
    tiles = [
        f"{'warp' if out['rows_per_cta'][i] > 1 else 'block'}_per_row_{int(out['threads'][i])}t_"
        f"{int(out['reads'][i])}read"
        for i in range(len(ops))
    ]
    groups = [GROUPS[g] for g in out["group"]]
    return build_estimates(ops, kinds, out, np.full(len(ops), clock_hz), tiles, groups)


def estimate(
    op: SoftmaxOp | NormOp, gpu: GpuSpec, point: OperatingPoint, coeffs: CoeffTable | object | None = None
) -> KernelEstimate:
    """One softmax or norm at one operating point."""
    return estimate_many([op], gpu, point, coeffs)[0]
