"""The input pipeline's rate (`TrainingRequest.loader_samples_per_s`, `--loader-samples-per-s`): a step takes
at least its samples per data-parallel rank at that rate, and the GPU idles for the difference."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from dse.calibrate.validate.training import dle_loader_samples_per_s
from dse.cli import app
from dse.errors import ConfigError
from dse.hardware.catalog import load_gpu
from dse.search.objective import evaluate_point
from dse.search.study import study_from_dict
from dse.training.parallel import ParallelLayout
from dse.training.predict import predict_training
from dse.training.step import TrainingRequest

A100 = load_gpu("a100-sxm-80gb")


def _step(rate: float, num_gpus: int = 1, batch: int = 64):
    req = TrainingRequest(
        micro_batch=batch, global_batch=batch * num_gpus, precision="fp16", optimizer="sgd",
        memory_format="nhwc", layout=ParallelLayout(num_gpus=num_gpus), loader_samples_per_s=rate,
    )  # fmt: skip
    return predict_training("efficientnet-b0", A100, req)


@settings(max_examples=15, deadline=None)
@given(rate=st.floats(min_value=1.0, max_value=1e6), num_gpus=st.sampled_from([1, 8]))
def test_a_step_is_the_longer_of_its_gpu_time_and_its_loader_time(rate: float, num_gpus: int) -> None:
    free, fed = _step(0.0, num_gpus), _step(rate, num_gpus)
    loader_s = 64 / rate  # each rank's 64 images at the rate; DDP ranks load in parallel
    assert fed.step_time_s == pytest.approx(max(free.step_time_s, loader_s), rel=1e-9)
    assert fed.metrics()["samples_per_s_per_gpu"] <= rate * (1 + 1e-9)
    wait_s = fed.phase_time_s["input_wait"]
    assert wait_s == pytest.approx(max(0.0, loader_s - free.step_time_s), rel=1e-9, abs=1e-15)
    # the GPU idles while it waits: the kernels' energy is unchanged, the wait adds idle energy only
    extra_j = fed.energy_per_step_j / num_gpus - free.energy_per_step_j / num_gpus
    assert extra_j == pytest.approx(fed.phase_energy_j["input_wait"], rel=1e-9, abs=1e-12)
    assert fed.avg_power_w <= free.avg_power_w * (1 + 1e-9)


def test_a_loader_below_the_gpu_rate_sets_the_throughput() -> None:
    """EfficientNet-B0 AMP on one A100: the GPU step is faster than 1,000 img/s, so a 1,000 img/s loader
    gives 1,000 img/s."""
    assert _step(0.0).metrics()["samples_per_s"] > 1000.0
    assert _step(1000.0).metrics()["samples_per_s"] == pytest.approx(1000.0, rel=1e-9)


@pytest.mark.parametrize("rate", [-1.0, float("nan"), float("inf"), True, "fast", 1e-308, 9e-4])
def test_a_rate_that_is_not_a_finite_number_at_least_zero_is_refused(rate: object) -> None:
    with pytest.raises(ConfigError, match="loader_samples_per_s"):
        _step(rate)  # type: ignore[arg-type]


def test_dle_ranks_get_the_one_gpu_rate_or_their_share_of_the_node() -> None:
    one, node = 2489.0, 8 * 2081.5  # the DGX A100 constants' sources: the EfficientNet-B0 AMP rows
    assert dle_loader_samples_per_s("a100-sxm-80gb", 1) == one
    assert dle_loader_samples_per_s("a100-sxm-80gb", 8) == pytest.approx(node / 8)
    assert dle_loader_samples_per_s("a100-sxm-80gb", 16) == pytest.approx(node / 8)  # two nodes, each its own
    assert dle_loader_samples_per_s("v100-sxm2-32gb", 1) == dle_loader_samples_per_s("v100-sxm2-16gb", 1)
    assert dle_loader_samples_per_s("h100-sxm", 1) == 0.0


def test_cli_takes_the_rate_and_names_a_bad_one() -> None:
    runner = CliRunner()
    args = ["predict", "--model", "efficientnet-b0", "--gpu", "a100-sxm-80gb", "--training", "--micro-batch"]
    args += ["64", "--precision", "fp16", "--optimizer", "sgd", "--json"]
    result = runner.invoke(app, [*args, "--loader-samples-per-s", "500"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    assert out["loader_samples_per_s"] == 500.0 and out["samples_per_s"] == pytest.approx(500.0)
    bad = runner.invoke(app, [*args, "--loader-samples-per-s", "-5"])
    assert bad.exit_code == 2 and "loader_samples_per_s" in bad.output and "Traceback" not in bad.output


def test_a_study_searches_the_rate_and_names_a_bad_one() -> None:
    cfg = study_from_dict(
        {
            "name": "loader", "model": "efficientnet-b0", "gpu": "a100-sxm-80gb",
            "workload": {"mode": "training", "micro_batch": 64, "precision": "fp16", "optimizer": "sgd"},
            "space": {"loader_samples_per_s": {"values": [0.0, 500.0]}},
            "objectives": {"step_time_s": "minimize"},
            "search": {"sampler": "grid", "n_points": 2, "executor": "serial"},
        }
    )  # fmt: skip
    fed = evaluate_point({"loader_samples_per_s": 500.0}, cfg.eval_context())
    assert fed["step_time_s"] == pytest.approx(64 / 500.0)
    assert evaluate_point({"loader_samples_per_s": 0.0}, cfg.eval_context())["step_time_s"] < 64 / 500.0
    with pytest.raises(ConfigError, match="loader_samples_per_s"):
        evaluate_point({"loader_samples_per_s": -1.0}, cfg.eval_context())


def test_the_slowest_loader_allowed_gives_a_finite_step() -> None:
    """1e-3 samples/s per rank: 64 samples take 64,000 s, a number the outputs can show (1e-308 gave inf)."""
    rate = _step(1e-3).metrics()["samples_per_s"]
    assert math.isfinite(rate) and rate == pytest.approx(1e-3, rel=1e-6)
