"""GEMM model: hand-checked traffic, tile choice, and the roofline on large shapes."""

from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dse.errors import ConfigError
from dse.hardware.overrides import apply_overrides
from dse.perf import gemm
from dse.perf.predict import predict_graph
from dse.perf.rates import DRAM_LATENCY_S
from dse.perf.tiles import simt_ffma_rate_factor
from dse.perf.types import OperatingPoint
from dse.workload.graph import WorkloadGraph
from dse.workload.ops import GemmOp
from tests.perf.perf_roofline import roofline_s


def test_large_square_gemm_is_compute_bound_and_near_roofline(h100):
    # 8192^3 bf16 at 1980 MHz: 2 * 8192^3 / (132 * 4096 * 1.98e9) = 1.027 ms of Tensor-Core time.
    op = GemmOp(name="g", m=8192, n=8192, k=8192)
    est = gemm.estimate(op, h100, OperatingPoint())
    ideal_s = 2 * 8192**3 / (132 * 4096 * 1.98e9)
    assert est.analytical_s == pytest.approx(ideal_s, rel=0.05)
    assert est.util["tensor"] > 0.9
    assert est.util["dram"] < 0.5
    assert est.tile.startswith("sm90_128x256") or est.tile.startswith("sm90_256x128")


def _tile_mn(tile: str) -> tuple[int, int]:
    m, n = re.search(r"_(\d+)x(\d+)", tile).groups()  # sm90_128x256_streamk: (128, 256)
    return int(m), int(n)


@pytest.mark.parametrize(
    ("field", "value", "fits"),
    [
        # one fp32 accumulator register per output element: 128x256 needs 32768, 128x128 16384
        ("sm.registers", 16384, lambda m, n: m * n <= 16384),
        # two pipeline stages of (m + n) rows x 128 bytes of K: 128x256 needs 98304 B, 128x64 49152 B
        ("sm.smem_bytes", 60000, lambda m, n: 2 * (m + n) * 128 <= 60000),
    ],
)
def test_tiles_that_do_not_fit_an_sm_are_not_chosen(h100, field, value, fits):
    op = GemmOp(name="g", m=8192, n=8192, k=8192)
    full = gemm.estimate(op, h100, OperatingPoint())
    small = gemm.estimate(op, apply_overrides(h100, {field: value}), OperatingPoint())
    assert not fits(*_tile_mn(full.tile)) and fits(*_tile_mn(small.tile))
    if field == "sm.registers":  # the fastest of fewer candidates, at their own occupancy or lower
        assert small.latency_s > full.latency_s


def test_a_gemm_no_tile_of_which_fits_is_refused(h100):
    # The smallest Hopper tile, 64x64, holds 4096 fp32 accumulators: 4095 registers per SM run no tile.
    graph = WorkloadGraph(name="g", ops=(GemmOp(name="g", m=8192, n=8192, k=8192),))
    assert predict_graph(graph, apply_overrides(h100, {"sm.registers": 4096})).latency_s > 0
    with pytest.raises(ConfigError, match="kernel 'g' cannot run on this GPU"):
        predict_graph(graph, apply_overrides(h100, {"sm.registers": 4095}))


def test_decode_gemm_is_memory_bound(h100):
    # m = 1: the 8192 x 8192 bf16 weight (134 MB) must be streamed: >= 134e6 / 3.35e12 = 40 us.
    op = GemmOp(name="g", m=1, n=8192, k=8192)
    est = gemm.estimate(op, h100, OperatingPoint())
    assert est.analytical_s >= op.min_dram_bytes / h100.memory.bw_bytes_per_s
    assert est.util["dram"] > 0.8
    assert est.util["tensor"] < 0.5 * est.util["dram"]  # the MMA computes padded rows, still mostly idle


def test_dram_traffic_ideal_when_operands_fit_l2(h100):
    # A, B (2 x 2 MiB) fit the 50 MiB L2: each is read once; C written once.
    op = GemmOp(name="g", m=1024, n=1024, k=1024)
    est = gemm.estimate(op, h100, OperatingPoint())
    assert est.dram_bytes == pytest.approx(op.min_dram_bytes, rel=1e-9)
    # Every threadblock loads its own A rows and B columns from L2: more than the DRAM bytes.
    assert est.l2_bytes > est.dram_bytes


def test_dram_rereads_when_operands_exceed_l2(h100):
    op = GemmOp(name="g", m=32768, n=32768, k=8192)  # A + B = 1 GiB >> L2
    est = gemm.estimate(op, h100, OperatingPoint())
    assert est.dram_bytes > 1.5 * op.min_dram_bytes


def test_split_or_stream_k_for_small_mn_long_k(h100):
    est = gemm.estimate(GemmOp(name="g", m=64, n=256, k=65536), h100, OperatingPoint())
    assert "splitk" in est.tile or "streamk" in est.tile


