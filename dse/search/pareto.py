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

`RunFront` keeps a run's front batch by batch and counts the batches without progress (`patience`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

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


def _beats(values: np.ndarray, reference_point: Sequence[float], directions: Sequence[str]) -> np.ndarray:
    """Mask of the rows of `values` strictly better than `reference_point` in every objective (the rows
    that add to the hypervolume)."""
    ref = to_minimization(np.asarray(reference_point, dtype=float)[None, :], directions)[0]
    return np.all(to_minimization(values, directions) < ref, axis=1)


def unbeaten_reference_warning(
    values: np.ndarray, reference_point: Sequence[float], directions: Sequence[str], names: Sequence[str]
) -> str | None:
    """Why the hypervolume of `values` (the feasible points, n x m) is 0: no row beats `reference_point`
    in every objective (one in another unit, ms for s, is the easy mistake); None when one does or there
    are no points."""
    if len(values) == 0 or _beats(values, reference_point, directions).any():
        return None
    best = [
        float(np.max(col) if d == "maximize" else np.min(col))
        for col, d in zip(np.asarray(values, dtype=float).T, directions, strict=True)
    ]
    sides = ", ".join(f"{n} {r:.4g}" for n, r in zip(names, reference_point, strict=True))
    return (
        f"no feasible point is better than the reference point in every objective ({sides}; the best "
        f"values found: {', '.join(f'{b:.4g}' for b in best)}), so the hypervolume is 0 and measures "
        "nothing: give a reference_point the points beat (check its units), or none (the first feasible "
        "batch's worst values, 10% of their range further out)"
    )


@dataclass
class RunFront:
    """A run's front as its batches come in, its hypervolume, and the batches in a row without progress.

    The reference point is the study's, else the first batch with a feasible point fixes it
    (`default_reference_point` of that batch), so that the hypervolumes of later batches compare. A batch
    is progress when the hypervolume grows by more than `min_improvement` (relative), or when a point of
    another value joins the front outside the reference box, where the hypervolume cannot see it (a
    reference point no point beats, or a default one the front has outgrown): patience counted such
    batches as stalled and stopped a run whose front was still moving.
    """

    directions: Sequence[str]
    ref: list[float] | None
    min_improvement: float
    ids: list[str] = field(default_factory=list)
    values: np.ndarray | None = None
    hv: float = 0.0
    best_hv: float = 0.0
    stalled: int = 0

    def add(self, ids: Sequence[str], rows: Sequence[Sequence[float]]) -> None:
        """Merge one batch's feasible points (their ids and objective rows; maybe none) and count it."""
        outside = False
        if rows:
            old = self.values if self.values is not None else np.empty((0, len(self.directions)))
            all_vals = np.vstack([old, np.asarray(rows, dtype=float)])
            if self.ref is None:
                self.ref = default_reference_point(all_vals, self.directions)
            mask = pareto_mask(all_vals, self.directions)
            joined = all_vals[len(old) :][mask[len(old) :]]
            unseen = [not (old == row).all(axis=1).any() for row in joined]  # duplicates change nothing
            outside = bool((~_beats(joined, self.ref, self.directions) & np.asarray(unseen, bool)).any())
            self.ids = [i for i, keep in zip([*self.ids, *ids], mask, strict=True) if keep]
            self.values = all_vals[mask]
            self.hv = hypervolume(self.values, self.ref, self.directions)
        if self.ref is None:
            return  # no feasible point yet: nothing to stall on
        gained = self.hv > self.best_hv * (1.0 + self.min_improvement) and self.hv > self.best_hv
        if gained:
            self.best_hv = self.hv
        self.stalled = 0 if gained or outside else self.stalled + 1
