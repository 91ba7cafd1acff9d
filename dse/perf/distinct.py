"""The distinct kernels of a list of graphs, cached: what `dse.perf.predict.predict_graph_totals` estimates.

The kernel model reads an op's shapes and dtypes, never its name or repeat count, so graphs of one family
(the steps of a serving table, a training step's parts) are estimated once per distinct kernel.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np

from dse.workload.graph import WorkloadGraph

Distinct = tuple[list[Any], list[np.ndarray], list[np.ndarray]]
# `distinct_ops` of the graph lists seen, by the graphs' identities: a serving table asks for the same cached
# step graphs at every design point of a model. Each entry holds its graphs, so no id is reused while cached;
# callers only read the lists and arrays.
_DISTINCT: dict[tuple[int, ...], tuple[tuple[WorkloadGraph, ...], Distinct]] = {}
_DISTINCT_MAX = 64


def distinct_ops(graphs: Sequence[WorkloadGraph]) -> Distinct:
    """(distinct ops, per graph the distinct index of each op, per graph its ops' repeat counts). Graphs of
    one family (the steps of a serving table) share most kernels: each distinct one is estimated once (the
    kernel model reads shapes and dtypes, never names or repeat counts)."""
    key = tuple(id(g) for g in graphs)
    hit = _DISTINCT.get(key)
    if hit is not None and all(a is b for a, b in zip(hit[0], graphs, strict=True)):
        return hit[1]
    out = _distinct_of(graphs)
    if len(_DISTINCT) >= _DISTINCT_MAX:
        _DISTINCT.clear()
    _DISTINCT[key] = (tuple(graphs), out)
    return out


def _distinct_of(graphs: Sequence[WorkloadGraph]) -> Distinct:
    index: dict[Any, int] = {}
    distinct: list[Any] = []
    where, counts = [], []
    for g in graphs:
        keys, count = _graph_shape_keys(g)
        counts.append(count)
        w = []
        for op, key in zip(g.ops, keys, strict=True):
            j = index.get(key)
            if j is None:
                j = index[key] = len(distinct)
                distinct.append(op)
            w.append(j)
        where.append(np.array(w, dtype=np.int64))
    return distinct, where, counts


_SHAPE_FIELDS: dict[type, tuple[str, ...]] = {}


def _shape_fields(op_type: type) -> tuple[str, ...]:
    if op_type not in _SHAPE_FIELDS:
        fields = dataclasses.fields(op_type)
        _SHAPE_FIELDS[op_type] = tuple(f.name for f in fields if f.name not in ("name", "count"))
    return _SHAPE_FIELDS[op_type]


# Shape keys and repeat counts of the graphs `predict_graph_totals` has seen, by identity: a serving table
# asks for the same cached step graphs (`dse.serving.step_table.step_graph`) at every design point. Each entry
# holds its graph, so an id is never reused while it is cached.
_GRAPH_KEYS: dict[int, tuple[WorkloadGraph, tuple[tuple[Any, ...], ...], np.ndarray]] = {}
_GRAPH_KEYS_MAX = 8192


def _graph_shape_keys(graph: WorkloadGraph) -> tuple[tuple[tuple[Any, ...], ...], np.ndarray]:
    hit = _GRAPH_KEYS.get(id(graph))
    if hit is not None and hit[0] is graph:
        return hit[1], hit[2]
    keys = tuple(_shape_key(op) for op in graph.ops)
    counts = np.array([op.count for op in graph.ops], dtype=float)
    if len(_GRAPH_KEYS) >= _GRAPH_KEYS_MAX:
        _GRAPH_KEYS.clear()
    _GRAPH_KEYS[id(graph)] = (graph, keys, counts)
    return keys, counts


def _shape_key(op: Any) -> tuple[Any, ...]:
    """What the kernel model reads of an op: its type and every field but its name and repeat count."""
    return (type(op), *(getattr(op, name) for name in _shape_fields(type(op))))
