"""Properties of power, cap and energy with the real kernel model (hypothesis over shapes and clocks).

"A fixed kernel" is a fixed kernel configuration: the GEMM model picks its tile per clock, and a tile
switch is a different kernel (cuBLAS's choice does not depend on the clock, the model's analytical
choice can), so the GEMM property is checked between clocks that keep the same tile and split; likewise
flash-decoding picks its split-KV count per clock, which shows as a change of DRAM traffic.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dse.hardware.catalog import load_gpu
from dse.perf import gemm
from dse.perf.coeffs import PowerCoeffs, default_power_coeffs, list_power_coeffs
from dse.perf.dvfs import clock_grid_hz
from dse.perf.multiclock import op_rows
from dse.perf.power import gpu_power_terms, power_parts_w
from dse.perf.predict import predict_graph
from dse.perf.types import OperatingPoint
from dse.workload.graph import WorkloadGraph
from dse.workload.ops import AttentionOp, ElementwiseOp, GemmOp, SoftmaxOp

FALLBACK = PowerCoeffs(
    architecture="any",
    l2_j_per_byte=3e-12,
    smem_j_per_byte=1e-12,
    tensor_j_per_flop=0.3e-12,
    cuda_j_per_flop=1e-12,
    sfu_j_per_op=3e-12,
    dram_scale=0.6,
    active_j_per_sm_cycle=1e-9,
)
GPUS = ("h100-sxm", "a100-pcie-40gb", "h200-sxm")


def _pc(gpu):
    return default_power_coeffs(gpu) if list_power_coeffs() else FALLBACK


def _coeffs(gpu):
    from dse.perf.coeffs import load_default_coeffs

    return load_default_coeffs(gpu)


def _tensor_flop(gpu, dtype, flop):
    """bf16-equivalent Tensor-Core FLOPs of a GEMM (as multiclock.op_rows gives them)."""
    from dse.perf.rates import tensor_flop_per_clk

    rate = tensor_flop_per_clk(gpu, dtype)
    return flop * (tensor_flop_per_clk(gpu, "bf16") / rate if rate > 0 else 0.0)


dims = st.integers(1, 1 << 14)


@settings(max_examples=25, deadline=None)
@given(
    gpu_name=st.sampled_from(GPUS),
    m=dims,
    n=dims,
    k=dims,
    dtype=st.sampled_from(["bf16", "fp8", "tf32", "fp32"]),
)
def test_gemm_power_non_decreasing_in_clock_for_a_fixed_tile(gpu_name, m, n, k, dtype):
    gpu = load_gpu(gpu_name)
    clocks = clock_grid_hz(gpu)[::3]
    c = clocks.size
    out = gemm.gemm_arrays(
        m=np.full(c, float(m)),
        n=np.full(c, float(n)),
        k=np.full(c, float(k)),
        batch=np.ones(c),
        dtype=[dtype] * c,
        out_dtype=[dtype if dtype != "tf32" else "fp32"] * c,
        b_shared=np.zeros(c, bool),
        gpu=gpu,
        sm_clock_hz=clocks,
        coeffs=_coeffs(gpu),
    )
    p = power_parts_w(
        out["util"].T,
        out["latency_s"],
        out["dram_bytes"],
        clocks,
        gpu_power_terms(gpu),
        _pc(gpu),
        tensor_flop=_tensor_flop(gpu, dtype, out["flop"]),
    )
    tile = out["tile_idx"] * 100 + out["split"]
    same = tile[1:] == tile[:-1]
    assert np.all(np.diff(p["total"])[same] >= -1e-9 * p["total"][1:][same])


@settings(max_examples=25, deadline=None)
@given(
    gpu_name=st.sampled_from(GPUS),
    elements=st.integers(1 << 8, 1 << 27),
    rows=dims,
    cols=st.integers(16, 1 << 15),
    batch=st.integers(1, 64),
    kv=st.integers(16, 1 << 15),
)
def test_other_kernels_power_non_decreasing_in_clock(gpu_name, elements, rows, cols, batch, kv):
    gpu = load_gpu(gpu_name)
    ops = [
        ElementwiseOp(name="e", kind="gelu", num_elements=elements),
        SoftmaxOp(name="s", rows=rows, cols=cols),
        AttentionOp(
            name="d",
            batch=batch,
            num_heads=32,
            num_kv_heads=8,
            head_dim=128,
            seq_len_q=1,
            seq_len_kv=kv,
            backend="decode",
        ),
    ]
    clocks = clock_grid_hz(gpu)[::3]
    r = op_rows(ops * clocks.size, gpu, np.repeat(clocks, len(ops)), _coeffs(gpu))
    p = power_parts_w(
        r["util"],
        r["latency_s"],
        r["dram_bytes"],
        r["sm_clock_hz"],
        gpu_power_terms(gpu),
        _pc(gpu),
        tensor_flop=r["tensor_flop"],
    )
    total = p["total"].reshape(clocks.size, len(ops))
    dram = r["dram_bytes"].reshape(clocks.size, len(ops))
    same = np.isclose(dram[1:], dram[:-1], rtol=1e-12)  # same kernel configuration (decode split count)
    assert np.all((np.diff(total, axis=0) >= -1e-9 * total[1:])[same])


@settings(max_examples=15, deadline=None)
@given(
    gpu_name=st.sampled_from(GPUS),
    m=dims,
    n=dims,
    k=dims,
    cap_frac=st.floats(0.0, 1.0),
    clock_frac=st.floats(0.0, 1.0),
    launch=st.sampled_from([None, "graphs", "eager"]),
)
def test_cap_respected_and_energy_is_power_times_time(gpu_name, m, n, k, cap_frac, clock_frac, launch):
    gpu = load_gpu(gpu_name)
    lo = gpu.power.power_cap_min_w or 0.4 * gpu.power.tdp_w
    cap = lo + cap_frac * (gpu.power.tdp_w - lo)
    f = gpu.clocks.sm_clock_min_hz + clock_frac * (gpu.clocks.sm_clock_max_hz - gpu.clocks.sm_clock_min_hz)
    graph = WorkloadGraph(
        name="g",
        ops=(
            GemmOp(name="g", m=m, n=n, k=k),
            ElementwiseOp(name="e", kind="silu_mul", num_elements=m * n, count=2),
        ),
    )
    r = predict_graph(
        graph,
        gpu,
        OperatingPoint(sm_clock_hz=f, power_cap_w=cap),
        _coeffs(gpu),
        _pc(gpu),
        launch=launch,
    )
    # The cap holds the pass's mean power (its gaps included), not each kernel's (`dse.perf.pass_cap`).
    exceeded = any(kp.cap_exceeded for kp in r.kernels)
    assert r.avg_power_w <= cap + 1e-9 or exceeded
    assert len({kp.effective_clock_hz for kp in r.kernels}) == 1  # one clock per pass
    for kp in r.kernels:
        assert kp.effective_clock_hz <= r.requested_clock_hz + 1e-3
        assert kp.energy_j == pytest.approx(kp.count * kp.power_w * kp.latency_s)
        assert kp.gap_energy_j == pytest.approx(kp.count * kp.gap_power_w * kp.gap_s)
    assert r.energy_j == pytest.approx(r.avg_power_w * r.latency_s, rel=1e-12)
    assert sum(r.energy_j_by_module().values()) == pytest.approx(r.energy_j, rel=1e-12)
    # A cap can be unreachable only at the lowest clock (e.g. a streaming kernel on an A100 PCIe at 210 MHz
    # predicted at 100.001 W under its 100 W minimum cap): such kernels are flagged and run at that clock.
    for kp in r.kernels:
        if kp.cap_exceeded:
            assert kp.effective_clock_hz == pytest.approx(gpu.clocks.sm_clock_min_hz, rel=0.02)


@pytest.mark.parametrize("gpu_name", GPUS)
def test_memory_bound_energy_minimum_below_max_clock(gpu_name):
    gpu = load_gpu(gpu_name)
    graph = WorkloadGraph(name="stream", ops=(ElementwiseOp(name="add", kind="add", num_elements=1 << 28),))
    clocks = clock_grid_hz(gpu)[::4]
    energy = [
        predict_graph(graph, gpu, OperatingPoint(sm_clock_hz=f), _coeffs(gpu), _pc(gpu)).energy_j
        for f in clocks
    ]
    best = clocks[int(np.argmin(energy))]
    assert best < gpu.clocks.sm_clock_max_hz
    assert min(energy) < energy[-1]