def test_fp8_on_hopper_uses_m_dispatched_cutlass_tiles(h100):
    small = gemm.estimate(
        GemmOp(name="g", m=16, n=4096, k=4096, dtype="fp8", out_dtype="bf16"), h100, OperatingPoint()
    )
    large = gemm.estimate(
        GemmOp(name="g", m=4096, n=4096, k=4096, dtype="fp8", out_dtype="bf16"), h100, OperatingPoint()
    )
    assert small.tile == "sm90_fp8_64x64_c1x8"
    assert large.tile == "sm90_fp8_128x128_c2x1"


def test_fp32_runs_on_cuda_cores(h100):
    est = gemm.estimate(GemmOp(name="g", m=2048, n=2048, k=2048, dtype="fp32"), h100, OperatingPoint())
    assert est.tile.startswith("simt")
    assert est.util["tensor"] == 0.0
    assert est.util["cuda"] > 0.5
    assert est.latency_s >= roofline_s(GemmOp(name="g", m=2048, n=2048, k=2048, dtype="fp32"), h100, 1.98e9)


def test_simt_ffma_share_counts_the_mainloop_instructions():
    # 128x128x8 tile, 32x64 warps (256 threads, 8x8 outputs each), per thread and K step: 64 FFMA, 4
    # LDS.128 (8 floats of A, 8 of B), (128 + 128) x 8 floats / 256 threads / 4 = 2 LDG.128 + 2 STS.128
    # per 8 K steps (0.5), one barrier and one branch per 8 K steps (0.25): 64 of 68.75 slots.
    args = (np.array(32.0), np.array(64.0), np.array(128.0), np.array(128.0), np.array(8.0))
    assert float(simt_ffma_rate_factor(*args, fp32_flop_per_clk=256.0)) == pytest.approx(64 / 68.75)
    # 64 FP32 lanes (GA100) need half the 128 issue slots: the other instructions fit beside them
    assert float(simt_ffma_rate_factor(*args, fp32_flop_per_clk=128.0)) == 1.0


@settings(max_examples=25, deadline=None)
@given(m=st.integers(1024, 16384), n=st.integers(1024, 16384), k=st.integers(256, 8192))
def test_simt_gemm_on_hopper_stays_under_the_issue_limit(h100, a100, m, n, k):
    # Hopper's 128 FP32 lanes per SM equal the schedulers' issue width: a SIMT GEMM's FFMA rate stays
    # at most the best tile's FFMA share (64 / 68.75) of the FP32 peak. A100's 64 lanes reach the peak.
    op = GemmOp(name="g", m=m, n=n, k=k, dtype="fp32")
    est = gemm.estimate(op, h100, OperatingPoint(sm_clock_hz=1.98e9))
    assert op.flop / est.analytical_s <= 64 / 68.75 * 132 * 256 * 1.98e9
    est_a = gemm.estimate(op, a100, OperatingPoint(sm_clock_hz=1.41e9))
    assert op.flop / est_a.analytical_s <= a100.sm.fp32_flop_per_clk * a100.num_sms * 1.41e9


def test_large_fp32_gemm_on_hopper_is_issue_bound(h100):
    # 8192 x 8192 x 2048 fp32: the FP32 lanes alone would allow 98% of the 66.9 TFLOP/s peak (the
    # previous prediction); four schedulers issuing FFMA and the mainloop's loads allow 93%, less the
    # prologue and epilogue of 64 x 16 tiles on 132 SMs.
    op = GemmOp(name="g", m=8192, n=8192, k=2048, dtype="fp32")
    est = gemm.estimate(op, h100, OperatingPoint(sm_clock_hz=1.98e9))
    assert 0.85 < op.flop / est.analytical_s / (132 * 256 * 1.98e9) <= 64 / 68.75


def test_fp8_on_ampere_falls_back_to_16_bit_tensor_cores(a100):
    est = gemm.estimate(GemmOp(name="g", m=4096, n=4096, k=4096, dtype="fp8"), a100, OperatingPoint())
    bf16 = gemm.estimate(GemmOp(name="g", m=4096, n=4096, k=4096, dtype="bf16"), a100, OperatingPoint())
    assert est.analytical_s == pytest.approx(bf16.analytical_s, rel=0.2)


def test_batched_gemm_with_shared_weight_reads_it_once(h100):
    shared = GemmOp(name="g", m=128, n=4096, k=4096, batch=8, b_shared=True)
    separate = GemmOp(name="g", m=128, n=4096, k=4096, batch=8, b_shared=False)
    p = OperatingPoint()
    assert gemm.estimate(shared, h100, p).dram_bytes < gemm.estimate(separate, h100, p).dram_bytes


