"""The report's other figures: parallel coordinates, energy breakdowns and DVFS curves.

Each takes a `ParetoInfo` (or plain breakdown dicts) and returns a plotly Figure, or None when the run has
nothing to show (no varying clock, no breakdowns).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from dse.report._imports import try_import
from dse.report.display import DisplayUnit, display_unit, round_sig
from dse.report.figures.pareto import DOMINATED_COLOR, FRONT_COLOR, LINE_COLOR, ParetoInfo

with try_import() as _imports:
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

MODULE_ORDER = ("dram", "l2", "smem", "tensor", "cuda", "sfu", "idle")
MODULE_COLORS = {
    "dram": "#4c72b0",
    "l2": "#8da0cb",
    "smem": "#64b5cd",
    "tensor": "#dd8452",
    "cuda": "#c44e52",
    "sfu": "#937860",
    "idle": "#b0b0b0",
}
MAX_OPS = 10
MAX_PARCOORDS_LINES = 5_000  # beyond this, a sample of dominated lines (software WebGL is slow)
MAX_DVFS_BINS = 16  # a clock axis with more distinct values is binned (medians of a few points are noise)
POWER_METRIC = "metric.avg_power_w"


# --- parallel coordinates ---------------------------------------------------------------------------


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


# --- energy breakdown -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class BreakdownRow:
    """The energy breakdown of one selected front point."""

    label: str
    point_id: str
    by_module: Mapping[str, float]
    by_op: Mapping[str, float]


def _shorten_names(names: Sequence[str]) -> dict[str, str]:
    """Drop path components every name shares (`llama-3.1-8b` in `prefill/llama-3.1-8b/layer[0-31]/...`)."""
    parts = {n: n.split("/") for n in names}
    if len(parts) < 2 or len({len(p) for p in parts.values()}) != 1:
        return {n: n for n in names}
    depth = len(next(iter(parts.values())))
    shared = {i for i in range(depth - 1) if len({p[i] for p in parts.values()}) == 1}
    return {n: "/".join(c for i, c in enumerate(p) if i not in shared) for n, p in parts.items()}


def _group_ops(rows: Sequence[BreakdownRow], max_ops: int) -> tuple[list[str], list[dict[str, float]]]:
    """Shorten op names (drop shared components), keep the `max_ops` largest, pool the rest."""
    short = _shorten_names(sorted({name for r in rows for name in r.by_op}))
    pooled: list[dict[str, float]] = []
    for r in rows:
        acc: dict[str, float] = {}
        for name, e in r.by_op.items():
            acc[short[name]] = acc.get(short[name], 0.0) + float(e)
        pooled.append(acc)
    totals: dict[str, float] = {}
    for acc in pooled:
        for k, v in acc.items():
            totals[k] = totals.get(k, 0.0) + v
    ranked = sorted(totals, key=totals.__getitem__, reverse=True)
    keep, rest = ranked[:max_ops], ranked[max_ops:]
    grouped = []
    for acc in pooled:
        g = {k: acc.get(k, 0.0) for k in keep}
        if rest:
            g["other ops"] = sum(acc.get(k, 0.0) for k in rest)
        grouped.append(g)
    return keep + (["other ops"] if rest else []), grouped


def _stacked_bars(
    title: str,
    y_labels: list[str],
    parts: list[str],
    values: Sequence[Mapping[str, float]],
    colors: Mapping[str, str],
) -> go.Figure:
    totals = np.array([sum(v.values()) for v in values])
    unit = display_unit("metric.energy_j", totals)
    fig = go.Figure()
    for part in parts:
        x = np.array([v.get(part, 0.0) for v in values])
        share = np.divide(x, totals, out=np.zeros_like(x), where=totals > 0)
        fig.add_trace(
            go.Bar(
                name=part,
                orientation="h",
                y=y_labels,
                x=round_sig(unit.convert(x), 4),
                customdata=np.round(share, 4),
                marker={"color": colors.get(part)} if part in colors else {},
                hovertemplate=f"{part}: %{{x:.4~g}} {unit.unit} (%{{customdata:.1%}})<extra>%{{y}}</extra>",
            )
        )
    fig.update_layout(
        barmode="stack",
        title={"text": title},
        xaxis={"title": {"text": f"energy ({unit.unit})"}},
        yaxis={"autorange": "reversed"},
        legend={"traceorder": "normal"},
        height=140 + 60 * len(y_labels),
        margin={"l": 200, "r": 30, "t": 60, "b": 50},
        template="plotly_white",
    )
    return fig


def plot_breakdowns(rows: Sequence[BreakdownRow], *, max_ops: int = MAX_OPS) -> tuple[go.Figure, go.Figure]:
    """Stacked bars of the selected points' energy by hardware module and by layer/operator."""
    _imports.check()
    labels = [f"{r.label} · {r.point_id}" for r in rows]
    modules = [m for m in MODULE_ORDER if any(m in r.by_module for r in rows)]
    modules += sorted({m for r in rows for m in r.by_module} - set(modules))
    by_module = _stacked_bars(
        "Energy by hardware module", labels, modules, [r.by_module for r in rows], MODULE_COLORS
    )
    ops, grouped = _group_ops(rows, max_ops)
    by_op = _stacked_bars("Energy by layer / operator", labels, ops, grouped, {"other ops": "#cccccc"})
    return by_module, by_op


