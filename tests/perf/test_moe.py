"""Weight-only GEMMs (`GemmOp.b_dtype`) and the fused-MoE grouped-GEMM correction (`dse.perf.moe`)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from dse.hardware.catalog import load_gpu
from dse.perf import gemm, gemm_steps
from dse.perf.coeffs import MoeCoeffs, MoeKernelFit, default_moe_coeffs
from dse.perf.moe import math_dtype
from dse.perf.pipeline import MODULE_INDEX
from dse.perf.predict import predict_graph
from dse.perf.types import OperatingPoint
from dse.workload.graph import WorkloadGraph
from dse.workload.moe import routed_expert_ops
from dse.workload.ops import GemmOp


def _expert(**kw) -> GemmOp:
    base = dict(name="e", m=512, n=3072, k=4096, batch=128, b_shared=False, dtype="bf16", grouped=True)
    return GemmOp(**(base | kw))


def test_weight_only_reads_narrow_weights_at_the_activation_rate_on_hopper(h100):
    assert math_dtype(h100, "bf16", "fp4") == "bf16"  # no fp4 Tensor Cores on Hopper
    small = dict(m=1, batch=32)  # weight streaming: time follows the weight bytes
    w4 = gemm.estimate(_expert(b_dtype="fp4", **small), h100, OperatingPoint())
    w16 = gemm.estimate(_expert(**small), h100, OperatingPoint())
    assert w4.dram_bytes < 0.3 * w16.dram_bytes and w4.latency_s < 0.5 * w16.latency_s
    assert w4.group.startswith("gemm/f16/")  # the bf16 GEMM's corrections
    big = dict(m=4096, batch=8)  # compute-bound: the bf16 rate, not fp4's or fp8's
    w4_big = gemm.estimate(_expert(b_dtype="fp4", **big), h100, OperatingPoint())
    fp4_big = gemm.estimate(_expert(dtype="fp4", **big), h100, OperatingPoint())
    assert w4_big.latency_s > 1.5 * fp4_big.latency_s


def _mainloop_cuda_flop(op: GemmOp, gpu, clock_hz: float) -> float:
    """CUDA-core work (FLOP) in the mainloop of `op`'s uncorrected timeline at `clock_hz`."""
    out = gemm.gemm_arrays(
        m=np.array([op.m], dtype=float), n=np.array([op.n], dtype=float), k=np.array([op.k], dtype=float),
        batch=np.array([op.batch], dtype=float), dtype=[op.dtype], out_dtype=[op.dtype],
        b_shared=np.array([op.b_shared]), gpu=gpu, sm_clock_hz=np.array([clock_hz]), b_dtype=[op.b_dtype],
    )  # fmt: skip
    fp32_flop_per_s = gpu.sm.fp32_flop_per_clk * clock_hz * gpu.num_sms
    return float(out["timeline"].busy[1, MODULE_INDEX["cuda"]][0] * fp32_flop_per_s)


def test_weight_only_b_tiles_are_dequantized_on_the_cuda_cores_on_hopper(h100):
    f = 1.5e9
    # One row block per expert: every B element of every expert is dequantized exactly once (3072 and
    # 4096 divide every tile and K step, so there is no padding).
    decode = _expert(m=1, batch=32, b_dtype="fp4")
    per_weight = gemm_steps.DEQUANT_SM_CYCLES_PER_WEIGHT * h100.sm.fp32_flop_per_clk
    assert per_weight == pytest.approx(
        7.0
    )  # 1.5 INT32 ops at 64 lanes + 0.5 HMUL2 at 128, in fp32 FLOP slots
    expected = per_weight * decode.batch * decode.n * decode.k
    assert _mainloop_cuda_flop(decode, h100, f) == pytest.approx(expected, rel=1e-9)
    assert _mainloop_cuda_flop(_expert(m=1, batch=32), h100, f) == 0.0  # bf16 weights: no dequantization
    # a long-K, few-column GEMM runs stream-K (K split across threadblocks): still each weight once
    long_k = GemmOp(name="w", m=1, n=256, k=32768, batch=1, b_shared=False, dtype="bf16", b_dtype="fp4")
    assert _mainloop_cuda_flop(long_k, h100, f) == pytest.approx(per_weight * 256 * 32768, rel=1e-9)
    # Each row block of a threadblock dequantizes its own copy of the B tile: 4096 rows need >= 16 blocks
    prefill = _expert(m=4096, batch=8, b_dtype="fp4")
    once = per_weight * prefill.batch * prefill.n * prefill.k
    assert _mainloop_cuda_flop(prefill, h100, f) >= 16 * once


