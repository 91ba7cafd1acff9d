"""The power cap on a pass's mean power (`dse.perf.pass_cap`): one clock per pass."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dse.hardware.catalog import load_gpu
from dse.perf.coeffs import default_power_coeffs
from dse.perf.dvfs import capped_rows, clock_grid_hz
from dse.perf.power import gpu_power_terms
from dse.perf.predict import predict_graph, predict_graph_totals, predict_graphs
from dse.perf.types import OperatingPoint
from dse.workload.graph import WorkloadGraph
from dse.workload.ops import ElementwiseOp, GemmOp
from tests.perf.power_fakes import roofline_estimator

H100 = load_gpu("h100-sxm")
# H100 with a limit far above anything it draws: the mean power at any clock, unthrottled.
UNCAPPED = H100.model_copy(update={"power": H100.power.model_copy(update={"tdp_w": 1e5})})
HOT = GemmOp(name="hot", m=8192, n=8192, k=8192)


def _mix(cool: int) -> WorkloadGraph:
    """A big GEMM followed by `cool` streaming kernels of 2^26 elements (DRAM-bound, cooler)."""
    ops = (HOT, ElementwiseOp(name="cool", kind="add", num_elements=1 << 26, count=cool))
    return WorkloadGraph(name=f"mix{cool}", ops=ops)


def test_hot_kernel_in_a_cool_pass_is_not_throttled():
    """Our H100: bf16 GEMMs in a loop settle at the 700 W cap near 1400 MHz, while eager passes that mix
    them with cooler kernels ran at 1980 MHz averaging 600-690 W (`dse/calibrate/measured` README). The
    model: the GEMM alone is throttled, the same GEMM in a pass whose mean fits is not."""
    alone = predict_graph(WorkloadGraph(name="hot", ops=(HOT,)), H100)
    assert alone.effective_clock_hz < H100.clocks.boost_clock_hz
    assert alone.avg_power_w <= H100.power.tdp_w + 1e-9
    mixed = predict_graph(_mix(400), H100)
    assert mixed.avg_power_w < H100.power.tdp_w
    assert mixed.effective_clock_hz == H100.clocks.boost_clock_hz
    assert mixed.peak_power_w > H100.power.tdp_w  # the GEMM itself draws more, for its milliseconds


@pytest.mark.parametrize("launch", [None, "eager"])
@pytest.mark.parametrize("cap", [300.0, 420.0, 550.0])
def test_the_pass_runs_at_the_highest_grid_clock_whose_mean_fits(launch, cap):
    """Against an exhaustive search: the mean power of the pass at every grid clock (the roofline stand-in
    has no tile choice, so each clock's prediction is the pass at that clock)."""
    graph = _mix(40)
    grid = clock_grid_hz(H100)
    means = [
        predict_graph(
            graph, UNCAPPED, OperatingPoint(sm_clock_hz=f), estimator=roofline_estimator, launch=launch
        )
        for f in grid
    ]
    fits = [f for f, p in zip(grid, means, strict=True) if p.avg_power_w <= cap]
    capped = predict_graph(
        graph, H100, OperatingPoint(power_cap_w=cap), estimator=roofline_estimator, launch=launch
    )
    assert fits, "the test's caps are reachable"
    assert capped.effective_clock_hz == pytest.approx(max(fits))
    assert capped.avg_power_w <= cap + 1e-9


@settings(max_examples=25, deadline=None)
@given(
    m=st.integers(1, 16384),
    n=st.integers(1, 16384),
    k=st.integers(1, 16384),
    cap=st.floats(200.0, 700.0),
)
def test_a_pass_of_one_kernel_is_the_per_kernel_rule(m, n, k, cap):
    """A kernel timed in a loop is a pass of one kernel: the same clock as `capped_rows`' per-kernel search
    (itself tested exhaustively in test_dvfs)."""
    op = GemmOp(name="g", m=m, n=n, k=k)
    point = OperatingPoint(power_cap_w=cap)
    pc = default_power_coeffs(H100)
    per_kernel = capped_rows([op], H100, point, None, pc, gpu_power_terms(H100))
    one = predict_graph(WorkloadGraph(name="g", ops=(op,)), H100, point)
    assert one.effective_clock_hz == per_kernel.rows["sm_clock_hz"][0]
    assert one.kernels[0].cap_exceeded == bool(per_kernel.cap_exceeded[0])


def test_graphs_predicted_together_equal_graphs_one_by_one():
    graphs = [_mix(c) for c in (1, 5, 40, 400)]
    point = OperatingPoint(power_cap_w=450.0)
    together = predict_graphs(graphs, H100, point)
    assert len({p.effective_clock_hz for p in together}) > 1  # the passes throttle differently
    for g, p in zip(graphs, together, strict=True):
        alone = predict_graph(g, H100, point)
        assert p.latency_s == pytest.approx(alone.latency_s, rel=1e-12)
        assert p.energy_j == pytest.approx(alone.energy_j, rel=1e-12)


def test_totals_group_graphs_into_one_pass():
    """`passes` makes graphs share one clock set by their joint mean (a training step's microbatches and
    optimizer); alone, the hot graph throttles deeper than inside the group."""
    hot, cool = WorkloadGraph(name="hot", ops=(HOT,)), _mix(400)
    cap = OperatingPoint(power_cap_w=500.0)
    lat_own, _ = predict_graph_totals([hot, cool], H100, cap)
    lat_joint, en_joint = predict_graph_totals([hot, cool], H100, cap, passes=[[0, 1]], runs=[1.0, 1.0])
    assert lat_joint[0] < lat_own[0]  # hot runs at the group's (higher) clock
    assert float(en_joint.sum() / lat_joint.sum()) <= 500.0 + 1e-9
    with pytest.raises(ValueError, match="exactly once"):
        predict_graph_totals([hot, cool], H100, cap, passes=[[0]])


def test_lower_cap_never_raises_the_clock():
    graph = _mix(40)
    clocks = [
        predict_graph(graph, H100, OperatingPoint(power_cap_w=c)).effective_clock_hz
        for c in np.linspace(250.0, 700.0, 10)
    ]
    assert all(a <= b for a, b in zip(clocks, clocks[1:], strict=False))
