"""Pareto fronts and hypervolume in numpy (no Optuna private helpers).

Dominance: a dominates b when a is no worse in every objective and better in at least one (after turning
maximized objectives into minimized ones). A point is on the front when nothing dominates it, so exact
duplicates of a front point are all on the front.

- 2-D front: lexicographic sort + running minimum, O(n log n) (reference/search-notes.md section 3.1).
- N-D front: sort, then test each point against the front found so far (O(n * |front|), vectorized).
- 2-D hypervolume: sorted rectangle sum. N-D: exact slicing over the last objective down to 2-D (HSO),
  fine for the fronts of a few hundred points that 3-4 objectives give.

Hypervolume is of the region dominated by the front and bounded by the reference point; points that are
not strictly better than the reference in every objective contribute nothing.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def to_minimization(values: np.ndarray, directions: Sequence[str] | None = None) -> np.ndarray:
    """Copy of `values` (n x m) with maximized columns negated."""
    out = np.array(values, dtype=float, copy=True)
    if out.ndim != 2:
        raise ValueError(f"values must be a 2-D array (points x objectives), got shape {out.shape}")
    if directions is not None:
        if len(directions) != out.shape[1]:
            raise ValueError(f"{len(directions)} directions for {out.shape[1]} objectives")
        for j, d in enumerate(directions):
            if d == "maximize":
                out[:, j] = -out[:, j]
            elif d != "minimize":
                raise ValueError(f"direction must be 'minimize' or 'maximize', got {d!r}")
    return out


def _front_2d(v: np.ndarray) -> np.ndarray:
    n = len(v)
    order = np.lexsort((v[:, 1], v[:, 0]))
    s = v[order]
    # A point is dominated iff some earlier point in sorted order that is not an exact duplicate has
    # f2 <= its f2. Exact duplicates are adjacent, so use the running minimum before its duplicate block.
    new_block = np.ones(n, dtype=bool)
    new_block[1:] = np.any(s[1:] != s[:-1], axis=1)
    block_start = np.maximum.accumulate(np.where(new_block, np.arange(n), 0))
    prefix_min = np.empty(n)
    prefix_min[0] = np.inf
    prefix_min[1:] = np.minimum.accumulate(s[:-1, 1])
    on = prefix_min[block_start] > s[:, 1]
    mask = np.empty(n, dtype=bool)
    mask[order] = on
    return mask


def _front_nd(v: np.ndarray) -> np.ndarray:
    n = len(v)
    order = np.lexsort(v.T[::-1])
    s = v[order]
    keep: list[int] = []
    front = np.empty((0, v.shape[1]))
    for i in range(n):
        p = s[i]
        if len(front):
            dominated = np.all(front <= p, axis=1) & np.any(front < p, axis=1)
            if dominated.any():
                continue
        # Sorted order: no later point can dominate an earlier kept one, so the front only grows.
        keep.append(i)
        front = s[keep]
    mask = np.zeros(n, dtype=bool)
    mask[order[keep]] = True
    return mask


def pareto_mask(values: np.ndarray, directions: Sequence[str] | None = None) -> np.ndarray:
    """Boolean mask of the non-dominated rows of `values` (n x m).

    Rows with a non-finite value (NaN, or an infinity that says the metric could not be computed) are never
    on the front. The one front implementation: the runner and the report both call it.
    """
    v = to_minimization(values, directions)
    n, m = v.shape
    mask = np.zeros(n, dtype=bool)
    ok = np.isfinite(v).all(axis=1)
    if not ok.any():
        return mask
    sub = v[ok]
    if m == 1:
        mask[ok] = sub[:, 0] == sub[:, 0].min()
    elif m == 2:
        mask[ok] = _front_2d(sub)
    else:
        mask[ok] = _front_nd(sub)
    return mask


def _hv_2d(points: np.ndarray, ref: np.ndarray) -> float:
    p = points[np.lexsort((points[:, 1], points[:, 0]))]
    total = 0.0
    best_f2 = ref[1]
    for f1, f2 in p:
        if f2 < best_f2:
            total += (ref[0] - f1) * (best_f2 - f2)
            best_f2 = f2
    return float(total)


def _hv_rec(points: np.ndarray, ref: np.ndarray) -> float:
    m = points.shape[1]
    if len(points) == 0:
        return 0.0
    if m == 1:
        return float(ref[0] - points[:, 0].min())
    if m == 2:
        return _hv_2d(points, ref)
    # Slice along the last objective: between consecutive levels the cross-section is the (m-1)-D
    # hypervolume of the points at or below the level.
    order = np.argsort(points[:, -1], kind="stable")
    p = points[order]
    levels = np.append(p[:, -1], ref[-1])
    total = 0.0
    for i in range(len(p)):
        height = levels[i + 1] - levels[i]
        if height <= 0:
            continue
        sub = p[: i + 1, :-1]
        sub = sub[pareto_mask(sub)]
        total += height * _hv_rec(sub, ref[:-1])
    return float(total)


def hypervolume(
    values: np.ndarray, reference_point: Sequence[float], directions: Sequence[str] | None = None
) -> float:
    """Hypervolume dominated by `values` (n x m) and bounded by `reference_point` (same directions)."""
    v = to_minimization(values, directions)
    ref = to_minimization(np.asarray(reference_point, dtype=float)[None, :], directions)[0]
    if v.shape[1] != len(ref):
        raise ValueError(f"reference point has {len(ref)} values for {v.shape[1]} objectives")
    v = v[~np.isnan(v).any(axis=1)]
    v = v[np.all(v < ref, axis=1)]
    if len(v) == 0:
        return 0.0
    v = v[pareto_mask(v)]
    return _hv_rec(np.unique(v, axis=0), ref)


def default_reference_point(
    values: np.ndarray, directions: Sequence[str], margin: float = 0.1
) -> list[float]:
    """Nadir of `values` pushed out by `margin` of the range (or of the magnitude when the range is 0)."""
    v = to_minimization(values, directions)
    v = v[~np.isnan(v).any(axis=1)]
    if len(v) == 0:
        raise ValueError("no points to derive a reference point from")
    worst, best = v.max(axis=0), v.min(axis=0)
    span = worst - best
    pad = np.where(span > 0, span * margin, np.maximum(np.abs(worst) * margin, 1e-12))
    ref = worst + pad
    return [float(-r) if d == "maximize" else float(r) for r, d in zip(ref, directions, strict=True)]
