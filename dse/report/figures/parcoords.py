"""Parallel coordinates of a run's feasible points: one axis per varying parameter, then the objectives."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from dse.report._imports import try_import
from dse.report.display import round_sig
from dse.report.figures.pareto import DOMINATED_COLOR, FRONT_COLOR, ParetoInfo

with try_import() as _imports:
    import plotly.graph_objects as go

MAX_PARCOORDS_LINES = 5_000  # beyond this, a sample of dominated lines (software WebGL is slow)
POWER_METRIC = "metric.avg_power_w"  # drawn as an axis beside the objectives


def _wrap_label(label: str, width: int = 14) -> str:
    """Break a long axis label at dots and spaces (`gpu.memory.<br>technology`) so labels do not overlap."""
    lines: list[str] = []
    current = ""
    for token in label.replace(".", ".\0").replace(" ", " \0").split("\0"):
        if current and len(current) + len(token) > width:
            lines.append(current.rstrip())
            current = ""
        current += token
    lines.append(current.rstrip())
    return "<br>".join(line for line in lines if line)


def plot_parcoords(
    info: ParetoInfo, *, max_lines: int = MAX_PARCOORDS_LINES, seed: int = 0
) -> go.Figure | None:
    """Parallel coordinates of feasible points: one axis per varying parameter, then the objectives.

    Categorical parameters are integer codes with `tickvals`/`ticktext` labels. Front lines are drawn last,
    in colour; beyond `max_lines` the dominated lines are a random sample (the front is always complete).
    """
    _imports.check()
    pts = info.points
    front = pts.loc[list(info.front_order)]
    dom = pts[(pts["status"] == "dominated") & pts["plotted"]]
    budget = max(max_lines - len(front), 0)
    if len(dom) > budget:
        dom = dom.sample(n=budget, random_state=seed)
    rows = pd.concat([dom, front])
    if rows.empty:
        return None
    dims: list[dict[str, Any]] = []
    for p in info.varying_params:
        if p.is_categorical:
            cats = list(p.categories or ())
            codes = {v: i for i, v in enumerate(cats)}
            values = np.array([codes.get(v, np.nan) for v in rows[p.column]], dtype=np.float32)
            dims.append(
                {
                    "label": _wrap_label(p.path),
                    "values": values,
                    "tickvals": list(range(len(cats))),
                    "ticktext": [str(c) for c in cats],
                    "range": [-0.25, len(cats) - 0.75],
                }
            )
        else:
            unit = info.param_units[p.column]
            values = unit.convert(pd.to_numeric(rows[p.column], errors="coerce").to_numpy(float))
            dims.append({"label": _wrap_label(unit.title), "values": round_sig(values, 5).astype(np.float32)})
    extra = [POWER_METRIC] if POWER_METRIC in info.metric_units else []
    for col in dict.fromkeys([*(o.column for o in info.objectives), *extra]):
        unit = info.metric_units[col]
        values = unit.convert(pd.to_numeric(rows[col], errors="coerce").to_numpy(float))
        dims.append({"label": _wrap_label(unit.title), "values": round_sig(values, 4).astype(np.float32)})
    is_front = (rows["status"] == "front").to_numpy(np.float32)
    sampled = (
        ""
        if len(rows) == int((pts["status"].isin(["front", "dominated"]) & pts["plotted"]).sum())
        else (f" (all {len(front)} front points and a random {len(dom)} of the dominated ones)")
    )
    fig = go.Figure(
        go.Parcoords(
            line={
                "color": is_front,
                "colorscale": [[0, DOMINATED_COLOR], [1, FRONT_COLOR]],
                "cmin": 0,
                "cmax": 1,
            },
            dimensions=dims,
            labelside="bottom",
            labelfont={"size": 11},
        )
    )
    fig.update_layout(
        title={"text": f"Feasible design points: front in colour, dominated in grey{sampled}"},
        margin={"l": 80, "r": 60, "t": 80, "b": 90},
        height=480,
        template="plotly_white",
    )
    return fig
