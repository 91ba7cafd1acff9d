"""Softmax, norms and elementwise: streaming traffic and configuration choice."""

from __future__ import annotations

import pytest

from dse.perf import elementwise, reduction
from dse.perf.types import OperatingPoint
from dse.workload.ops import ElementwiseOp, NormOp, SoftmaxOp

P = OperatingPoint()


def test_large_elementwise_streams_at_dram_bandwidth(h100):
    op = ElementwiseOp(name="x", kind="add", num_elements=1 << 28)  # 1.6 GB moved
    est = elementwise.estimate(op, h100, P)
    assert est.dram_bytes == pytest.approx(op.min_dram_bytes)
    assert est.analytical_s == pytest.approx(op.min_dram_bytes / h100.memory.bw_bytes_per_s, rel=0.02)
    assert est.util["dram"] > 0.95


def test_tiny_elementwise_has_a_latency_floor(h100):
    est = elementwise.estimate(ElementwiseOp(name="x", kind="gelu", num_elements=1024), h100, P)
    assert est.analytical_s >= 1e-6  # at least one DRAM round trip plus the launch ramp
    assert est.util["dram"] < 0.01


def test_short_rows_use_a_warp_per_row(h100):
    est = reduction.estimate(SoftmaxOp(name="s", rows=4096, cols=512), h100, P)
    assert est.tile.startswith("warp_per_row")
    assert est.dram_bytes == pytest.approx(2 * 4096 * 512 * 2)


def test_rows_beyond_shared_memory_are_read_again(h100):
    cached = reduction.estimate(SoftmaxOp(name="s", rows=64, cols=16384), h100, P)
    uncached = reduction.estimate(SoftmaxOp(name="s", rows=64, cols=65536), h100, P)
    assert "1read" in cached.tile and "3read" in uncached.tile
    assert uncached.l2_bytes / uncached.dram_bytes > cached.l2_bytes / cached.dram_bytes


def test_softmax_uses_the_sfu_and_norms_do_not(h100):
    s = reduction.estimate(SoftmaxOp(name="s", rows=8192, cols=8192), h100, P)
    n = reduction.estimate(NormOp(name="n", rows=8192, cols=8192, kind="rmsnorm"), h100, P)
    assert s.util["sfu"] > 0.0
    assert n.util["sfu"] < s.util["sfu"]
