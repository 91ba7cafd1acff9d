"""Attention model: flash (causal / GQA), decode, eager."""

from __future__ import annotations

import numpy as np
import pytest

from dse.errors import ConfigError
from dse.hardware.overrides import apply_overrides
from dse.perf import attention
from dse.perf.predict import predict_graph
from dse.perf.types import OperatingPoint
from dse.workload.graph import WorkloadGraph
from dse.workload.ops import AttentionOp

P = OperatingPoint()


def _op(**kw):
    base = dict(
        name="a", batch=2, num_heads=32, num_kv_heads=8, head_dim=128, seq_len_q=4096, seq_len_kv=4096
    )
    return AttentionOp(**(base | kw))


def test_causal_costs_about_half_of_non_causal(h100):
    causal = attention.estimate(_op(causal=True), h100, P)
    full = attention.estimate(_op(causal=False), h100, P)
    assert 0.45 < causal.analytical_s / full.analytical_s < 0.65
    assert causal.flop == pytest.approx(full.flop / 2, rel=0.01)


def test_flash_long_prefill_is_tensor_bound(h100):
    est = attention.estimate(_op(), h100, P)
    assert est.util["tensor"] > 0.7
    assert est.tile.startswith("fa_fa3")


def test_flash_attention_needs_registers_for_its_accumulators(h100):
    # FA3's prefill tile at head dim 128: 128 query rows x (128 dims of O + 128 keys of S) fp32
    # accumulators, 32768 registers; an SM with one fewer cannot hold a threadblock of it.
    graph = WorkloadGraph(name="a", ops=(_op(),))
    assert predict_graph(graph, apply_overrides(h100, {"sm.registers": 32768})).latency_s > 0
    with pytest.raises(ConfigError, match="kernel 'a' cannot run on this GPU"):
        predict_graph(graph, apply_overrides(h100, {"sm.registers": 32767}))


def test_gqa_shares_kv_traffic(h100):
    mha = attention.estimate(_op(num_kv_heads=32, seq_len_q=1, seq_len_kv=8192, backend="decode"), h100, P)
    gqa = attention.estimate(_op(num_kv_heads=8, seq_len_q=1, seq_len_kv=8192, backend="decode"), h100, P)
    assert gqa.dram_bytes < 0.3 * mha.dram_bytes
    assert gqa.latency_s < mha.latency_s


def test_decode_is_kv_bandwidth_bound_and_splits_small_batches(h100):
    est = attention.estimate(
        _op(batch=1, num_kv_heads=8, seq_len_q=1, seq_len_kv=32768, backend="decode"), h100, P
    )
    kv_bytes = 2 * 1 * 8 * 32768 * 128 * 2
    assert est.dram_bytes >= kv_bytes
    assert est.analytical_s >= kv_bytes / h100.memory.bw_bytes_per_s
    assert "splits1" not in est.tile  # 8 (batch x KV heads) threadblocks cannot fill 132 SMs
    assert est.util["dram"] > 0.5


def test_fp8_kv_cache_halves_decode_traffic(h100):
    bf16 = attention.estimate(_op(batch=64, seq_len_q=1, seq_len_kv=8192, backend="decode"), h100, P)
    fp8 = attention.estimate(
        _op(batch=64, seq_len_q=1, seq_len_kv=8192, backend="decode", kv_dtype="fp8"), h100, P
    )
    assert fp8.dram_bytes == pytest.approx(bf16.dram_bytes / 2, rel=0.05)


def test_eager_writes_the_score_matrix(h100):
    op = _op(batch=1, seq_len_q=2048, seq_len_kv=2048, backend="eager")
    est = attention.estimate(op, h100, P)
    scores = 1 * 32 * 2048 * 2048 * 2
    assert est.dram_bytes > 2 * scores  # written by QK^T, read and written by softmax, read by PV
    assert "softmax" in est.tile and "repeat_kv" in est.tile
    flash = attention.estimate(_op(batch=1, seq_len_q=2048, seq_len_kv=2048), h100, P)
    assert flash.latency_s < est.latency_s


