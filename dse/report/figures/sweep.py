"""Figures of `dse sweep` and `dse compare`, and the offline page that holds one.

`plot_sweep(rows, paths)`: one line chart per metric of `sweep_metrics(paths)` (stacked, shared x = the first
swept parameter), one line per value of the second parameter; infeasible points are drawn as crosses
with their reason in hover, failed points leave a gap. `plot_compare(rows)`: a grouped bar chart, one group
per metric of `COMPARE_METRICS`, one bar per GPU, normalized to the first GPU, absolute values in hover.
`figure_page(fig, title)`: a self-contained HTML page (plotly.js inlined, no CDN) as one string.
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from typing import Any

from dse.report._imports import try_import
from dse.report.markup import plotly_text
from dse.search.sweep import COMPARE_METRICS, sweep_metrics
from dse.units import format_value

with try_import() as _imports:
    import plotly.graph_objects as go
    import plotly.io as pio
    from plotly.offline import get_plotlyjs
    from plotly.subplots import make_subplots

PLOT_CONFIG = {"displaylogo": False, "responsive": True}


def _display(row: Mapping[str, Any], key: str, scale: float) -> float | None:
    value = row["metrics"].get(key)
    return float(value) * scale if isinstance(value, int | float) and not isinstance(value, bool) else None


def _series(rows: Sequence[Mapping[str, Any]], paths: Sequence[str]) -> dict[Any, list[Mapping[str, Any]]]:
    """Rows grouped by the second swept parameter's value (one group, None, for a 1-D sweep)."""
    groups: dict[Any, list[Mapping[str, Any]]] = {}
    for row in rows:
        key = row["params"][paths[1]] if len(paths) > 1 else None
        groups.setdefault(key, []).append(row)
    return groups


def plot_sweep(rows: Sequence[Mapping[str, Any]], paths: Sequence[str], title: str = "") -> Any:
    """The sweep's line charts (see the module docstring)."""
    _imports.check()
    metrics = sweep_metrics(paths)
    n = len(metrics)
    fig = make_subplots(
        rows=n, cols=1, shared_xaxes=True, vertical_spacing=0.03, subplot_titles=[m[1] for m in metrics]
    )
    palette = ["#1f77b4", "#e4572e", "#2ca02c", "#9467bd", "#8c564b", "#17becf", "#bcbd22", "#7f7f7f"]
    for i, (value, group) in enumerate(_series(rows, paths).items()):
        name = paths[0] if value is None else f"{paths[1]} = {value:g}"
        color = palette[i % len(palette)]
        xs = [r["params"][paths[0]] for r in group]
        hover = [
            r["status"] if r["reason"] is None else f"{r['status']}: " + plotly_text(str(r["reason"])[:200])
            for r in group
        ]
        symbols = ["circle" if r["reason"] is None else "x" for r in group]
        for j, (key, label, scale, fmt) in enumerate(metrics):
            ys = [_display(r, key, scale) for r in group]
            # the value as the text table shows it (`format_value`: 3.32e-300, not d3's 300 zeros)
            shown = ["-" if y is None else format_value(y, fmt) for y in ys]
            fig.add_trace(
                go.Scatter(
                    x=xs,
                    y=ys,
                    mode="lines+markers",
                    name=plotly_text(name),
                    legendgroup=name,
                    showlegend=j == 0,
                    line={"color": color},
                    marker={"symbol": symbols, "size": 8},
                    customdata=list(zip(shown, hover, strict=True)),
                    hovertemplate=f"{paths[0]} = %{{x}}<br>{label}: %{{customdata[0]}}<br>%{{customdata[1]}}"
                    "<extra>%{fullData.name}</extra>",
                ),
                row=j + 1,
                col=1,
            )
    fig.update_xaxes(title_text=paths[0], row=n, col=1)
    fig.update_layout(
        title=plotly_text(title),
        height=260 * n,
        template="plotly_white",
        hovermode="closest",
        margin={"t": 80},
    )
    return fig


def plot_compare(rows: Sequence[Mapping[str, Any]], title: str = "") -> Any:
    """Grouped bars: per metric, each GPU's value over the first GPU's (absolute values in hover)."""
    _imports.check()
    base = rows[0]
    metrics = [m for m in COMPARE_METRICS if _display(base, m[0], m[2])]
    fig = go.Figure()
    for row in rows:
        ratios, texts = [], []
        for key, _, scale, fmt in metrics:
            value, ref = _display(row, key, scale), _display(base, key, scale)
            ratios.append(None if value is None or not ref else value / ref)
            texts.append("-" if value is None else format_value(value, fmt))
        name = str(row["params"]["gpu"]) + ("" if row["reason"] is None else f" ({row['status']})")
        fig.add_trace(
            go.Bar(
                x=[m[1] for m in metrics],
                y=ratios,
                name=plotly_text(name),
                customdata=[[text, plotly_text(base["params"]["gpu"])] for text in texts],
                hovertemplate="%{x}: %{customdata[0]} (x%{y:.2f} of %{customdata[1]})"
                "<extra>%{fullData.name}</extra>",
            )
        )
    fig.update_layout(
        title=plotly_text(title),
        barmode="group",
        template="plotly_white",
        yaxis_title=plotly_text(f"relative to {base['params']['gpu']}"),
        height=520,
    )
    return fig


def figure_page(fig: Any, title: str) -> str:
    """One self-contained HTML page holding `fig`: plotly.js inlined once, no network needed to open it."""
    _imports.check()
    div = pio.to_html(
        fig,
        full_html=False,
        include_plotlyjs=False,
        include_mathjax=False,
        div_id="figure",
        config=PLOT_CONFIG,
    )
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        f"<title>{html.escape(title)}</title>"
        f'<script type="text/javascript">{get_plotlyjs()}</script></head>'
        f'<body style="font-family: system-ui, sans-serif; margin: 16px">{div}</body></html>'
    )


__all__ = ["figure_page", "plot_compare", "plot_sweep"]
