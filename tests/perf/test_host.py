"""The asynchronous launch queue (dse.perf.host): hand-worked cases and properties."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dse.errors import ConfigError
from dse.hardware.catalog import load_gpu
from dse.perf.host import (
    DEFAULT_HOST,
    HostCoeffs,
    check_launch,
    execution_order,
    gpu_only_coeffs,
    schedule,
)
from dse.perf.predict import predict_graph
from dse.perf.types import CoeffTable, PhaseCoeffs
from dse.workload.graph import WorkloadGraph
from dse.workload.ops import ElementwiseOp, GemmOp
from tests.perf.power_fakes import roofline_estimator

H100 = load_gpu("h100-sxm")
# Round numbers so the expected schedules can be worked out by hand.
HOST = HostCoeffs(
    step_s=1.0,
    eager_gemm_s=3.0,
    eager_other_s=1.0,
    graph_launch_s=0.5,
    engine_op_s=0.25,
    launch_latency_s=0.0,
    kernel_gap_cycles=0.0,
    graph_kernel_gap_s=0.0,
)
CLOCK_HZ = 1e9


def _ops(*kinds: str) -> list:
    return [
        GemmOp(name=f"g{i}", m=64, n=64, k=64)
        if k == "g"
        else ElementwiseOp(name=f"e{i}", kind="add", num_elements=64)
        for i, k in enumerate(kinds)
    ]


def test_host_bound_queue_by_hand():
    # issue times 1+3=4, 5, 6; GPU times 1 each: starts 4, 5, 6 -> wall 7, waits 4, 0, 0
    q = schedule(np.array([1.0, 1.0, 1.0]), _ops("g", "e", "e"), "eager", HOST, CLOCK_HZ)
    assert q.wall_s == pytest.approx(7.0)
    np.testing.assert_allclose(q.wait_s, [4.0, 0.0, 0.0])
    assert q.host_s == pytest.approx(6.0)


def test_gpu_bound_queue_hides_the_host():
    # issue at 4, 5, 6; GPU times 10: back to back from 4 -> wall 34, only the first launch waits
    q = schedule(np.array([10.0, 10.0, 10.0]), _ops("g", "e", "e"), "eager", HOST, CLOCK_HZ)
    assert q.wall_s == pytest.approx(34.0)
    np.testing.assert_allclose(q.wait_s, [4.0, 0.0, 0.0])


def test_graphs_pay_one_launch():
    q = schedule(np.array([1.0, 1.0]), _ops("g", "g"), "graphs", HOST, CLOCK_HZ)
    assert q.wall_s == pytest.approx(1.0 + 0.5 + 2.0)


def test_dispatch_gap_is_gpu_cycles():
    # 1000 cycles between kernels: 1 s at 1 kHz, 0.5 s at 2 kHz; per op when the clocks differ
    host = dataclasses.replace(HOST, kernel_gap_cycles=1000.0)
    lat = np.array([10.0, 10.0, 10.0])  # GPU-bound: issue at 4, 5, 6; the gap lies between the kernels
    slow = schedule(lat, _ops("g", "e", "e"), "eager", host, 1e3)
    fast = schedule(lat, _ops("g", "e", "e"), "eager", host, 2e3)
    # the first kernel starts at its issue time 4 (its gap hides in the wait), each later one a gap after
    # the previous one ends: 4 + 10 + 2 x (gap + 10)
    assert slow.wall_s == pytest.approx(4.0 + 10.0 + 2 * 11.0)
    assert fast.wall_s == pytest.approx(4.0 + 10.0 + 2 * 10.5)
    # each gap at its own kernel's clock (the previous kernel's would give 4 + 10 + 11 + 10.5)
    mixed = schedule(lat, _ops("g", "e", "e"), "eager", host, np.array([1e3, 2e3, 2e3]))
    assert mixed.wall_s == pytest.approx(4.0 + 10.0 + 10.5 + 10.5)
    # in a CUDA graph the gap is at most graph_kernel_gap_s: 0.2 s here against 0.5 s of cycles
    in_graph = dataclasses.replace(host, graph_kernel_gap_s=0.2)
    q = schedule(np.array([10.0, 10.0]), _ops("g", "g"), "graphs", in_graph, 2e3)
    assert q.wall_s == pytest.approx(1.0 + 0.5 + 10.0 + 0.2 + 10.0)  # step, graph launch, kernels and one gap
    for bad in (0.0, -1.0, float("nan")):
        with pytest.raises(ConfigError, match="clock"):
            schedule(lat, _ops("g", "e", "e"), "eager", host, bad)


def test_layers_interleave_and_repeats_run_in_a_row():
    ops = [
        GemmOp(name="m/layer[0-2]/a", m=8, n=8, k=8, count=3),
        ElementwiseOp(name="m/layer[0-2]/b", kind="add", num_elements=8, count=3),
        ElementwiseOp(name="m/head", kind="add", num_elements=8, count=2),
    ]
    assert execution_order(ops).tolist() == [0, 1, 0, 1, 0, 1, 2, 2]


def test_unknown_launch_mode_is_an_error():
    with pytest.raises(ConfigError, match="eager, graphs, engine"):
        check_launch("lazy")
    with pytest.raises(ConfigError):
        dataclasses.replace(HOST, step_s=-1.0)


def test_gpu_only_coeffs_drop_host_time_from_eps():
    table = CoeffTable(groups={"norm": PhaseCoeffs(eps_s=45e-6), "gemm": PhaseCoeffs(eps_s=45e-6)})
    out = gpu_only_coeffs(table)
    assert out is not None
    assert out.groups["norm"].eps_s == pytest.approx(2e-6) and out.groups["gemm"].eps_s == pytest.approx(
        45e-6
    )


def test_gpu_only_coeffs_keep_a_sets_other_fields_and_an_untrimmed_set_itself() -> None:
    from dse.perf.coeffs import load_default_coeffs

    ampere, hopper = load_default_coeffs("ampere"), load_default_coeffs("hopper")
    trimmed = gpu_only_coeffs(ampere)
    assert trimmed.moe is ampere.moe and trimmed.lookup("norm").eps_s == pytest.approx(2e-6)
    assert trimmed.lookup("gemm") == ampere.lookup("gemm")
    assert gpu_only_coeffs(hopper) is hopper  # its host-timed groups already sit at the floor


@pytest.mark.parametrize("gpu_name", ["a100-sxm-80gb", "a10", "h100-sxm"])
def test_gpu_time_alone_carries_no_host_time(gpu_name: str) -> None:
    """Without a launch mode a prediction is GPU time: a 4,096-element add streams in microseconds on
    every GPU. The Ampere set's host-timed eps (45 us, fitted on wall times around one PyTorch call) made
    it 47 us on an A100 and its Llama-3.1-8B decode step twice the weight read."""
    from dse.perf.coeffs import load_default_coeffs

    gpu = load_gpu(gpu_name)
    graph = WorkloadGraph(name="t", ops=(ElementwiseOp(name="add", kind="add", num_elements=4096),))
    pred = predict_graph(graph, gpu, coeffs=load_default_coeffs(gpu))
    assert pred.latency_s < 8e-6


costs = st.floats(0.0, 200e-6)
times = st.lists(st.floats(1e-7, 5e-3), min_size=1, max_size=12)


@settings(max_examples=60, deadline=None)
@given(lat=times, kinds=st.data(), c=st.tuples(costs, costs, costs, costs), faster=st.floats(0.0, 1.0))
def test_queue_properties(lat, kinds, c, faster):
    ops = _ops(*kinds.draw(st.lists(st.sampled_from("ge"), min_size=len(lat), max_size=len(lat))))
    t = np.array(lat)
    clocks = np.array(kinds.draw(st.lists(st.floats(3e8, 2e9), min_size=len(lat), max_size=len(lat))))
    host = dataclasses.replace(
        DEFAULT_HOST, step_s=c[0], eager_gemm_s=c[1], eager_other_s=c[2], kernel_gap_cycles=c[3] * CLOCK_HZ
    )
    eager = schedule(t, ops, "eager", host, clocks)
    # a slower clock (at the same kernel times) never shortens the dispatch gaps, so never the wall time
    assert schedule(t, ops, "eager", host, 0.5 * clocks).wall_s >= eager.wall_s - 1e-12
    # never below the GPU's own time, nor below the host's
    assert eager.wall_s >= t.sum() - 1e-12
    assert eager.wall_s >= eager.host_s + host.launch_latency_s + t[-1] - 1e-12
    # a faster host never makes the workload slower
    quick = dataclasses.replace(
        host, step_s=faster * c[0], eager_gemm_s=faster * c[1], eager_other_s=faster * c[2]
    )
    assert schedule(t, ops, "eager", quick, clocks).wall_s <= eager.wall_s + 1e-12
    # CUDA graphs are never slower than eager launches of the same kernels
    assert schedule(t, ops, "graphs", host, clocks).wall_s <= eager.wall_s + 1e-12
    # waits and GPU time add up to the wall time
    assert eager.wait_s.sum() + t.sum() == pytest.approx(eager.wall_s, rel=1e-9, abs=1e-15)


@settings(max_examples=10, deadline=None)
@given(m=st.integers(1, 4096), n=st.integers(64, 8192), layers=st.integers(1, 8))
def test_workload_properties_through_predict(m, n, layers):
    graph = WorkloadGraph(
        name="w",
        ops=(
            GemmOp(name=f"w/layer[0-{layers - 1}]/p", m=m, n=n, k=n, count=layers),
            ElementwiseOp(name=f"w/layer[0-{layers - 1}]/a", kind="add", num_elements=m * n, count=layers),
        ),
    )
    gpu_only = predict_graph(graph, H100, estimator=roofline_estimator)
    eager = predict_graph(graph, H100, launch="eager", estimator=roofline_estimator)
    graphs = predict_graph(graph, H100, launch="graphs", estimator=roofline_estimator)
    assert eager.latency_s >= gpu_only.latency_s and eager.latency_s >= eager.host_s
    assert graphs.latency_s <= eager.latency_s
    assert eager.energy_j >= gpu_only.energy_j  # waits draw at least idle power