def test_hopper_packs_gqa_query_heads_into_one_tile(h100):
    # One query per sequence (a prompt of one token), 40 query heads on one KV head: FA3's PackGQA puts
    # the 40 rows in one tile per sequence, where unpacked tiles would be one per query head.
    common = dict(
        batch=np.array([64.0, 64.0]),
        seq_len_q=np.ones(2),
        seq_len_kv=np.ones(2),
        num_heads=np.array([40.0, 40.0]),
        num_kv_heads=np.array([1.0, 40.0]),
        head_dim=np.full(2, 128.0),
        causal=np.ones(2, dtype=bool),
        act_bytes=np.full(2, 2.0),
        kv_bytes=np.full(2, 2.0),
        gpu=h100,
        sm_clock_hz=np.full(2, 1.98e9),
    )
    out = attention.flash_arrays(**common)
    assert list(out["grid"]) == [64.0, 64.0 * 40.0]
    assert out["analytical_s"][0] < out["analytical_s"][1]


def test_lone_threadblocks_run_at_one_threadblock_per_sm(h100):
    # 1 sequence x 1 KV head x 4096 causal queries (32 tiles of 128) on 132 SMs: the longest tile
    # (32 K/V blocks of 128 keys) runs alone on its SM, so the kernel takes at least its Tensor-Core time.
    out = attention.flash_arrays(
        batch=np.ones(1),
        seq_len_q=np.array([4096.0]),
        seq_len_kv=np.array([4096.0]),
        num_heads=np.ones(1),
        num_kv_heads=np.ones(1),
        head_dim=np.array([128.0]),
        causal=np.ones(1, dtype=bool),
        act_bytes=np.full(1, 2.0),
        kv_bytes=np.full(1, 2.0),
        gpu=h100,
        sm_clock_hz=np.array([1.98e9]),
    )
    longest_tile_s = 32 * 4.0 * 128 * 128 * 128 / (4096 * 1.98e9)
    assert out["grid"][0] == 32
    assert out["analytical_s"][0] >= longest_tile_s


def test_cache_write_adds_the_kv_copy(h100):
    # vLLM's context attention copies the new K and V (bf16 in, fp8 cache out) before the kernel.
    common = dict(
        batch=np.array([8.0]),
        seq_len_q=np.array([1024.0]),
        seq_len_kv=np.array([1024.0]),
        num_heads=np.array([32.0]),
        num_kv_heads=np.array([8.0]),
        head_dim=np.array([128.0]),
        causal=np.ones(1, dtype=bool),
        act_bytes=np.full(1, 2.0),
        kv_bytes=np.full(1, 1.0),
        gpu=h100,
        sm_clock_hz=np.array([1.98e9]),
    )
    plain = attention.flash_arrays(**common)
    with_copy = attention.flash_arrays(**common, cache_write=True)
    copy_b = 8 * 1024 * 2 * 8 * 128 * (2.0 + 1.0)
    assert with_copy["dram_bytes"][0] - plain["dram_bytes"][0] == pytest.approx(copy_b)
    assert with_copy["analytical_s"][0] - plain["analytical_s"][0] >= copy_b / h100.memory.bw_bytes_per_s


