"""`write_html_report(run_dir)`: one offline, self-contained HTML page per run.

The page inlines plotly.js once in <head> and places every figure as a div (`to_html(full_html=False,
include_plotlyjs=False)`), so it opens with no network: no CDN, no web fonts, no MathJax. Sections: the
energy-latency scatter with a colour-by control, the front as a table, parallel coordinates, the energy
breakdown of selected front points, DVFS curves when the clock varies, and the study's settings with the
reason the run stopped.
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from dse.config.outpaths import output_file_problem
from dse.errors import ConfigError, os_failure
from dse.report._imports import try_import
from dse.report.display import display_unit
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
from dse.report.frames import REPORT_FILE, Objective, RunData, load_run, point_params
from dse.report.markup import esc as _esc
from dse.report.markup import kv_table as _kv_table
from dse.report.settings import constraint_text, settings_section
from dse.report.table import TABLE_CSS, front_table
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


def _constraint_metrics(run: RunData) -> set[str]:
    """The names the study's constraints mention (metrics, or numbers that are not): its front table keeps
    them even where they repeat another column."""
    names: set[str] = set()
    for c in (run.study or {}).get("constraints") or []:
        names.update(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", constraint_text(c)))
    return names


def _serving_line(run: RunData) -> str:
    """What the study served, from its resolved study: mode (or the modes searched), engine, lengths, SLO."""
    study = run.study or {}
    workload = study.get("workload") or {}
    if not isinstance(workload, dict) or not workload:
        return ""
    mode = str(workload.get("mode", "static"))
    if mode == "training":
        return _training_line(study, workload)
    space = study.get("space") or {}
    # a searched knob's workload value is only the default its parameter overrides (h100_gddr7.yaml's
    # batch 32 against the 8 and 64 it searches)
    searched = _searched(study)
    mode_param = space.get("mode") if isinstance(space, dict) else None
    if isinstance(mode_param, dict) and isinstance(mode_param.get("values"), list):
        modes = ", ".join(str(m) for m in mode_param["values"])
        how = f"modes searched: {modes}"
    else:
        how = f"mode: {mode} ({MODE_TEXT.get(mode, mode)})"
        for knob in ("batch", "concurrency", "request_rate_per_s"):
            if (knob in workload or knob in searched) and (knob == "batch") == (mode == "static"):
                how += f", {knob} searched" if knob in searched else f", {knob} {workload[knob]}"
    engine = workload.get("engine") or ("none" if mode == "static" else "vllm")
    # `none` is no serving engine: one kernel per operator, no scheduler
    engine_text = "no serving engine (one kernel per operator)" if engine == "none" else f"{engine} engine"
    engine_text = "engine searched" if "engine" in searched else engine_text
    lengths = f"{workload.get('input_tokens', '?')} in / {workload.get('output_tokens', '?')} out"
    if workload.get("length_dist", "fixed") != "fixed":
        lengths += f" ({workload['length_dist']})"
    slo = [
        str(c) for c in study.get("constraints") or [] if any(m in str(c) for m in ("ttft", "tpot", "e2e"))
    ]
    precision = _precision_text(study, workload)
    text = f"serving {study.get('model', '')}: {how}; {engine_text}; {lengths}; {precision}"
    return text + (f"; SLO: {', '.join(slo)}" if slo else "")


def _searched(study: Mapping[str, Any]) -> set[str]:
    """The keys a study searches: each parameter's name, and the workload key it sets (`path:`)."""
    space = study.get("space")
    space = space if isinstance(space, Mapping) else {}
    return set(space) | {str(p["path"]) for p in space.values() if isinstance(p, Mapping) and "path" in p}


