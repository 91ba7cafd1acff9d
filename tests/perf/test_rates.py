"""Which Tensor Cores run a dtype on a GPU (`dse.perf.rates`): the catalog's `sm.tensor_flop_per_clk` and
the fallback to a wider type."""

from __future__ import annotations

import pytest

from dse.hardware.catalog import load_gpu
from dse.perf import gemm
from dse.perf.rates import tensor_dtype_used, tensor_flop_per_clk
from dse.perf.types import OperatingPoint
from dse.workload.ops import GemmOp


def test_tf32_without_tf32_tensor_cores_runs_in_fp32_on_the_cuda_cores() -> None:
    """Session 36: a V100 (Tensor Cores for fp16 only, [V100-WP]) ran TF32 GEMMs on its fp16 Tensor Cores,
    87 TFLOP/s for a 4096^3 GEMM on a card whose FP32 peak is 15.7. TF32 needs compute capability 8.0;
    cuBLAS and cuDNN run an `allow_tf32` matmul in FP32 on Volta's CUDA cores: the same kernel as fp32."""
    v100 = load_gpu("v100-sxm2")
    assert "tf32" not in v100.sm.tensor_flop_per_clk
    assert tensor_flop_per_clk(v100, "tf32") == 0.0 and tensor_dtype_used(v100, "tf32") == "fp32"
    point = OperatingPoint()
    tf32, fp32 = (
        gemm.estimate(GemmOp(name="g", m=4096, n=4096, k=4096, dtype=dtype), v100, point, None)
        for dtype in ("tf32", "fp32")
    )
    assert tf32.latency_s == pytest.approx(fp32.latency_s, rel=1e-12)
    # no faster than the CUDA cores' peak at the clock it runs at
    peak_flop_per_s = v100.fp32_peak_flop_per_s(v100.clocks.boost_clock_hz)
    assert 2 * 4096**3 / tf32.latency_s <= peak_flop_per_s
    # the fallback to a wider Tensor-Core type stays for the narrow types: fp8 on an A100 multiplies in bf16
    a100 = load_gpu("a100-sxm-80gb")
    assert tensor_flop_per_clk(a100, "fp8") == a100.sm.tensor_flop_per_clk["bf16"]
    assert tensor_flop_per_clk(a100, "tf32") == a100.sm.tensor_flop_per_clk["tf32"]
