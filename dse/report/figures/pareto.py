"""The Pareto view: `build_pareto_info(trials, objectives) -> ParetoInfo` (data, tested) and
`plot_pareto(info) -> go.Figure` (drawing, smoke-tested), split as in optuna's `_pareto_front.py`.

Each point falls in one class: `front` (feasible and non-dominated), `dominated` (feasible), `infeasible`
(evaluated but breaking a constraint; kept with its reason) or `failed` (an error or no objective values;
counted, not drawn). The scatter uses WebGL (`Scattergl`) and keeps hover data compact: one `customdata`
row per point (rounded, display units) and one `hovertemplate` per trace; metrics that are the same for
every point are written once in the template, and a trace too large for HOVER_CELL_BUDGET carries only its
most relevant metrics. A 50,000-point run stays near 11 MB, 4.8 MB of which is plotly.js.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from dse.errors import ConfigError
from dse.report._imports import try_import
from dse.report.display import DisplayUnit, display_unit, round_sig
from dse.report.frames import Objective, ParamInfo, default_objectives, infer_parameters, metric_columns
from dse.search.pareto import default_reference_point, hypervolume, pareto_mask

with try_import() as _imports:
    import plotly.graph_objects as go

STATUS_ORDER = ("front", "dominated", "infeasible", "failed")
FRONT_COLOR = "#e4572e"
DOMINATED_COLOR = "#b8b8b8"
INFEASIBLE_COLOR = "#7b4fa0"
LINE_COLOR = "#222222"
MISSING = "-"  # shown in hover for a parameter or metric a point does not have
# Per-point hover data is the bulk of a large report. A trace whose rows x metrics exceed this many cells
# carries only its most relevant metrics (at least MIN_HOVER_METRICS); 50,000 points keep 8.
HOVER_CELL_BUDGET = 400_000
MIN_HOVER_METRICS = 6
# Metrics listed first in hover (after the objectives), when the run has them.
PREFERRED_METRICS = (
    "ttft_s",
    "tpot_s",
    "e2e_latency_s",
    "energy_j",
    "energy_per_output_token_j",
    "avg_power_w",
    "memory_bytes",
    "output_tokens_per_s",
    "peak_power_w",
)


@dataclass(frozen=True, kw_only=True)
class Axis:
    """One plotted objective: its trials column, direction and display unit."""

    column: str
    direction: str
    unit: DisplayUnit


@dataclass(frozen=True, kw_only=True)
class ParetoInfo:
    """Everything the Pareto scatter shows, computed without plotly.

    `points` is the trials frame plus `status` (one of STATUS_ORDER), `plotted` (has finite x and y),
    and `_x`/`_y` (the plotted objectives in display units). `front_order` lists the row labels of the
    front sorted along x. `selected` names a few front points (best of each objective, the knee) by row
    label, for the energy breakdown and the front table. `study_objectives` are the run's own, those its
    log's `on_front` was computed for.
    """

    objectives: tuple[Objective, ...]
    x: Axis
    y: Axis
    points: pd.DataFrame
    params: tuple[ParamInfo, ...]
    metrics: tuple[str, ...]
    metric_units: dict[str, DisplayUnit]
    constant_metrics: dict[str, float]
    param_units: dict[str, DisplayUnit]
    front_order: tuple[int, ...]
    selected: dict[str, int]
    color_by: str | None
    front_from_log: bool
    study_objectives: tuple[Objective, ...]

    def count(self, status: str) -> int:
        """Number of points in one class."""
        return int((self.points["status"] == status).sum())

    @property
    def n_points(self) -> int:
        """All logged points."""
        return len(self.points)

    @property
    def n_plotted(self) -> int:
        """Points drawn in the scatter (those with finite objective values)."""
        return int(self.points["plotted"].sum())

    @property
    def reranked(self) -> bool:
        """Whether the page ranks by objectives other than the study's (`dse report --objective`)."""
        return set(self.objectives) != set(self.study_objectives)

    @property
    def varying_params(self) -> tuple[ParamInfo, ...]:
        """Parameters that take more than one value in this run."""
        return tuple(p for p in self.params if p.kind != "constant")


