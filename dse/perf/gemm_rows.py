"""Per-row inputs of the GEMM model (`dse.perf.gemm`): shapes, element sizes and module rates, and the
distinct problems a call chooses kernels for (rows that differ only in their clock share one choice)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from dse.hardware.spec import GpuSpec
from dse.perf.arrays import GemmRows
from dse.perf.rates import DTYPE_BYTES, Rates, rates_at


def row_inputs(
    num: int,
    shapes: tuple[np.ndarray, ...],
    dtype: list[str],
    b_dtype: list[str],
    out_dtype: list[str] | tuple[str, ...],
    b_shared: np.ndarray,
    tc_clk: np.ndarray,
    rates: Rates,
) -> GemmRows:
    """The per-row inputs of `dse.perf.gemm._evaluate`: shapes, element sizes and module rates."""
    m, n, k, batch, f = shapes
    return GemmRows(
        m=m,
        n=n,
        k=k,
        batch=batch,
        in_elem_bytes=np.array([DTYPE_BYTES[d] for d in dtype]),
        b_elem_bytes=np.array([DTYPE_BYTES[d] for d in b_dtype]),
        out_elem_bytes=np.array([DTYPE_BYTES[o] for o in out_dtype]),
        b_shared=np.broadcast_to(np.asarray(b_shared, dtype=bool), (num,)),
        l2_bw_per_sm_bytes_per_s=rates.l2_bw_per_sm_bytes_per_s,
        l2_bw_bytes_per_s=rates.l2_bw_bytes_per_s,
        smem_bw_per_sm_bytes_per_s=rates.smem_bw_per_sm_bytes_per_s,
        fp32_flop_per_s_per_sm=rates.fp32_flop_per_s_per_sm,
        tc_flop_per_s_per_sm=np.maximum(tc_clk, 1.0) * f,
    )


# Problem key (`distinct_rows`) -> chosen candidate index, kept by calls on one GPU and coefficients.
ChoiceMemo = dict[tuple[float, ...], int] | None


@dataclass(frozen=True, slots=True)
class ChoiceProblems:
    """The distinct kernel-choice problems of a `gemm.gemm_arrays` call: rows that differ only in their
    clock (a clock sweep, the power-cap search) share one choice."""

    first: np.ndarray  # the first row of each problem
    problem: np.ndarray  # each row's problem
    rows: GemmRows  # the problems' rows at their choice clock
    dcls: np.ndarray  # the problems' dtype classes
    math_factor: np.ndarray  # and math-time factors
    keys: list[tuple[float, ...]]  # each problem's inputs (`distinct_rows`): equal keys, equal choices


def choice_rows(
    rows: GemmRows, tc_clk: np.ndarray, lib: np.ndarray, dcls: np.ndarray, gpu: GpuSpec,
    dtypes: tuple[Any, Any, Any], choice_hz: np.ndarray, math_factor: np.ndarray,
) -> ChoiceProblems:  # fmt: skip
    """The distinct choice problems of `rows` and their rows at their choice clock `choice_hz`; `dtypes`
    are the rows' (A, stored B, output) dtypes, `dcls` their dtype classes, `math_factor` the stretch of
    their math time (a grouped MoE kernel's, `dse.perf.moe`)."""
    extra = np.column_stack([tc_clk, lib, dcls, choice_hz, math_factor]).astype(float)
    first, problem, keys = distinct_rows(rows, extra)
    f_pick_hz = choice_hz[first]
    dtype, stored, out_dtype = ([d[i] for i in first] for d in dtypes)
    shapes = (rows.m[first], rows.n[first], rows.k[first], rows.batch[first], f_pick_hz)
    rates = rates_at(gpu, f_pick_hz)
    pick_rows = row_inputs(
        first.size, shapes, dtype, stored, out_dtype, rows.b_shared[first], tc_clk[first], rates
    )
    return ChoiceProblems(first, problem, pick_rows, dcls[first], math_factor[first], keys)


def distinct_rows(
    rows: GemmRows, extra: np.ndarray
) -> tuple[np.ndarray, np.ndarray, list[tuple[float, ...]]]:
    """(first row of each distinct choice problem, index of each row's problem, each problem's key: the
    row's shape, element sizes, B sharing and `extra`), problems in the key's sorted order. `extra`
    [N, k]: the other per-row inputs of the choice (Tensor-Core rate, library, dtype class, choice clock,
    math-time factor)."""
    fields = (rows.m, rows.n, rows.k, rows.batch, rows.in_elem_bytes, rows.b_elem_bytes, rows.out_elem_bytes)
    key = np.column_stack([*fields, rows.b_shared.astype(float), extra])
    # As `np.unique(key, axis=0, return_index=True, return_inverse=True)` (rows sorted, float equality),
    # through a dict: a call has tens of rows, where np.unique's fixed cost dominates.
    key_rows = [tuple(row) for row in key.tolist()]
    seen: dict[tuple[float, ...], int] = {}
    for i, row in enumerate(key_rows):
        seen.setdefault(row, i)
    order = sorted(seen)
    slot = {row: j for j, row in enumerate(order)}
    first = np.array([seen[row] for row in order], dtype=np.intp)
    inverse = np.array([slot[row] for row in key_rows], dtype=np.intp)
    return first, inverse, order
