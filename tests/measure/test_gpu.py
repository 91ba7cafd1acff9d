"""Real-GPU checks (`pytest -m gpu tests/measure`): NVML, torch launchers, short kernel and model runs.

Excluded by default (pyproject addopts). They need an NVIDIA GPU, its driver and a CUDA build of PyTorch;
clock locking is exercised only with DSE_TEST_LOCK=1 (it needs root).
"""

from __future__ import annotations

import math
import os

import pytest

from dse.measure.harness import MeasureProtocol, measure_ops
from dse.measure.names import parse_kernel_name
from dse.measure.suites import build_suite

pytestmark = pytest.mark.gpu

FAST = MeasureProtocol(
    warmup_s=0.2, repeats=2, max_repeats=3, cooldown_s=0.1, jitter_s=0.05, idle_s=1.0, settle_s=0.1
)


@pytest.fixture(scope="module")
def gpu():
    from dse.measure.nvml import NvmlGpu

    with NvmlGpu.open(0) as handle:
        yield handle


def test_nvml_readings_are_plausible(gpu):
    assert 10.0 < gpu.power_w() < 2000.0
    e0 = gpu.energy_j()
    gpu.sleep_s(0.5)
    assert gpu.energy_j() > e0
    assert 1e8 < gpu.sm_clock_hz() < 4e9 and 0.0 < gpu.temp_c() < 110.0
    clocks = gpu.supported_sm_clocks_hz()
    assert clocks and max(clocks) > 1e9


def test_every_smoke_op_runs_and_names_its_kernel():
    from dse.measure.kernels import TorchLauncher

    launcher = TorchLauncher(0)
    for op in build_suite("smoke"):
        kernel = launcher.prepare(op)
        try:
            assert kernel.run(3) >= 3
            assert kernel.kernel_name, op.name
            assert parse_kernel_name(kernel.kernel_name).op != "unknown" or op.name.startswith("silu")
        finally:
            kernel.release()


def test_smoke_suite_measures_unlocked(gpu):
    from dse.measure.kernels import TorchLauncher

    samples = measure_ops(build_suite("smoke"), [None], FAST, gpu, TorchLauncher(0))
    assert len(samples) == 5
    for s in samples:
        assert s.num_calls * s.latency_s >= 1.0
        assert s.idle_power_w < s.avg_power_w <= s.power_limit_w * 1.1
        assert math.isfinite(s.trace_energy_j) and s.trace_energy_j == pytest.approx(s.energy_j, rel=0.25)


@pytest.mark.skipif(
    os.environ.get("DSE_TEST_LOCK") != "1", reason="set DSE_TEST_LOCK=1 (root) to lock clocks"
)
def test_locked_clock_is_observed_and_reset(gpu):
    from dse.measure.kernels import TorchLauncher
    from dse.measure.nvml import locked_clocks

    target = sorted(gpu.supported_sm_clocks_hz())[len(gpu.supported_sm_clocks_hz()) // 2]
    samples = measure_ops(build_suite("smoke")[:1], [target], FAST, gpu, TorchLauncher(0))
    assert samples[0].avg_sm_clock_hz == pytest.approx(target, rel=0.05)
    with locked_clocks(gpu, None) as observed:  # reset: the GPU picks its clock again
        assert observed > 0


def test_gpt2_model_run_has_a_consistent_breakdown(gpu, tmp_path):
    from dse.measure.model_run import measure_model
    from dse.measure.torch_llm import build_torch_llm
    from dse.workload.models import load_model_config

    runner = build_torch_llm(load_model_config("gpt2"), batch=4, seq_len=512)
    try:
        result = measure_model(runner, gpu, FAST)
    finally:
        runner.release()
    b = result.breakdown
    assert sum(b["by_op"].values()) == pytest.approx(b["energy_j"])
    assert b["by_op"]["prefill/gpt2/layer[0-11]/mlp/up_proj"] > 0
    # every kernel of the forward pass sits under one of the graph's op annotations
    assert b["by_op"].get("prefill/(other kernels)", 0.0) < 0.05 * b["energy_j"]
