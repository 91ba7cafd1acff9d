"""Energy breakdowns of selected front points: by hardware module and by operator (stacked bars)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from dse.report._imports import try_import
from dse.report.display import display_unit, round_sig
from dse.report.markup import plotly_text

with try_import() as _imports:
    import plotly.graph_objects as go

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


@dataclass(frozen=True, slots=True)
class BreakdownRow:
    """The energy breakdown of one selected front point."""

    label: str
    point_id: str
    by_module: Mapping[str, float]
    by_op: Mapping[str, float]
    # What bounds each phase ({"prefill": {"bound_by", "shares"}}) and the roofline data, when computed.
    bound_by: Mapping[str, Any] | None = None
    roofline: Mapping[str, Any] | None = None


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
        # Names and labels carry user text (a model path, a study's labels): escaped, since Plotly reads
        # tags in them, and referenced from the hover template rather than pasted into it (a `%{` in a
        # name would be template syntax).
        fig.add_trace(
            go.Bar(
                name=plotly_text(part),
                orientation="h",
                y=[plotly_text(label) for label in y_labels],
                x=round_sig(unit.convert(x), 4),
                customdata=np.round(share, 4),
                marker={"color": colors.get(part)} if part in colors else {},
                hovertemplate=(
                    f"%{{fullData.name}}: %{{x:.4~g}} {unit.unit} (%{{customdata:.1%}})<extra>%{{y}}</extra>"
                ),
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