def test_arrays_match_per_op_estimates(h100, hopper_coeffs):
    ops = [
        GemmOp(name=f"g{i}", m=m, n=n, k=k, dtype=d)
        for i, (m, n, k, d) in enumerate(
            [
                (1, 4096, 4096, "bf16"),
                (512, 1024, 8192, "fp8"),
                (4096, 4096, 4096, "fp32"),
                (33, 65536, 128, "bf16"),
            ]
        )
    ]
    many = gemm.estimate_many(ops, h100, OperatingPoint(), hopper_coeffs)
    for op, est in zip(ops, many, strict=True):
        one = gemm.estimate(op, h100, OperatingPoint(), hopper_coeffs)
        assert one == est
        assert np.isclose(one.latency_s, est.latency_s, rtol=0, atol=0)


def test_fp8_activation_quant_costs_a_round_trip_per_2048_elements_of_k(h100):
    # vLLM's per-tensor quantization: one 1024-thread threadblock per row, two elements per thread per
    # pass, two kernels. Going from K = 2048 (1 pass) to 2560 (2 passes) adds one dependent DRAM round
    # trip per round of resident rows in each kernel: 2 x ceil(ceil(16384 / 132) / 2) x latency.
    def prologue_s(k):
        out = gemm.gemm_arrays(
            m=np.array([16384.0]),
            n=np.array([32.0]),
            k=np.array([k]),
            batch=np.ones(1),
            dtype=["fp8"],
            out_dtype=["bf16"],
            b_shared=np.zeros(1, dtype=bool),
            gpu=h100,
            sm_clock_hz=np.array([1.98e9]),
            act_quant=np.ones(1, dtype=bool),
        )
        return out["timeline"].t_pro[0]

    rounds = np.ceil(np.ceil(16384 / 132) / 2)
    step = prologue_s(2560.0) - prologue_s(2048.0)
    assert step >= 2 * rounds * DRAM_LATENCY_S
    # within one pass K adds only its bandwidth share
    assert prologue_s(2048.0) - prologue_s(1536.0) < 0.25 * step


def test_correction_matches_the_fit_features_for_partial_waves(h100, hopper_coeffs):
    # The fit scores lambda . features(math derate) + eps; predictions must use the same formula, also
    # when the kernel fills only part of the GPU (the math derate is weighed by the busy-SM fraction once).
    out = gemm.gemm_arrays(
        m=np.array([1523.0, 64.0]),
        n=np.array([915.0, 1024.0]),
        k=np.array([798.0, 4096.0]),
        batch=np.ones(2),
        dtype=["bf16", "bf16"],
        out_dtype=["bf16", "bf16"],
        b_shared=np.zeros(2, dtype=bool),
        gpu=h100,
        sm_clock_hz=np.full(2, 1.98e9),
        coeffs=hopper_coeffs,
    )
    tl = out["timeline"]
    assert tl.sm_active_frac[0] < 1.0  # 48 output tiles on 132 SMs
    for i, g in enumerate(out["group"]):
        c = hopper_coeffs.table.lookup(gemm.GROUPS[g])
        feats = tl.features(c.math_derate, c.load_derate)[i]
        expected = c.lambda_pro * feats[0] + c.lambda_main * feats[1] + c.lambda_epi * feats[2] + c.eps_s
        assert out["latency_s"][i] == pytest.approx(expected, rel=1e-12)


@settings(max_examples=12, deadline=None)
@given(
    dim=st.sampled_from(["m", "n", "k"]),
    fixed=st.tuples(st.integers(1, 8192), st.integers(1, 8192)),
    dtype=st.sampled_from(["bf16", "fp8", "fp32"]),
    seed=st.integers(0, 2**16),
)
def test_a_row_is_estimated_as_if_alone_in_a_large_call(h100, dim, fixed, dtype, seed):
    """Each row's kernel choice and estimate are its own: 96 rows that differ in one dimension (eager
    decode attention's shape; large enough that the choice scores a grid whose shared dimensions are
    computed once per candidate) give, row by row, what each row alone gives."""
    rng = np.random.default_rng(seed)
    num = 96
    dims = dict(zip([d for d in ("m", "n", "k") if d != dim], (float(f) for f in fixed), strict=True))
    shape = {d: np.full(num, dims[d]) for d in dims} | {dim: rng.integers(1, 8192, num).astype(float)}
    rows = shape | {"batch": np.full(num, 32.0), "dtype": [dtype] * num, "out_dtype": ["bf16"] * num}
    rows |= {"b_shared": np.zeros(num, dtype=bool), "sm_clock_hz": np.full(num, 1.5e9)}
    together = gemm.gemm_arrays(**rows, gpu=h100)
    for i in rng.choice(num, 6, replace=False).tolist():
        alone = gemm.gemm_arrays(**{key: v[i : i + 1] for key, v in rows.items()}, gpu=h100)
        for key in ("latency_s", "dram_bytes", "tile_idx", "split"):
            assert alone[key][0] == together[key][i], key
