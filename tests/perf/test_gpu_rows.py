"""A kernel-model call over several GPUs (`dse.perf.gpu_rows`): each row as on its own GPU."""

from __future__ import annotations

import functools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dse.hardware.catalog import load_gpu
from dse.perf import gemm
from dse.perf.gpu_rows import GpuRows

# Keys of a `gemm_arrays` result that are per-row arrays (util: [6, N]).
_KEYS = ("latency_s", "analytical_s", "util", "flop", "dram_bytes", "l2_bytes", "smem_bytes", "grid",
         "group", "tile_idx", "split", "simt", "library")  # fmt: skip


@functools.cache
def _gpus() -> tuple:
    """Three H100-like design points of `spaces/h100_like.yaml`: SM count, HBM generation, bus width and
    data rate, tensor rate and DRAM energy all differ."""
    fast = {"num_sms": 120, "memory.technology": "hbm3e", "memory.data_rate_frac": 0.3}
    slow = {"num_sms": 100, "memory.bus_width_bits": 4096, "memory.data_rate_frac": 0.77}
    return (
        load_gpu("h100-sxm"),
        load_gpu("h100-sxm", fast | {"sm.tensor_factor": 1.5, "memory.energy_factor": 0.8}),
        load_gpu("h100-sxm", slow | {"sm.tensor_factor": 0.5}),
    )


def _rows(*fields: st.SearchStrategy, max_size: int = 16) -> st.SearchStrategy:
    """Lists of rows `(*fields, gpu index into _gpus(), clock step of 15 MHz above 1005 MHz)`."""
    return st.lists(st.tuples(*fields, st.integers(0, 2), st.integers(0, 65)), min_size=1, max_size=max_size)


def _check_rows_as_alone(kw: dict, idx: np.ndarray, choice_clock_hz: np.ndarray | None = None) -> None:
    """The call over all GPUs gives each row the bits of a call on that row's GPU alone."""
    gpus = _gpus()
    rows = GpuRows.of(gpus[0], gpus, idx)
    both = gemm.gemm_arrays(gpu=gpus[0], gpu_rows=rows, choice_clock_hz=choice_clock_hz, choice_memo={}, **kw)
    for gi, gpu in enumerate(gpus):
        sel = np.nonzero(idx == gi)[0]
        if not sel.size:
            continue
        sub = {key: v[sel] if isinstance(v, np.ndarray) else [v[i] for i in sel] for key, v in kw.items()}
        choice = None if choice_clock_hz is None else choice_clock_hz[sel]
        alone = gemm.gemm_arrays(gpu=gpu, choice_clock_hz=choice, **sub)
        for key in _KEYS:
            np.testing.assert_array_equal(np.asarray(both[key])[..., sel], alone[key], err_msg=key)


def _check_family_rows(fn, kw: dict, idx: np.ndarray, clocks: np.ndarray, keys: tuple[str, ...]) -> None:
    """A family's call over all GPUs (`gpu_rows`) gives each row the bits of a call on its GPU alone."""
    gpus = _gpus()
    both = fn(**kw, gpu=gpus[0], sm_clock_hz=clocks, gpu_rows=GpuRows.of(gpus[0], gpus, idx))
    for gi, one in enumerate(gpus):
        sel = np.nonzero(idx == gi)[0]
        alone = fn(**{k: v[sel] for k, v in kw.items()}, gpu=one, sm_clock_hz=clocks[sel])
        for key in keys:
            np.testing.assert_array_equal(np.asarray(both[key])[..., sel], alone[key], err_msg=key)


@settings(max_examples=25, deadline=None)
@given(
    rows=_rows(
        st.integers(1, 8192),
        st.integers(1, 16384),
        st.integers(1, 16384),
        st.integers(1, 64),
        st.sampled_from(["bf16", "fp8"]),
        st.booleans(),
        max_size=24,
    ),
    throttled=st.booleans(),
)
def test_rows_on_several_gpus_are_each_as_on_their_own(rows, throttled):
    # Every value of a GEMM row is a function of its shape, its clock and its GPU alone, so a call mixing
    # GPUs must give each row what a call on its GPU gives it (bit for bit: the same arithmetic), with the
    # kernels chosen at the rows' own clocks or (the power-cap search's probes) at another clock.
    m, n, k, b, dtype, quant, gpu, step = (list(c) for c in zip(*rows, strict=True))
    clocks = 1005e6 + 15e6 * np.array(step, dtype=float)
    kw = {
        "m": np.array(m, dtype=float), "n": np.array(n, dtype=float), "k": np.array(k, dtype=float),
        "batch": np.array(b, dtype=float), "dtype": dtype, "out_dtype": ["bf16"] * len(rows),
        "b_shared": np.array([i % 2 == 0 for i in range(len(rows))]), "sm_clock_hz": clocks,
        "act_quant": np.array(quant),
    }  # fmt: skip
    _check_rows_as_alone(kw, np.array(gpu), np.full(len(rows), 1980e6) if throttled else None)


