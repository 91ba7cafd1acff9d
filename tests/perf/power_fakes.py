"""A tiny roofline kernel model for testing the power model without the real kernel model.

Each op runs at the slowest of its Tensor-Core (or CUDA-core) time, its DRAM time and its L2 time at the
requested clock, plus a 2 us fixed cost. Utilizations are those busy times over the latency, so the
output has the same shape and meaning as the real estimators' `KernelEstimate`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from dse.hardware.spec import GpuSpec
from dse.perf.rates import effective_sm_clock_hz, tensor_flop_per_clk
from dse.perf.types import KernelEstimate, OperatingPoint
from dse.workload.ops import GemmOp, op_kind

FIXED_S = 2e-6


def roofline_estimator(
    ops: Sequence[Any], gpu: GpuSpec, point: OperatingPoint, coeffs: Any = None
) -> list[KernelEstimate]:
    f = effective_sm_clock_hz(gpu, point)
    out = []
    for op in ops:
        flop = op.flop
        dram = op.min_dram_bytes
        if isinstance(op, GemmOp) and op.dtype != "fp32":
            t_math = flop / (tensor_flop_per_clk(gpu, op.dtype) * gpu.num_sms * f)
            unit = "tensor"
        else:
            t_math = flop / (gpu.sm.fp32_flop_per_clk * gpu.num_sms * f)
            unit = "cuda"
        t_dram = dram / gpu.memory.bw_bytes_per_s
        l2 = 2.0 * dram
        t_l2 = l2 / (gpu.l2.l2_bytes_per_clk * f)
        smem = 2.0 * dram
        t_smem = smem / (gpu.sm.smem_bytes_per_clk * gpu.num_sms * f)
        lat = max(t_math, t_dram, t_l2, t_smem) + FIXED_S
        util = {
            "dram": t_dram / lat,
            "l2": t_l2 / lat,
            "smem": t_smem / lat,
            "tensor": 0.0,
            "cuda": 0.0,
            "sfu": 0.0,
        }
        util[unit] = t_math / lat
        out.append(
            KernelEstimate(
                name=op.name,
                kind=op_kind(op),
                count=op.count,
                latency_s=lat,
                sm_clock_hz=f,
                flop=flop,
                dram_bytes=dram,
                l2_bytes=l2,
                smem_bytes=smem,
                util=util,
            )
        )
    return out
