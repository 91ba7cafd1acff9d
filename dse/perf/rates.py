"""Module rates of a GPU at an SM clock, as numpy arrays, plus the effective-clock hook.

Everything the kernel model needs from a `GpuSpec` is gathered here once per call, so the estimators work
on plain arrays. Rates inside an SM (Tensor Cores, CUDA cores, SFUs, shared memory) and the L2 scale with
the SM clock; DRAM bandwidth does not.

L2 bandwidth has two limits: the whole L2 (`l2_bw_bytes_per_s`, shared by all SMs) and each SM's port
into it (`l2_bw_per_sm_bytes_per_s`, `L2_PORT_BYTES_PER_CLK` per clock), so a kernel that occupies few
SMs cannot reach the full L2 (or DRAM) bandwidth.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dse.errors import ConfigError
from dse.hardware.spec import GpuSpec
from dse.perf.types import OperatingPoint

# NOTE(perf): a nominal DRAM round-trip latency (load issue to data in shared memory). It is not a
# datasheet number (NVIDIA publishes none); pointer-chasing micro-benchmarks of A100/H100 report about
# 500-700 ns. It enters the pipeline-fill (prologue) time and Little's-law bandwidth limits; the fitted
# lambda_p absorbs its error.
DRAM_LATENCY_S = 600e-9
# NOTE(perf): L2 -> SM fill bandwidth of one SM per clock (the SM's L1 / TMA port); Ampere and Hopper
# SMs fill 64 bytes per clock from L2 in micro-benchmarks. Not a datasheet number.
L2_PORT_BYTES_PER_CLK = 64.0

# Storage bytes per element of the dtypes the kernels read and write.
DTYPE_BYTES: dict[str, float] = {
    "fp32": 4.0,
    "tf32": 4.0,
    "bf16": 2.0,
    "fp16": 2.0,
    "fp8": 1.0,
    "int8": 1.0,
    "fp4": 0.5,
}

# When a GPU lacks Tensor Cores for a dtype, the kernel runs on the next wider type it has (e.g. fp8
# weights on an A100 are up-converted and multiplied in bf16). TF32 has no wider Tensor-Core type: it is
# fp32 data, which a narrower bf16 or fp16 MMA would round, so where the GPU has no TF32 (Volta) it runs
# on the CUDA cores in FP32 (rate 0 here: the SIMT path), as cuBLAS and cuDNN run an `allow_tf32` matmul
# or convolution there (TF32 needs compute capability 8.0).
_TENSOR_FALLBACK: dict[str, tuple[str, ...]] = {
    "fp4": ("fp4", "fp8", "bf16", "fp16", "tf32"),
    "fp8": ("fp8", "bf16", "fp16", "tf32"),
    "int8": ("int8", "bf16", "fp16", "tf32"),
    "bf16": ("bf16", "fp16", "tf32"),
    "fp16": ("fp16", "bf16", "tf32"),
    "tf32": ("tf32",),
}


def effective_sm_clock_hz(gpu: GpuSpec, point: OperatingPoint) -> float:
    """The SM clock the kernels run at.

    The requested clock (or the GPU's default boost clock) clamped to the GPU's range. Power-cap throttling
    is not applied here: `dse.perf.dvfs.capped_rows` re-estimates the kernels whose predicted power exceeds
    `point.power_cap_w` at a lower clock (the fitted corrections were fitted at those capped clocks).
    """
    clock_hz = gpu.clocks.boost_clock_hz if point.sm_clock_hz is None else float(point.sm_clock_hz)
    return float(np.clip(clock_hz, gpu.clocks.sm_clock_min_hz, gpu.clocks.sm_clock_max_hz))


def tensor_flop_per_clk(gpu: GpuSpec, dtype: str) -> float:
    """Dense Tensor-Core FLOP per clock per SM for `dtype`; 0.0 for fp32 (runs on CUDA cores)."""
    if dtype == "fp32":
        return 0.0
    rates = gpu.sm.tensor_flop_per_clk
    for candidate in _TENSOR_FALLBACK.get(dtype, (dtype,)):
        if candidate in rates:
            return float(rates[candidate])
    return 0.0


def check_tensor_dtype(gpu: GpuSpec, dtype: str, remedy: str = "choose another --precision") -> None:
    """ConfigError unless `gpu` has Tensor Cores for `dtype` (or it is fp32, on CUDA cores): a vision
    graph's convolutions and a training step's GEMMs have no weight-only fallback (Volta: fp16 only).
    `remedy` ends the message."""
    rates = gpu.sm.tensor_flop_per_clk
    if dtype not in ("fp32", *rates):
        raise ConfigError(
            f"{gpu.name} has no {dtype} tensor cores (has {', '.join(sorted(rates))}): {remedy}"
        )


def check_serving_precision(gpu: GpuSpec, precision: str, kv_dtype: str | None = None) -> None:
    """ConfigError unless an LLM served at `precision` runs on `gpu`: bf16 needs bf16 Tensor Cores, and so
    do fp8 and MXFP4 checkpoints where the GPU has no such math (their weight-only kernels, Marlin on
    Ampere, dequantize to bf16; compute capability 8.0 and later). A Volta GPU serves fp16 or fp32, as
    vLLM refuses bf16 there, and so keeps no bf16 KV cache either (`kv_dtype`)."""
    if kv_dtype == "bf16" and "bf16" not in gpu.sm.tensor_flop_per_clk:
        raise ConfigError(f"{gpu.name} has no bf16 support: --kv-dtype bf16 cannot run there; use fp16")
    if precision in ("fp16", "fp32", "tf32") or "bf16" in gpu.sm.tensor_flop_per_clk:
        return
    raise ConfigError(
        f"{gpu.name} has no bf16 tensor cores (has {', '.join(sorted(gpu.sm.tensor_flop_per_clk))}): "
        f"--precision {precision} needs them (bf16, or fp8 / MXFP4 weights dequantized to bf16); use fp16"
    )


def tensor_dtype_used(gpu: GpuSpec, dtype: str) -> str:
    """The dtype whose Tensor Cores actually run a `dtype` matmul (see `tensor_flop_per_clk`)."""
    if dtype == "fp32":
        return "fp32"
    for candidate in _TENSOR_FALLBACK.get(dtype, (dtype,)):
        if candidate in gpu.sm.tensor_flop_per_clk:
            return candidate
    return "fp32"


@dataclass(frozen=True, slots=True)
class Rates:
    """Module rates at the clock(s) `sm_clock_hz` (arrays broadcast against the shape arrays)."""

    num_sms: int | np.ndarray  # per row on a call over several GPUs (`dse.perf.gpu_rows.rows_rates`)
    sm_clock_hz: np.ndarray
    dram_bw_bytes_per_s: float | np.ndarray  # the same
    l2_bw_bytes_per_s: np.ndarray
    l2_bw_per_sm_bytes_per_s: np.ndarray
    smem_bw_per_sm_bytes_per_s: np.ndarray
    fp32_flop_per_s_per_sm: np.ndarray
    sfu_op_per_s_per_sm: np.ndarray
    fp32_flop_per_clk: float  # per SM (the CUDA cores' issue slots: 2 x the FP32 lanes)
    l2_bytes: float
    smem_bytes_per_sm: float
    registers_per_sm: int
    max_threads_per_sm: int
    max_threadblocks_per_sm: int
    architecture: str

    def tensor_flop_per_s_per_sm(self, flop_per_clk: np.ndarray) -> np.ndarray:
        return flop_per_clk * self.sm_clock_hz


def rates_at(gpu: GpuSpec, sm_clock_hz: np.ndarray | float) -> Rates:
    """Rates of `gpu` at the given SM clock(s)."""
    f = np.asarray(sm_clock_hz, dtype=float)
    return Rates(
        num_sms=gpu.num_sms,
        sm_clock_hz=f,
        dram_bw_bytes_per_s=gpu.memory.bw_bytes_per_s,
        l2_bw_bytes_per_s=gpu.l2.l2_bytes_per_clk * f,
        l2_bw_per_sm_bytes_per_s=L2_PORT_BYTES_PER_CLK * f,
        smem_bw_per_sm_bytes_per_s=gpu.sm.smem_bytes_per_clk * f,
        fp32_flop_per_s_per_sm=gpu.sm.fp32_flop_per_clk * f,
        sfu_op_per_s_per_sm=gpu.sm.sfu_op_per_clk * f,
        fp32_flop_per_clk=float(gpu.sm.fp32_flop_per_clk),
        l2_bytes=gpu.l2.l2_bytes,
        smem_bytes_per_sm=gpu.sm.smem_bytes,
        registers_per_sm=gpu.sm.registers,
        max_threads_per_sm=gpu.sm.max_threads,
        max_threadblocks_per_sm=gpu.sm.max_threadblocks,
        architecture=gpu.architecture,
    )


def arch_family(gpu: GpuSpec) -> str:
    """Kernel-library generation: `hopper` (TMA + wgmma, FlashAttention-3; also Blackwell) or `ampere`.
    GEMMs tell Blackwell apart (its tcgen05 kernels: `dse.perf.tiles.gemm_library`)."""
    return "hopper" if gpu.architecture.lower() in ("hopper", "blackwell") else "ampere"
