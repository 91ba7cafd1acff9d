"""`write_html_report(run_dir)`: one offline, self-contained HTML page per run.

The page inlines plotly.js once in <head> and places every figure as a div (`to_html(full_html=False,
include_plotlyjs=False)`), so it opens with no network: no CDN, no web fonts, no MathJax. Sections: the
energy-latency scatter with a colour-by control, the front as a table, parallel coordinates, the energy
breakdown of selected front points, DVFS curves when the clock varies, and the study's settings with the
reason the run stopped.
"""

from __future__ import annotations

import html
import json
import logging
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from dse.errors import ConfigError
from dse.report._imports import try_import
from dse.report.figures.breakdown import BreakdownRow, plot_breakdowns
from dse.report.figures.dvfs import clock_column, plot_dvfs
from dse.report.figures.parcoords import plot_parcoords
from dse.report.figures.pareto import (
    DOMINATED_COLOR,
    FRONT_COLOR,
    ParetoInfo,
    build_pareto_info,
    category_colorscale,
    customdata_columns,
    plot_pareto,
)
from dse.report.figures.roofline import plot_roofline
from dse.report.frames import REPORT_FILE, Objective, ParamInfo, RunData, load_run, point_params
from dse.report.table import TABLE_CSS, front_table
from dse.report.table import fmt_value as _fmt
from dse.serving.load import MODE_TEXT

with try_import() as _imports:
    import plotly.io as pio
    from plotly.offline import get_plotlyjs

logger = logging.getLogger(__name__)

BreakdownFn = Callable[[dict[str, Any]], Mapping[str, Mapping[str, float]]]
PLOT_CONFIG = {"displaylogo": False, "responsive": True, "scrollZoom": False}

_CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, Helvetica, Arial, sans-serif; margin: 0;
       color: #222; background: #fafafa; }
