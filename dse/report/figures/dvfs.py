"""DVFS curves: energy, latency and power of the front against the SM clock, when the study varied it."""

from __future__ import annotations

import numpy as np
import pandas as pd

from dse.report._imports import try_import
from dse.report.display import DisplayUnit, round_sig
from dse.report.figures.pareto import FRONT_COLOR, LINE_COLOR, ParetoInfo

with try_import() as _imports:
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

MAX_DVFS_BINS = 16  # a clock axis with more distinct values is binned (medians of a few points are noise)
POWER_METRIC = "metric.avg_power_w"


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
