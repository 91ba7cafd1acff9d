"""Bottleneck attribution (dse.perf.bounds) on textbook cases."""

from __future__ import annotations

import pytest

from dse.hardware.catalog import load_gpu
from dse.perf.bounds import BOUND_LABELS
from dse.perf.predict import predict_graph
from dse.perf.types import OperatingPoint
from dse.serving.static import ServingRequest, predict_serving
from dse.workload.graph import WorkloadGraph
from dse.workload.llm import build_decode_graph
from dse.workload.models import load_model_config
from dse.workload.ops import GemmOp

H100 = load_gpu("h100-sxm")


def one_gemm(m: int, n: int, k: int) -> WorkloadGraph:
    return WorkloadGraph(name="gemm", ops=(GemmOp(name="gemm", m=m, n=n, k=k, dtype="bf16"),))


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
