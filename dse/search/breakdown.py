"""Energy breakdowns of logged points, for the report (the run log keeps scalar metrics only).

The breakdown of a point is recomputed from its parameters and the run's resolved study: the model is
deterministic, so this is the breakdown the search saw.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from dse.search.objective import EvalContext, build_inputs, predict_inputs


def context_for_run(run_dir: str | Path) -> EvalContext | None:
    """The evaluation context of a run (from study.resolved.yaml); None when the run has none."""
    path = Path(run_dir) / "study.resolved.yaml"
    if not path.is_file():
        return None
    from dse.search.study import load_study

    cfg = load_study(path).config
    return cfg.eval_context()


def breakdown_for_point(params: Mapping[str, Any], ctx: EvalContext) -> dict[str, dict[str, float]]:
    """{"by_module": {module: J}, "by_op": {phase/op name: J}} of one design point; {} for a point of a
    load mode (a simulated run of many different engine steps: `dse.serving.load` keeps no breakdown)."""
    inputs = build_inputs(params, ctx)
    if "load" in inputs:
        return {}
    estimate = predict_inputs(inputs)
    return {"by_module": dict(estimate.energy_j_by_module), "by_op": dict(estimate.energy_j_by_name)}
