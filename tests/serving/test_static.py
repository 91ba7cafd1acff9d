"""LLM serving predictions: metric definitions, the vectorized decode, breakdowns and capacity."""

from __future__ import annotations

import dataclasses
import json

import pytest
from typer.testing import CliRunner

from dse.cli import app
from dse.errors import ConfigError
from dse.hardware.catalog import load_gpu
from dse.perf.coeffs import load_default_coeffs
from dse.perf.predict import predict_graphs
from dse.perf.types import OperatingPoint
from dse.serving.static import ServingRequest, predict_serving, rollup_by_level
from dse.workload.llm import build_decode_graph, build_prefill_graph
from dse.workload.models import load_model_config

runner = CliRunner()


@pytest.fixture(scope="module")
def llama8b():
    return load_model_config("llama-3.1-8b")


@pytest.fixture(scope="module")
def h100():
    return load_gpu("h100-sxm")


def test_metric_definitions(llama8b, h100) -> None:
    req = ServingRequest(batch=8, input_tokens=512, output_tokens=64)
    est = predict_serving(llama8b, h100, req)
    assert est.feasible
    assert est.e2e_latency_s == pytest.approx(est.ttft_s + est.tpot_s * (req.output_tokens - 1), rel=1e-12)
    assert est.output_tokens_per_s == pytest.approx(8 * 64 / est.e2e_latency_s)
    assert est.energy_per_output_token_j == pytest.approx(est.energy_j / (8 * 64))
    assert est.energy_per_request_j == pytest.approx(est.energy_j / 8)
    assert est.avg_power_w == pytest.approx(est.energy_j / est.e2e_latency_s)
    assert est.energy_j == pytest.approx(est.prefill_energy_j + est.decode_energy_j)
    # the cap holds each phase's mean; a kernel's own power may exceed it for its milliseconds
    assert est.avg_power_w <= min(est.peak_power_w, h100.power.tdp_w * (1 + 1e-9))


def test_vectorized_decode_equals_step_by_step(llama8b, h100) -> None:
    """The shortcut (fixed ops x steps + all attention at once) against predicting every step's graph, the
    prefill one pass under the cap and the decode steps together another."""
    req = ServingRequest(batch=4, input_tokens=300, output_tokens=6)
    est = predict_serving(llama8b, h100, req)
    coeffs = load_default_coeffs(h100)  # what predict_serving uses by default
    graphs = [build_prefill_graph(llama8b, batch=4, seq_len=300)] + [
        build_decode_graph(llama8b, batch=4, context_len=300 + j) for j in range(req.output_tokens - 1)
    ]
    n = len(graphs)
    prefill, *steps = predict_graphs(
        graphs, h100, OperatingPoint(), coeffs, passes=[[0], list(range(1, n))], runs=[1.0] * n
    )
    assert est.ttft_s == pytest.approx(prefill.latency_s, rel=1e-12)
    assert est.decode_energy_j == pytest.approx(sum(s.energy_j for s in steps), rel=1e-9)
    assert est.tpot_s == pytest.approx(sum(s.latency_s for s in steps) / len(steps), rel=1e-9)


def test_breakdowns_sum_to_total(llama8b, h100) -> None:
    est = predict_serving(llama8b, h100, ServingRequest(batch=16, input_tokens=256, output_tokens=32))
    assert sum(est.energy_j_by_module.values()) == pytest.approx(est.energy_j, rel=1e-9)
    assert sum(est.energy_j_by_name.values()) == pytest.approx(est.energy_j, rel=1e-9)
    phases = rollup_by_level(est.energy_j_by_name, 1)
    assert set(phases) == {"prefill", "decode"}
    assert phases["prefill"] == pytest.approx(est.prefill_energy_j, rel=1e-9)
    layers = rollup_by_level(est.energy_j_by_name, 3)
    assert any("layer[0-31]" in key for key in layers)
    assert {"idle", "dram", "tensor"} <= set(est.energy_j_by_module)


