"""`multiclock.op_rows` (per-op clocks, one call per family) equals the registry's `estimate_ops`."""

from __future__ import annotations

import numpy as np
import pytest

from dse.hardware.catalog import load_gpu
from dse.perf.multiclock import estimate_arrays, op_rows
from dse.perf.registry import estimate_ops
from dse.perf.types import OperatingPoint
from dse.workload.llm import build_decode_graph, build_prefill_graph
from dse.workload.models import load_model_config
from dse.workload.ops import AttentionOp, ElementwiseOp, GemmOp, NormOp, SoftmaxOp

OPS = [
    GemmOp(name="g", m=4096, n=4096, k=4096),
    GemmOp(name="g8", m=64, n=8192, k=8192, dtype="fp8", out_dtype="bf16", b_shared=True),
    GemmOp(name="g32", m=512, n=768, k=3072, dtype="fp32"),
    GemmOp(name="tf", m=512, n=768, k=3072, dtype="tf32", batch=4),
    AttentionOp(
        name="f", batch=2, num_heads=32, num_kv_heads=8, head_dim=128, seq_len_q=1024, seq_len_kv=1024
    ),
    AttentionOp(
        name="d",
        batch=16,
        num_heads=32,
        num_kv_heads=8,
        head_dim=128,
        seq_len_q=1,
        seq_len_kv=4096,
        backend="decode",
        kv_dtype="fp8",
    ),
    AttentionOp(
        name="e",
        batch=2,
        num_heads=12,
        num_kv_heads=12,
        head_dim=64,
        seq_len_q=512,
        seq_len_kv=512,
        backend="eager",
    ),
    SoftmaxOp(name="s", rows=4096, cols=2048),
    NormOp(name="n", rows=4096, cols=4096, kind="rmsnorm"),
    NormOp(name="l", rows=512, cols=768, kind="layernorm", dtype="fp32"),
    ElementwiseOp(name="a", kind="silu_mul", num_elements=1 << 22),
    ElementwiseOp(name="c", kind="cast", num_elements=1 << 20, out_dtype="fp32"),
]


@pytest.mark.parametrize("gpu_name", ["h100-sxm", "a100-pcie-40gb", "a10"])
def test_op_rows_equal_estimate_ops(gpu_name):
    gpu = load_gpu(gpu_name)
    clocks = np.linspace(gpu.clocks.sm_clock_min_hz, gpu.clocks.sm_clock_max_hz, len(OPS))
    rows = op_rows(OPS, gpu, clocks)
    for i, op in enumerate(OPS):
        ref = estimate_arrays(estimate_ops([op], gpu, OperatingPoint(sm_clock_hz=clocks[i])))
        for key in ("util", "latency_s", "dram_bytes", "sm_clock_hz"):
            np.testing.assert_allclose(rows[key][i], ref[key][0], rtol=1e-12, err_msg=f"{op.name} {key}")


def test_op_rows_equal_estimate_ops_on_llm_graphs_with_shipped_coeffs():
    from dse.perf.coeffs import load_default_coeffs

    gpu = load_gpu("h200-sxm")
    coeffs = load_default_coeffs(gpu)
    arch = load_model_config("llama-3.1-8b")
    for graph in (
        build_decode_graph(arch, batch=8, context_len=1000, precision="bf16", attention="flash"),
        build_prefill_graph(arch, batch=1, seq_len=700, precision="fp8", attention="flash"),
    ):
        ops = list(graph.ops)
        ref = estimate_arrays(estimate_ops(ops, gpu, OperatingPoint(sm_clock_hz=1.4e9), coeffs))
        rows = op_rows(ops, gpu, 1.4e9, coeffs)
        for key in ref:
            np.testing.assert_allclose(rows[key], ref[key], rtol=1e-12)


def test_op_rows_clamps_clocks_like_the_estimators():
    gpu = load_gpu("h100-sxm")
    rows = op_rows(OPS[:1], gpu, 5e9)
    assert rows["sm_clock_hz"][0] == gpu.clocks.sm_clock_max_hz


@pytest.mark.parametrize("gpu_name", ["h100-sxm", "h200-sxm", "a100-pcie-40gb"])
def test_tensor_flop_is_the_useful_mma_work_in_bf16_equivalents(gpu_name):
    """tensor_flop is the op's matmul FLOPs (no padding), an fp8 FLOP counting bf16 rate / fp8 rate, fp32
    GEMMs and non-matmul kernels none; the same at any clock and with or without latency coefficients."""
    from dse.perf.coeffs import load_default_coeffs
    from dse.perf.rates import tensor_flop_per_clk

    gpu = load_gpu(gpu_name)
    hopper = gpu_name != "a100-pcie-40gb"
    ops = [
        GemmOp(name="bf16", m=6144, n=6144, k=6144),
        GemmOp(name="fp8", m=6144, n=6144, k=6144, dtype="fp8", out_dtype="bf16"),
        GemmOp(name="short", m=8, n=4096, k=4096),
        GemmOp(name="fp32", m=512, n=512, k=512, dtype="fp32"),
        AttentionOp(name="prefill", batch=2, num_heads=32, num_kv_heads=8, head_dim=128, seq_len_q=1000,
                    seq_len_kv=1000, backend="flash", causal=True),
        AttentionOp(name="decode8", batch=16, num_heads=32, num_kv_heads=8, head_dim=128, seq_len_q=1,
                    seq_len_kv=4000, backend="decode", kv_dtype="fp8"),
        AttentionOp(name="eager", batch=2, num_heads=12, num_kv_heads=12, head_dim=64, seq_len_q=256,
                    seq_len_kv=256, backend="eager"),
        SoftmaxOp(name="softmax", rows=4096, cols=4096),
    ]  # fmt: skip
    fp8_per_bf16 = tensor_flop_per_clk(gpu, "bf16") / tensor_flop_per_clk(gpu, "fp8")
    assert fp8_per_bf16 == (0.5 if hopper else 1.0)  # hardware-facts 3.2: fp8 at twice bf16 on Hopper
    causal_pairs = 1000 * 1001 / 2
    expected = [
        2 * 6144**3,
        2 * 6144**3 * fp8_per_bf16,
        2 * 8 * 4096 * 4096,
        0.0,
        4 * 2 * 32 * 128 * causal_pairs,
        4 * 16 * 32 * 128 * 4000 * (fp8_per_bf16 if hopper else 1.0),
        2 * (2 * 2 * 12 * 256 * 256 * 64),
        0.0,
    ]
    for f in (0.8e9, 1.3e9):
        for coeffs in (None, load_default_coeffs(gpu)):
            r = op_rows(ops, gpu, f, coeffs)
            np.testing.assert_allclose(r["tensor_flop"], expected, rtol=1e-12)