def _precision_text(study: Mapping[str, Any], workload: Mapping[str, Any]) -> str:
    """The precision the points served at: as written, searched, or (none written) the checkpoint's weights
    of the model, which the evaluator resolves per point (`LlmArch.checkpoint_precision`)."""
    from dse.workload.models import load_model_config

    searched = _searched(study)
    if "precision" in searched:
        return "precision searched"
    if workload.get("precision") is not None:
        return str(workload["precision"])
    if "model" in searched:
        return "each model at its checkpoint's precision"
    try:
        precision = load_model_config(str(study.get("model", ""))).checkpoint_precision
    except ConfigError:  # the study ran, so its model loaded then: a config file since moved or changed
        return "the checkpoint's precision"
    return f"{precision} (the checkpoint's weights)" if precision else "bf16"


def _training_line(study: Mapping[str, Any], workload: Mapping[str, Any]) -> str:
    """What a training study trains: GPUs, layout, sequence (an LLM's) or image size, batches, precision,
    LoRA; a key the study searches says so instead of its default."""
    from dse.workload.vision import is_vision_model

    model = str(study.get("model", ""))
    searched = _searched(study)
    size, unit = ("image_size", "px") if is_vision_model(model) else ("seq_len", "tokens")
    labels = {
        "num_gpus": "GPUs", "tp": "tp", "pp": "pp", size: unit, "micro_batch": "micro batch",
        "global_batch": "global batch", "precision": "", "lora_rank": "LoRA rank", "objective": "",
    }  # fmt: skip
    defaults = {"tp": 1, "pp": 1, "lora_rank": 0, "objective": "pretrain"}  # left unsaid
    parts = []
    for key, label in labels.items():
        value, default = workload.get(key), defaults.get(key)
        if key == "precision" and value is None:  # a training step's default (not a checkpoint's)
            value = "bf16"
        if key in searched:
            parts.append(f"{key.replace('_', ' ')} searched")
        elif value is None or value == default:
            continue
        elif key in ("num_gpus", "seq_len", "image_size"):
            parts.append(f"{value} {'GPU' if key == 'num_gpus' and value == 1 else label}")
        else:
            parts.append(f"{label} {value}".strip())
    return f"training {model}: {', '.join(parts)}"


def _pareto_section(info: ParetoInfo) -> str:
    fig = plot_pareto(info)
    current = info.color_by.removeprefix("param.") if info.color_by else ""
    options = ['<option value="">Pareto status (front in colour, dominated grey)</option>']
    cols = customdata_columns(info)
    meta_params = []
    for p in info.varying_params:
        selected = " selected" if p.path == current else ""
        options.append(f'<option value="{_esc(p.path)}"{selected}>{_esc(p.label)}</option>')
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
    if info.reranked:
        notes.append(
            f"Ranked by {_objectives_text(info.objectives)} instead of the study's "
            f"{_objectives_text(info.study_objectives)}: the front, its table, the selected points and the "
            "hypervolume are those of the objectives drawn here, computed for this report from the "
            "feasible points."
        )
    elif not info.front_from_log:
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
        f'<section id="pareto"><h2>{_esc(_pareto_title(info))}</h2>'
        f'<div class="controls"><label>Colour by <select id="color-by">{"".join(options)}</select></label>'
        '<label><input type="checkbox" id="color-dominated"> colour dominated points too</label></div>'
        f"{_figure_div(fig, 'pareto-plot')}"
        f'<p class="note">{_esc(caption)}</p>'
        + "".join(f'<p class="note">{_esc(n)}</p>' for n in notes)
        + f"<script>{_COLOR_JS % {'meta': meta}}</script></section>"
    )


def _objectives_text(objectives: Sequence[Objective]) -> str:
    return ", ".join(f"{o.column.removeprefix('metric.')} ({o.direction})" for o in objectives)


