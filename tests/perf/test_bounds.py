"""Bottleneck attribution (dse.perf.bounds) on textbook cases."""

from __future__ import annotations

import numpy as np
import pytest

from dse.hardware.catalog import load_gpu
from dse.hardware.overrides import apply_overrides
from dse.perf.bounds import BOUND_LABELS, kernel_bounds
from dse.perf.predict import predict_graph
from dse.perf.types import MODULES, OperatingPoint
from dse.serving.static import ServingRequest, predict_serving
from dse.workload.graph import WorkloadGraph
from dse.workload.llm import build_decode_graph
from dse.workload.models import load_model_config
from dse.workload.ops import GemmOp

H100 = load_gpu("h100-sxm")


def one_gemm(m: int, n: int, k: int) -> WorkloadGraph:
    return WorkloadGraph(name="gemm", ops=(GemmOp(name="gemm", m=m, n=n, k=k, dtype="bf16"),))


def labels(*utils: dict[str, float]) -> list[str]:
    """`kernel_bounds` of kernels with these utilizations (modules left out: 0), not capped, not waiting."""
    util = np.array([[u.get(m, 0.0) for m in MODULES] for u in utils])
    n = len(utils)
    return kernel_bounds(util, np.ones(n), np.zeros(n), np.full(n, 1e9), 1e9)


def test_a_math_unit_a_kernel_does_not_use_never_bounds_it() -> None:
    # The fp8 quant kernel of a batch-8 decode as the model gives it: a 3.7 us latency floor with DRAM 1%
    # busy and no math unit working; its floor is a DRAM round trip, so its bound is dram (it was tensor:
    # the first of two zero math units, "within 5 points" of 1%).
    quant = {"dram": 0.0096, "l2": 0.0032}
    assert labels(quant) == ["dram"]
    assert "tensor" not in labels({}, {"smem": 0.01}, {"dram": 0.04, "cuda": 0.0})


def test_a_latency_floor_scales_every_utilization_alike_and_keeps_the_label() -> None:
    # A floor stretches a kernel's time, dividing every module's busy fraction by one factor: the module
    # that does the most work is the same. A streaming kernel (DRAM 80% busy, CUDA cores 2%) stays dram,
    # a GEMM with smem and Tensor Cores in lockstep (the module docstring's 100% / 99.5%) stays tensor.
    stream = {"dram": 0.8, "l2": 0.27, "cuda": 0.02}
    gemm = {"dram": 0.3, "l2": 0.6, "smem": 1.0, "tensor": 0.995}
    for scale in (1.0, 0.1, 0.01):
        scaled = [{m: u * scale for m, u in k.items()} for k in (stream, gemm)]
        assert labels(*scaled) == ["dram", "tensor"], scale


def test_a_large_gemm_is_tensor_bound_below_the_cap_and_cap_bound_under_a_low_cap() -> None:
    below = predict_graph(one_gemm(8192, 8192, 8192), H100, OperatingPoint(sm_clock_hz=1.2e9))
    assert below.kernels[0].bound_by == "tensor"
    capped = predict_graph(one_gemm(8192, 8192, 8192), H100, OperatingPoint(power_cap_w=250.0))
    assert capped.kernels[0].bound_by == "power_cap"


def test_batch_one_decode_streams_the_weights_from_dram() -> None:
    graph = build_decode_graph(load_model_config("llama-3.1-8b"), batch=1, context_len=1024)
    pred = predict_graph(graph, H100)
    shares = pred.bound_by_shares()
    assert next(iter(shares)) == "dram" and shares["dram"] > 0.7
    assert sum(shares.values()) == pytest.approx(1.0) and set(shares) <= set(BOUND_LABELS)


def test_fp8_decode_kernels_that_never_touch_the_tensor_cores_are_not_tensor_bound() -> None:
    graph = build_decode_graph(load_model_config("llama-3.1-8b"), batch=8, context_len=1152, precision="fp8")
    kernels = predict_graph(graph, H100).kernels
    no_tensor = [k for k in kernels if k.energy_j_by_module["tensor"] == 0.0]
    names = {k.name.rsplit("/", 1)[-1] for k in no_tensor}
    assert {"qkv_quant", "o_quant", "gate_up_quant", "down_quant", "kv_cache_write"} <= names
    assert [k.name for k in no_tensor if k.bound_by == "tensor"] == []


def test_a_decode_that_more_tensor_throughput_does_not_speed_up_is_not_tensor_bound() -> None:
    # Batch-8 fp8 decode on an H100 with an 8192-bit HBM3e bus: its latency-floor kernels made it
    # "tensor (47%)", yet 4x the Tensor-Core throughput leaves its TPOT within 1%.
    request = ServingRequest(batch=8, input_tokens=1024, output_tokens=256, precision="fp8")
    model = load_model_config("llama-3.1-8b")
    wide = {"memory.technology": "hbm3e", "memory.bus_width_bits": 8192}
    base = predict_serving(model, apply_overrides(H100, wide), request)
    fast_tc = predict_serving(model, apply_overrides(H100, wide | {"sm.tensor_factor": 4}), request)
    assert fast_tc.tpot_s > 0.99 * base.tpot_s
    assert base.bound_by["decode"]["bound_by"] == "dram"


def test_tiny_eager_kernels_wait_for_the_host() -> None:
    graph = build_decode_graph(load_model_config("gpt2"), batch=1, context_len=128)
    eager = predict_graph(graph, H100, launch="eager")  # eager PyTorch: tens of us of host per launch
    assert next(iter(eager.bound_by_shares())) == "host"
    graphs = predict_graph(graph, H100)  # GPU time only: the GPU is the bound
    assert "host" not in graphs.bound_by_shares()


def test_serving_reports_what_bounds_each_phase() -> None:
    request = ServingRequest(batch=1, input_tokens=512, output_tokens=32)
    est = predict_serving(load_model_config("llama-3.1-8b"), H100, request)
    assert set(est.bound_by) == {"prefill", "decode"}
    assert est.bound_by["decode"]["bound_by"] == "dram"
    assert est.to_dict()["bound_by"]["decode"]["shares"]["dram"] > 0.7