def test_eager_decode_rows_on_several_gpus_are_each_as_on_their_own():
    # Eager attention's decode QK^T rows (m 1, k 128, a context per step): 3 x 255 rows make a grid large
    # and sparse enough that the choice scores the valid (row, candidate) pairs alone.
    steps = np.arange(1024.0, 1279.0)
    num = 3 * steps.size
    kw = {
        "m": np.ones(num), "n": np.tile(steps, 3), "k": np.full(num, 128.0), "batch": np.full(num, 1024.0),
        "dtype": ["bf16"] * num, "out_dtype": ["bf16"] * num, "b_shared": np.zeros(num, dtype=bool),
        "sm_clock_hz": np.repeat([1.98e9, 1.5e9, 1.2e9], steps.size),
    }  # fmt: skip
    _check_rows_as_alone(kw, np.repeat([0, 1, 2], steps.size))


def test_sparse_choice_rows_on_several_gpus_are_each_as_on_their_own():
    # vLLM's fp8 kernels dispatch one tile per range of m (fp8 rows of m 1-8192); bf16 rows of a short K
    # admit no split-K: over 150 rows most (row, candidate) pairs are invalid, and the choice scores the
    # valid pairs alone, flattened.
    m = np.round(np.geomspace(1.0, 8192.0, 150))
    num = m.size
    kw = {
        "m": m, "n": np.full(num, 4096.0), "k": np.where(np.arange(num) % 3 == 0, 16384.0, 128.0),
        "batch": np.ones(num), "dtype": ["fp8" if i % 4 == 0 else "bf16" for i in range(num)],
        "out_dtype": ["bf16"] * num, "b_shared": np.ones(num, dtype=bool),
        "sm_clock_hz": np.full(num, 1.755e9), "act_quant": np.ones(num, dtype=bool),
    }  # fmt: skip
    _check_rows_as_alone(kw, np.arange(num) % 3)


@settings(max_examples=20, deadline=None)
@given(
    rows=_rows(st.integers(1, 2**24), st.integers(1, 65536), st.sampled_from([1.0, 2.0, 4.0])),
)
def test_streaming_rows_on_several_gpus_are_each_as_on_their_own(rows):
    # Elementwise kernels and reductions (softmax, norms) read the SM count and DRAM bandwidth per row too.
    from dse.perf import elementwise, reduction

    size, cols, nbytes, gpu, step = (np.array(c) for c in zip(*rows, strict=True))
    clocks = 1005e6 + 15e6 * step.astype(float)
    num = size.size
    kinds = {
        elementwise.elementwise_arrays: {"kind": np.arange(num) % len(elementwise.KINDS),
                                         "num_elements": size.astype(float), "in_bytes": nbytes,
                                         "out_bytes": nbytes},
        reduction.reduction_arrays: {"kind": np.arange(num) % len(reduction.KINDS), "rows": size / cols,
                                     "cols": cols.astype(float), "dtype_bytes": nbytes},
    }  # fmt: skip
    for fn, kw in kinds.items():
        _check_family_rows(fn, kw, gpu, clocks, ("latency_s", "util", "dram_bytes", "l2_bytes", "grid"))


@settings(max_examples=20, deadline=None)
@given(
    rows=_rows(
        st.integers(1, 64),
        st.integers(1, 4096),
        st.integers(0, 8192),
        st.sampled_from([(32, 8, 128), (64, 8, 128), (32, 32, 64), (16, 4, 256)]),
        st.sampled_from([1.0, 2.0]),
    ),
)
def test_attention_rows_on_several_gpus_are_each_as_on_their_own(rows):
    # FlashAttention prefill and flash-decoding read the SM count, DRAM bandwidth and Tensor-Core rates
    # (bf16 and, decoding an fp8 cache on Hopper, fp8) per row too; decode's split choice included.
    from dse.perf import attention

    b, sq, ctx, heads, kv_b, gpu, step = (list(c) for c in zip(*rows, strict=True))
    h, hkv, d = (np.array(c, dtype=float) for c in zip(*heads, strict=True))
    gpu, clocks = np.array(gpu), 1005e6 + 15e6 * np.array(step, dtype=float)
    shape = {"batch": np.array(b, dtype=float), "num_heads": h, "num_kv_heads": hkv, "head_dim": d,
             "act_bytes": np.full(len(rows), 2.0), "kv_bytes": np.array(kv_b)}  # fmt: skip
    sq_f, kv_f = np.array(sq, dtype=float), np.array(sq, dtype=float) + np.array(ctx, dtype=float)
    kinds = {
        attention.flash_arrays: shape | {"seq_len_q": sq_f, "seq_len_kv": kv_f,
                                         "causal": np.arange(len(rows)) % 2 == 0},
        attention.decode_arrays: shape | {"seq_len_q": np.ones(len(rows)), "seq_len_kv": kv_f},
    }  # fmt: skip
    keys = ("latency_s", "analytical_s", "util", "flop", "dram_bytes", "l2_bytes", "grid")
    for fn, kw in kinds.items():
        _check_family_rows(fn, kw, gpu, clocks, keys)


def test_gpus_differing_in_what_rows_do_not_carry_are_refused():
    h100 = load_gpu("h100-sxm")
    bigger_l2 = load_gpu("h100-sxm", {"l2.l2_bytes": 100 * 2**20})
    with pytest.raises(ValueError, match="differs from 'h100-sxm' in l2_bytes"):
        GpuRows.of(h100, [h100, bigger_l2], [0, 1])
    with pytest.raises(ValueError, match="architecture"):
        GpuRows.of(h100, [load_gpu("a100-sxm-80gb")], [0])
    with pytest.raises(ValueError, match=r"index must be a list of integers in \[0, 0\]"):
        GpuRows.of(h100, [h100], [1])
