"""The GEMM model's per-row bookkeeping: distinct choice problems and per-row lookups."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from dse.perf import gemm
from dse.perf.gemm_rows import _sorted_distinct
from dse.perf.pipeline import lookup_rows
from dse.perf.rates import DTYPE_BYTES

# A column of a problem key: one value on every row, or a few values (-0.0 beside 0.0 among them).
_COLUMN = st.one_of(
    st.sampled_from([0.0, 7.0]).map(lambda v: ("same", v)),
    st.just(("few", (-0.0, 0.0, 1.5, 3.0))),
)


@settings(max_examples=60, deadline=None)
@given(
    columns=st.lists(_COLUMN, min_size=1, max_size=13), num=st.integers(32, 300), seed=st.integers(0, 2**16)
)
def test_sorted_distinct_finds_numpys_unique_rows(columns, num, seed):
    """The sort path of `distinct_rows` (which sorts only the columns that vary) gives what np.unique
    gives: the same problems in the same order, each one's first row, each row's problem."""
    rng = np.random.default_rng(seed)
    key = np.column_stack(
        [np.full(num, v) if kind == "same" else rng.choice(np.array(v), num) for kind, v in columns]
    )
    first, inverse = _sorted_distinct(key)
    _, want_first, want_inverse = np.unique(key + 0.0, axis=0, return_index=True, return_inverse=True)
    assert first.tolist() == want_first.tolist()
    assert inverse.tolist() == want_inverse.ravel().tolist()


def test_a_clock_sweep_of_one_shape_chosen_at_one_clock_is_one_problem(h100):
    """40 rows of one GEMM at 40 clocks, each choosing its kernel at the boost clock (the power-cap
    search's probe): one choice problem, so every row runs the kernel that row alone chooses there."""
    num = 40
    clocks = np.linspace(0.6e9, 1.98e9, num)
    rows = {
        "m": np.full(num, 4096.0),
        "n": np.full(num, 4096.0),
        "k": np.full(num, 4096.0),
        "batch": np.ones(num),
        "dtype": ["bf16"] * num,
        "out_dtype": ["bf16"] * num,
        "b_shared": np.zeros(num, dtype=bool),
    }
    swept = gemm.gemm_arrays(**rows, gpu=h100, sm_clock_hz=clocks, choice_clock_hz=1.98e9)
    for i in (0, 17, num - 1):
        alone = {key: v[i : i + 1] for key, v in rows.items()}
        one = gemm.gemm_arrays(**alone, gpu=h100, sm_clock_hz=clocks[i : i + 1], choice_clock_hz=1.98e9)
        assert (one["tile_idx"][0], one["split"][0]) == (swept["tile_idx"][i], swept["split"][i])
        assert one["latency_s"][0] == swept["latency_s"][i]


@given(keys=st.lists(st.sampled_from(sorted(DTYPE_BYTES)), max_size=40))
def test_lookup_rows_is_the_lookup_of_each_row(keys):
    """One value per key, in order, and the type a list of the values gives (one dtype or several), for
    keys in a list, a tuple or an array."""
    want = np.array([DTYPE_BYTES[k] for k in keys])
    for as_given in (keys, tuple(keys), np.array(keys, dtype=object)):
        got = lookup_rows(DTYPE_BYTES, as_given)
        assert got.dtype == want.dtype
        assert got.tolist() == want.tolist()
