"""The report's settings section: the study's objectives, constraints and parameters, the run's summary,
and why points failed or were infeasible."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

import pandas as pd

from dse.report.figures.pareto import ParetoInfo, front_hypervolume
from dse.report.frames import ParamInfo, RunData
from dse.report.markup import esc as _esc
from dse.report.markup import kv_table as _kv_table
from dse.report.table import fmt_value as _fmt

# A number standing on its own: not the digits of a name such as `ttft_p90_s` or `h100-sxm`.
_NUMBER = re.compile(r"(?<![\w.-])-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?(?!\w|\.\d)")


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


def constraint_text(c: Any) -> str:
    """A study constraint as text, from its string or its {metric, op, value} form."""
    if isinstance(c, Mapping):
        if c.get("text"):
            return str(c["text"])
        if {"metric", "op", "value"} <= set(c):
            return f"{c['metric']} {c['op']} {c['value']}"
        return json.dumps(c, default=str)
    return str(c)


def _alternatives(value: Any) -> str:
    """A `when:` condition's values: `hbm3 or hbm3e` (a list's repr read ['hbm3', 'hbm3e'])."""
    return " or ".join(str(v) for v in value) if isinstance(value, list) else str(value)


def _describe_param(spec: Mapping[str, Any], p: ParamInfo | None) -> str:
    """`96 … 144, step 4`, `hbm3, hbm3e`, `4096`, plus its `when`; from the logged column without a spec."""
    kind = spec.get("kind", p.kind if p else "")
    if kind in ("int", "float") and "low" in spec:
        text = f"{spec['low']} … {spec['high']}"
        text += f", step {spec['step']}" if spec.get("step") is not None else ""
        text += ", log scale" if spec.get("log") else ""
    elif kind == "constant":
        text = f"{spec.get('value', p.constant_value if p else '')}"
    elif spec.get("values") is not None:
        text = ", ".join(str(v) for v in spec["values"])
    elif p is not None and p.categories:
        text = ", ".join(str(v) for v in p.categories)
    else:
        text = ""
    if spec.get("when"):
        text += " when " + ", ".join(f"{k} = {_alternatives(v)}" for k, v in dict(spec["when"]).items())
    return text


def _param_rows(run: RunData, info: ParetoInfo) -> str:
    """One row per space parameter, by name with the path it sets beside it: parameters sharing a path
    under disjoint `when`s (`hbm_bus`, `gddr_bus`, `lpddr_bus`) are each a row (keyed by path, only the
    last was shown). A logged column that the summary does not declare (no summary.json) is a row too."""
    declared = [p for p in run.summary.get("parameters") or () if isinstance(p, Mapping) and p.get("path")]
    logged = {p.path: p for p in info.params}
    rows = [(str(d.get("name") or d["path"]), str(d["path"]), d) for d in declared]
    named_paths = {path for _, path, _ in rows}
    rows += [(p.path, p.path, {}) for p in info.params if p.path not in named_paths]
    cells = []
    for name, path, spec in rows:
        p = logged.get(path)
        kind = spec.get("kind", p.kind if p else "")
        cells.append(
            f'<tr><td class="text">{_esc(name)}</td><td class="text">{_esc(path)}</td>'
            f'<td class="text">{_esc(kind)}</td><td class="text">{_esc(_describe_param(spec, p))}</td></tr>'
        )
    return (
        '<h3>Parameters</h3><table><tr><th class="text">parameter</th><th class="text">path</th>'
        f'<th class="text">kind</th><th class="text">range / values</th></tr>{"".join(cells)}</table>'
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
    "reference_point_source",
    "warnings",
    "stop_reason",
    "objectives",
    "constraints",
    "parameters",
    "run_dir",
)


def _point_text(values: Any) -> Any:
    return "(" + ", ".join(_fmt(v) for v in values) + ")" if isinstance(values, list) else values


_DEFAULT_REFERENCE = (
    "the study gives none: the worst values of the first batch with a feasible point, 10% of their range "
    "further out (later front points outside it add no hypervolume)"
)


def _result_pairs(s: Mapping[str, Any], info: ParetoInfo) -> list[tuple[str, Any]]:
    """The run's counts, and the front size and hypervolume of the objectives the page ranks by: the
    summary's for the study's own, else computed here, with the study's front named as such."""
    pairs = [(k, s[k]) for k in ("n_points", "n_feasible", "n_failed") if k in s]
    if not pairs:
        pairs = [
            ("n_points", info.n_points),
            ("n_feasible", info.count("front") + info.count("dominated")),
            ("n_failed", info.count("failed")),
        ]
    if not info.reranked:
        pairs.append(("front_size", s.get("front_size", info.count("front"))))
        pairs += [(k, _point_text(s[k])) for k in ("hypervolume", "reference_point") if k in s]
        if s.get("reference_point_source") == "first feasible batch":
            pairs.append(("reference_point from", _DEFAULT_REFERENCE))
        return pairs
    pairs.append(("front_size", info.count("front")))
    if (hv := front_hypervolume(info)) is not None:
        pairs += [
            ("hypervolume", hv[0]),
            (
                "reference_point",
                _point_text(hv[1]) + " (the feasible points' worst values, 10% of their range further out)",
            ),
        ]
    if "front_size" in s:
        own = ", ".join(o.column.removeprefix("metric.") for o in info.study_objectives)
        hv_text = f", hypervolume {_fmt(s['hypervolume'])}" if "hypervolume" in s else ""
        pairs.append((f"study's front ({own})", f"{s['front_size']} points{hv_text}"))
    return pairs


def settings_section(run: RunData, info: ParetoInfo) -> str:
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
    warnings = s.get("warnings")
    for text in warnings if isinstance(warnings, list) else ():  # what the run warned of at its end
        parts.append(f'<p><span class="stop"><b>Warning:</b> {_esc(str(text))}</span></p>')
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
    res_pairs = _result_pairs(s, info)
    objs = ", ".join(f"{o.column.removeprefix('metric.')} ({o.direction})" for o in info.objectives)
    cons = s.get("constraints") or []
    parts.append('<div class="grid"><div><h3>Run</h3>' + _kv_table(run_pairs) + "</div>")
    parts.append("<div><h3>Results</h3>" + _kv_table(res_pairs) + "</div>")
    obj_pairs: list[tuple[str, Any]] = [("objectives", objs)]
    obj_pairs += [("constraint", constraint_text(c)) for c in cons]
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