# --- DVFS -------------------------------------------------------------------------------------------


def clock_column(info: ParetoInfo) -> str | None:
    """The varying SM-clock parameter, if the study searched over it."""
    for p in info.varying_params:
        if not p.is_categorical and p.path.split(".")[-1] in ("sm_clock_mhz", "sm_clock_hz"):
            return p.column
    return None


def _dvfs_panel_traces(
    stats: pd.DataFrame,
    fclock: np.ndarray,
    front_y: np.ndarray,
    front: pd.DataFrame,
    cunit: DisplayUnit,
    unit: DisplayUnit,
    *,
    show_legend: bool,
) -> list[go.Scatter]:
    """One DVFS panel: the interquartile band and median per clock, and the front points on top."""
    xs = stats.index.to_numpy()
    band = go.Scatter(
        x=np.concatenate([xs, xs[::-1]]),
        y=round_sig(np.concatenate([stats[0.75].to_numpy(), stats[0.25].to_numpy()[::-1]]), 4),
        fill="toself",
        mode="lines",
        fillcolor="rgba(76,114,176,0.15)",
        line={"width": 0},
        hoverinfo="skip",
        name="25-75% of points",
        legendgroup="band",
        showlegend=show_legend,
    )
    median = go.Scatter(
        x=xs,
        y=round_sig(stats[0.5].to_numpy(), 4),
        mode="lines+markers",
        line={"color": "#4c72b0"},
        name="median over other parameters",
        legendgroup="median",
        showlegend=show_legend,
        hovertemplate=f"%{{x:.0f}} {cunit.unit}: median %{{y:.4~g}} {unit.unit}<extra></extra>",
    )
    points = go.Scatter(
        x=fclock,
        y=round_sig(front_y, 4),
        mode="markers",
        marker={"color": FRONT_COLOR, "size": 8, "line": {"width": 1, "color": LINE_COLOR}},
        name="Pareto front points",
        legendgroup="front",
        showlegend=show_legend,
        customdata=front["point_id"].to_numpy(object),
        hovertemplate=f"%{{customdata}}<br>%{{x:.0f}} {cunit.unit}: %{{y:.4~g}} {unit.unit}<extra></extra>",
    )
    return [band, median, points]


def plot_dvfs(info: ParetoInfo) -> go.Figure | None:
    """Latency, power and energy against the SM clock: median and interquartile band over the other
    parameters at each clock (feasible points), with the front points on top. None without a clock axis.
    """
    _imports.check()
    col = clock_column(info)
    if col is None:
        return None
    pts = info.points[info.points["status"].isin(["front", "dominated"]) & info.points["plotted"]]
    if pts.empty:
        return None
    cunit = info.param_units[col]
    clock = cunit.convert(pd.to_numeric(pts[col], errors="coerce").to_numpy(float))
    uniq = np.unique(clock[np.isfinite(clock)])
    if len(uniq) > MAX_DVFS_BINS:
        edges = np.linspace(uniq[0], uniq[-1], MAX_DVFS_BINS + 1)
        idx = np.clip(np.digitize(clock, edges) - 1, 0, MAX_DVFS_BINS - 1)
        clock = (edges[idx] + edges[idx + 1]) / 2
    panels = [info.x.column, POWER_METRIC, info.y.column]
    panels = [c for c in dict.fromkeys(panels) if c in info.metric_units]
    fig = make_subplots(
        rows=1,
        cols=len(panels),
        shared_xaxes=True,
        subplot_titles=[info.metric_units[c].title for c in panels],
    )
    front = pts[pts["status"] == "front"]
    fclock = cunit.convert(pd.to_numeric(front[col], errors="coerce").to_numpy(float))
    for k, mcol in enumerate(panels, start=1):
        unit = info.metric_units[mcol]
        frame = pd.DataFrame({"clock": clock, "v": unit.convert(pts[mcol].to_numpy(float))}).dropna()
        stats = frame.groupby("clock")["v"].quantile([0.25, 0.5, 0.75]).unstack()
        front_y = unit.convert(front[mcol].to_numpy(float))
        for trace in _dvfs_panel_traces(stats, fclock, front_y, front, cunit, unit, show_legend=k == 1):
            fig.add_trace(trace, row=1, col=k)
        fig.update_xaxes(title={"text": cunit.title}, row=1, col=k)
    fig.update_layout(
        title={"text": "DVFS: how latency, power and energy move with the SM clock"},
        height=420,
        margin={"l": 60, "r": 30, "t": 90, "b": 60},
        legend={"orientation": "h", "y": -0.2},
        template="plotly_white",
    )
    return fig
