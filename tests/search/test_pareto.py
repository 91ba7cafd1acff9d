"""Pareto front and hypervolume: property tests against naive O(n^2) / inclusion-exclusion versions."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from dse.search.pareto import RunFront, default_reference_point, hypervolume, pareto_mask


def naive_mask(v: np.ndarray) -> np.ndarray:
    n = len(v)
    out = np.ones(n, dtype=bool)
    for i in range(n):
        for j in range(n):
            if i != j and np.all(v[j] <= v[i]) and np.any(v[j] < v[i]):
                out[i] = False
                break
    return out


def naive_hv(points: np.ndarray, ref: np.ndarray) -> float:
    """Inclusion-exclusion over all subsets (exact; for a handful of points)."""
    pts = [p for p in points if np.all(p < ref)]
    total = 0.0
    for k in range(1, len(pts) + 1):
        for subset in itertools.combinations(pts, k):
            corner = np.max(np.array(subset), axis=0)
            total += (-1) ** (k + 1) * float(np.prod(ref - corner))
    return total


# Small integer grids make ties and exact duplicates common, which is where sort-based fronts go wrong.
def points(m: int, max_n: int = 40) -> st.SearchStrategy[np.ndarray]:
    return st.integers(1, max_n).flatmap(
        lambda n: hnp.arrays(np.float64, (n, m), elements=st.integers(0, 6).map(float))
    )


@settings(max_examples=200, deadline=None)
@given(points(2))
def test_front_2d_matches_naive(v: np.ndarray) -> None:
    assert np.array_equal(pareto_mask(v), naive_mask(v))


@settings(max_examples=150, deadline=None)
@given(st.integers(3, 4).flatmap(points))
def test_front_nd_matches_naive(v: np.ndarray) -> None:
    assert np.array_equal(pareto_mask(v), naive_mask(v))


@settings(max_examples=100, deadline=None)
@given(points(2), st.lists(st.sampled_from(["minimize", "maximize"]), min_size=2, max_size=2))
def test_directions_are_negations(v: np.ndarray, directions: list[str]) -> None:
    signs = np.array([-1.0 if d == "maximize" else 1.0 for d in directions])
    assert np.array_equal(pareto_mask(v, directions), naive_mask(v * signs))


@settings(max_examples=150, deadline=None)
@given(st.integers(2, 4).flatmap(lambda m: points(m, max_n=7)))
def test_hypervolume_matches_inclusion_exclusion(v: np.ndarray) -> None:
    ref = np.full(v.shape[1], 7.0)
    assert hypervolume(v, ref) == pytest.approx(naive_hv(v, ref), rel=1e-12, abs=1e-12)


def test_hypervolume_known_values() -> None:
    assert hypervolume(np.array([[1.0, 1.0]]), [2.0, 3.0]) == pytest.approx(2.0)
    assert hypervolume(np.array([[0.0, 1.0], [1.0, 0.0]]), [2.0, 2.0]) == pytest.approx(3.0)
    assert hypervolume(np.array([[1.0, 1.0, 1.0]]), [2.0, 2.0, 2.0]) == pytest.approx(1.0)
    # maximize: the same box seen from the other side
    assert hypervolume(np.array([[-1.0, 1.0]]), [0.0, 0.0], ["minimize", "maximize"]) == pytest.approx(1.0)
    # points outside the reference box contribute nothing
    assert hypervolume(np.array([[3.0, 0.0]]), [2.0, 2.0]) == 0.0


def test_front_ignores_nan_rows_and_keeps_duplicates() -> None:
    v = np.array([[1.0, 2.0], [np.nan, 0.0], [1.0, 2.0], [2.0, 1.0], [2.0, 2.0]])
    assert pareto_mask(v).tolist() == [True, False, True, True, False]


def test_front_ignores_infinite_rows_in_either_direction() -> None:
    # -inf in a minimised objective would otherwise dominate everything; +inf in a maximised one too.
    v = np.array([[1.0, 2.0], [-np.inf, 5.0], [2.0, 1.0], [3.0, np.inf]])
    assert pareto_mask(v).tolist() == [True, False, True, False]
    assert pareto_mask(v, ["minimize", "maximize"]).tolist() == [True, False, False, False]


def test_large_2d_front_is_fast_and_right() -> None:
    rng = np.random.default_rng(0)
    v = rng.random((200_000, 2))
    mask = pareto_mask(v)
    front = v[mask]
    order = np.argsort(front[:, 0])
    assert np.all(np.diff(front[order, 1]) < 0)  # strictly decreasing along the front
    sample = rng.choice(len(v), 300, replace=False)
    assert np.array_equal(mask[sample], naive_mask(np.vstack([front, v[sample]]))[len(front) :])


def test_default_reference_point_is_beyond_the_nadir() -> None:
    v = np.array([[1.0, 10.0], [3.0, 5.0]])
    ref = default_reference_point(v, ["minimize", "maximize"])
    assert ref[0] > 3.0 and ref[1] < 5.0


def test_run_front_counts_front_points_outside_its_reference_box_as_progress() -> None:
    """The default reference point is frozen from the first feasible batch; a later front point beyond it
    adds no hypervolume, yet the front moved, so the batch is not stalled. A repeat of a front value, or a
    dominated point, is no progress."""
    front = RunFront(directions=["minimize", "minimize"], ref=None, min_improvement=1e-6)
    front.add(["a"], [[1.0, 1.0]])
    assert front.ref == pytest.approx([1.1, 1.1])  # one point: 10% of its magnitude out (no range)
    hv = front.hv
    assert hv == pytest.approx(0.01) and front.stalled == 0
    front.add(["b"], [[0.5, 2.0]])  # on the front, beyond the reference's f2: no hypervolume
    assert front.hv == hv and front.stalled == 0 and front.ids == ["a", "b"]
    front.add(["c"], [[0.5, 2.0]])  # the same value again
    assert front.stalled == 1 and front.ids == ["a", "b", "c"]
    front.add(["d"], [[3.0, 3.0]])  # dominated
    assert front.stalled == 2
    front.add(["e"], [[0.9, 0.9]])  # dominates a: more hypervolume
    assert front.hv == pytest.approx(0.04) and front.stalled == 0 and front.ids == ["b", "c", "e"]
    front.add([], [])  # a batch of infeasible points only
    assert front.stalled == 1