def test_dequantization_costs_cuda_core_energy_on_hopper_only(h100):
    def cuda_j(op: GemmOp, gpu) -> float:
        graph = WorkloadGraph(name="experts", ops=(op,))
        return predict_graph(graph, gpu, OperatingPoint()).energy_j_by_module()["cuda"]

    w4, w16 = _expert(m=1, batch=32, b_dtype="fp4"), _expert(m=1, batch=32)
    # otherwise the CUDA cores only convert the output tile in the epilogue
    assert cuda_j(w4, h100) > 10.0 * cuda_j(w16, h100)
    assert cuda_j(w4, h100) > 10.0 * cuda_j(w4, load_gpu("b200"))  # native fp4 MMAs: nothing to dequantize
    # the A100 has half Hopper's FP32 issue slots per SM clock: the same cycles are half the FLOP
    a100 = load_gpu("a100-sxm-80gb")
    assert _mainloop_cuda_flop(w4, a100, 1.2e9) == pytest.approx(0.5 * _mainloop_cuda_flop(w4, h100, 1.2e9))


def test_fp4_is_native_on_blackwell():
    b200 = load_gpu("b200")
    assert math_dtype(b200, "bf16", "fp4") == "fp4"
    op = _expert(m=4096, batch=8, out_dtype="bf16")
    w4 = gemm.estimate(replace(op, b_dtype="fp4"), b200, OperatingPoint())
    fp4 = gemm.estimate(replace(op, dtype="fp4"), b200, OperatingPoint())
    assert w4.latency_s == pytest.approx(fp4.latency_s, rel=1e-9)


def test_grouped_correction_slows_compute_bound_experts_only(h100, hopper_coeffs):
    moe = MoeCoeffs(architecture="hopper", groups={"f16": MoeKernelFit(math_eff=0.5, expert_s=1e-6)})
    with_moe = replace(hopper_coeffs, moe=moe)
    big = _expert(m=2048, batch=16)
    dense = gemm.estimate(big, h100, OperatingPoint(), replace(hopper_coeffs, moe=None))
    slow = gemm.estimate(big, h100, OperatingPoint(), with_moe)
    assert slow.latency_s > 1.5 * dense.latency_s
    ungrouped = replace(big, grouped=False)
    assert gemm.estimate(ungrouped, h100, OperatingPoint(), with_moe).latency_s == pytest.approx(
        dense.latency_s
    )
    small = _expert(m=1, batch=8)  # weight reads: only the per-expert cost is added
    d_small = gemm.estimate(small, h100, OperatingPoint(), replace(hopper_coeffs, moe=None))
    s_small = gemm.estimate(small, h100, OperatingPoint(), with_moe)
    # the grouped kernel chooses its tile at its own math rate (a smaller one than the dense GEMM may pick
    # for one row per expert), with the same weight-read time: within 1%
    assert s_small.latency_s == pytest.approx(d_small.latency_s + 8 * 1e-6, rel=1e-2)
    assert min(s_small.util.values()) >= 0.0 and max(s_small.util.values()) <= 1.0


def test_shipped_hopper_set_carries_the_moe_fit(hopper_coeffs):
    moe = default_moe_coeffs("hopper")
    assert moe is not None and {"f16", "f8", "f16_wo"} <= set(moe.groups)
    assert all(0.3 < f.math_eff <= 1.0 for f in moe.groups.values())
    assert moe.provenance["sha256"] and hopper_coeffs.moe == moe
    assert default_moe_coeffs("blackwell") == moe  # borrowed (ARCH_FALLBACK)


def test_routed_expert_ops_shard_like_expert_parallelism():
    kw = dict(hidden_size=4096, expert_width=1536, num_experts=128, k=8, tokens=1024)
    one = routed_expert_ops("m", expert_dtype="bf16", act_dtype="bf16", **kw)
    ep4 = routed_expert_ops("m", expert_dtype="bf16", act_dtype="bf16", ep_size=4, **kw)
    g1 = next(o for o in one if o.name == "m/experts_gate_up")
    g4 = next(o for o in ep4 if o.name == "m/experts_gate_up")
    assert g1.grouped and g4.batch == g1.batch // 4 and g4.m == g1.m
    bal = routed_expert_ops("m", expert_dtype="fp4", act_dtype="bf16", balanced=True, **(kw | {"tokens": 4}))
    g = next(o for o in bal if o.name == "m/experts_down")
    assert (g.batch, g.m, g.dtype, g.b_dtype) == (32, 1, "bf16", "fp4")
