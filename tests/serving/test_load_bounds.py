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