def _knee(front_xy: np.ndarray) -> int:
    """Index of the knee of a front given as minimised, front-ordered values (max distance to the chord)."""
    if len(front_xy) < 3:
        return 0
    lo, hi = front_xy.min(axis=0), front_xy.max(axis=0)
    norm = (front_xy - lo) / np.where(hi > lo, hi - lo, 1.0)
    if norm.shape[1] == 2:
        a, b = norm[0], norm[-1]
        d = b - a
        dist = np.abs(d[0] * (norm[:, 1] - a[1]) - d[1] * (norm[:, 0] - a[0])) / max(np.hypot(*d), 1e-12)
        return int(np.argmax(dist))
    return int(np.argmin(np.linalg.norm(norm, axis=1)))


def _pick_axes(objectives: Sequence[Objective], columns: Sequence[str]) -> tuple[Objective, Objective]:
    """Latency-like objective on x, energy-like on y when there is one; else the first two.

    A single-objective study is drawn against a latency or energy metric of the run.
    """
    if len(objectives) < 2:
        extra = [o for o in default_objectives(columns) if o not in objectives]
        objectives = [*objectives, *extra][:2]
    xs = [o for o in objectives if o.column.endswith("_s")]
    ys = [o for o in objectives if o.column.endswith("_j")]
    if xs and ys:
        return xs[0], ys[0]
    return objectives[0], objectives[1]


def _classify(
    df: pd.DataFrame, objectives: Sequence[Objective], *, log_is_for_these: bool
) -> tuple[np.ndarray, np.ndarray, bool]:
    """(status per row, mask of the candidates for the front, whether the front came from the log).

    The log's `on_front` is the front of the study's objectives: used only when `log_is_for_these`.
    """
    feasible = (
        df["feasible"].fillna(False).astype(bool) if "feasible" in df else pd.Series(True, index=df.index)
    )
    error = df["error"] if "error" in df else pd.Series(None, index=df.index)
    errored = error.notna() & (error.astype(str).str.len() > 0)
    obj_vals = _objective_values(df, objectives)
    has_values = np.isfinite(obj_vals).all(axis=1)
    candidates = (feasible & ~errored).to_numpy() & has_values

    front_from_log = log_is_for_these and bool("on_front" in df and df["on_front"].notna().any())
    if front_from_log:
        on_front = df["on_front"].fillna(False).astype(bool).to_numpy() & candidates
    else:
        on_front = np.zeros(len(df), dtype=bool)
        idx = np.flatnonzero(candidates)
        on_front[idx] = pareto_mask(obj_vals[idx], [o.direction for o in objectives])
    status = np.select(
        [errored.to_numpy(), ~feasible.to_numpy(), ~has_values, on_front],
        ["failed", "infeasible", "failed", "front"],
        default="dominated",
    )
    return status, candidates, front_from_log


def _objective_values(df: pd.DataFrame, objectives: Sequence[Objective]) -> np.ndarray:
    return np.column_stack([pd.to_numeric(df[o.column], errors="coerce").to_numpy(float) for o in objectives])


def _selected_points(
    front_rows: np.ndarray, fvals: np.ndarray, objectives: Sequence[Objective]
) -> dict[str, int]:
    """The front points the page highlights: best in each objective and the knee, in the page's order."""
    selected: dict[str, int] = {}
    if not len(front_rows):
        return selected
    for j, o in enumerate(objectives):
        label = display_unit(o.column).label
        selected[f"best {label}"] = int(front_rows[int(np.argmin(fvals[:, j]))])
    knee = int(front_rows[_knee(fvals)])
    if knee not in selected.values():
        selected["knee"] = knee
    # Keep the page's order: best x, knee, best y, then any further objectives.
    keys = list(selected)
    ordered = [keys[0]] + (["knee"] if "knee" in selected else []) + [k for k in keys[1:] if k != "knee"]
    deduped: dict[str, int] = {}
    for k in ordered:
        if selected[k] not in deduped.values():
            deduped[k] = selected[k]
    return deduped


def _metric_info(
    df: pd.DataFrame, candidates: np.ndarray, wanted: set[str]
) -> tuple[tuple[str, ...], dict[str, DisplayUnit], dict[str, float]]:
    """(metrics shown, their display units, metrics that are the same for every drawn point)."""
    # Metrics no point has (text fields the runner logs as empty) are left out of hover and table, and so is
    # one of a `*_hz` / `*_mhz` pair (both show in MHz): the `_mhz` one, unless the study asks for it by name.
    columns = metric_columns(df)
    twins = set()
    for c in columns:
        hz = c.removesuffix("_mhz") + "_hz"
        if c.endswith("_mhz") and hz in columns:
            twins.add(hz if c in wanted and hz not in wanted else c)
    metrics = tuple(
        m
        for m in columns
        if m in wanted or (m not in twins and pd.to_numeric(df[m], errors="coerce").notna().any())
    )
    metric_units = {m: display_unit(m, df.loc[candidates, m].to_numpy(float)) for m in metrics}
    drawn = df.loc[df["plotted"]]
    constant_metrics = {}
    for m in metrics:
        vals = pd.to_numeric(drawn[m], errors="coerce")
        if len(vals) > 1 and vals.notna().all() and vals.nunique() == 1 and m not in wanted:
            constant_metrics[m] = float(vals.iloc[0])
    return metrics, metric_units, constant_metrics


