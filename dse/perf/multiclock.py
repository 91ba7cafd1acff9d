"""The kernel model at a clock per op, as arrays: what the power model, DVFS curves and cap search need.

`dse.perf.registry.estimate_ops` takes one operating point per call and returns `KernelEstimate` values.
The power-cap search needs many ops at many clocks, and a call costs a few milliseconds of fixed numpy
overhead whatever its size; so this module calls the kernel families' public vectorized functions
(`gemm.gemm_arrays`, `attention.flash_arrays` / `decode_arrays`, `attention_eager.eager_arrays`,
`reduction.reduction_arrays`, `elementwise.elementwise_arrays`), which accept a clock per row, directly:
any set of (op, clock) pairs costs one call per family. The families' GPU-independent inputs (shapes,
dtypes, flags: `family_inputs`) are read from an op list once and kept for the list (`_op_table`).

`op_rows(ops, gpu, clocks_hz, coeffs)` returns util [N, len(MODULES)], latency_s, dram_bytes and
sm_clock_hz [N]; tests check it against `estimate_ops` op by op (`tests/perf/test_power_rows.py`), so a
change in the families' inputs shows up there. It also returns tensor_flop [N], the op's useful
Tensor-Core FLOPs in bf16 equivalents (an fp8 FLOP counts 1/2 where fp8 runs at twice the rate), which the
power model charges as Tensor-Core work (`dse.perf.power`); a `KernelEstimate` does not carry it.
`estimator_rows(estimator)` adapts any `KernelEstimate`-returning estimator (one call per distinct clock)
to the same interface.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, cast

import numpy as np

from dse.hardware.spec import GpuSpec
from dse.perf.first_pass import FAMILIES, take_share
from dse.perf.pipeline import float_rows
from dse.perf.rates import DTYPE_BYTES
from dse.perf.types import MODULES, KernelEstimate, OperatingPoint
from dse.workload.ops import AttentionOp, ElementwiseOp, GemmOp, NormOp, SoftmaxOp

Estimator = Callable[[Sequence[Any], GpuSpec, OperatingPoint, Any], list[KernelEstimate]]
RowEstimator = Callable[[Sequence[Any], GpuSpec, np.ndarray, Any], dict[str, np.ndarray]]
_M = len(MODULES)


def estimate_arrays(estimates: Sequence[KernelEstimate]) -> dict[str, np.ndarray]:
    """Arrays of a list of estimates: util [n, M], latency_s, dram_bytes, sm_clock_hz."""
    n = len(estimates)
    util = np.empty((n, _M))
    lat = np.empty(n)
    dram = np.empty(n)
    clk = np.empty(n)
    for i, e in enumerate(estimates):
        u = e.util
        util[i] = [u.get(m, 0.0) for m in MODULES]
        lat[i] = e.latency_s
        dram[i] = e.dram_bytes
        clk[i] = e.sm_clock_hz
    return {"util": util, "latency_s": lat, "dram_bytes": dram, "sm_clock_hz": clk}


def estimator_rows(estimator: Estimator) -> RowEstimator:
    """A row estimator from a `KernelEstimate` estimator: one call per distinct clock."""

    def rows(ops: Sequence[Any], gpu: GpuSpec, sm_clock_hz: np.ndarray, coeffs: Any) -> dict[str, np.ndarray]:
        f = np.broadcast_to(np.asarray(sm_clock_hz, dtype=float), (len(ops),))
        out: list[KernelEstimate | None] = [None] * len(ops)
        for clock in np.unique(f):
            idx = np.nonzero(f == clock)[0]
            sub = [ops[i] for i in idx.tolist()]
            ests = estimator(sub, gpu, OperatingPoint(sm_clock_hz=float(clock)), coeffs)
            for i, e in zip(idx, ests, strict=True):
                out[i] = e
        return estimate_arrays(cast(list[KernelEstimate], out))  # every row was filled above

    return rows


def _clamp(gpu: GpuSpec, f: np.ndarray) -> np.ndarray:
    """As `rates.effective_sm_clock_hz`: clocks outside the GPU's range are clamped."""
    return f.clip(gpu.clocks.sm_clock_min_hz, gpu.clocks.sm_clock_max_hz)


