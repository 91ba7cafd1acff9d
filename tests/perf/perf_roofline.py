"""Independent roofline bounds for the kernel-model tests (hand-derived, not from the model)."""

from __future__ import annotations

from dse.hardware.spec import GpuSpec
from dse.workload.ops import AttentionOp, ElementwiseOp, GemmOp, NormOp, SoftmaxOp

_FALLBACK = {
    "fp8": ("fp8", "bf16"),
    "int8": ("int8", "bf16"),
    "fp4": ("fp4", "fp8", "bf16"),
    "bf16": ("bf16", "fp16"),
    "fp16": ("fp16", "bf16"),
    "tf32": ("tf32", "bf16"),
}


def math_peak_flop_per_s(gpu: GpuSpec, dtype: str, clock_hz: float) -> float:
    """Highest math rate a kernel of `dtype` could use at `clock_hz` (Tensor Cores, else CUDA cores)."""
    if dtype == "fp32":
        return gpu.sm.fp32_flop_per_clk * gpu.num_sms * clock_hz
    for d in _FALLBACK.get(dtype, (dtype,)):
        if d in gpu.sm.tensor_flop_per_clk:
            return gpu.sm.tensor_flop_per_clk[d] * gpu.num_sms * clock_hz
    return gpu.sm.fp32_flop_per_clk * gpu.num_sms * clock_hz


def roofline_s(op, gpu: GpuSpec, clock_hz: float) -> float:
    """max(FLOP / peak math rate, compulsory DRAM bytes / DRAM bandwidth) of one execution."""
    memory_s = op.min_dram_bytes / gpu.memory.bw_bytes_per_s
    if isinstance(op, GemmOp):
        return max(op.flop / math_peak_flop_per_s(gpu, op.dtype, clock_hz), memory_s)
    if isinstance(op, AttentionOp):
        fastest = "fp8" if op.backend == "decode" and op.cache_dtype == "fp8" else op.dtype
        return max(op.flop / math_peak_flop_per_s(gpu, fastest, clock_hz), memory_s)
    if isinstance(op, SoftmaxOp | NormOp | ElementwiseOp):
        return max(op.flop / (gpu.sm.fp32_flop_per_clk * gpu.num_sms * clock_hz), memory_s)
    raise TypeError(type(op))
