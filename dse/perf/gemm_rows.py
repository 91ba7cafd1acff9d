"""Per-row inputs of the GEMM model (`dse.perf.gemm`): shapes, element sizes and module rates, and the
distinct problems a call chooses kernels for (rows that differ only in their clock share one choice)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from dse.hardware.spec import GpuSpec
from dse.perf.arrays import GemmRows
from dse.perf.pipeline import bool_rows, lookup_rows
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
    per_gpu: tuple[np.ndarray | float, np.ndarray | float] | None = None,
) -> GemmRows:
    """The per-row inputs of `dse.perf.gemm._evaluate`: shapes, element sizes and module rates. `per_gpu`:
    each row's (SM count, DRAM bandwidth) on a call over several GPUs (default: `rates`' own)."""
    m, n, k, batch, f = shapes
    num_sms, dram_bw = (rates.num_sms, rates.dram_bw_bytes_per_s) if per_gpu is None else per_gpu
    return GemmRows(
        m=m,
        n=n,
        k=k,
        batch=batch,
        in_elem_bytes=lookup_rows(DTYPE_BYTES, dtype),
        b_elem_bytes=lookup_rows(DTYPE_BYTES, b_dtype),
        out_elem_bytes=lookup_rows(DTYPE_BYTES, out_dtype),
        b_shared=bool_rows(b_shared, num),
        l2_bw_per_sm_bytes_per_s=rates.l2_bw_per_sm_bytes_per_s,
        l2_bw_bytes_per_s=rates.l2_bw_bytes_per_s,
        smem_bw_per_sm_bytes_per_s=rates.smem_bw_per_sm_bytes_per_s,
        fp32_flop_per_s_per_sm=rates.fp32_flop_per_s_per_sm,
        tc_flop_per_s_per_sm=np.maximum(tc_clk, 1.0) * f,
        num_sms=num_sms,
        dram_bw_bytes_per_s=dram_bw,
    )


# Problem key (`distinct_rows`) -> chosen candidate index, kept by calls on one GPU and coefficients.
# A problem's key (`distinct_rows`): the bytes of its input floats with -0.0 made 0.0, or (a NaN among a
# call's inputs) their tuple; equal keys are equal inputs either way.
ProblemKey = tuple[float, ...] | bytes
ChoiceMemo = dict[ProblemKey, int] | None


@dataclass(frozen=True, slots=True)
class ChoiceProblems:
    """The distinct kernel-choice problems of a `gemm.gemm_arrays` call: rows that differ only in their
    clock (a clock sweep, the power-cap search) share one choice."""

    first: np.ndarray  # the first row of each problem
    problem: np.ndarray  # each row's problem
    dcls: np.ndarray  # the problems' dtype classes
    math_factor: np.ndarray  # and math-time factors
    keys: list[ProblemKey]  # each problem's inputs (`distinct_rows`): equal keys, equal choices
    rows: GemmRows  # the call's rows (at their own clocks `sm_clock_hz`), and what `pick_rows` needs
    sm_clock_hz: np.ndarray
    tc_clk: np.ndarray
    dtypes: tuple[Any, Any, Any]
    choice_hz: np.ndarray
    gpu: GpuSpec

    def pick_rows(self, which: np.ndarray) -> GemmRows:
        """Problems `which` as rows at their choice clock, a column [len(which), 1]; built only for the
        problems a memo does not hold yet (every field is elementwise in its row)."""
        first = self.first[which]
        f_pick_hz = self.choice_hz[first]
        if (f_pick_hz == self.sm_clock_hz[first]).all():  # at their own clock (a first pass): those rows
            return self.rows.column(first)
        dtype, stored, out_dtype = ([d[i] for i in first.tolist()] for d in self.dtypes)
        r = self.rows
        shapes = (r.m[first], r.n[first], r.k[first], r.batch[first], f_pick_hz)
        rates = rates_at(self.gpu, f_pick_hz)
        b_shared = r.b_shared[first]
        per_gpu = None  # one GPU: the rates' own
        if isinstance(r.num_sms, np.ndarray) and isinstance(r.dram_bw_bytes_per_s, np.ndarray):
            per_gpu = (r.num_sms[first], r.dram_bw_bytes_per_s[first])
        rows = row_inputs(
            first.size, shapes, dtype, stored, out_dtype, b_shared, self.tc_clk[first], rates, per_gpu
        )
        return rows.column(np.arange(first.size))


def choice_rows(
    rows: GemmRows, sm_clock_hz: np.ndarray, tc_clk: np.ndarray, lib: np.ndarray, dcls: np.ndarray,
    gpu: GpuSpec, dtypes: tuple[Any, Any, Any], choice_hz: np.ndarray, math_factor: np.ndarray,
) -> ChoiceProblems:  # fmt: skip
    """The distinct choice problems of `rows`, which run at `sm_clock_hz` (their rows at their choice
    clock `choice_hz`: `ChoiceProblems.pick_rows`); `dtypes` are the rows' (A, stored B, output) dtypes,
    `dcls` their dtype classes, `math_factor` the stretch of their math time (a grouped MoE kernel's,
    `dse.perf.moe`); rows on several GPUs add their SM count and DRAM bandwidth to the problem."""
    per_gpu = [rows.num_sms, rows.dram_bw_bytes_per_s] if np.ndim(rows.num_sms) else []  # several GPUs
    extra = np.column_stack([tc_clk, lib, dcls, choice_hz, math_factor, *per_gpu]).astype(float)
    first, problem, keys = distinct_rows(rows, extra)
    return ChoiceProblems(
        first,
        problem,
        dcls[first],
        math_factor[first],
        keys,
        rows,
        sm_clock_hz,
        tc_clk,
        dtypes,
        choice_hz,
        gpu,
    )


# From this many rows `distinct_rows` sorts the keys with numpy (below, a dict of tuples is faster).
_SORT_MIN_ROWS = 32


def distinct_rows(rows: GemmRows, extra: np.ndarray) -> tuple[np.ndarray, np.ndarray, list[ProblemKey]]:
    """(first row of each distinct choice problem, index of each row's problem, each problem's key: the
    row's shape, element sizes, B sharing and `extra`), problems in the key's sorted order. `extra`
    [N, k]: the other per-row inputs of the choice (Tensor-Core rate, library, dtype class, choice clock,
    math-time factor). The keys are bytes (`ProblemKey`: cheaper to build and hash than tuples), tuples
    for a call with a NaN input (no bytes stand for float equality there)."""
    fields = (rows.m, rows.n, rows.k, rows.batch, rows.in_elem_bytes, rows.b_elem_bytes, rows.out_elem_bytes)
    key = np.column_stack([*fields, rows.b_shared.astype(float), extra])
    nan = bool(np.isnan(key).any())
    if key.shape[0] >= _SORT_MIN_ROWS and not nan:
        first, inverse = _sorted_distinct(key)
        return first, inverse, _byte_keys(key[first])
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
    return first, inverse, list(order) if nan else _byte_keys(key[first])


def _byte_keys(key: np.ndarray) -> list[ProblemKey]:
    """Each row of `key` (no NaN) as bytes, -0.0 made 0.0 (the only equal floats of unequal bits)."""
    rows = np.ascontiguousarray(key + 0.0)
    return rows.view(np.dtype((np.void, rows.shape[1] * rows.itemsize))).ravel().tolist()  # bytes each


def _sorted_distinct(key: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """`distinct_rows`' dict path by a stable lexicographic sort (hundreds of rows: eager attention's
    decode steps): the same problems, order and first rows, for keys without NaN (where tuple order and
    float order agree, and -0.0 equals 0.0 in both)."""
    # The first column is the primary key, as in tuple order; columns equal on every row change neither
    # the order nor which rows are equal, so only the others are sorted and compared.
    varies = key[:, (key != key[0]).any(axis=0)]
    if not varies.shape[1]:  # one problem (a clock sweep of one shape, chosen at one clock)
        return np.zeros(1, dtype=np.intp), np.zeros(key.shape[0], dtype=np.intp)
    order = np.lexsort(varies.T[::-1])
    ordered = varies[order]
    new = np.empty(order.size, dtype=bool)
    new[:1] = True
    np.any(ordered[1:] != ordered[:-1], axis=1, out=new[1:])
    inverse = np.empty(order.size, dtype=np.intp)
    inverse[order] = np.cumsum(new) - 1
    return order[new], inverse