# The family of an op of exactly these types (a lookup: `op_rows` asks once per op).
_FAMILY_OF_TYPE: dict[type, str] = {
    GemmOp: "gemm", SoftmaxOp: "reduction", NormOp: "reduction", ElementwiseOp: "elementwise"
}  # fmt: skip


def family_of(op: Any) -> str:
    """The kernel family (and `*_arrays` function) that estimates `op`: gemm, attention_flash,
    attention_decode, attention_eager, reduction or elementwise."""
    key = _FAMILY_OF_TYPE.get(type(op))
    if key is not None:
        return key
    if isinstance(op, GemmOp):
        return "gemm"
    if isinstance(op, AttentionOp):
        return f"attention_{op.backend}"
    if isinstance(op, SoftmaxOp | NormOp):
        return "reduction"
    if isinstance(op, ElementwiseOp):
        return "elementwise"
    raise TypeError(f"no estimator for {type(op).__name__}")


def _frozen(values: Any, dtype: Any = float) -> np.ndarray:
    """A read-only array: family inputs may be kept by `_op_table` and shared between calls."""
    a = np.array(values, dtype=dtype)
    a.flags.writeable = False
    return a


def family_inputs(key: str, ops: Sequence[Any]) -> dict[str, Any]:
    """The GPU-independent arguments of family `key`'s `*_arrays` function for `ops` (all of that family):
    shapes, dtypes and flags, as read-only arrays and tuples."""
    from dse.perf import elementwise, reduction

    def flags(field: str) -> np.ndarray:
        return _frozen([getattr(o, field) for o in ops], bool)

    def arr(field: str) -> np.ndarray:
        return _frozen([getattr(o, field) for o in ops])

    def nbytes(dtypes: Sequence[str]) -> np.ndarray:
        return _frozen([DTYPE_BYTES[d] for d in dtypes])

    if key == "gemm":
        return {
            "m": arr("m"), "n": arr("n"), "k": arr("k"), "batch": arr("batch"),
            "dtype": tuple(o.dtype for o in ops), "out_dtype": tuple(o.c_dtype for o in ops),
            "b_shared": flags("b_shared"), "act_quant": flags("act_quant"),
            "b_dtype": tuple(o.b_dtype for o in ops), "grouped": flags("grouped"),
        }  # fmt: skip
    if key == "reduction":
        kinds = ["softmax" if isinstance(o, SoftmaxOp) else o.kind for o in ops]
        return {
            "kind": _frozen([reduction.KINDS.index(k) for k in kinds], None),
            "rows": arr("rows"), "cols": arr("cols"), "dtype_bytes": nbytes([o.dtype for o in ops]),
        }  # fmt: skip
    if key == "elementwise":
        return {
            "kind": _frozen([elementwise.KINDS.index(o.kind) for o in ops], None),
            "num_elements": arr("num_elements"), "in_bytes": nbytes([o.dtype for o in ops]),
            "out_bytes": nbytes([o.out_dtype or o.dtype for o in ops]),
            **_frozen_bn(elementwise.bn_fields(ops)),
        }  # fmt: skip
    shape = {f: arr(f) for f in ("batch", "seq_len_q", "seq_len_kv", "num_heads", "num_kv_heads", "head_dim")}
    if key == "attention_eager":
        return shape | {"dtype": tuple(o.dtype for o in ops)}
    shape |= {"act_bytes": nbytes([o.dtype for o in ops]), "kv_bytes": nbytes([o.cache_dtype for o in ops])}
    return shape | {"causal": flags("causal")} if key == "attention_flash" else shape