header { background: #1f2d3d; color: #fff; padding: 16px 28px; }
header h1 { margin: 0 0 4px 0; font-size: 22px; }
header p { margin: 2px 0; opacity: 0.9; }
nav { padding: 8px 28px; background: #eef1f4; font-size: 14px; }
nav a { margin-right: 16px; color: #1f4e79; text-decoration: none; }
section { background: #fff; margin: 16px 28px; padding: 12px 20px; border: 1px solid #e3e3e3;
          border-radius: 6px; }
h2 { font-size: 18px; margin: 6px 0 10px 0; }
.note { color: #555; font-size: 13px; margin: 6px 0; }
.stop { background: #fff4d6; border: 1px solid #e8c66a; padding: 6px 10px; border-radius: 4px;
        display: inline-block; }
.controls { font-size: 14px; margin: 4px 0 8px 0; }
.controls label { margin-right: 18px; }
table { border-collapse: collapse; font-size: 13px; }
th, td { border-bottom: 1px solid #e6e6e6; padding: 3px 8px; text-align: right; white-space: nowrap; }
th { background: #f3f5f7; position: sticky; top: 0; }
td.text, th.text { text-align: left; }
tr.sel td { background: #fff1ea; }
.scroll { max-height: 460px; overflow: auto; border: 1px solid #eee; }
.kv td:first-child { text-align: left; color: #555; }
.kv td { text-align: left; }
pre { background: #f6f8fa; padding: 8px; overflow: auto; font-size: 12px; max-height: 400px; }
.grid { display: flex; flex-wrap: wrap; gap: 28px; }
"""

_COLOR_JS = """
(function () {
  const META = %(meta)s;
  const gd = document.getElementById("pareto-plot");
  const sel = document.getElementById("color-by");
  const chk = document.getElementById("color-dominated");
  if (!gd || !sel) return;
  const find = (prefix) => gd.data.findIndex((t) => (t.name || "").startsWith(prefix));
  function values(trace, p) {
    const cd = trace.customdata || [];
    if (p.categories) {
      const codes = new Map(p.categories.map((c, i) => [String(c), i]));
      return cd.map((r) => (codes.has(String(r[p.col])) ? codes.get(String(r[p.col])) : null));
    }
    return cd.map((r) => (typeof r[p.col] === "number" ? r[p.col] : null));
  }
  function apply() {
    const iF = find("Pareto front"), iD = find("dominated");
    const p = META.params.find((q) => q.path === sel.value);
    if (!p) {
      Plotly.restyle(gd, {"marker.color": [META.front], "marker.showscale": [false]}, [iF]);
      Plotly.restyle(gd, {"marker.color": [META.dominated], "marker.showscale": [false]}, [iD]);
      return;
    }
    const vf = values(gd.data[iF], p), vd = values(gd.data[iD], p);
    const bar = {title: {text: p.title}};
    let scale;
    if (p.categories) {
      bar.tickvals = p.categories.map((_, i) => i);
      bar.ticktext = p.categories.map(String);
      scale = {"marker.colorscale": [p.colorscale], "marker.cmin": [-0.5],
               "marker.cmax": [p.categories.length - 0.5]};
    } else {
      let lo = Infinity, hi = -Infinity;
      for (const arr of chk.checked ? [vf, vd] : [vf]) {
        for (const v of arr) if (v !== null && isFinite(v)) { lo = Math.min(lo, v); hi = Math.max(hi, v); }
      }
      if (!isFinite(lo)) { lo = 0; hi = 1; }
      if (hi <= lo) hi = lo + 1;
      scale = {"marker.colorscale": ["Viridis"], "marker.cmin": [lo], "marker.cmax": [hi]};
    }
    Plotly.restyle(gd, Object.assign({"marker.color": [vf], "marker.showscale": [true],
                                      "marker.colorbar": [bar]}, scale), [iF]);
    Plotly.restyle(gd, Object.assign({"marker.color": [chk.checked ? vd : META.dominated],
                                      "marker.showscale": [false]}, scale), [iD]);
  }
  sel.addEventListener("change", apply);
  chk.addEventListener("change", apply);
})();
"""


def _esc(value: Any) -> str:
    return html.escape(str(value), quote=True)


def script_json(obj: Any) -> str:
    """JSON to embed in a <script> element: strict (no NaN), with `<`, `>`, `&` and the JavaScript line
    separators escaped, so no string in it (a parameter value, a study name) can close the element."""
    text = json.dumps(obj, allow_nan=False)
    for char, escaped in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"), ("\u2028", "\\u2028"),
                          ("\u2029", "\\u2029")):  # fmt: skip
        text = text.replace(char, escaped)
    return text


def _figure_div(fig: Any, div_id: str) -> str:
    return pio.to_html(
        fig, full_html=False, include_plotlyjs=False, include_mathjax=False, div_id=div_id, config=PLOT_CONFIG
    )


def _kv_table(pairs: Sequence[tuple[str, Any]]) -> str:
    rows = "".join(f"<tr><td>{_esc(k)}</td><td>{_esc(_fmt(v))}</td></tr>" for k, v in pairs)
    return f'<table class="kv">{rows}</table>'


# --- sections ---------------------------------------------------------------------------------------


def _header(run: RunData, info: ParetoInfo) -> str:
    s = run.summary
    study = s.get("study") or run.run_dir.parent.name
    run_id = s.get("run_id") or run.run_dir.name
    stop = s.get("stop_reason") or "unknown: the run wrote no summary.json (killed or still running?)"
    counts = (
        f"{info.n_points} points · {info.count('front') + info.count('dominated')} feasible · "
        f"{info.count('infeasible')} infeasible · {info.count('failed')} failed · "
        f"front {info.count('front')}"
    )
    serving = _serving_line(run)
    return (
        f"<header><h1>{_esc(study)}</h1><p>run <code>{_esc(run_id)}</code> · {_esc(counts)}</p>"
        + (f'<p class="serving">{_esc(serving)}</p>' if serving else "")
        + f"<p>stopped: {_esc(stop)}</p></header>"
        '<nav><a href="#pareto">Pareto front</a><a href="#front">front table</a>'
        '<a href="#parcoords">parallel coordinates</a><a href="#breakdown">energy breakdown</a>'
        '<a href="#bottleneck">bottlenecks</a>'
        '<a href="#dvfs">DVFS</a><a href="#settings">settings</a></nav>'
    )


def _serving_line(run: RunData) -> str:
    """What the study served, from its resolved study: mode (or the modes searched), engine, lengths, SLO."""
    study = run.study or {}
    workload = study.get("workload") or {}
    if not isinstance(workload, dict) or not workload:
        return ""
    mode = str(workload.get("mode", "static"))
    space = study.get("space") or {}
    mode_param = space.get("mode") if isinstance(space, dict) else None
    if isinstance(mode_param, dict) and isinstance(mode_param.get("values"), list):
        modes = ", ".join(str(m) for m in mode_param["values"])
        how = f"modes searched: {modes}"
    else:
        how = f"mode: {mode} ({MODE_TEXT.get(mode, mode)})"
        for knob in ("batch", "concurrency", "request_rate_per_s"):
            if knob in workload and (knob == "batch") == (mode == "static"):
                how += f", {knob} {workload[knob]}"
    engine = workload.get("engine") or ("none" if mode == "static" else "vllm")
    lengths = f"{workload.get('input_tokens', '?')} in / {workload.get('output_tokens', '?')} out"
    if workload.get("length_dist", "fixed") != "fixed":
        lengths += f" ({workload['length_dist']})"
    slo = [
        str(c) for c in study.get("constraints") or [] if any(m in str(c) for m in ("ttft", "tpot", "e2e"))
    ]
    text = f"serving {study.get('model', '')}: {how}; {engine} engine; {lengths}"
    return text + (f"; SLO: {', '.join(slo)}" if slo else "")


def _pareto_section(info: ParetoInfo) -> str:
    fig = plot_pareto(info)
    current = info.color_by.removeprefix("param.") if info.color_by else ""
    options = ['<option value="">Pareto status (front in colour, dominated grey)</option>']
    cols = customdata_columns(info)
    meta_params = []
    for p in info.varying_params:
        selected = " selected" if p.path == current else ""
        options.append(f'<option value="{_esc(p.path)}"{selected}>{_esc(p.path)}</option>')
        meta_params.append(
            {
                "path": p.path,
                "col": cols.index(p.column),
                "title": info.param_units[p.column].title,
                "categories": [str(c) for c in p.categories] if p.categories else None,
                "colorscale": category_colorscale(len(p.categories)) if p.categories else None,
            }
        )
    meta = script_json({"params": meta_params, "front": FRONT_COLOR, "dominated": DOMINATED_COLOR})
    notes = []
    unplotted = info.n_points - info.n_plotted
    if info.n_points and not info.n_plotted:
        notes.append(
            "No point has objective values: every evaluation failed or was rejected. See Errors below."
        )
    elif unplotted:
        notes.append(
            f"{unplotted} point(s) have no objective values (errors, or rejected before evaluation) and "
            "are not drawn; see the settings section for the reasons."
        )
    if not info.front_from_log:
        notes.append(
            "The log has no on_front column (unfinished run): the front was computed for this report."
        )
    step = "connected by its attainment (step) line, " if len(info.objectives) == 2 else ""
    caption = (
        f"Each marker is one evaluated design point. The Pareto front is drawn large and outlined, {step}"
        "dominated feasible points are grey, infeasible points are marked ×. Hover a point for its "
        "parameters and metrics (units in each line). Drag to zoom, double-click to reset."
    )
    return (
        '<section id="pareto"><h2>Energy versus latency</h2>'
        f'<div class="controls"><label>Colour by <select id="color-by">{"".join(options)}</select></label>'
        '<label><input type="checkbox" id="color-dominated"> colour dominated points too</label></div>'
        f"{_figure_div(fig, 'pareto-plot')}"
        f'<p class="note">{_esc(caption)}</p>'
        + "".join(f'<p class="note">{_esc(n)}</p>' for n in notes)
        + f"<script>{_COLOR_JS % {'meta': meta}}</script></section>"
    )


def _parcoords_section(info: ParetoInfo) -> str:
    fig = plot_parcoords(info)
    if fig is None:
        body = '<p class="note">No feasible points.</p>'
    else:
        tip = "Drag along an axis to filter lines; drag an axis title to reorder."
        body = f'{_figure_div(fig, "parcoords-plot")}<p class="note">{tip}</p>'
    return f'<section id="parcoords"><h2>Parallel coordinates</h2>{body}</section>'


def _breakdown_rows(
    run: RunData, info: ParetoInfo, breakdown_fn: BreakdownFn | None
) -> tuple[list[BreakdownRow], str]:
    rows: list[BreakdownRow] = []
    problems: list[str] = []
    for label, idx in info.selected.items():
        row = info.points.loc[idx]
        pid = str(row["point_id"])
        data: Mapping[str, Any] | None = None
        if breakdown_fn is not None:
            try:
                data = breakdown_fn(point_params(row.to_dict(), info.params))
            except Exception as exc:  # one bad point must not cost the whole report
                logger.warning("breakdown of %s failed: %s", pid, exc)
                problems.append(f"{pid}: {type(exc).__name__}: {exc}")
        elif run.breakdowns:
            data = run.breakdowns.get(pid)
        if data:
            by_module = {str(k): float(v) for k, v in (data.get("by_module") or {}).items()}
            by_op = {str(k): float(v) for k, v in (data.get("by_op") or {}).items()}
            rows.append(
                BreakdownRow(
                    label=label, point_id=pid, by_module=by_module, by_op=by_op,
                    bound_by=data.get("bound_by"), roofline=data.get("roofline"),
                )
            )  # fmt: skip
    if rows:
        source = "the model (breakdown_fn)" if breakdown_fn is not None else "breakdowns.json"
        note = f"Energy of selected front points, from {source}."
    elif breakdown_fn is None and not run.breakdowns:
        note = (
            "No energy breakdown: this run has no breakdowns.json and no model was given to compute one "
            "(`dse report` computes it when the study's predictor is available)."
        )
    else:
        note = "No breakdown for the selected front points."
    if problems:
        note += " Failed: " + "; ".join(problems)
    return rows, note


def _breakdown_section(rows: list[BreakdownRow], note: str) -> str:
    body = ""
    if rows:
        by_module, by_op = plot_breakdowns(rows)
        body = _figure_div(by_module, "breakdown-module-plot") + _figure_div(by_op, "breakdown-op-plot")
    return (
        f'<section id="breakdown"><h2>Energy breakdown</h2><p class="note">{_esc(note)}</p>{body}</section>'
    )


def _bound_text(bound: Mapping[str, Any]) -> str:
    shares = sorted((bound.get("shares") or {}).items(), key=lambda kv: -kv[1])
    return f"{bound.get('bound_by', '?')} (" + ", ".join(f"{k} {100 * v:.0f}%" for k, v in shares[:3]) + ")"


def _bottleneck_section(rows: list[BreakdownRow]) -> str:
    """What limits each selected point's phases (time shares by bound) and a roofline of one of them."""
    bound_rows = [r for r in rows if r.bound_by]
    if not bound_rows:
        note = "No per-kernel view: the selected points have no breakdown (load-mode points keep none)."
        return f'<section id="bottleneck"><h2>Bottlenecks</h2><p class="note">{note}</p></section>'
    phases = sorted({p for r in bound_rows for p in (r.bound_by or {})})
    pairs = [
        (f"{r.label} ({r.point_id})", "; ".join(f"{p}: {_bound_text((r.bound_by or {})[p])}" for p in phases))
        for r in bound_rows
    ]
    body = _kv_table(pairs)
    chosen = next((r for r in bound_rows if r.label == "knee" and r.roofline), None)
    chosen = chosen or next((r for r in bound_rows if r.roofline), None)
    fig = (
        plot_roofline(chosen.roofline, f"{chosen.label} ({chosen.point_id})")
        if chosen and chosen.roofline
        else None
    )
    if fig is not None:
        body += _figure_div(fig, "roofline-plot")
    note = (
        "What bounds each phase of the selected front points: the share of its time each kernel limit takes "
        "(dram, l2, smem, tensor, cuda, host, power_cap). The roofline places every kernel of one point's "
        "prefill and middle decode step by FLOP per DRAM byte (its minimum traffic) and achieved FLOP/s; a "
        "kernel far under the roofs is held by L2, latency or the power cap (hover: bound by)."
    )
    return f'<section id="bottleneck"><h2>Bottlenecks</h2><p class="note">{_esc(note)}</p>{body}</section>'


def _dvfs_section(info: ParetoInfo) -> str:
    if clock_column(info) is None:
        body = '<p class="note">The SM clock is not a varying parameter of this study: no DVFS curves.</p>'
    else:
        fig = plot_dvfs(info)
        if fig is None:
            body = '<p class="note">No feasible point to draw DVFS curves from.</p>'
        else:
            body = _figure_div(fig, "dvfs-plot") + (
                '<p class="note">Median and interquartile band over all other parameters at each clock '
                "(feasible points only), with the front's points on top.</p>"
            )
    return f'<section id="dvfs"><h2>DVFS curves</h2>{body}</section>'


_NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")


def _counts_table(title: str, series: pd.Series, limit: int = 10) -> str:
    """Count reasons, pooling those that differ only in their numbers (`avg_power_w 712 W > 700 W`)."""
    text = series.fillna("").astype(str)
    if text.empty:
        return ""
    frame = pd.DataFrame({"text": text, "key": text.str.replace(_NUMBER, "#", regex=True)})
    grouped = (
        frame.groupby("key", sort=False)["text"].agg(["size", "first"]).sort_values("size", ascending=False)
    )
    counts = grouped["size"]
    examples = grouped["first"]
    rows = "".join(
        f'<tr><td class="text">{_esc(k or "(no reason given)")}</td><td>{v}</td>'
        + (f'<td class="text note">e.g. {_esc(examples[k])}</td>' if "#" in k else "")
        + "</tr>"
        for k, v in counts.iloc[:limit].items()
    )
    more = f'<p class="note">… and {len(counts) - limit} more.</p>' if len(counts) > limit else ""
    return f"<h3>{_esc(title)}</h3><table>{rows}</table>{more}"


def _constraint_text(c: Any) -> str:
    if isinstance(c, Mapping):
        if c.get("text"):
            return str(c["text"])
        if {"metric", "op", "value"} <= set(c):
            return f"{c['metric']} {c['op']} {c['value']}"
        return json.dumps(c, default=str)
    return str(c)


def _describe_param(p: ParamInfo, spec: Mapping[str, Any]) -> str:
    """`96 … 144, step 4`, `hbm3, hbm3e`, `4096`, plus `when` and a name that differs from the path."""
    kind = spec.get("kind", p.kind)
    if kind in ("int", "float") and "low" in spec:
        text = f"{spec['low']} … {spec['high']}"
        text += f", step {spec['step']}" if spec.get("step") is not None else ""
        text += ", log scale" if spec.get("log") else ""
    elif kind == "constant" or p.kind == "constant":
        text = f"{spec.get('value', p.constant_value)}"
    elif spec.get("values") is not None:
        text = ", ".join(str(v) for v in spec["values"])
    elif p.categories:
        text = ", ".join(str(v) for v in p.categories)
    else:
        text = ""
    if spec.get("when"):
        text += " when " + ", ".join(f"{k} = {v}" for k, v in dict(spec["when"]).items())
    name = spec.get("name")
    if name and name != p.path:
        text += f" (named {name})"
    return text


def _param_rows(run: RunData, info: ParetoInfo) -> str:
    declared = {str(p.get("path")): p for p in run.summary.get("parameters") or () if isinstance(p, Mapping)}
    rows = []
    for p in info.params:
        spec = declared.get(p.path, {})
        rows.append(
            f'<tr><td class="text">{_esc(p.path)}</td><td class="text">{_esc(spec.get("kind", p.kind))}</td>'
            f'<td class="text">{_esc(_describe_param(p, spec))}</td></tr>'
        )
    return (
        '<h3>Parameters</h3><table><tr><th class="text">path</th><th class="text">kind</th>'
        f'<th class="text">range / values</th></tr>{"".join(rows)}</table>'
    )


_SUMMARY_SHOWN = (
    "study",
    "run_id",
    "sampler",
    "executor",
    "seed",
    "elapsed_s",
    "points_per_s",
    "n_points",
    "n_feasible",
    "n_failed",
    "front_size",
    "hypervolume",
    "reference_point",
    "stop_reason",
    "objectives",
    "constraints",
    "parameters",
    "run_dir",
)


def _settings_section(run: RunData, info: ParetoInfo) -> str:
    s = run.summary
    parts = ['<section id="settings"><h2>Study settings and run summary</h2>']
    stop = s.get("stop_reason")
    if stop:
        parts.append(f'<p><span class="stop"><b>Why the run stopped:</b> {_esc(stop)}</span></p>')
    else:
        parts.append(
            '<p><span class="stop"><b>No summary.json:</b> the run did not finish (killed, or still '
            f"running). Everything here is computed from {_esc(run.source)}.</span></p>"
        )
    run_pairs = [(k, s[k]) for k in ("study", "run_id", "sampler", "executor", "seed") if k in s]
    run_pairs.append(("data source", run.source))
    run_pairs.append(("run directory", str(run.run_dir)))
    if "elapsed_s" in s:
        run_pairs.append(("elapsed (s)", s["elapsed_s"]))
    if "points_per_s" in s:
        run_pairs.append(("points per second", s["points_per_s"]))
    run_pairs += [
        (k, v) for k, v in s.items() if k not in _SUMMARY_SHOWN and isinstance(v, str | int | float)
    ]
    res_pairs = [(k, s[k]) for k in ("n_points", "n_feasible", "n_failed", "front_size") if k in s]
    if not res_pairs:
        res_pairs = [
            ("n_points", info.n_points),
            ("n_feasible", info.count("front") + info.count("dominated")),
            ("n_failed", info.count("failed")),
            ("front_size", info.count("front")),
        ]
    for k in ("hypervolume", "reference_point"):
        if k in s:
            value = s[k]
            if isinstance(value, list):
                value = "(" + ", ".join(_fmt(v) for v in value) + ")"
            res_pairs.append((k, value))
    objs = ", ".join(f"{o.column.removeprefix('metric.')} ({o.direction})" for o in info.objectives)
    cons = s.get("constraints") or []
    parts.append('<div class="grid"><div><h3>Run</h3>' + _kv_table(run_pairs) + "</div>")
    parts.append("<div><h3>Results</h3>" + _kv_table(res_pairs) + "</div>")
    obj_pairs: list[tuple[str, Any]] = [("objectives", objs)]
    obj_pairs += [("constraint", _constraint_text(c)) for c in cons]
    parts.append("<div><h3>Objectives and constraints</h3>" + _kv_table(obj_pairs) + "</div></div>")
    parts.append(_param_rows(run, info))
    pts = info.points
    parts.append(_counts_table("Why points are infeasible", pts.loc[pts["status"] == "infeasible", "reason"]))
    if "error" in pts:
        parts.append(_counts_table("Errors", pts.loc[pts["status"] == "failed", "error"]))
    if run.env:
        env = json.dumps(run.env, indent=2, default=str)
        parts.append(f"<details><summary>Environment (env.json)</summary><pre>{_esc(env)}</pre></details>")
    if run.study_yaml:
        parts.append(
            "<details><summary>Resolved study (study.resolved.yaml)</summary>"
            f"<pre>{_esc(run.study_yaml)}</pre></details>"
        )
    parts.append("</section>")
    return "".join(parts)


# --- the page ---------------------------------------------------------------------------------------


def build_report_html(
    run: RunData,
    *,
    color_by: str | None = None,
    breakdown_fn: BreakdownFn | None = None,
    objectives: Sequence[tuple[str, str]] | None = None,
) -> str:
    """The whole page as one string (see `write_html_report`)."""
    _imports.check()
    chosen = run.objectives if not objectives else report_objectives(run, objectives)
    info = build_pareto_info(run.trials, chosen, parameters=run.parameters, color_by=color_by)
    breakdown = _breakdown_rows(run, info, breakdown_fn)
    study = run.summary.get("study") or run.run_dir.parent.name
    body = "".join(
        [
            _header(run, info),
            _pareto_section(info),
            front_table(info),
            _parcoords_section(info),
            _breakdown_section(*breakdown),
            _bottleneck_section(breakdown[0]),
            _dvfs_section(info),
            _settings_section(run, info),
        ]
    )
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>dse report · {_esc(study)} · {_esc(run.run_dir.name)}</title>"
        f"<style>{_CSS}{TABLE_CSS}</style>"
        f'<script type="text/javascript">{get_plotlyjs()}</script></head>'
        f"<body>{body}</body></html>"
    )


def report_objectives(run: RunData, objectives: Sequence[tuple[str, str]]) -> list[Objective]:
    """Objectives the user picked for the report's axes and front (any logged metric, e.g. cost or
    carbon); ConfigError naming the metrics a run has."""
    have = sorted(c.removeprefix("metric.") for c in run.trials.columns if c.startswith("metric."))
    chosen = []
    for name, direction in objectives:
        if f"metric.{name}" not in run.trials.columns:
            raise ConfigError(f"--objective {name}: the run logged no such metric; it has {', '.join(have)}")
        if direction not in ("minimize", "maximize"):
            raise ConfigError(f"--objective {name}:{direction}: the direction is minimize or maximize")
        chosen.append(Objective(f"metric.{name}", direction))  # type: ignore[arg-type]
    return chosen


def write_html_report(
    run_dir: str | Path,
    *,
    color_by: str | None = None,
    out: str | Path | None = None,
    breakdown_fn: BreakdownFn | None = None,
    objectives: Sequence[tuple[str, str]] | None = None,
) -> Path:
    """Write the run's offline, self-contained HTML report and return its path.

    Args:
        run_dir: a run directory (`results/<study>/<run_id>/`); trials.parquet is read, or points.jsonl for
            a run that was killed before writing it.
        color_by: a parameter path to colour the scatter by initially (the page can switch it).
        out: where to write; default `<run_dir>/report.html`.
        breakdown_fn: `params -> {"by_module": {name: energy_j}, "by_op": {name: energy_j}}`, called for a
            few selected front points; without it the run's breakdowns.json is used, if any.
        objectives: (metric, minimize|maximize) pairs to draw and rank instead of the study's own, e.g.
            `[("usd_per_million_output_tokens", "minimize"), ("gco2_per_output_token", "minimize")]`.
    """
    _imports.check()
    run = load_run(run_dir)
    page = build_report_html(run, color_by=color_by, breakdown_fn=breakdown_fn, objectives=objectives)
    path = Path(out) if out is not None else Path(run_dir) / REPORT_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(page, encoding="utf-8")
    tmp.replace(path)
    logger.info("wrote %s (%.1f MB)", path, path.stat().st_size / 1e6)
    return path
