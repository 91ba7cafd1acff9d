"""Feasibility of an evaluated point: the model's own verdict plus the study's constraints.

A point is feasible when the model says so (`feasible` in its metrics, e.g. the memory fits) and every
study constraint holds. The reason of an infeasible point lists each cause; the model's part comes first and
starts with `model: `, which is how a replay tells the sampler the same constraint values as the first run
(the log is the only state that survives a crash).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from dse.search.objective import COMPARISONS, STATUS_KEYS, finite
from dse.search.study import ConstraintConfig, StudyConfig

MODEL_REASON_PREFIX = "model: "


def constraint_check(c: ConstraintConfig, metrics: Mapping[str, Any]) -> tuple[bool, float, str]:
    """(holds, normalized violation (<= 0 when it holds), reason text when it does not)."""
    lhs = metrics.get(c.metric)
    rhs = c.value if isinstance(c.value, float) else metrics.get(c.value)
    if not finite(lhs):
        return False, 1.0, f"{c.text}: {c.metric} not available"
    if not finite(rhs):
        return False, 1.0, f"{c.text}: {c.value} not available"
    ok = COMPARISONS[c.op](lhs, rhs)
    scale = max(abs(rhs), 1e-12)
    violation = (lhs - rhs) / scale if c.op in ("<=", "<") else (rhs - lhs) / scale
    if ok:
        return True, min(violation, 0.0), ""
    rhs_text = f"{rhs:.6g}" if isinstance(c.value, float) else f"{c.value} {rhs:.6g}"
    return False, max(violation, 1e-12), f"{c.metric} {lhs:.6g} violates {c.op} {rhs_text}"


def classify(metrics: dict[str, Any], error: str | None, cfg: StudyConfig) -> tuple[bool, str, str | None]:
    """(feasible, reason, error) of one evaluated point."""
    if error is not None:
        return False, "error", error
    model_ok = metrics.pop("feasible", True)
    model_why = metrics.pop("infeasible_reason", "") or ""
    for key in STATUS_KEYS:
        metrics.pop(key, None)
    parts = []
    if model_ok is False:
        parts.append(MODEL_REASON_PREFIX + (str(model_why) or "infeasible"))
    else:
        bad = [m for m in cfg.objectives if not finite(metrics.get(m))]
        if bad:
            return False, "error", f"objective {bad[0]!r} missing or not finite: {metrics.get(bad[0])!r}"
    for c in cfg.constraints:
        ok, _, why = constraint_check(c, metrics)
        if not ok:
            parts.append(why)
    return not parts, "; ".join(parts), None


def clean_metrics(metrics: Mapping[str, Any]) -> dict[str, Any]:
    """Numbers as floats (non-finite -> None) and counts as integers (the run log and pareto.csv print
    `num_gpus: 8`, as `dse predict --json` does), the status keys as they are, anything else dropped."""
    out: dict[str, Any] = {}
    for k, v in metrics.items():
        if k in STATUS_KEYS:
            out[k] = v
        elif isinstance(v, bool):
            out[k] = float(v)
        elif isinstance(v, int):
            out[k] = v
        elif isinstance(v, float):
            out[k] = v if math.isfinite(v) else None
    return out