def _frozen_bn(fields: dict[str, Any]) -> dict[str, Any]:
    """`elementwise.bn_fields`, read-only: its layouts a tuple, its arrays not writeable."""
    for value in fields.values():
        if isinstance(value, np.ndarray):
            value.flags.writeable = False
    return fields | ({"bn_layout": tuple(fields["bn_layout"])} if "bn_layout" in fields else {})


def family_arrays(
    key: str,
    ops: Sequence[Any],
    gpu: GpuSpec,
    sm_clock_hz: np.ndarray,
    coeffs: Any = None,
    *,
    cache_write: bool = False,
    choice_clock_hz: Any = None,
    choice_memo: dict | None = None,
) -> dict[str, Any]:
    """The full output of family `key`'s vectorized model (latency_s, util [M, N], dram_bytes, group,
    timeline, ...) for `ops` (all of that family) at `sm_clock_hz` (one per op, already clamped).

    `cache_write`: flash attention ops include vLLM's KV-cache write (`attention.flash_arrays`), as the
    measured tables of `dse.calibrate.fit.kernels.CACHE_WRITE_TABLES` time them; graphs keep it off.
    `choice_clock_hz` (per op, default its own clock): where GEMM kernels are chosen, `choice_memo`: the
    choices kept for later calls on the same GPU and coefficients (both `gemm.gemm_arrays`)."""
    return _family_call(
        key, family_inputs(key, ops), gpu, sm_clock_hz, coeffs,
        cache_write=cache_write, choice_clock_hz=choice_clock_hz, choice_memo=choice_memo,
    )  # fmt: skip


def _family_call(
    key: str, inputs: dict[str, Any], gpu: GpuSpec, fs: np.ndarray, coeffs: Any, *, cache_write: bool,
    choice_clock_hz: Any, choice_memo: dict | None, gpu_rows: Any = None,
) -> dict[str, Any]:  # fmt: skip
    """`family_arrays` from the family's `family_inputs` (`gpu_rows`: per-row GPUs, `dse.perf.gpu_rows`;
    the families of `first_pass.FAMILIES` take them)."""
    from dse.perf import attention, attention_eager, elementwise, gemm, reduction

    common = {"gpu": gpu, "sm_clock_hz": fs, "coeffs": coeffs}
    if gpu_rows is not None:
        common["gpu_rows"] = gpu_rows
    if key == "gemm":
        return gemm.gemm_arrays(**inputs, **common, choice_clock_hz=choice_clock_hz, choice_memo=choice_memo)
    if key == "reduction":
        return reduction.reduction_arrays(**inputs, **common)
    if key == "elementwise":
        return elementwise.elementwise_arrays(**inputs, **common)
    if key == "attention_eager":
        choice = {"choice_clock_hz": choice_clock_hz, "choice_memo": choice_memo}
        return attention_eager.eager_arrays(**inputs, **common, **choice)
    if key == "attention_flash":
        return attention.flash_arrays(**inputs, **common, cache_write=cache_write)
    if key == "attention_decode":
        return attention.decode_arrays(**inputs, **common)
    raise ValueError(f"unknown kernel family {key!r}")


@dataclass(frozen=True, slots=True)
class _Family:
    """The ops of one kernel family within an op list: their rows, GPU-independent inputs and the dtypes
    `tensor_flop_bf16` reads."""

    key: str
    idx: np.ndarray
    inputs: dict[str, Any]
    flop_dtypes: tuple[Any, ...]


@dataclass(frozen=True, slots=True)
class _OpTable:
    ops: tuple[Any, ...]  # held, so that the ids keying `_TABLES` stay theirs
    families: tuple[_Family, ...]


# Op lists already split by family, by the ids of their ops: a search predicts the same cached graphs
# (`dse.serving.static._graphs`) at thousands of GPUs and clocks. An entry holds its ops, so no other
# object can take their ids while it lives. Bounded (least recently used out), and only for lists of up
# to `_TABLE_MAX_OPS` ops (a calibration fit's thousands of sampled kernels are read once).
_TABLES: dict[tuple[int, ...], _OpTable] = {}
_TABLES_MAX = 128
_TABLE_MAX_OPS = 4096