def test_longer_context_slows_decode(llama8b, h100) -> None:
    short = predict_serving(llama8b, h100, ServingRequest(batch=32, input_tokens=128, output_tokens=64))
    long = predict_serving(llama8b, h100, ServingRequest(batch=32, input_tokens=4096, output_tokens=64))
    assert long.tpot_s > short.tpot_s
    assert long.kv_cache_bytes > short.kv_cache_bytes


def test_weights_beyond_capacity_are_infeasible_with_numbers(h100) -> None:
    # Llama-3.1-70B in bf16 is ~141 GB of weights (70.6 B x 2 bytes) > 80 GB
    est = predict_serving(
        load_model_config("llama-3.1-70b"), h100, ServingRequest(batch=1, input_tokens=128, output_tokens=8)
    )
    assert not est.feasible
    assert "GiB" in est.infeasible_reason and "weights" in est.infeasible_reason
    assert est.weight_bytes == pytest.approx(70.6e9 * 2, rel=0.01)
    assert est.e2e_latency_s > 0 and est.energy_j > 0  # numbers are still reported


def test_kv_cache_beyond_gddr7_capacity(llama8b) -> None:
    gddr7 = load_gpu("h100-sxm", {"memory.technology": "gddr7", "memory.bus_width_bits": 512})
    req = ServingRequest(batch=64, input_tokens=2048, output_tokens=256)
    # 64 x 2304 tokens x 128 KiB = 18 GiB of KV cache + 16 GB of weights > 0.9 x 32 GiB
    assert not predict_serving(llama8b, gddr7, req).feasible
    assert predict_serving(llama8b, load_gpu("h100-sxm"), req).feasible


def test_fp8_needs_less_memory_and_time(llama8b, h100) -> None:
    req = dict(batch=32, input_tokens=1024, output_tokens=64)
    bf16 = predict_serving(llama8b, h100, ServingRequest(**req, precision="bf16"))
    fp8 = predict_serving(llama8b, h100, ServingRequest(**req, precision="fp8"))
    assert fp8.weight_bytes < bf16.weight_bytes
    assert fp8.tpot_s < bf16.tpot_s


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        (dict(batch=0, input_tokens=10, output_tokens=10), "batch"),
        (dict(batch=1, input_tokens=10, output_tokens=0), "output_tokens"),
    ],
)
def test_bad_requests(kwargs, needle) -> None:
    with pytest.raises(ConfigError, match=needle):
        ServingRequest(**kwargs)


def test_context_and_encoder_errors(llama8b, h100) -> None:
    with pytest.raises(ConfigError, match="context"):
        predict_serving(llama8b, h100, ServingRequest(batch=1, input_tokens=131000, output_tokens=2000))
    with pytest.raises(ConfigError, match="encoder"):
        predict_serving(
            load_model_config("bert-large"), h100, ServingRequest(batch=1, input_tokens=8, output_tokens=2)
        )


