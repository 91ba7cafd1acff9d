"""`bound_by` under load: representative decode and prefill steps, communication on several GPUs."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from dse.cli import app
from dse.hardware.catalog import load_gpu
from dse.perf.bounds import BOUND_LABELS
from dse.serving.load import LoadRequest, predict_load
from dse.serving.load_bounds import with_bounds
from dse.workload.models import load_model_config

H100 = load_gpu("h100-sxm")


def _bounds(model: str, **kw: object) -> dict:
    arch = load_model_config(model)
    request = LoadRequest(mode="concurrency", input_tokens=512, output_tokens=64, num_requests=32, **kw)  # type: ignore[arg-type]
    est = predict_load(arch, H100, request)
    assert est.bound_by == {}  # a search point does not pay for it
    return with_bounds(est, arch, H100).bound_by


def test_small_batch_decode_streams_weights_and_long_prompts_compute() -> None:
    bound = _bounds("llama-3.1-8b", concurrency=4)
    assert bound["decode"]["bound_by"] == "dram"
    assert bound["prefill"]["bound_by"] in ("tensor", "power_cap")  # a 512-token prompt is compute-bound
    for phase in bound.values():
        assert set(phase["shares"]) <= set(BOUND_LABELS)
        assert sum(phase["shares"].values()) == pytest.approx(1.0)


def test_tensor_parallel_decode_counts_communication() -> None:
    bound = _bounds("llama-3.1-70b", concurrency=32, tp=4)
    assert 0.0 < bound["decode"]["shares"]["communication"] < 1.0
    assert "communication" not in _bounds("llama-3.1-8b", concurrency=4)["decode"]["shares"]


def test_cli_reports_bounds_under_load() -> None:
    args = ["--model", "llama-3.1-8b", "--concurrency", "4", "--input-tokens", "256", "--output-tokens", "32"]
    out = json.loads(CliRunner().invoke(app, ["predict", *args, "--num-requests", "16", "--json"]).stdout)
    assert out["bound_by"]["decode"]["bound_by"] == "dram"
    text = CliRunner().invoke(app, ["whatif", "h100-sxm", "--set", "gpu.sm.tensor_factor=2", *args])
    assert text.exit_code == 0 and text.output.count("bound by decode: dram") == 2


def test_decode_breakdown_prices_the_step_as_the_load_model_does() -> None:
    """The representative decode step (bounds and the report's energy breakdown) runs the kernel model with
    the corrections the load simulation's steps use (the shipped set): its energy equals the load model's
    own step predictor's (`dse.serving.steps.predict_step`) for the same step. Before, it ran the
    uncorrected analytical model, and Llama-3.1-8B's decode at 64 sequences read as power-capped under load
    while the same step of a static batch was DRAM-bound. At 64 sequences each step streams all 16 GB of
    weights for ~1 TFLOP of work, far under an H100's ~295 FLOP/byte ridge: DRAM-bound."""
    from dse.serving.load_bounds import decode_step_breakdown
    from dse.serving.steps import predict_step

    arch = load_model_config("llama-3.1-8b")
    request = LoadRequest(
        mode="concurrency", concurrency=64, input_tokens=1024, output_tokens=256, num_requests=128,
        sampling="greedy",
    )  # fmt: skip
    est = predict_load(arch, H100, request)
    decodes = round(float(est.values["avg_batch_size"]))  # type: ignore[arg-type]
    per_token_j = sum(decode_step_breakdown(est, arch, H100)["by_module"].values())
    key = ("llama-3.1-8b", "h100-sxm", "bf16", "vllm", "greedy", "bf16", 0, 1024 + 128, decodes, 0)
    assert per_token_j * decodes == pytest.approx(predict_step(key, None, None, None)[1], rel=1e-9)
    assert with_bounds(est, arch, H100).bound_by["decode"]["bound_by"] == "dram"


@pytest.mark.parametrize("rate", [1e-307, 5e-324, 1e-7, 2e9])
def test_request_rates_no_server_sees_are_refused(rate: float) -> None:
    """Arrivals months apart span more seconds than the run's float sums keep apart: 1e-307 requests/s
    printed NaN power (and `--json` an internal error); now one error with the range (a fuzzer's finding)."""
    from dse.errors import ConfigError

    with pytest.raises(ConfigError, match=r"request_rate_per_s must be a number in \[1e-06, 1e9\]"):
        LoadRequest(mode="request_rate", request_rate_per_s=rate, input_tokens=100, output_tokens=100)
    args = ["predict", "--model", "llama-3.1-8b", "--input-tokens", "100", "--output-tokens", "100"]
    result = CliRunner().invoke(app, [*args, "--request-rate", str(rate), "--num-requests", "10"])
    assert result.exit_code == 2 and "1e-06" in result.stderr and "nan" not in result.stdout