def _op_table(ops: Sequence[Any]) -> _OpTable:
    if len(ops) > _TABLE_MAX_OPS:
        return _new_table(ops)
    key = tuple(map(id, ops))
    table = _TABLES.pop(key, None)
    if table is None:
        table = _new_table(ops)
    _TABLES[key] = table  # the most recently used last
    while len(_TABLES) > _TABLES_MAX:
        del _TABLES[next(iter(_TABLES))]
    return table


def _new_table(ops: Sequence[Any]) -> _OpTable:
    groups: dict[str, list[int]] = {}
    for i, op in enumerate(ops):
        groups.setdefault(family_of(op), []).append(i)
    families = []
    for fam, rows in groups.items():
        sub = [ops[i] for i in rows]
        families.append(_Family(fam, _frozen(rows, None), family_inputs(fam, sub), _flop_dtypes(fam, sub)))
    return _OpTable(tuple(ops), tuple(families))


def family_rows(
    ops: Sequence[Any], gpu: GpuSpec, clock_hz: float, key: str
) -> tuple[dict, np.ndarray] | None:
    """(family `key`'s inputs, their clocks) in `op_rows(ops, gpu, clock_hz)`'s call of that family (the
    inputs object itself, kept with the op list); None when `ops` has none of that family."""
    return families_rows(ops, gpu, clock_hz).get(key)


def families_rows(ops: Sequence[Any], gpu: GpuSpec, clock_hz: float) -> dict[str, tuple[dict, np.ndarray]]:
    """`family_rows` of every family of `ops`, by family (the op list's table read once)."""
    f = _clamp(gpu, float_rows(clock_hz, len(ops)))
    return {fam.key: (fam.inputs, f[fam.idx]) for fam in _op_table(ops).families}


def op_rows(
    ops: Sequence[Any],
    gpu: GpuSpec,
    sm_clock_hz: np.ndarray | float,
    coeffs: Any = None,
    *,
    cache_write: bool = False,
    choice_clock_hz: float | None = None,
    choice_memo: dict | None = None,
) -> dict[str, np.ndarray]:
    """The kernel model for `ops[i]` at `sm_clock_hz[i]`, one vectorized call per kernel family
    (`cache_write`, `choice_clock_hz`, `choice_memo`: see `family_arrays`; one choice clock for every op).

    Returns util [N, len(MODULES)], tensor_flop [N], latency_s [N], dram_bytes [N], sm_clock_hz [N]
    (clamped to the GPU's range, as the estimators do).
    """
    n = len(ops)
    f = _clamp(gpu, float_rows(sm_clock_hz, n))
    util = np.zeros((n, _M))
    tensor_flop = np.zeros(n)
    lat = np.zeros(n)
    dram = np.zeros(n)
    for fam in _op_table(ops).families:
        idx = fam.idx
        # a search chunk's first passes may have run these families together (`dse.perf.first_pass`)
        ready = fam.key in FAMILIES and not cache_write
        out = take_share(fam.inputs, gpu, f[idx], coeffs, choice_clock_hz) if ready else None
        if out is None:
            out = _family_call(
                fam.key, fam.inputs, gpu, f[idx], coeffs,
                cache_write=cache_write, choice_clock_hz=choice_clock_hz, choice_memo=choice_memo,
            )  # fmt: skip
        util[idx] = np.asarray(out["util"]).T
        tensor_flop[idx] = _tensor_flop(fam.key, fam.flop_dtypes, out, gpu)
        lat[idx] = out["latency_s"]
        dram[idx] = out["dram_bytes"]
    return {"util": util, "tensor_flop": tensor_flop, "latency_s": lat, "dram_bytes": dram, "sm_clock_hz": f}