def _pareto_title(info: ParetoInfo) -> str:
    """The scatter's heading: its two objectives (energy versus latency for the usual pair)."""
    names = [o.column.split(".", 1)[-1] for o in info.objectives[:2]]
    energy = any("energy" in n or n.endswith("_j") for n in names)
    # a time, not a rate: `output_tokens_per_s` ends in `_s` too
    latency = any(
        (n.endswith("_s") and not n.endswith("_per_s")) or "latency" in n or "tpot" in n or "ttft" in n
        for n in names
    )
    if len(names) < 2 or (energy and latency):
        return "Energy versus latency" if energy and latency else "Objectives"
    first, second = (display_unit(o.column).label for o in info.objectives[:2])
    return f"{first[:1].upper()}{first[1:]} versus {second}"


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
    notes: list[str] = []
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
            notes += [str(data["note"])] if data.get("note") else []
            by_module = {str(k): float(v) for k, v in (data.get("by_module") or {}).items()}
            by_op = {str(k): float(v) for k, v in (data.get("by_op") or {}).items()}
            rows.append(
                BreakdownRow(
                    label=label, point_id=pid, by_module=by_module, by_op=by_op,
                    bound_by=data.get("bound_by"), roofline=data.get("roofline"),
                )
            )  # fmt: skip
    if rows:
        source = "the model, recomputed for this report" if breakdown_fn is not None else "breakdowns.json"
        note = f"Energy of selected front points, from {source}."
        note += "".join(f" ({n})" for n in dict.fromkeys(notes))
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
        note = (
            "No per-kernel view: the selected points have no breakdown (points under load and training "
            "steps keep none)."
        )
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
    info = build_pareto_info(
        run.trials, chosen, parameters=run.parameters, color_by=color_by, study_objectives=run.objectives
    )
    breakdown = _breakdown_rows(run, info, breakdown_fn)
    study = run.summary.get("study") or run.run_dir.parent.name
    body = "".join(
        [
            _header(run, info),
            _pareto_section(info),
            front_table(info, keep=_constraint_metrics(run)),
            _parcoords_section(info),
            _breakdown_section(*breakdown),
            _bottleneck_section(breakdown[0]),
            _dvfs_section(info),
            settings_section(run, info),
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


# Metrics where more is better besides rates: model FLOP utilization and what it gives per GPU.
_MORE_IS_BETTER = ("mfu", "model_tflops_per_gpu")


def natural_direction(metric: str) -> str:
    """maximize for a rate of work done (`*_per_s`, `*_per_s_per_gpu`: throughput, goodput), utilization
    (`mfu`) or a capacity (`memory_capacity_bytes`, `kv_capacity_tokens`), minimize for everything else
    (latency, energy, power, cost, carbon, memory used)."""
    rate = metric.endswith("_per_s") or metric.endswith("_per_s_per_gpu")
    capacity = "capacity" in metric.split("_")
    return "maximize" if rate or capacity or metric in _MORE_IS_BETTER else "minimize"


def report_objectives(run: RunData, objectives: Sequence[tuple[str, str]]) -> list[Objective]:
    """Objectives the user picked for the report's axes and front (any logged metric, e.g. cost or
    carbon); ConfigError naming the metrics a run has. A metric given without a direction ("") takes the
    study's own when it is one of its objectives, else its `natural_direction`."""
    have = sorted(c.removeprefix("metric.") for c in run.trials.columns if c.startswith("metric."))
    own = {o.column: o.direction for o in run.objectives}
    chosen: list[Objective] = []
    for name, given in objectives:
        if f"metric.{name}" not in run.trials.columns:
            raise ConfigError(f"--objective {name}: the run logged no such metric; it has {', '.join(have)}")
        direction = given or own.get(f"metric.{name}") or natural_direction(name)
        if direction not in ("minimize", "maximize"):
            raise ConfigError(f"--objective {name}:{direction}: the direction is minimize or maximize")
        if any(o.column == f"metric.{name}" for o in chosen):  # a front of one metric against itself
            raise ConfigError(f"--objective {name}: given twice; pick two different metrics")
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
    if (problem := output_file_problem(path, REPORT_FILE)) is not None:
        raise ConfigError(f"report {path}: {problem}")
    tmp = path.with_name(path.name + ".tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(page, encoding="utf-8")
        tmp.replace(path)
    except OSError as exc:  # a read-only directory, a full disk: no half-written page left behind
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise os_failure(f"report {path}: cannot write ({exc.strerror or exc})", exc) from None
    logger.info("wrote %s (%.1f MB)", path, path.stat().st_size / 1e6)
    return path
