"""A chunk's first passes run together (`evaluate_point.prepare_chunk`, `dse.perf.first_pass`): every
point's metrics are those of its evaluation alone, and the points do take their shares."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from dse.hardware.catalog import load_gpu
from dse.perf import first_pass, multiclock
from dse.search.objective import EvalContext, evaluate_chunk, evaluate_point
from dse.search.study import load_study

_SPACE = {
    "gpu.num_sms": [96, 120, 132, 144],
    "gpu.memory.technology": ["hbm3", "hbm3e"],
    "gpu.memory.data_rate_frac": [0.05, 0.4, 0.93],
    "gpu.sm.tensor_factor": [0.5, 1.0, 2.0],
    "gpu.memory.energy_factor": [0.7, 1.3],
    "sm_clock_mhz": [1005, 1500, 1980],
    "precision": ["bf16", "fp8"],
    "attention": ["flash", "eager"],
}


def _points(count: int, seed: int) -> list[dict]:
    rng = np.random.default_rng(seed)
    return [{k: v[int(rng.integers(len(v)))] for k, v in _SPACE.items()} for _ in range(count)]


def _shares(points: list[dict]) -> int:
    """The family calls of `first_pass.FAMILIES` the points' first passes make: an eager point's attention
    is a family of its own (no flash or decode attention rows)."""
    eager = sum(p["attention"] == "eager" for p in points)
    return len(first_pass.FAMILIES) * len(points) - 2 * eager


def _alone(params: dict, ctx: EvalContext) -> dict:
    return evaluate_point(params, ctx)  # a plain function: no prepare_chunk


@pytest.fixture(scope="module")
def ctx() -> EvalContext:
    return load_study(Path(__file__).parents[2] / "studies" / "llm_serving.yaml").config.eval_context()


def _counting_takes(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    taken: list[bool] = []

    def take(*args):
        out = first_pass.take_share(*args)
        taken.append(out is not None)
        return out

    monkeypatch.setattr(multiclock, "take_share", take)
    return taken


@pytest.mark.parametrize("cap_w", [None, 450.0])
def test_chunk_metrics_equal_each_point_alone_and_shares_are_taken(ctx, monkeypatch, cap_w):
    # Every row of a GEMM call is a function of its own inputs, so the chunk's joint call must leave every
    # metric bit-identical; at a binding 450 W cap the power-cap search's probes run after the first pass.
    points = [p | ({"power_cap_w": cap_w} if cap_w else {}) for p in _points(12, seed=3)]
    alone = evaluate_chunk(points, ctx, _alone)
    taken = _counting_takes(monkeypatch)
    chunked = evaluate_chunk(points, ctx, evaluate_point)
    assert [r["metrics"] for r in chunked] == [r["metrics"] for r in alone]
    assert all(r["error"] is None for r in chunked)
    # each point's first pass took its share of each family that takes per-row GPUs
    assert taken.count(True) == _shares(points)


def test_a_gpu_that_cannot_join_is_evaluated_on_its_own(ctx, monkeypatch):
    # A point with a larger L2 among H100-like ones: one call cannot hold both (the rows do not carry the
    # L2 size), so it calls the GEMM model itself; a load-mode point and a failing point are left alone.
    big_l2 = _points(1, seed=7)[0] | {"gpu.l2.l2_bytes": 100 * 2**20}
    load = {"mode": "concurrency", "concurrency": 4, "attention": "flash", "num_requests": 8}
    points = [*_points(3, seed=5), big_l2, load, {"gpu.num_sms": -1}]
    alone = evaluate_chunk(points, ctx, _alone)
    taken = _counting_takes(monkeypatch)
    chunked = evaluate_chunk(points, ctx, evaluate_point)
    assert [(r["metrics"], r["error"]) for r in chunked] == [(r["metrics"], r["error"]) for r in alone]
    assert taken.count(True) == _shares(points[:3])  # the three points that share calls
    assert chunked[-1]["error"] is not None


def test_a_share_goes_only_to_its_own_call():
    # The share of a pass on one GPU at one clock is not given to the same ops on another GPU or clock.
    from dse.perf.coeffs import load_default_coeffs
    from dse.perf.host import gpu_only_coeffs
    from dse.workload.llm import build_decode_graph
    from dse.workload.models import load_model_config

    ops = list(build_decode_graph(load_model_config("llama-3.1-8b"), batch=8, context_len=512).ops)
    h100, slower = load_gpu("h100-sxm"), load_gpu("h100-sxm", {"memory.data_rate_frac": 0.1})
    coeffs = gpu_only_coeffs(load_default_coeffs(h100))
    first_pass.prefetch([first_pass.FirstPass(ops, g, 1.5e9, coeffs) for g in (h100, slower)])
    found = multiclock.family_rows(ops, h100, 1.5e9, "gemm")
    assert found is not None
    inputs, fs = found
    assert first_pass.take_share(inputs, h100, fs, coeffs, 1.2e9) is None  # another choice clock
    assert first_pass.take_share(inputs, load_gpu("h100-sxm", {"num_sms": 100}), fs, coeffs, 1.5e9) is None
    mine = first_pass.take_share(inputs, slower, fs, coeffs, 1.5e9)
    assert mine is not None
    own = multiclock.op_rows(ops, slower, 1.5e9, coeffs, choice_clock_hz=1.5e9, choice_memo={})
    gemm_idx = [i for i, op in enumerate(ops) if multiclock.family_of(op) == "gemm"]
    np.testing.assert_array_equal(mine["latency_s"], own["latency_s"][gemm_idx])
    assert first_pass.take_share(inputs, slower, fs, coeffs, 1.5e9) is None  # taken once
