"""The distinct kernels of a list of graphs (`dse.perf.distinct`), and its cache by graph identity."""

from __future__ import annotations

from dse.perf.distinct import distinct_ops
from dse.workload.graph import WorkloadGraph
from dse.workload.ops import ElementwiseOp, GemmOp


def _graphs() -> list[WorkloadGraph]:
    a = GemmOp(name="a", m=64, n=128, k=256)
    same_shape = GemmOp(name="renamed", m=64, n=128, k=256, count=3)  # names and counts are not shapes
    other = ElementwiseOp(name="e", kind="add", num_elements=1024)
    return [WorkloadGraph(name="g0", ops=(a, other)), WorkloadGraph(name="g1", ops=(same_shape, other, a))]


def test_each_shape_is_estimated_once_and_mapped_back():
    graphs = _graphs()
    distinct, where, counts = distinct_ops(graphs)
    assert len(distinct) == 2
    assert where[0].tolist() == [0, 1] and where[1].tolist() == [0, 1, 0]
    assert counts[1].tolist() == [3.0, 1.0, 1.0]


def test_the_same_graphs_hit_the_cache_and_other_graphs_do_not():
    graphs = _graphs()
    first = distinct_ops(graphs)
    assert distinct_ops(list(graphs)) is first  # the same graph objects, a new list
    changed = [
        graphs[0],
        WorkloadGraph(name="g2", ops=(ElementwiseOp(name="x", kind="copy", num_elements=8),)),
    ]
    distinct, where, _ = distinct_ops(changed)
    assert distinct_ops(changed) is not first and len(distinct) == 3 and where[1].tolist() == [2]