def test_request_is_frozen() -> None:
    req = ServingRequest(batch=1, input_tokens=1, output_tokens=1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        req.batch = 2  # type: ignore[misc]


def test_cli_predict_serving_json() -> None:
    result = runner.invoke(
        app,
        [
            "predict",
            "--model",
            "llama-3.1-8b",
            "--gpu",
            "h100-sxm",
            "--batch",
            "32",
            "--input-tokens",
            "1024",
            "--output-tokens",
            "256",
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    for key in (
        "ttft_s",
        "tpot_s",
        "e2e_latency_s",
        "output_tokens_per_s",
        "energy_j",
        "energy_per_output_token_j",
        "avg_power_w",
        "peak_power_w",
        "memory_bytes",
        "feasible",
    ):
        assert key in data
    assert data["feasible"] is True


def test_cli_infeasible_exits_zero() -> None:
    result = runner.invoke(
        app,
        [
            "predict",
            "--model",
            "llama-3.1-70b",
            "--gpu",
            "l4",
            "--batch",
            "1",
            "--input-tokens",
            "128",
            "--output-tokens",
            "4",
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["feasible"] is False


def test_cli_breakdown_table() -> None:
    result = runner.invoke(
        app,
        [
            "predict",
            "--model",
            "llama-3.1-8b",
            "--batch",
            "4",
            "--input-tokens",
            "128",
            "--output-tokens",
            "16",
            "--breakdown",
        ],
    )
    assert result.exit_code == 0, result.output
    assert "energy by hardware module" in result.stdout and "energy by operator" in result.stdout


def test_cli_whatif_gddr7() -> None:
    result = runner.invoke(
        app,
        [
            "whatif",
            "h100-sxm",
            "--memory",
            "gddr7",
            "--bus-width-bits",
            "512",
            "--data-rate-gbps",
            "32",
            "--model",
            "llama-3.1-8b",
            "--batch",
            "8",
            "--input-tokens",
            "512",
            "--output-tokens",
            "32",
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["changed"]["memory_bw_bytes_per_s"] == pytest.approx(2.048e12)
    # decode is bandwidth-bound: 2.05 instead of 3.35 TB/s makes every token slower
    assert data["changed"]["tpot_s"] > data["baseline"]["tpot_s"]


def test_cli_whatif_needs_a_change() -> None:
    result = runner.invoke(app, ["whatif", "h100-sxm"])
    assert result.exit_code == 2
    assert "--memory" in result.output


def test_fp8_kv_cache_halves_cache_memory_and_speeds_long_decode(llama8b, h100) -> None:
    base = ServingRequest(batch=64, input_tokens=4096, output_tokens=64)
    fp8kv = dataclasses.replace(base, kv_dtype="fp8")
    a, b = predict_serving(llama8b, h100, base), predict_serving(llama8b, h100, fp8kv)
    assert b.kv_cache_bytes == pytest.approx(a.kv_cache_bytes / 2)
    assert b.weight_bytes == a.weight_bytes
    # decode at 64 x 4k context streams ~35 GB of bf16 cache per step against 16 GB of weights: an fp8
    # cache cuts the step by well over a tenth; the prefill attends in bf16 and barely changes
    assert b.tpot_s < 0.9 * a.tpot_s
    assert b.ttft_s == pytest.approx(a.ttft_s, rel=0.02)
    assert b.to_dict()["kv_dtype"] == "fp8"
    with pytest.raises(ConfigError, match="kv_dtype 'int4' is not one of"):
        ServingRequest(batch=1, input_tokens=8, output_tokens=8, kv_dtype="int4")


def test_engine_and_sampler_shape_the_steps(llama8b, h100) -> None:
    base = ServingRequest(batch=16, input_tokens=512, output_tokens=32)
    vllm = dataclasses.replace(base, engine="vllm")
    a, b = predict_serving(llama8b, h100, base), predict_serving(llama8b, h100, vllm)
    # fused add+norm and q/k-norm+rope: fewer launch-bound kernels per decode step
    assert b.tpot_s < a.tpot_s
    assert not any("residual_add" in name for name in b.energy_j_by_name)
    # The sampler runs after every LM head: at the default clock the decode steps (under the cap) take longer
    # and the run spends more energy; the prefill, whose mean is held at the cap, is compared at a clock where
    # the cap does not bind (under it a cool kernel added to the pass may lift its clock one 15 MHz grid step,
    # which outweighs a short kernel's time).
    sampled = predict_serving(llama8b, h100, dataclasses.replace(vllm, sampling="top_k_top_p"))
    assert sampled.tpot_s > b.tpot_s and sampled.energy_j > b.energy_j
    cool = OperatingPoint(sm_clock_hz=1.2e9)
    b = predict_serving(llama8b, h100, vllm, cool)
    sampled = predict_serving(llama8b, h100, dataclasses.replace(vllm, sampling="top_k_top_p"), cool)
    assert sampled.tpot_s > b.tpot_s and sampled.ttft_s > b.ttft_s
    assert any("/sampler/" in name for name in sampled.energy_j_by_name)
    assert sum(sampled.energy_j_by_module.values()) == pytest.approx(sampled.energy_j, rel=1e-9)
    with pytest.raises(ConfigError, match="engine 'tgi' is not one of"):
        ServingRequest(batch=1, input_tokens=8, output_tokens=8, engine="tgi")
    with pytest.raises(ConfigError, match="sampling 'beam' is not one of"):
        ServingRequest(batch=1, input_tokens=8, output_tokens=8, sampling="beam")


def test_sliding_window_caps_decode_attention():
    """Mistral-7B-v0.1 attends to the last 4096 keys: once the context passes the window, a decode step
    costs the same however long the prompt; a full-attention model keeps slowing down."""
    from dse.workload.llm import build_decode_graph
    from dse.workload.ops import AttentionOp

    mistral, llama = load_model_config("mistral-7b"), load_model_config("llama-3.1-8b")
    assert mistral.sliding_window == 4096
    ops = build_decode_graph(mistral, batch=4, context_len=8000).ops
    (attn,) = [op for op in ops if isinstance(op, AttentionOp)]
    assert attn.seq_len_kv == 4096
    gpu = load_gpu("h100-sxm")

    def tpot(arch, prompt):
        request = ServingRequest(batch=8, input_tokens=prompt, output_tokens=16)
        return predict_serving(arch, gpu, request).tpot_s

    assert tpot(mistral, 5000) == pytest.approx(tpot(mistral, 7000), rel=1e-12)
    assert tpot(mistral, 3000) < tpot(mistral, 5000)  # the window is not full yet at 3000
    assert tpot(llama, 5000) < tpot(llama, 7000)


@pytest.mark.parametrize("precision", ["bf16", "fp8", "mxfp4"])
def test_a_volta_gpu_serves_no_bf16_based_precision(precision: str) -> None:
    """V100 has fp16 Tensor Cores only: bf16, and fp8 / MXFP4 weights whose kernels dequantize to bf16, are
    refused as vLLM refuses them (they returned numbers, fp8 faster than fp16); fp16 serves, and an A100
    keeps fp8 (weight-only kernels)."""
    from dse.serving.load import LoadRequest, predict_load

    arch, v100 = load_model_config("llama-3.1-8b"), load_gpu("v100-sxm2")
    static = ServingRequest(batch=8, input_tokens=128, output_tokens=16, precision=precision)
    load = LoadRequest(
        mode="concurrency", concurrency=8, input_tokens=128, output_tokens=16, precision=precision
    )
    with pytest.raises(ConfigError, match="no bf16 tensor cores"):
        predict_serving(arch, v100, static)
    with pytest.raises(ConfigError, match="no bf16 tensor cores"):
        predict_load(arch, v100, load)
    assert predict_serving(arch, v100, dataclasses.replace(static, precision="fp16")).tpot_s > 0
    if precision == "fp8":
        assert predict_serving(arch, load_gpu("a100-sxm-80gb"), static).tpot_s > 0


@pytest.mark.parametrize("field", ["batch", "input_tokens", "output_tokens"])
def test_request_sizes_are_bounded(field: str) -> None:
    """A 23-digit batch was accepted (a 2e30-byte KV cache, 'infeasible', exit 0): past 2^31 - 1 a typo."""
    from dse.serving.static import MAX_REQUEST_INT

    base = {"batch": 1, "input_tokens": 8, "output_tokens": 8}
    with pytest.raises(ConfigError, match=f"{field} must be an integer in"):
        ServingRequest(**{**base, field: MAX_REQUEST_INT + 1})
