"""Elementwise kernels (activations, residual adds, rotary, casts): streaming at DRAM bandwidth.

Kernel configuration (PyTorch's vectorized elementwise kernels): 128 threads per threadblock, each thread
handles 4 vectors of 16 bytes of the widest input, so small tensors run few threadblocks and cannot reach
full bandwidth (the Little's-law limit and the memory latency of `pipeline.streaming_timeline` form the
launch / ramp floor). Every input is read once and the output (if the kind has one) written once; FLOP
and SFU ops per element come from `dse.workload.ops.ELEMENTWISE_KINDS`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from dse.hardware.spec import GpuSpec
from dse.perf.batchnorm import launch_arrays
from dse.perf.depthwise import in_flight_bytes, is_depthwise
from dse.perf.gpu_rows import GpuRows, streaming_rates
from dse.perf.pipeline import build_estimates, correct, float_rows, machine_rates, streaming_timeline
from dse.perf.rates import DTYPE_BYTES, effective_sm_clock_hz, rates_at
from dse.perf.types import CoeffTable, KernelEstimate, OperatingPoint, coeff_table
from dse.workload.ops import ELEMENTWISE_KINDS, ElementwiseOp

KINDS: tuple[str, ...] = tuple(ELEMENTWISE_KINDS)
# Every kind falls back to the `elementwise` group, but batch norm's and depthwise convolutions': their
# kernels' loads in flight are fitted on measured kernels (`dse.perf.batchnorm.ELEMENTS_IN_FLIGHT`,
# `dse.perf.depthwise.BYTES_IN_FLIGHT`), so the elementwise group's DRAM derate, fitted on streaming
# kernels, would count their shortfall twice; no shipped set has a `batchnorm` or `depthwise` group.
GROUPS: tuple[str, ...] = tuple(
    f"batchnorm/{k}" if k.startswith("bn_") else f"depthwise/{k}" if is_depthwise(k) else f"elementwise/{k}"
    for k in KINDS
)
_DEPTHWISE_IN_FLIGHT = in_flight_bytes(KINDS)
_THREADS = 128.0
_VECTORS_PER_THREAD = 4.0
_VECTOR_BYTES = 16.0


def elementwise_arrays(
    *,
    kind: np.ndarray,
    num_elements: np.ndarray,
    in_bytes: np.ndarray,
    out_bytes: np.ndarray,
    gpu: GpuSpec,
    sm_clock_hz: np.ndarray,
    coeffs: CoeffTable | object | None = None,
    bn_layout: Sequence[str] | None = None,
    bn_batch: np.ndarray | None = None,
    bn_channels: np.ndarray | None = None,
    gpu_rows: GpuRows | None = None,
) -> dict[str, np.ndarray]:
    """Vectorized model of N elementwise kernels; `kind` holds indices into KINDS. Rows with a
    `bn_layout` (with their `bn_batch` and `bn_channels`) are batch-norm kernels at their library's launch
    configuration (`dse.perf.batchnorm`). `gpu_rows`: rows on GPUs differing from `gpu` in SM count and
    DRAM bandwidth (`dse.perf.gpu_rows`), each as on its own."""
    kind = np.asarray(kind, dtype=int)
    num = kind.shape[0]
    bc = lambda x: float_rows(x, num)  # noqa: E731
    n_el, in_b, out_b, f = bc(num_elements), bc(in_bytes), bc(out_bytes), bc(sm_clock_hz)
    table = np.array([ELEMENTWISE_KINDS[k] for k in KINDS], dtype=float)  # flop, sfu, inputs, outputs
    flop_el, sfu_el, n_in, n_out = table[kind, 0], table[kind, 1], table[kind, 2], table[kind, 3]
    rates = rates_at(gpu, f)

    per_thread = _VECTORS_PER_THREAD * _VECTOR_BYTES / np.maximum(in_b, out_b)
    per_cta = _THREADS * per_thread
    grid = np.ceil(n_el / per_cta)
    conc = np.full(num, float(min(rates.max_threads_per_sm // int(_THREADS), rates.max_threadblocks_per_sm)))
    threads = np.full(num, _THREADS)
    dw_in_flight = _DEPTHWISE_IN_FLIGHT[kind]
    in_flight = np.where(np.isnan(dw_in_flight), _VECTORS_PER_THREAD * _VECTOR_BYTES, dw_in_flight)
    if bn_layout is not None:  # batch norm at its library's launch configuration
        bn = launch_arrays([KINDS[k] for k in kind], bn_layout, bn_batch, bn_channels, n_el, in_b)
        native = ~np.isnan(bn["grid"])
        grid, threads = np.where(native, bn["grid"], grid), np.where(native, bn["threads"], threads)
        in_flight = np.where(native, bn["in_flight_b"], in_flight)
        conc = np.where(native, np.minimum(bn["conc"], rates.max_threadblocks_per_sm), conc)
    elems = n_el / grid
    bytes_cta = elems * (n_in * in_b + n_out * out_b)
    tl = streaming_timeline(
        **(machine_rates(rates) | streaming_rates(gpu_rows)),
        grid=grid,
        conc=conc,
        threads=threads,
        dram_b=bytes_cta,
        l2_b=bytes_cta,
        smem_b=np.zeros(num),
        flop=elems * flop_el,
        sfu_op=elems * sfu_el,
        passes=np.ones(num),
        in_flight_b=in_flight,
    )
    latency_s, util = correct(tl, coeff_table(coeffs).matrix(GROUPS)[kind])
    return {
        "latency_s": latency_s,
        "analytical_s": tl.analytical_s(),
        "util": util,
        "timeline": tl,
        "flop": n_el * flop_el,
        "dram_bytes": grid * bytes_cta,
        "l2_bytes": grid * bytes_cta,
        "smem_bytes": np.zeros(num),
        "group": kind.copy(),
        "grid": grid,
        "threads": threads,
    }


def bn_fields(ops: Sequence[ElementwiseOp]) -> dict[str, Any]:
    """The `elementwise_arrays` batch-norm arguments of `ops` (empty when none has a `bn_layout`)."""
    if not any(o.bn_layout for o in ops):
        return {}
    return {
        "bn_layout": [o.bn_layout for o in ops],
        "bn_batch": np.array([o.bn_batch for o in ops], dtype=float),
        "bn_channels": np.array([o.bn_channels for o in ops], dtype=float),
    }


def estimate_many(
    ops: list[ElementwiseOp], gpu: GpuSpec, point: OperatingPoint, coeffs: CoeffTable | object | None = None
) -> list[KernelEstimate]:
    """Estimates for many elementwise ops at one operating point, vectorized."""
    if not ops:
        return []
    clock_hz = effective_sm_clock_hz(gpu, point)
    out = elementwise_arrays(
        kind=np.array([KINDS.index(o.kind) for o in ops]),
        num_elements=np.array([o.num_elements for o in ops], dtype=float),
        in_bytes=np.array([DTYPE_BYTES[o.dtype] for o in ops]),
        out_bytes=np.array([DTYPE_BYTES[o.out_dtype or o.dtype] for o in ops]),
        gpu=gpu,
        sm_clock_hz=np.full(len(ops), clock_hz),
        coeffs=coeffs,
        **bn_fields(ops),
    )
    tiles = [
        f"{o.bn_layout or f'vec{int(_VECTOR_BYTES)}B'}_{int(out['threads'][i])}t_grid{int(out['grid'][i])}"
        for i, o in enumerate(ops)
    ]
    groups = [GROUPS[g] for g in out["group"]]
    return build_estimates(ops, ["elementwise"] * len(ops), out, np.full(len(ops), clock_hz), tiles, groups)


def estimate(
    op: ElementwiseOp, gpu: GpuSpec, point: OperatingPoint, coeffs: CoeffTable | object | None = None
) -> KernelEstimate:
    """One elementwise op at one operating point."""
    return estimate_many([op], gpu, point, coeffs)[0]