def test_decode_split_is_the_fastest_valid_candidate_each_scored_alone(h100, hopper_coeffs):
    """`_best_splits` scores only the (row, split) pairs a context can take, gathered into one pass: its
    choice equals scoring every candidate in a pass of its own and taking the fastest valid one (the
    first within 1e-9), on contexts from one K/V block to all 128 splits and on batches 1-256."""
    from dse.perf.pipeline import correct
    from dse.perf.types import coeff_table

    rng = np.random.default_rng(7)
    n = 300
    shape = dict(
        batch=rng.choice([1.0, 2.0, 8.0, 64.0, 256.0], n),
        seq_len_q=np.ones(n),
        seq_len_kv=np.exp(rng.uniform(np.log(16.0), np.log(300_000.0), n)).round(),
        num_heads=np.full(n, 32.0),
        num_kv_heads=rng.choice([1.0, 8.0, 32.0], n),
        head_dim=rng.choice([64.0, 128.0, 256.0], n),
        act_bytes=np.full(n, 2.0),
        kv_bytes=rng.choice([1.0, 2.0], n),
    )
    f = np.full(n, h100.clocks.boost_clock_hz)
    got = attention.decode_arrays(**shape, gpu=h100, sm_clock_hz=f, coeffs=hopper_coeffs)["splits"]
    c = attention._common(
        shape["batch"], shape["seq_len_q"], shape["seq_len_kv"], shape["num_heads"], shape["num_kv_heads"],
        shape["head_dim"], shape["kv_bytes"], shape["act_bytes"], h100, f, decode=True,
    )  # fmt: skip
    table = coeff_table(hopper_coeffs).matrix(attention.DECODE_GROUPS)
    base = (
        np.where(c.kv_f8, 1, 0) * len(attention.HEAD_DIM_CLASSES) + attention._head_dim_class(c.head_dim)
    ) * 2
    best_lat, want = np.full(n, np.inf), np.ones(n)
    for s in attention._SPLIT_CANDIDATES:
        ev = attention._decode_timeline(c, np.full(n, float(s)))
        lat, _ = correct(ev.timeline, table[base + (s > 1)])
        better = ev.valid & (lat < best_lat * (1.0 - 1e-9))
        best_lat, want = np.where(better, lat, best_lat), np.where(better, float(s), want)
    np.testing.assert_array_equal(got, want)
    assert set(np.unique(got)) > {1.0, 2.0}  # the rows span several choices


def test_decode_result_is_its_chosen_split_evaluated_alone(h100, hopper_coeffs):
    """`decode_arrays` takes each row's result from `_best_splits`' pass over the (row, split) pairs: the
    same bits as evaluating the rows at their chosen splits in a pass of their own."""
    from dse.perf.pipeline import correct
    from dse.perf.types import coeff_table

    rng = np.random.default_rng(11)
    n = 200
    shape = dict(
        batch=rng.choice([1.0, 8.0, 64.0], n),
        seq_len_q=np.ones(n),
        seq_len_kv=np.exp(rng.uniform(np.log(16.0), np.log(200_000.0), n)).round(),
        num_heads=np.full(n, 32.0),
        num_kv_heads=rng.choice([1.0, 8.0, 32.0], n),
        head_dim=rng.choice([64.0, 128.0], n),
        act_bytes=np.full(n, 2.0),
        kv_bytes=rng.choice([1.0, 2.0], n),
    )
    f = rng.uniform(0.8e9, h100.clocks.boost_clock_hz, n)
    got = attention.decode_arrays(**shape, gpu=h100, sm_clock_hz=f, coeffs=hopper_coeffs)
    c = attention._common(
        shape["batch"], shape["seq_len_q"], shape["seq_len_kv"], shape["num_heads"], shape["num_kv_heads"],
        shape["head_dim"], shape["kv_bytes"], shape["act_bytes"], h100, f, decode=True,
    )  # fmt: skip
    ev = attention._decode_timeline(c, got["splits"])
    table = coeff_table(hopper_coeffs).matrix(attention.DECODE_GROUPS)
    lat, util = correct(ev.timeline, table[got["group"]])
    np.testing.assert_array_equal(got["latency_s"], lat)
    np.testing.assert_array_equal(got["util"], util)
    np.testing.assert_array_equal(got["analytical_s"], ev.timeline.analytical_s())
    for key in ("dram_bytes", "l2_bytes", "grid"):
        np.testing.assert_array_equal(got[key], getattr(ev, key))


def test_a_nan_decode_context_gives_nan_not_another_rows_result():
    """No split count is valid for a NaN context: its row must read NaN (a NaN from upstream stays
    visible), not the result of the pair the selection would default to (row 0's)."""
    from dse.hardware.catalog import load_gpu
    from dse.perf.attention import decode_arrays

    out = decode_arrays(
        batch=np.array([8.0, 8.0]), seq_len_q=np.array([1.0, 1.0]), seq_len_kv=np.array([4096.0, np.nan]),
        num_heads=32, num_kv_heads=8, head_dim=128, act_bytes=2.0, kv_bytes=2.0,
        gpu=load_gpu("h100-sxm"), sm_clock_hz=1.98e9,
    )  # fmt: skip
    assert np.isfinite(out["latency_s"][0]) and np.isnan(out["latency_s"][1])
