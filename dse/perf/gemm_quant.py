"""vLLM's dynamic per-tensor fp8 quantization of a GEMM's activation, as one streaming timeline
(`dse.perf.gemm` adds it to the prologue of the 8-bit GEMMs whose op asks for it: `GemmOp.act_quant`)."""

from __future__ import annotations

import numpy as np

from dse.perf.arrays import GemmRows
from dse.perf.pipeline import Timeline, streaming_timeline, sum_timelines
from dse.perf.rates import Rates

_QUANT_SRC_BYTES = 2.0  # fp8 GEMMs quantize a 16-bit activation
_QUANT_ELEMS_PER_THREAD = 2.0  # elements a quantization thread handles per pass over its row


def activation_quant(col: GemmRows, rates: Rates, n: int) -> tuple[Timeline, np.ndarray]:
    """vLLM's dynamic per-tensor fp8 quantization of the activation A before the CUTLASS fp8 GEMM.

    Two kernels with one 1024-thread threadblock per row of A: an abs-max reduction (reads A in 16 bit,
    then folds the row's maximum into the single scale with an atomic) and the scaled conversion (reads
    A again, writes it in fp8). Each thread takes two elements per pass, so a row of K elements costs
    ceil(K / 2048) dependent passes (the measured fp8 latencies step up by one DRAM round trip per pass
    and per kernel at K = 2048, 4096, ...), plus the atomic's round trip in the reduction. Returns their
    summed streaming timeline and DRAM bytes.
    """
    rows = (col.m * col.batch).ravel()
    k = col.k.ravel()
    threads = np.full(n, 1024.0)
    conc = np.full(n, float(max(1, rates.max_threads_per_sm // 1024)))
    a_b = rows * k * _QUANT_SRC_BYTES
    common = dict(
        rates_num_sms=_per_row(col.num_sms),
        dram_bw_bytes_per_s=_per_row(col.dram_bw_bytes_per_s),
        l2_sm=col.l2_bw_per_sm_bytes_per_s.ravel(),
        l2_tot=col.l2_bw_bytes_per_s.ravel(),
        smem_sm=col.smem_bw_per_sm_bytes_per_s.ravel(),
        fp32_sm=col.fp32_flop_per_s_per_sm.ravel(),
        sfu_sm=col.fp32_flop_per_s_per_sm.ravel(),
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


def _per_row(value: np.ndarray | float) -> np.ndarray | float:
    """A GPU value of a column of rows: flat like the rows when it is per row (several GPUs), else as is."""
    return np.ravel(value) if np.ndim(value) else value
