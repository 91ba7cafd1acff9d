"""Workload predictions: energy = power x time everywhere, breakdowns, host gaps, DVFS behaviour."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from dse.errors import ConfigError
from dse.hardware.catalog import load_gpu
from dse.perf.coeffs import PowerCoeffs
from dse.perf.host import DEFAULT_HOST
from dse.perf.power import ENERGY_KEYS
from dse.perf.predict import predict_command_payload, predict_graph
from dse.perf.types import OperatingPoint
from dse.workload.graph import WorkloadGraph
from dse.workload.ops import ElementwiseOp, GemmOp, SoftmaxOp
from tests.perf.power_fakes import roofline_estimator

PC = PowerCoeffs(
    architecture="hopper",
    l2_j_per_byte=8e-12,
    smem_j_per_byte=3e-12,
    tensor_j_per_flop=0.35e-12,
    cuda_j_per_flop=2e-12,
    sfu_j_per_op=5e-12,
    dram_scale=1.0,
    active_j_per_sm_cycle=3e-10,
    gap_j_per_sm_cycle=1e-10,
)
H100 = load_gpu("h100-sxm")
GRAPH = WorkloadGraph(
    name="toy",
    ops=(
        GemmOp(name="toy/layer[0-3]/qkv", m=4096, n=6144, k=4096, count=4),
        SoftmaxOp(name="toy/layer[0-3]/softmax", rows=4096, cols=4096, count=4),
        ElementwiseOp(name="toy/layer[0-3]/add", kind="add", num_elements=4096 * 4096, count=4),
        GemmOp(name="toy/lm_head", m=4096, n=32000, k=4096),
    ),
)


def _predict(point=None, **kw):
    return predict_graph(GRAPH, H100, point or OperatingPoint(), None, PC, estimator=roofline_estimator, **kw)


@pytest.mark.parametrize("launch", [None, "graphs", "engine", "eager"])
@pytest.mark.parametrize(
    "point", [OperatingPoint(), OperatingPoint(sm_clock_hz=900e6), OperatingPoint(power_cap_w=300)]
)
def test_energy_is_power_times_time_everywhere(point, launch):
    r = _predict(point, launch=launch)
    assert r.energy_j == pytest.approx(r.avg_power_w * r.latency_s, rel=1e-12)
    assert r.latency_s == pytest.approx(sum(k.count * (k.latency_s + k.gap_s) for k in r.kernels), rel=1e-12)
    for k in r.kernels:  # a kernel's own energy; the wait for the host before it apart
        assert k.energy_j == pytest.approx(k.count * k.power_w * k.latency_s, rel=1e-12)
        assert k.gap_energy_j == pytest.approx(k.count * k.gap_power_w * k.gap_s, rel=1e-12)
        assert sum(k.energy_j_by_module.values()) == pytest.approx(k.energy_j, rel=1e-12)
        assert set(k.energy_j_by_module) == set(ENERGY_KEYS)
    assert r.gap_energy_j == pytest.approx(sum(k.gap_energy_j for k in r.kernels), rel=1e-12)
    assert sum(k.energy_j for k in r.kernels) + r.gap_energy_j == pytest.approx(r.energy_j, rel=1e-12)
    assert sum(r.energy_j_by_module().values()) == pytest.approx(r.energy_j, rel=1e-12)
    assert sum(r.energy_j_by_name().values()) == pytest.approx(r.energy_j, rel=1e-12)
    assert sum(r.energy_j_by_kind().values()) == pytest.approx(r.energy_j, rel=1e-12)
    assert r.peak_power_w == max(k.power_w for k in r.kernels)
    assert r.min_effective_clock_hz <= r.effective_clock_hz <= r.requested_clock_hz + 1e-3


def test_count_multiplies_energy_and_time():
    one = WorkloadGraph(name="one", ops=(GemmOp(name="g", m=2048, n=2048, k=2048),))
    three = WorkloadGraph(name="three", ops=(GemmOp(name="g", m=2048, n=2048, k=2048, count=3),))
    a = predict_graph(one, H100, None, None, PC, estimator=roofline_estimator)
    b = predict_graph(three, H100, None, None, PC, estimator=roofline_estimator)
    assert b.energy_j == pytest.approx(3 * a.energy_j)
    assert b.latency_s == pytest.approx(3 * a.latency_s)
    assert b.avg_power_w == pytest.approx(a.avg_power_w)


def test_a_slow_host_makes_the_gpu_wait_at_lower_power():
    r0 = _predict()
    slow = dataclasses.replace(DEFAULT_HOST, eager_gemm_s=5e-3, eager_other_s=5e-3)
    r1 = _predict(launch="eager", host=slow)
    assert r1.busy_s == pytest.approx(r0.busy_s)
    assert r1.latency_s > r0.latency_s
    assert r1.avg_power_w < r0.avg_power_w  # the GPU waits at near-idle power
    assert r1.launch == "eager" and r1.host_s >= 13 * 5e-3
    with pytest.raises(ConfigError):
        _predict(launch="lazy")


def test_a_kernels_energy_is_its_own_and_the_host_waits_are_a_part_of_their_own():
    """Session 36: each kernel's energy included the GPU's wait for the host before it, so the first kernel
    of an eager pass carried the pass's 1 ms framework entry and read as its hottest kernel. The waits are
    now one part of their own (by name and by kind, `HOST_GAP_PART`), and the totals are unchanged."""
    from dse.perf.kernel_rows import HOST_GAP_PART

    r = _predict(launch="eager")
    first = r.kernels[0]
    # the pass's entry (DEFAULT_HOST.step_s, 1 ms) is waited out before the first kernel can start (gap_s is
    # per execution: the first op runs 4 times)
    assert first.count * first.gap_s >= DEFAULT_HOST.step_s
    # its own energy: its power over its own time, the definition of a kernel's energy
    assert first.energy_j == pytest.approx(first.count * first.power_w * first.latency_s, rel=1e-12)
    # the entry's idle time costs at least the GPU's idle power over it: all of it in the waits' part
    assert first.gap_energy_j >= DEFAULT_HOST.step_s * H100.power.idle_power_w.at(first.effective_clock_hz)
    by_name, by_kind = r.energy_j_by_name(), r.energy_j_by_kind()
    assert by_name[HOST_GAP_PART] == by_kind[HOST_GAP_PART] == pytest.approx(r.gap_energy_j, rel=1e-12)
    assert by_name[first.name] == pytest.approx(first.energy_j, rel=1e-12)
    # kernels plus waits are the workload's energy, which a launch mode's waits still add to
    assert sum(k.energy_j for k in r.kernels) + r.gap_energy_j == pytest.approx(r.energy_j, rel=1e-12)
    assert r.energy_j > sum(k.energy_j for k in _predict().kernels)
    # without a launch mode there is no wait, and no part for it
    assert HOST_GAP_PART not in _predict().energy_j_by_name() and _predict().gap_energy_j == 0.0


def test_cap_lowers_the_effective_clock_and_reports_it():
    free = _predict(OperatingPoint(power_cap_w=700))
    capped = _predict(OperatingPoint(power_cap_w=250))
    assert capped.effective_clock_hz < free.effective_clock_hz
    assert capped.avg_power_w <= 250 + 1e-9  # the pass's mean, not each kernel (`dse.perf.pass_cap`)
    assert capped.latency_s >= free.latency_s


def test_memory_bound_energy_minimum_is_below_max_clock():
    """A DRAM-bound kernel takes as long at low clocks, so V^2 f savings win until idle power dominates."""
    stream = WorkloadGraph(name="s", ops=(ElementwiseOp(name="s", kind="add", num_elements=1 << 28),))
    clocks = np.arange(600e6, 1981e6, 60e6)
    energy = [
        predict_graph(
            stream, H100, OperatingPoint(sm_clock_hz=f), None, PC, estimator=roofline_estimator
        ).energy_j
        for f in clocks
    ]
    assert clocks[int(np.argmin(energy))] < H100.clocks.sm_clock_max_hz


def test_to_dict_is_json_ready_and_payload_has_mhz():
    r = _predict(launch="eager")
    text = json.dumps(r.to_dict())
    back = json.loads(text)
    assert back["energy_j"] == r.energy_j and len(back["kernels"]) == len(GRAPH.ops)
    payload = predict_command_payload(r)
    for key in ("latency_s", "energy_j", "avg_power_w", "effective_clock_mhz", "energy_j_by_module"):
        assert key in payload
    assert "kernels" not in payload
    assert payload["effective_clock_mhz"] == pytest.approx(r.effective_clock_hz / 1e6)


def test_empty_graph():
    r = predict_graph(WorkloadGraph(name="e", ops=()), H100, None, None, PC, estimator=roofline_estimator)
    assert r.energy_j == 0.0 and r.latency_s == 0.0 and r.kernels == ()


def test_graph_totals_in_one_pass_equal_graphs_predicted_one_by_one() -> None:
    from dse.perf.predict import predict_graph_totals
    from dse.workload.engine import ENGINES, engine_step_graph
    from dse.workload.models import load_model_config

    arch = load_model_config("llama-3.1-8b")
    graphs = [
        engine_step_graph(
            arch, decodes=d, prefills=k, input_tokens=512, context_len=c, engine=ENGINES["vllm"]
        )
        for d, k, c in ((1, 0, 600), (64, 0, 2000), (0, 3, 1), (32, 2, 900))
    ]
    for point in (OperatingPoint(), OperatingPoint(sm_clock_hz=1.2e9, power_cap_w=350.0)):
        latency_s, energy_j, clock_hz_s = predict_graph_totals(graphs, H100, point)
        for g, t, e, c in zip(graphs, latency_s, energy_j, clock_hz_s, strict=True):
            one = predict_graph(g, H100, point)
            assert t == pytest.approx(one.latency_s, rel=1e-12) and e == pytest.approx(
                one.energy_j, rel=1e-12
            )
            assert c / t == pytest.approx(one.effective_clock_hz, rel=1e-12)
