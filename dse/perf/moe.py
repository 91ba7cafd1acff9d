"""Fused-MoE grouped GEMMs: the dense GEMM model with a fitted kernel efficiency and a per-expert cost;
and the MMA dtype of weight-only GEMMs (`math_dtype`), which the MXFP4 experts need.

vLLM's fused-MoE path runs each expert GEMM of a layer in one grouped kernel (`GemmOp.grouped`): the
Triton `fused_moe` kernel (bf16, fp8), FlashInfer's CUTLASS grouped GEMM (fp8 block scales) or, for
MXFP4 on Hopper, gpt-oss's Triton `matmul_ogs` and Marlin's MoE kernel. They are not the tuned dense
GEMMs of `dse.perf.gemm`: the rows of an expert are gathered through sorted token ids (no TMA tile of A),
the grid is one threadblock per (expert, row block, column block) with no persistent scheduling or
stream-K, and the row blocks of every expert are padded to the block size. The aiconfigurator fused-MoE
tables show the effect: 680 TFLOP/s at best for bf16 on H100 (989 dense peak), and per-layer latencies
1.2-2x the dense model's at 8k tokens.

The correction keeps the dense model's tiles, traffic and fitted phase coefficients and adds two
physical parameters per kernel class (`MoeKernelFit`), keyed by the MMA dtype class (`f16`, `f8`) with
`_wo` for weight-only kernels (`f16_wo`: MXFP4 weights dequantized to bf16 in the mainloop on Hopper; the
dense model counts that dequantization as CUDA-core work,
`dse.perf.gemm_steps.DEQUANT_SM_CYCLES_PER_WEIGHT`, so `math_eff` is what is left: 0.68 with it, 0.61
when the fit had to absorb it, train MAPE 15.0% / 15.6%):

- `math_eff` (0..1]: the grouped kernel's Tensor-Core throughput as a fraction of the dense model's;
  the mainloop's math time is divided by it (memory-bound steps are unchanged);
- `expert_s`: a fixed cost per expert that receives rows (its row-block setup: loading the sorted token
  ids and expert offsets, the first weight tile's latency, and the padded last row block).

    t = lambda_pro t_pro + lambda_main sum_j w_j max(dl load_j, dm math_j / math_eff) + lambda_epi t_epi
        + eps + experts x expert_s

Fitted by `dse.calibrate.fit.moe` on aiconfigurator's vLLM fused-MoE layer tables (balanced routing);
stored in `dse/perf/data/moe_<arch>.json` and carried by the `CoeffSet` (`CoeffSet.moe`). Without one
(a bare `CoeffTable`, or the neutral set) grouped GEMMs get the dense model.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from dse.hardware.spec import GpuSpec
from dse.perf.coeffs import MoeCoeffs
from dse.perf.pipeline import MODULE_INDEX, Timeline, correct
from dse.perf.rates import DTYPE_BYTES

# Dtype classes, in the order of `dse.perf.gemm.DTYPE_CLASSES` (kept here to avoid an import cycle).
_DTYPE_CLASSES: tuple[str, ...] = ("f16", "f8", "tf32", "fp32", "f4")


def math_dtype(gpu: GpuSpec, dtype: str, b_dtype: str | None = None) -> str:
    """The dtype a GEMM's MMAs run in: the activations' `dtype`, or a narrower weight dtype `b_dtype`
    when the GPU has Tensor Cores of its own for it (then the whole GEMM runs in it, as a W4A4 / W8A8
    kernel does).

    NOTE(dse): on Hopper (no fp4 Tensor Cores) vLLM runs MXFP4 experts as weight-only W4A16 kernels: the
    Marlin MoE kernel and gpt-oss's Triton `matmul_ogs` load the 4-bit weights with their e8m0 scales,
    dequantize them in registers and multiply in bf16 (vLLM `mxfp4.py` selects these backends below
    compute capability 10.0); Blackwell's fifth-generation Tensor Cores multiply fp4 natively.
    """
    if b_dtype is None or b_dtype == dtype or dtype == "fp32":
        return dtype
    native = b_dtype in gpu.sm.tensor_flop_per_clk
    return b_dtype if native and DTYPE_BYTES[b_dtype] < DTYPE_BYTES[dtype] else dtype


def operand_dtypes(
    gpu: GpuSpec,
    dtype: list[str] | tuple[str, ...],
    b_dtype: list[str | None] | tuple[str | None, ...] | None,
) -> tuple[list[str], list[str]]:
    """Per GEMM row: the MMA dtype (`math_dtype`) and B's storage dtype (`b_dtype`, else `dtype`)."""
    if b_dtype is None:  # B stored as A: `math_dtype` is the row's dtype
        return list(dtype), list(dtype)
    stored = [b or d for b, d in zip(b_dtype, dtype, strict=True)]
    pairs = list(zip(dtype, stored, strict=True))
    math_of = {pair: math_dtype(gpu, *pair) for pair in set(pairs)}  # per distinct pair, then per row
    return [math_of[pair] for pair in pairs], stored


