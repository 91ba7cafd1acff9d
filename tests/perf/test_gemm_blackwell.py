"""Blackwell GEMMs: tcgen05 kernels read their operands from shared memory once per CTA (or CTA pair), so a
large B200 GEMM is fed at the Tensor Cores' rate and each narrower dtype halves its time."""

from __future__ import annotations

import pytest

from dse.hardware.catalog import load_gpu
from dse.perf import gemm
from dse.perf.coeffs import load_default_coeffs
from dse.perf.predict import predict_graph
from dse.perf.types import OperatingPoint
from dse.workload.graph import WorkloadGraph
from dse.workload.ops import GemmOp

LOCKED = OperatingPoint(sm_clock_hz=1000e6)  # below every cap: no throttling between dtypes
LARGE_SQUARES = (4096, 8192, 16384)


@pytest.fixture(scope="module")
def b200():
    return load_gpu("b200")


def test_shared_memory_traffic_follows_each_architectures_mma(b200, h100):
    # 8192^3 bf16, 64 K elements (128 B) a stage, 8192 / 64 = 128 stages a tile; C (bf16) is staged once.
    op = GemmOp(name="g", m=8192, n=8192, k=8192)
    c_bytes = 8192 * 8192 * 2
    # B200: a 2-SM 256x256 tcgen05 tile, 128x256 per CTA, (8192 / 128) x (8192 / 256) = 2048 CTAs. A CTA
    # stages its 128 A rows and half of B (128 columns), and the MMA reads the same from its shared memory:
    # 2 x (128 + 128) x 128 B a stage.
    bw = gemm.estimate(op, b200, LOCKED)
    assert bw.tile.startswith("sm100_2sm_256x256")
    assert bw.smem_bytes == 2048 * 128 * 2 * (128 + 128) * 128 + c_bytes
    # H100: a 128x256 wgmma tile of two 64x256 warpgroups, 64 x 32 = 2048 threadblocks. It stages A and B,
    # (128 + 256) x 128 B, and each warpgroup's MMA reads its 64 A rows and all 256 B columns: 2 x (64 + 256)
    # x 128 B, 2.5x the tcgen05 CTA's reads for the same output tile.
    hp = gemm.estimate(op, h100, LOCKED)
    assert hp.tile.startswith("sm90_128x256")
    assert hp.smem_bytes == 2048 * 128 * ((128 + 256) * 128 + 2 * (64 + 256) * 128) + c_bytes


def _gemm_latencies(gpu, coeffs, size: int) -> dict[str, tuple[float, str]]:
    out = {}
    for dtype in ("bf16", "fp8", "fp4"):
        op = GemmOp(name=dtype, m=size, n=size, k=size, dtype=dtype, out_dtype="bf16")
        k = predict_graph(WorkloadGraph(name=dtype, ops=(op,)), gpu, LOCKED, coeffs).kernels[0]
        out[dtype] = (k.latency_s, k.bound_by)
    return out


@pytest.mark.parametrize("size", LARGE_SQUARES)
@pytest.mark.parametrize("shipped", [False, True], ids=["analytical", "shipped"])
def test_large_b200_gemms_halve_with_each_narrower_dtype(b200, size, shipped):
    # B200's dense peaks double from bf16 to fp8 to fp4 (8192, 16384, 32768 FLOP/clk per SM) while the
    # operand bytes per FLOP halve: a stage of 128 B of K per row carries 2x the K and costs the same
    # clocks, so a large GEMM's mainloop halves. The prologue, the epilogue (C is bf16 for all three) and
    # the wave tail do not shrink, hence less than 2x; they are small beside 4096^3 and larger mainloops.
    coeffs = load_default_coeffs(b200) if shipped else None
    t = _gemm_latencies(b200, coeffs, size)
    assert 1.6 <= t["bf16"][0] / t["fp8"][0] <= 2.0
    assert 1.6 <= t["fp8"][0] / t["fp4"][0] <= 2.0


@pytest.mark.parametrize("size", LARGE_SQUARES[1:])
def test_large_b200_gemms_are_not_shared_memory_bound(b200, size):
    # Per CTA stage of the 2-SM 256x256 tile: 2 x 256 x 128 B of shared-memory writes and reads take
    # 512 clocks at 128 B/clock, as many as the MMA (2 x 128 x 256 x 64 FLOP / 8192 per clock): the
    # Tensor Cores, not shared memory, set the pace (the per-warp reads charged before took 640 clocks).
    # Only the epilogue's C staging adds to shared memory; at 4096^3 in fp4 (28 us) it is 6% of the
    # mainloop's traffic while the Tensor Cores are busy 72% of the time, which makes the label smem there.
    # (The analytical model: the shipped sets' fitted load derate stretches every memory module's busy time.)
    for dtype, (_, bound) in _gemm_latencies(b200, None, size).items():
        assert bound == "tensor", dtype
