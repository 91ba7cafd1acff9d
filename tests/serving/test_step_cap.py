"""The power cap on serving steps: each step's mean power held under the cap (`dse.serving.step_table`)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dse.hardware.catalog import load_gpu
from dse.perf.coeffs import load_default_coeffs
from dse.perf.graph_parts import predict_graph_parts
from dse.perf.predict import predict_graph_totals
from dse.perf.types import OperatingPoint
from dse.serving.load import LoadRequest, predict_load
from dse.serving.step_table import capped_steps, step_graph
from dse.workload.models import load_model_config

H100 = load_gpu("h100-sxm")
ARCH = load_model_config("llama-3.1-8b")
COEFFS = load_default_coeffs(H100)


def _step(decodes: int, prompts: int, each: int, context: int):
    return step_graph(ARCH, decodes, prompts, each, context, "bf16", "vllm", "top_k_top_p", None)


DECODE_256 = _step(256, 0, 0, 2048)  # a decode step whose GEMMs alone draw over 700 W, its mean ~610 W
PREFILL_8K = _step(0, 8, 1024, 8192)  # a prefill step of 8 prompts: ~1.3 kW at the boost clock
STEPS = [_step(d, 0, 0, c) for d in (1, 8, 32, 128, 256) for c in (512, 4096)] + [
    _step(0, k, 1024, 1024 * k) for k in (1, 2, 8)
] + [_step(32, 2, 1024, 2048)]  # fmt: skip


def test_a_step_whose_mean_fits_runs_at_the_requested_clock() -> None:
    # Its hottest kernels alone are over the cap, so holding each kernel under it on its own throttles them;
    # the limiter sees the step's mean, which fits: nothing slows down.
    lat, en = capped_steps([DECODE_256], H100, None, COEFFS, None)
    free = predict_graph_parts([DECODE_256], H100, H100.clocks.boost_clock_hz, COEFFS)
    free_j = sum(free.energy_j.values())
    assert en[0] / lat[0] < H100.power.tdp_w
    assert lat[0] == pytest.approx(free.latency_s[0], rel=1e-12) and en[0] == pytest.approx(
        free_j[0], rel=1e-12
    )
    per_kernel_lat, _, _ = predict_graph_totals([DECODE_256], H100, None, COEFFS, cap_rule="kernel")
    assert per_kernel_lat[0] > 1.01 * lat[0]


@pytest.mark.parametrize(
    ("gpu_name", "cap_w"),
    [("h100-sxm", None), ("h100-sxm", 450.0), ("h100-sxm", 300.0), ("a100-sxm-80gb", None),
     ("a100-sxm-80gb", 250.0), ("a100-pcie-40gb", None), ("b200", None), ("h200-sxm", 500.0)],
)  # fmt: skip
def test_the_clock_of_a_step_over_the_cap_is_the_exact_searchs(gpu_name: str, cap_w: float | None) -> None:
    # Two evaluated clocks and each energy term's own clock law against the grid search of
    # `dse.perf.pass_cap` (each step its own pass), which evaluates every step at the clocks it settles
    # between. Decode steps of 1-256 sequences and prefill steps of 1-8 prompts: within 2% on average,
    # 5% at worst (the large-batch A100 PCIe decode steps, whose kernels turn compute-bound in between).
    gpu = load_gpu(gpu_name)
    coeffs, point = load_default_coeffs(gpu), OperatingPoint(power_cap_w=cap_w)
    lat, en = capped_steps(STEPS, gpu, point, coeffs, None)
    exact_lat, exact_en, _ = predict_graph_totals(STEPS, gpu, point, coeffs)
    assert np.abs(lat / exact_lat - 1).mean() < 0.02 and np.abs(en / exact_en - 1).mean() < 0.02
    assert lat == pytest.approx(exact_lat, rel=0.05) and en == pytest.approx(exact_en, rel=0.05)
    assert np.all(en <= lat * (cap_w or gpu.power.tdp_w) * (1 + 1e-9))


def test_a_step_over_the_cap_throttles_and_one_under_does_not() -> None:
    free = predict_graph_parts([PREFILL_8K], H100, H100.clocks.boost_clock_hz, COEFFS)
    assert sum(free.energy_j.values())[0] / free.latency_s[0] > 1.5 * H100.power.tdp_w
    lat, en = capped_steps([PREFILL_8K], H100, None, COEFFS, None)
    assert lat[0] > 1.2 * free.latency_s[0]
    assert en[0] / lat[0] == pytest.approx(H100.power.tdp_w, rel=0.02)  # the highest grid clock that fits


@settings(max_examples=12, deadline=None)
@given(low=st.floats(200.0, 700.0), high=st.floats(200.0, 700.0))
def test_a_lower_cap_never_speeds_a_step_nor_lifts_it_over_the_cap(low: float, high: float) -> None:
    low, high = min(low, high), max(low, high)
    graphs = [PREFILL_8K, DECODE_256, _step(8, 0, 0, 1024)]
    lat_lo, en_lo = capped_steps(graphs, H100, OperatingPoint(power_cap_w=low), COEFFS, None)
    lat_hi, _ = capped_steps(graphs, H100, OperatingPoint(power_cap_w=high), COEFFS, None)
    assert np.all(lat_lo >= lat_hi * (1 - 1e-12))
    assert np.all(en_lo / lat_lo <= low * (1 + 1e-9))


def test_each_step_is_capped_on_its_own() -> None:
    # A step's clock does not depend on which other steps share the call.
    point = OperatingPoint(power_cap_w=250.0)
    alone = capped_steps([DECODE_256], H100, point, COEFFS, None)
    together = capped_steps([PREFILL_8K, DECODE_256, _step(1, 0, 0, 512)], H100, point, COEFFS, None)
    assert together[0][1] == pytest.approx(alone[0][0], rel=1e-12)
    assert together[1][1] == pytest.approx(alone[1][0], rel=1e-12)


def test_a_run_under_load_holds_the_cap() -> None:
    # Every step's kernels at or under the cap, gaps at idle power: the run's mean cannot exceed it.
    load = LoadRequest(mode="concurrency", concurrency=32, num_requests=96, input_tokens=2048,
                       output_tokens=64, engine="vllm")  # fmt: skip
    capped = predict_load(ARCH, H100, load, OperatingPoint(power_cap_w=400.0)).values
    free = predict_load(ARCH, H100, load).values
    assert capped["avg_power_w"] <= 400.0 * (1 + 1e-9) < free["avg_power_w"]
    assert capped["ttft_s"] > free["ttft_s"] and capped["tpot_s"] >= free["tpot_s"]