def moe_coeffs_of(coeffs: object | None) -> MoeCoeffs | None:
    """The MoE set a `CoeffSet` carries (None for a bare table, None, or a set without one)."""
    moe = getattr(coeffs, "moe", None)
    return moe if isinstance(moe, MoeCoeffs) else None


def moe_key(dtype_class: str, weight_only: bool) -> str:
    """The `MoeCoeffs` key of a grouped GEMM: its MMA dtype class, `_wo` for weight-only kernels."""
    return f"{dtype_class}_wo" if weight_only else dtype_class


def grouped_factors(
    grouped: np.ndarray, dtype_class: np.ndarray, weight_only: np.ndarray, moe: MoeCoeffs | None
) -> tuple[np.ndarray, np.ndarray]:
    """Per row: the math-time factor (1 / math_eff) and the per-expert cost in seconds (1 and 0 for rows
    that are not grouped or whose key has no fit)."""
    n = grouped.shape[0]
    inv_eff, expert_s = np.ones(n), np.zeros(n)
    if moe is None:
        return inv_eff, expert_s
    for ci, name in enumerate(_DTYPE_CLASSES):
        for wo in (False, True):
            fit = moe.groups.get(moe_key(name, wo))
            sel = grouped & (dtype_class == ci) & (weight_only == wo)
            if fit is not None and sel.any():
                inv_eff[sel] = 1.0 / fit.math_eff
                expert_s[sel] = fit.expert_s
    return inv_eff, expert_s


def scale_math(tl: Timeline, factor: np.ndarray) -> Timeline:
    """`tl` with the mainloop's math steps and the busy time of the module doing the MMAs (Tensor Cores,
    or the CUDA cores of SIMT rows) stretched by `factor`. The CUDA cores' dequantization of weight-only
    rows is not stretched: the grouped kernel's lower MMA throughput does not add dequantization work."""
    busy = tl.busy.copy()
    tensor, cuda = MODULE_INDEX["tensor"], MODULE_INDEX["cuda"]
    simt = busy[1, tensor] <= 0.0
    busy[1, tensor] *= factor
    busy[1, cuda] *= np.where(simt, factor, 1.0)
    return replace(tl, main_math=tl.main_math * factor[None, :], busy=busy)


def correct_grouped(
    tl: Timeline, coeff_rows: np.ndarray, num_experts: np.ndarray, inv_eff: np.ndarray, expert_s: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Latency [N] and utilization [M, N] of GEMM rows with the MoE correction (module docstring): math
    stretched by `inv_eff` and `expert_s` per expert (`grouped_factors`; 1 and 0 on rows not grouped);
    `num_experts` is each row's batch."""
    latency_s, util = correct(scale_math(tl, inv_eff), coeff_rows)
    extra_s = num_experts * expert_s
    total_s = latency_s + extra_s
    return total_s, util * (latency_s / np.maximum(total_s, 1e-30))[None, :]