def tensor_flop_bf16(key: str, ops: Sequence[Any], out: dict[str, Any], gpu: GpuSpec) -> np.ndarray:
    """Useful Tensor-Core FLOPs of each op in bf16 equivalents: the matmul FLOPs of the op (no padded
    tile rows or columns, no masked-out causal pairs) x bf16 rate / rate of the dtype the MMAs run in.

    `key` is the family (`gemm`, `attention_flash`, `attention_decode`, `attention_eager`, `reduction`,
    `elementwise`) and `out` its `*_arrays` output for `ops`; callers that run the families themselves
    (`dse.calibrate.fit.samples`) pass the result to the power model's `tensor_flop`.

    The MMA dtypes follow the families: a GEMM runs in its dtype (fp32 on CUDA cores: none), FlashAttention
    prefill in 16 bit, flash-decoding in fp8 on Hopper when the KV cache is fp8 (FA3), eager attention's
    two GEMMs in the op's dtype.
    """
    return _tensor_flop(key, _flop_dtypes(key, ops), out, gpu)


def _flop_dtypes(key: str, ops: Sequence[Any]) -> tuple[Any, ...]:
    """What `tensor_flop_bf16` reads of each op of family `key`: GEMMs' (A, B) dtypes, flash-decoding's
    KV-cache dtype, eager attention's dtype (nothing for the other families)."""
    if key == "gemm":
        return tuple((o.dtype, o.b_dtype) for o in ops)
    if key == "attention_decode":
        return tuple(o.cache_dtype for o in ops)
    if key == "attention_eager":
        return tuple(o.dtype for o in ops)
    return ()


def _tensor_flop(key: str, dtypes: tuple[Any, ...], out: dict[str, Any], gpu: GpuSpec) -> np.ndarray:
    """`tensor_flop_bf16` from the ops' `_flop_dtypes`."""
    from dse.perf.rates import arch_family, tensor_flop_per_clk

    if key == "attention_flash":
        return np.asarray(out["flop"], dtype=float)
    if key not in ("gemm", "attention_decode", "attention_eager"):
        return np.zeros(np.asarray(out["latency_s"]).shape[0])  # reductions and elementwise: CUDA cores
    bf16 = tensor_flop_per_clk(gpu, "bf16")

    def per_bf16(dtype: str) -> float:
        rate = tensor_flop_per_clk(gpu, dtype)
        return bf16 / rate if rate > 0 else 0.0

    if key == "gemm":
        from dse.perf.moe import math_dtype

        factor = {pair: per_bf16(math_dtype(gpu, *pair)) for pair in set(dtypes)}  # per distinct pair
        return np.asarray(out["flop"]) * _per_row(factor, dtypes)
    if key == "attention_decode":
        fp8_mma = arch_family(gpu) == "hopper"
        # hundreds of decode steps, a dtype or two
        factor = {d: per_bf16("fp8") if fp8_mma and _dtype_bytes(d) <= 1 else 1.0 for d in set(dtypes)}
        return np.asarray(out["flop"]) * _per_row(factor, dtypes)
    parts = out["parts"]  # eager attention
    factor = {d: per_bf16(d) for d in set(dtypes)}  # per distinct dtype (a row per decode step)
    return (parts["qk"]["flop"] + parts["pv"]["flop"]) * _per_row(factor, dtypes)


def _per_row(factor: dict[Any, float], keys: tuple[Any, ...]) -> np.ndarray | float:
    """Each row's factor by its key; the one factor itself when all rows share a key (a product with it
    gives the same bits, without an array built from hundreds of decode steps' keys)."""
    if len(factor) == 1:
        return next(iter(factor.values()))
    return np.array([factor[key] for key in keys])


def _dtype_bytes(dtype: str) -> float:
    return DTYPE_BYTES[dtype]


def take_rows(rows: dict[str, np.ndarray], idx: np.ndarray) -> dict[str, np.ndarray]:
    """The rows `idx` of a row dict."""
    return {k: v[idx] for k, v in rows.items()}


def put_rows(into: dict[str, np.ndarray], idx: np.ndarray, rows: dict[str, np.ndarray]) -> None:
    """Overwrite the rows `idx` of `into` (in place) with `rows`."""
    for k, v in rows.items():
        into[k][idx] = v