def _color_column(color_by: str | None, params: Sequence[ParamInfo]) -> str | None:
    """The column of a parameter given by path, column or the study's name for it (`gddr_bus`)."""
    if not color_by:
        return None
    for p in params:
        if color_by in (p.column, p.path, *p.names):
            return p.column
    known = ", ".join(p.label for p in params)
    raise ConfigError(f"--color-by {color_by!r}: no such parameter in this run (known: {known})")


def build_pareto_info(
    trials: pd.DataFrame,
    objectives: Sequence[Objective],
    *,
    parameters: Sequence[ParamInfo] | None = None,
    color_by: str | None = None,
    study_objectives: Sequence[Objective] | None = None,
) -> ParetoInfo:
    """Classify every point and order the front.

    Args:
        trials: one row per point in the trials.parquet layout (`frames.read_trials`).
        objectives: the objectives to rank by; the first latency-like and energy-like ones are plotted.
        parameters: parameter descriptions (`frames.infer_parameters`); inferred when omitted.
        color_by: a parameter path or column to colour by (`sm_clock_mhz` or `param.sm_clock_mhz`);
            ConfigError when the run has no such parameter.
        study_objectives: the run's own objectives (`RunData.objectives`); None: `objectives` are those.

    The front comes from the log's `on_front` column when the log has one and `objectives` are the study's
    (any order, same directions); else it is computed over all objectives from the feasible, error-free
    points (the log's front would be that of other objectives: `dse report --objective`).
    """
    objectives = tuple(objectives)
    own = objectives if study_objectives is None else tuple(study_objectives)
    df = trials.reset_index(drop=True).copy()
    ox, oy = _pick_axes(objectives, list(df.columns))
    for col in {o.column for o in (*objectives, ox, oy)} - set(df.columns):
        df[col] = np.nan  # an objective no point produced (every evaluation failed)
    params = tuple(parameters) if parameters is not None else infer_parameters(df)
    status, candidates, front_from_log = _classify(
        df, objectives, log_is_for_these=set(own) == set(objectives)
    )
    df["status"] = status
    # units from the front's candidates, or from every point where none is feasible (else SI bytes, MB/s)
    scaled = candidates if candidates.any() else np.ones(len(df), dtype=bool)
    xu = display_unit(ox.column, df.loc[scaled, ox.column].to_numpy(float))
    yu = display_unit(oy.column, df.loc[scaled, oy.column].to_numpy(float))
    df["_x"] = xu.convert(pd.to_numeric(df[ox.column], errors="coerce").to_numpy(float))
    df["_y"] = yu.convert(pd.to_numeric(df[oy.column], errors="coerce").to_numpy(float))
    # Infeasible points that have objective values are drawn (marked x); those without are only counted.
    df["plotted"] = np.isfinite(df["_x"]) & np.isfinite(df["_y"]) & (status != "failed")

    front_rows = np.flatnonzero(status == "front")
    front_rows = front_rows[np.lexsort((df["_y"].to_numpy()[front_rows], df["_x"].to_numpy()[front_rows]))]
    signs = np.array([-1.0 if o.direction == "maximize" else 1.0 for o in objectives])
    selected = _selected_points(front_rows, _objective_values(df, objectives)[front_rows] * signs, objectives)
    wanted = {o.column for o in objectives} | {ox.column, oy.column}
    metrics, metric_units, constant_metrics = _metric_info(df, scaled, wanted)
    param_units = {
        p.column: display_unit(p.column, None if p.is_categorical else df[p.column].to_numpy(float))
        for p in params
        if p.kind != "constant"
    }
    return ParetoInfo(
        objectives=objectives,
        x=Axis(column=ox.column, direction=ox.direction, unit=xu),
        y=Axis(column=oy.column, direction=oy.direction, unit=yu),
        points=df,
        params=params,
        metrics=metrics,
        constant_metrics=constant_metrics,
        metric_units=metric_units,
        param_units=param_units,
        front_order=tuple(int(i) for i in front_rows),
        selected=selected,
        color_by=_color_column(color_by, params),
        front_from_log=front_from_log,
        study_objectives=own,
    )


