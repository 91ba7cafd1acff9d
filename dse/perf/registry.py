"""The estimator table and the entry points that estimate many ops and whole workload graphs.

    coeffs = load_default_coeffs(gpu)                  # dse.perf.coeffs (None = uncorrected model)
    kernels = estimate_ops(ops, gpu, OperatingPoint(), coeffs)
    graph_est = estimate_graph(graph, gpu, OperatingPoint(sm_clock_hz=1.5e9), coeffs)

Ops are grouped by family and each family is estimated in one vectorized call; results come back in the
order of the input ops.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from dse.hardware.spec import GpuSpec
from dse.perf import attention, elementwise, gemm, reduction
from dse.perf.types import CoeffTable, GraphEstimate, KernelEstimate, OperatingPoint
from dse.workload.graph import WorkloadGraph
from dse.workload.ops import AttentionOp, ElementwiseOp, GemmOp, NormOp, Op, SoftmaxOp

# The op argument is `Any`: each family takes only its own op types, and the tables below dispatch on
# `type(op)`, so every estimator only ever sees the ops it accepts.
Estimator = Callable[[Any, GpuSpec, OperatingPoint, object], KernelEstimate]
BatchEstimator = Callable[[list[Any], GpuSpec, OperatingPoint, object], list[KernelEstimate]]

# Scalar estimators, one per op type (the contract tests iterate over this table).
ESTIMATORS: dict[type, Estimator] = {
    GemmOp: gemm.estimate,
    AttentionOp: attention.estimate,
    SoftmaxOp: reduction.estimate,
    NormOp: reduction.estimate,
    ElementwiseOp: elementwise.estimate,
}

# Vectorized estimators; softmax and norms share one family call.
_BATCH: dict[type, tuple[str, BatchEstimator]] = {
    GemmOp: ("gemm", gemm.estimate_many),
    AttentionOp: ("attention", attention.estimate_many),
    SoftmaxOp: ("reduction", reduction.estimate_many),
    NormOp: ("reduction", reduction.estimate_many),
    ElementwiseOp: ("elementwise", elementwise.estimate_many),
}


def estimate_op(
    op: Op, gpu: GpuSpec, point: OperatingPoint, coeffs: CoeffTable | object | None = None
) -> KernelEstimate:
    """One op (scalar path)."""
    try:
        estimator = ESTIMATORS[type(op)]
    except KeyError:
        raise TypeError(f"no estimator for {type(op).__name__}") from None
    return estimator(op, gpu, point, coeffs)


def estimate_ops(
    ops: Sequence[Op], gpu: GpuSpec, point: OperatingPoint, coeffs: CoeffTable | object | None = None
) -> list[KernelEstimate]:
    """Estimates of many ops, vectorized within each family, in input order.

    Args:
        ops: the ops (their `count` is carried into the estimates, not multiplied in).
        gpu: the GPU.
        point: SM clock (None: the GPU's default boost clock) and power cap.
        coeffs: a `CoeffSet` (e.g. `dse.perf.coeffs.load_default_coeffs(gpu)`), a `CoeffTable`, or
            None for the uncorrected analytical model.
    """
    families: dict[str, tuple[BatchEstimator, list[int]]] = {}
    for i, op in enumerate(ops):
        try:
            name, fn = _BATCH[type(op)]
        except KeyError:
            raise TypeError(f"no estimator for {type(op).__name__}") from None
        families.setdefault(name, (fn, []))[1].append(i)
    out: list[KernelEstimate | None] = [None] * len(ops)
    for fn, idx in families.values():
        for i, est in zip(idx, fn([ops[i] for i in idx], gpu, point, coeffs), strict=True):
            out[i] = est
    return [e for e in out if e is not None]


def estimate_graph(
    graph: WorkloadGraph, gpu: GpuSpec, point: OperatingPoint, coeffs: CoeffTable | object | None = None
) -> GraphEstimate:
    """Estimate every op of a graph; totals weigh each op by its `count`."""
    kernels = tuple(estimate_ops(graph.ops, gpu, point, coeffs))
    return GraphEstimate(
        name=graph.name,
        kernels=kernels,
        latency_s=sum(k.latency_s * k.count for k in kernels),
        flop=sum(k.flop * k.count for k in kernels),
        dram_bytes=sum(k.dram_bytes * k.count for k in kernels),
    )
