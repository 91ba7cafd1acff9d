"""The kernel model at a clock per op, as arrays: what the power model, DVFS curves and cap search need.

`dse.perf.registry.estimate_ops` takes one operating point per call and returns `KernelEstimate` values.
The power-cap search needs many ops at many clocks, and a call costs a few milliseconds of fixed numpy
overhead whatever its size; so this module calls the kernel families' public vectorized functions
(`gemm.gemm_arrays`, `attention.flash_arrays` / `decode_arrays`, `attention_eager.eager_arrays`,
`reduction.reduction_arrays`, `elementwise.elementwise_arrays`), which accept a clock per row, directly:
any set of (op, clock) pairs costs one call per family.

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
from typing import Any, cast

import numpy as np

from dse.hardware.spec import GpuSpec
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


def _gemm_family(
    ops: Sequence[Any], gpu: GpuSpec, sm_clock_hz: np.ndarray, coeffs: Any, choice_clock_hz: Any = None,
    choice_memo: dict | None = None,
) -> dict[str, Any]:  # fmt: skip
    from dse.perf import gemm

    def flags(field: str) -> np.ndarray:
        return np.array([getattr(o, field) for o in ops], dtype=bool)

    return gemm.gemm_arrays(
        m=np.array([o.m for o in ops], dtype=float),
        n=np.array([o.n for o in ops], dtype=float),
        k=np.array([o.k for o in ops], dtype=float),
        batch=np.array([o.batch for o in ops], dtype=float),
        dtype=[o.dtype for o in ops],
        out_dtype=[o.c_dtype for o in ops],
        b_shared=flags("b_shared"),
        gpu=gpu,
        sm_clock_hz=sm_clock_hz,
        coeffs=coeffs,
        act_quant=flags("act_quant"),
        b_dtype=[o.b_dtype for o in ops],
        grouped=flags("grouped"),
        choice_clock_hz=choice_clock_hz,
        choice_memo=choice_memo,
    )


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
    from dse.perf import attention, attention_eager, elementwise, reduction

    def arr(values: list[float]) -> np.ndarray:
        return np.array(values, dtype=float)

    sub, fs = ops, sm_clock_hz
    if key == "gemm":
        return _gemm_family(sub, gpu, fs, coeffs, choice_clock_hz, choice_memo)
    if key == "reduction":
        kinds = ["softmax" if isinstance(o, SoftmaxOp) else o.kind for o in sub]
        return reduction.reduction_arrays(
            kind=np.array([reduction.KINDS.index(k) for k in kinds]),
            rows=arr([o.rows for o in sub]),
            cols=arr([o.cols for o in sub]),
            dtype_bytes=arr([_dtype_bytes(o.dtype) for o in sub]),
            gpu=gpu,
            sm_clock_hz=fs,
            coeffs=coeffs,
        )
    if key == "elementwise":
        return elementwise.elementwise_arrays(
            kind=np.array([elementwise.KINDS.index(o.kind) for o in sub]),
            num_elements=arr([o.num_elements for o in sub]),
            in_bytes=arr([_dtype_bytes(o.dtype) for o in sub]),
            out_bytes=arr([_dtype_bytes(o.out_dtype or o.dtype) for o in sub]),
            gpu=gpu,
            sm_clock_hz=fs,
            coeffs=coeffs,
            **elementwise.bn_fields(sub),
        )
    shape = {
        "batch": arr([o.batch for o in sub]),
        "seq_len_q": arr([o.seq_len_q for o in sub]),
        "seq_len_kv": arr([o.seq_len_kv for o in sub]),
        "num_heads": arr([o.num_heads for o in sub]),
        "num_kv_heads": arr([o.num_kv_heads for o in sub]),
        "head_dim": arr([o.head_dim for o in sub]),
    }
    if key == "attention_eager":
        return attention_eager.eager_arrays(
            **shape, dtype=[o.dtype for o in sub], gpu=gpu, sm_clock_hz=fs, coeffs=coeffs,
            choice_clock_hz=choice_clock_hz, choice_memo=choice_memo,
        )  # fmt: skip
    dt = {
        "act_bytes": arr([_dtype_bytes(o.dtype) for o in sub]),
        "kv_bytes": arr([_dtype_bytes(o.cache_dtype) for o in sub]),
    }
    if key == "attention_flash":
        causal = np.array([o.causal for o in sub], dtype=bool)
        return attention.flash_arrays(
            **shape, **dt, causal=causal, gpu=gpu, sm_clock_hz=fs, coeffs=coeffs, cache_write=cache_write
        )
    if key == "attention_decode":
        return attention.decode_arrays(**shape, **dt, gpu=gpu, sm_clock_hz=fs, coeffs=coeffs)
    raise ValueError(f"unknown kernel family {key!r}")


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
    groups: dict[str, list[int]] = {}
    for i, op in enumerate(ops):
        groups.setdefault(family_of(op), []).append(i)
    for key, rows in groups.items():
        sub = [ops[i] for i in rows]
        idx = np.array(rows)  # once, not per use below
        out = family_arrays(
            key, sub, gpu, f[idx], coeffs,
            cache_write=cache_write, choice_clock_hz=choice_clock_hz, choice_memo=choice_memo,
        )  # fmt: skip
        util[idx] = np.asarray(out["util"]).T
        tensor_flop[idx] = tensor_flop_bf16(key, sub, out, gpu)
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
    from dse.perf.rates import arch_family, tensor_flop_per_clk

    bf16 = tensor_flop_per_clk(gpu, "bf16")

    def per_bf16(dtype: str) -> float:
        rate = tensor_flop_per_clk(gpu, dtype)
        return bf16 / rate if rate > 0 else 0.0

    if key == "gemm":
        from dse.perf.moe import math_dtype

        pairs = [(o.dtype, o.b_dtype) for o in ops]
        factor = {pair: per_bf16(math_dtype(gpu, *pair)) for pair in set(pairs)}  # per distinct pair
        return np.asarray(out["flop"]) * np.array([factor[pair] for pair in pairs])
    if key == "attention_flash":
        return np.asarray(out["flop"], dtype=float)
    if key == "attention_decode":
        fp8_mma = arch_family(gpu) == "hopper"
        cache_dtypes = [o.cache_dtype for o in ops]  # hundreds of decode steps, a dtype or two
        factor = {d: per_bf16("fp8") if fp8_mma and _dtype_bytes(d) <= 1 else 1.0 for d in set(cache_dtypes)}
        return np.asarray(out["flop"]) * np.array([factor[d] for d in cache_dtypes])
    if key == "attention_eager":
        parts = out["parts"]
        return (parts["qk"]["flop"] + parts["pv"]["flop"]) * np.array([per_bf16(o.dtype) for o in ops])
    return np.zeros(len(ops))  # reductions and elementwise kernels run on CUDA cores


def _dtype_bytes(dtype: str) -> float:
    return DTYPE_BYTES[dtype]


def take_rows(rows: dict[str, np.ndarray], idx: np.ndarray) -> dict[str, np.ndarray]:
    """The rows `idx` of a row dict."""
    return {k: v[idx] for k, v in rows.items()}


def put_rows(into: dict[str, np.ndarray], idx: np.ndarray, rows: dict[str, np.ndarray]) -> None:
    """Overwrite the rows `idx` of `into` (in place) with `rows`."""
    for k, v in rows.items():
        into[k][idx] = v