def front_hypervolume(info: ParetoInfo) -> tuple[float, list[float]] | None:
    """(hypervolume of the page's front, its reference point), None without a feasible point.

    The reference is what a run whose study gives none takes (`default_reference_point`): the feasible
    points' nadir pushed out by 10% of their range, here over all of them. For a front of the study's own
    objectives the run's summary.json has the figure the run reported (its reference may differ).
    """
    feasible = info.points["status"].isin(("front", "dominated")).to_numpy()
    if not feasible.any():
        return None
    values = _objective_values(info.points, info.objectives)
    directions = [o.direction for o in info.objectives]
    ref = default_reference_point(values[feasible], directions)
    return hypervolume(values[list(info.front_order)], ref, directions), ref


# --- hover data -------------------------------------------------------------------------------------


def hover_metrics(info: ParetoInfo, n_rows: int | None = None) -> list[str]:
    """Metrics a trace of `n_rows` points carries per point, most relevant first.

    The plotted objectives are in x and y and constant metrics in the template text, so neither is
    repeated. Past HOVER_CELL_BUDGET cells the list is cut (large runs stay small files).
    """
    skip = {info.x.column, info.y.column, *info.constant_metrics}
    objectives = [o.column for o in info.objectives]
    preferred = ["metric." + m for m in PREFERRED_METRICS]
    ranked = [m for m in dict.fromkeys([*objectives, *preferred, *info.metrics]) if m in info.metrics]
    metrics = [m for m in ranked if m not in skip]
    if n_rows:
        keep = max(MIN_HOVER_METRICS, HOVER_CELL_BUDGET // n_rows)
        metrics = metrics[:keep]
    return metrics


def customdata_columns(info: ParetoInfo, n_rows: int | None = None) -> list[str]:
    """Columns packed into each point's `customdata`, in order: point_id, varying params, metrics.

    Parameters come first, so their indices are the same in every trace (the page's colour-by control
    reads them); the metric list depends on the trace's size (`hover_metrics`).
    """
    return ["point_id", *(p.column for p in info.varying_params), *hover_metrics(info, n_rows)]


def _display_values(info: ParetoInfo, rows: pd.DataFrame, col: str) -> np.ndarray:
    """One column in display units, rounded, as an object array with None for missing values."""
    s = rows[col]
    param = next((p for p in info.params if p.column == col), None)
    if col == "point_id" or (param is not None and param.is_categorical):
        vals = s.astype(object).where(s.notna(), None).to_numpy(object)
        return np.array(
            [MISSING if v is None else v if isinstance(v, str) else str(v) for v in vals], dtype=object
        )
    unit = info.metric_units.get(col) or info.param_units.get(col) or DisplayUnit(col)
    num = unit.convert(pd.to_numeric(s, errors="coerce").to_numpy(float))
    digits = 5 if param is not None else 4
    num = round_sig(num, digits)
    out = num.astype(object)
    whole = np.isfinite(num) & (num == np.round(num)) & (np.abs(num) < 2**53)
    out[whole] = num[whole].astype(np.int64).astype(object)
    out[~np.isfinite(num)] = MISSING
    return out


def build_customdata(info: ParetoInfo, rows: pd.DataFrame, *, with_reason: bool = False) -> np.ndarray:
    """The `customdata` array for a set of rows (see `customdata_columns`), plus the reason if asked."""
    cols = customdata_columns(info, len(rows))
    data = np.empty((len(rows), len(cols) + int(with_reason)), dtype=object)
    for j, col in enumerate(cols):
        data[:, j] = _display_values(info, rows, col)
    if with_reason:
        reason = rows["reason"] if "reason" in rows else pd.Series("", index=rows.index)
        data[:, -1] = reason.fillna("").astype(str).to_numpy(object)
    return data


def hovertemplate(info: ParetoInfo, status: str, n_rows: int, *, with_reason: bool = False) -> str:
    """One trace's hover template: every parameter and metric with its unit."""
    cols = customdata_columns(info, n_rows)
    lines = [f"<b>%{{customdata[0]}}</b> ({status})"]
    lines.append(f"{info.x.unit.title}: %{{x:.4~g}}")
    lines.append(f"{info.y.unit.title}: %{{y:.4~g}}")
    for j, col in enumerate(cols[1:], start=1):
        if col in info.param_units:
            lines.append(f"{info.param_units[col].title} = %{{customdata[{j}]}}")
        else:
            # Already rounded to 4 significant digits; no d3 format, which would print a gap as 0.
            lines.append(f"{info.metric_units[col].title}: %{{customdata[{j}]}}")
    left_out = len(hover_metrics(info)) - len(hover_metrics(info, n_rows))
    if left_out:
        lines.append(f"<i>{left_out} more metrics: see the front table or trials.parquet</i>")
    same = [p for p in info.params if p.kind == "constant"]
    for p in same:
        lines.append(f"{p.path} = {p.constant_value}")
    for m, value in info.constant_metrics.items():
        unit = info.metric_units[m]
        lines.append(f"{unit.title}: {unit.convert_one(value):.4g}")
    if same or info.constant_metrics:
        k = len(lines) - len(same) - len(info.constant_metrics)
        lines.insert(k, "<i>same for every point:</i>")
    if with_reason:
        lines.append(f"<b>infeasible:</b> %{{customdata[{len(cols)}]}}")
    return "<br>".join(lines) + "<extra></extra>"


# --- colour -----------------------------------------------------------------------------------------


def color_values(info: ParetoInfo, rows: pd.DataFrame, column: str) -> np.ndarray:
    """Numbers to colour by: display values, or integer codes for a categorical parameter."""
    param = next(p for p in info.params if p.column == column)
    if param.is_categorical:
        codes = {v: i for i, v in enumerate(param.categories or ())}
        return np.array([codes.get(v, np.nan) for v in rows[column]], dtype=np.float32)
    unit = info.param_units.get(column, DisplayUnit(column))
    return unit.convert(pd.to_numeric(rows[column], errors="coerce").to_numpy(float)).astype(np.float32)


def _colorbar(info: ParetoInfo, column: str) -> dict[str, Any]:
    param = next(p for p in info.params if p.column == column)
    bar: dict[str, Any] = {"title": {"text": info.param_units.get(column, DisplayUnit(param.path)).title}}
    if param.is_categorical:
        cats = param.categories or ()
        bar |= {"tickvals": list(range(len(cats))), "ticktext": [str(c) for c in cats]}
    return bar


CATEGORY_COLORS = ("#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3", "#937860", "#da8bc3", "#8c8c8c")


def category_colorscale(n: int) -> list[list[Any]]:
    """A stepped colour scale for integer codes 0..n-1 (used with cmin=-0.5, cmax=n-0.5)."""
    n = max(n, 1)
    scale: list[list[Any]] = []
    for i in range(n):
        color = CATEGORY_COLORS[i % len(CATEGORY_COLORS)]
        scale += [[i / n, color], [(i + 1) / n, color]]
    return scale


def color_scale(info: ParetoInfo, column: str) -> dict[str, Any]:
    """`colorscale`, `cmin`, `cmax` for colouring the front by one parameter (the page's default view)."""
    param = next(p for p in info.params if p.column == column)
    if param.is_categorical:
        n = len(param.categories or ())
        return {"colorscale": category_colorscale(n), "cmin": -0.5, "cmax": n - 0.5}
    vals = color_values(info, info.points.loc[list(info.front_order)], column)
    finite = vals[np.isfinite(vals)]
    lo, hi = (float(finite.min()), float(finite.max())) if finite.size else (0.0, 1.0)
    return {"colorscale": "Viridis", "cmin": lo, "cmax": hi if hi > lo else lo + 1}


# --- axes -------------------------------------------------------------------------------------------

LOG_SPAN = 100.0  # start an axis in log scale when its positive values span more than this factor


def _axis_type(info: ParetoInfo, col: str) -> str:
    vals = info.points.loc[info.points["plotted"], col].to_numpy(float)
    if vals.size == 0 or (vals <= 0).any():
        return "linear"
    return "log" if vals.max() / vals.min() > LOG_SPAN else "linear"


def _axis_type_menus(info: ParetoInfo) -> list[dict[str, Any]]:
    """Two small button groups to switch each axis between linear and log scale."""
    menus = []
    for k, (axis, col) in enumerate((("xaxis", "_x"), ("yaxis", "_y"))):
        active = 1 if _axis_type(info, col) == "log" else 0
        menus.append(
            {
                "type": "buttons",
                "direction": "right",
                "active": active,
                "showactive": True,
                "x": 0.0 + 0.16 * k,
                "xanchor": "left",
                "y": 1.01,
                "yanchor": "bottom",
                "pad": {"t": 2, "b": 2},
                "font": {"size": 11},
                "buttons": [
                    {
                        "label": f"{axis[0]} linear",
                        "method": "relayout",
                        "args": [{f"{axis}.type": "linear"}],
                    },
                    {"label": f"{axis[0]} log", "method": "relayout", "args": [{f"{axis}.type": "log"}]},
                ],
            }
        )
    return menus


# --- figure -----------------------------------------------------------------------------------------


def _xy(rows: pd.DataFrame) -> dict[str, np.ndarray]:
    return {"x": rows["_x"].to_numpy(np.float32), "y": rows["_y"].to_numpy(np.float32)}


def _background_traces(info: ParetoInfo) -> list[go.Scattergl]:
    """The dominated (grey) and infeasible (x) points."""
    pts = info.points
    dom = pts[(pts["status"] == "dominated") & pts["plotted"]]
    infeas = pts[(pts["status"] == "infeasible") & pts["plotted"]]
    return [
        go.Scattergl(
            name="dominated",
            mode="markers",
            **_xy(dom),
            marker={"size": 4, "color": DOMINATED_COLOR, "opacity": 0.6},
            customdata=build_customdata(info, dom),
            hovertemplate=hovertemplate(info, "dominated", len(dom)),
        ),
        go.Scattergl(
            name="infeasible",
            mode="markers",
            **_xy(infeas),
            marker={"symbol": "x", "size": 6, "color": INFEASIBLE_COLOR, "opacity": 0.7},
            customdata=build_customdata(info, infeas, with_reason=True),
            hovertemplate=hovertemplate(info, "infeasible", len(infeas), with_reason=True),
        ),
    ]


def _front_traces(info: ParetoInfo) -> list[go.Scattergl]:
    """The front as a step line (2-D fronts only) and as markers, coloured by a parameter if asked."""
    front = info.points.loc[list(info.front_order)]
    line = go.Scattergl(
        name="front line",
        mode="lines",
        **_xy(front),
        line={"shape": "hv" if info.x.direction == "minimize" else "vh", "color": LINE_COLOR, "width": 1.5},
        hoverinfo="skip",
        showlegend=False,
        visible=len(info.objectives) == 2,
    )
    marker: dict[str, Any] = {"size": 9, "line": {"width": 1, "color": LINE_COLOR}, "color": FRONT_COLOR}
    if info.color_by:
        marker |= color_scale(info, info.color_by) | {
            "color": color_values(info, front, info.color_by),
            "showscale": True,
            "colorbar": _colorbar(info, info.color_by),
        }
    markers = go.Scattergl(
        name=f"Pareto front ({len(front)})",
        mode="markers",
        **_xy(front),
        marker=marker,
        customdata=build_customdata(info, front),
        hovertemplate=hovertemplate(info, "front", len(front)),
    )
    return [line, markers]


def plot_pareto(info: ParetoInfo) -> go.Figure:
    """Energy-versus-latency scatter: front highlighted and connected, dominated grey, infeasible x.

    Trace names are stable (`dominated`, `infeasible`, `front line`, `front`): the page's colour-by
    control and the browser test find traces by name.
    """
    _imports.check()
    fig = go.Figure()
    for trace in (*_background_traces(info), *_front_traces(info)):
        fig.add_trace(trace)
    two_d = len(info.objectives) == 2
    fig.update_layout(updatemenus=_axis_type_menus(info))
    # No figure title: the page's heading names the plot, and the axis-scale buttons sit up there.
    note = "" if two_d else f"front over {len(info.objectives)} objectives, drawn in the first two"
    fig.update_layout(
        title={"text": note, "x": 0.5, "y": 0.98, "font": {"size": 13}},
        xaxis={"title": {"text": info.x.unit.title}, "type": _axis_type(info, "_x")},
        yaxis={"title": {"text": info.y.unit.title}, "type": _axis_type(info, "_y")},
        hovermode="closest",
        legend={"orientation": "h", "y": 1.02, "yanchor": "bottom", "x": 1, "xanchor": "right"},
        margin={"l": 70, "r": 30, "t": 70, "b": 60},
        template="plotly_white",
        height=560,
    )
    return fig
