"""The report's front table: parameters, then metrics, with units in the headers.

Clicking a header sorts the rows by that column (numbers numerically with blanks last, text alphabetically
with digit runs compared as numbers, so fp8 comes before fp16; a second click reverses), and a "Download
CSV" link holds exactly the table's rows in their current order, built in the browser from the cells as a
`data:` URL (nothing is fetched). Numeric cells carry their full-precision value in `data-v` (in the
header's unit): the sort and the CSV use it, the cell shows 4 significant digits. The script embeds no
data, and every cell text is escaped.
"""

from __future__ import annotations

import html
import re
from collections.abc import Collection
from typing import Any

import numpy as np

from dse.report.figures.pareto import ParetoInfo

MAX_TABLE_ROWS = 1000

TABLE_CSS = """
#front-table th { cursor: pointer; user-select: none; }
#front-table th[aria-sort="ascending"]::after { content: " \\25B2"; font-size: 10px; }
#front-table th[aria-sort="descending"]::after { content: " \\25BC"; font-size: 10px; }
.table-tools { font-size: 13px; margin: 4px 0 8px 0; }
"""

_TABLE_JS = """
(function () {
  const table = document.getElementById("front-table");
  const link = document.getElementById("front-csv");
  if (!table || !link) return;
  const tbody = table.tBodies[0];
  const heads = [...table.tHead.rows[0].cells];
  const raw = (td) => (td.dataset.v !== undefined ? td.dataset.v : td.textContent);
  function field(td) {
    let s = raw(td);
    if (td.dataset.v === undefined && /^[=+@\\t\\r-]/.test(s)) s = "'" + s;  // no spreadsheet formulas
    return /[",\\r\\n]/.test(s) ? '"' + s.replace(/"/g, '""') + '"' : s;
  }
  function csv() {
    const lines = [heads.map((th) => field(th)).join(",")];
    for (const tr of tbody.rows) lines.push([...tr.cells].map(field).join(","));
    return lines.join("\\r\\n") + "\\r\\n";
  }
  function refresh() { link.href = "data:text/csv;charset=utf-8," + encodeURIComponent(csv()); }
  function sortBy(k) {
    const th = heads[k];
    const dir = th.getAttribute("aria-sort") === "ascending" ? -1 : 1;
    const num = th.dataset.type === "num";
    const key = (tr) => {
      const s = raw(tr.cells[k]);
      return num ? (s === "" ? NaN : Number(s)) : s;
    };
    const rows = [...tbody.rows].map((tr, i) => ({tr, i, v: key(tr)}));
    rows.sort((a, b) => {
      if (num) {
        const na = isNaN(a.v), nb = isNaN(b.v);
        if (na || nb) return na === nb ? a.i - b.i : (na ? 1 : -1);  // blanks last either way
        return dir * (a.v - b.v) || a.i - b.i;
      }
      return dir * a.v.localeCompare(b.v, undefined, {numeric: true, sensitivity: "base"}) || a.i - b.i;
    });
    heads.forEach((h) => h.removeAttribute("aria-sort"));
    th.setAttribute("aria-sort", dir > 0 ? "ascending" : "descending");
    for (const r of rows) tbody.appendChild(r.tr);
    refresh();
  }
  heads.forEach((th, k) => {
    th.title = "Click to sort";
    th.addEventListener("click", () => sortBy(k));
  });
  refresh();
})();
"""


def _esc(value: Any) -> str:
    return html.escape(str(value), quote=True)


def fmt_value(value: Any, digits: int = 4) -> str:
    """A cell's text: `–` for a missing value, yes/no, integers as such, floats to `digits` digits."""
    if value is None or (isinstance(value, float) and not np.isfinite(value)):
        return "–"
    if isinstance(value, bool | np.bool_):
        return "yes" if value else "no"
    if isinstance(value, int | np.integer):
        return str(int(value))
    if isinstance(value, float | np.floating):
        v = float(value)
        if 1e4 <= abs(v) < 1e15:  # 27,500 rather than 2.75e+04: a price, a rate, a count
            return f"{float(f'{v:.{digits}g}'):,.0f}"
        return f"{v:.{digits}g}"
    return str(value)


def _num_cell(value: float, digits: int = 4) -> str:
    """A numeric cell: the rounded text, and the full value in `data-v` (empty when missing)."""
    if not np.isfinite(value):
        return '<td data-v="">–</td>'
    shown: float | int = int(value) if float(value).is_integer() else float(value)
    return f'<td data-v="{shown!r}">{fmt_value(shown, digits)}</td>'


def _columns(info: ParetoInfo, keep: Collection[str] = ()) -> tuple[list[str], str]:
    """The metric columns (objectives first), and the header row: point, selected, parameters, metrics."""
    obj_cols = [o.column for o in info.objectives]
    # a metric repeating a searched parameter (training points report tp, ep, lora_rank ...) shows once
    searched = {p.column.split(".", 1)[-1] for p in info.varying_params}
    metric_cols = obj_cols + [
        m
        for m in info.metrics
        if m not in obj_cols and m not in info.constant_metrics and m.split(".", 1)[-1] not in searched
    ]
    metric_cols = _without_repeats(info, metric_cols, keep)
    head = ['<th class="text">point</th>', '<th class="text">selected</th>']
    for p in info.varying_params:
        title = _esc(info.param_units[p.column].title)
        head.append(
            f'<th class="text">{title}</th>' if p.is_categorical else f'<th data-type="num">{title}</th>'
        )
    head += [f'<th data-type="num">{_esc(info.metric_units[m].title)}</th>' for m in metric_cols]
    return metric_cols, "".join(head)


def _twin(column: str) -> str | None:
    """The column a metric may merely repeat: a percentile's mean (`metric.ttft_p90_s` -> `metric.ttft_s`;
    a static batch's requests all see the mean) and the logged clock's searched parameter."""
    if column == "metric.sm_clock_hz":
        return "param.sm_clock_mhz"
    match = re.fullmatch(r"(metric\..+)_p(?:50|90|99)_s", column)
    return f"{match.group(1)}_s" if match else None


def _without_repeats(info: ParetoInfo, metric_cols: list[str], keep: Collection[str]) -> list[str]:
    """`metric_cols` less the metrics that repeat their twin (`_twin`), shown too, on every front row.
    Objectives and the study's constraint metrics (`keep`) always stay."""
    rows = info.points.loc[list(info.front_order)]
    shown = set(metric_cols) | {p.column for p in info.varying_params if not p.is_categorical}
    keep = {o.column for o in info.objectives} | {f"metric.{k}" for k in keep}
    out = []
    for m in metric_cols:
        twin = _twin(m)
        if twin in shown and m not in keep and not rows.empty:
            units = (info.param_units if twin.startswith("param.") else info.metric_units)[twin]
            if np.array_equal(
                _shown(info.metric_units[m], rows[m]), _shown(units, rows[twin]), equal_nan=True
            ):
                continue
        out.append(m)
    return out


def _shown(unit: Any, column: Any) -> np.ndarray:
    """A column's values as the table shows them (display unit, 4 significant digits)."""
    values = np.array([unit.convert_one(v) for v in column], dtype=float)
    return np.array([float(f"{v:.4g}") if np.isfinite(v) else v for v in values])


def _body(info: ParetoInfo, metric_cols: list[str]) -> tuple[list[str], int, int]:
    """The body rows (at most MAX_TABLE_ROWS), how many are shown and how many points the front has."""
    rows = info.points.loc[list(info.front_order)]
    tags = {row: label for label, row in info.selected.items()}
    body = []
    shown = rows.iloc[:MAX_TABLE_ROWS]
    for label, row in shown.iterrows():
        tag = tags.get(int(label), "")
        cells = [f'<td class="text">{_esc(row["point_id"])}</td>', f'<td class="text">{_esc(tag)}</td>']
        for p in info.varying_params:
            value = row[p.column]
            if p.is_categorical:
                cells.append(f'<td class="text">{_esc(fmt_value(value, 6))}</td>')
            else:
                cells.append(_num_cell(info.param_units[p.column].convert_one(value), 6))
        for m in metric_cols:
            cells.append(_num_cell(info.metric_units[m].convert_one(row[m])))
        cls = ' class="sel"' if tag else ""
        body.append(f"<tr{cls}>{''.join(cells)}</tr>")
    return body, len(shown), len(rows)


def front_table(info: ParetoInfo, keep: Collection[str] = ()) -> str:
    """The `#front` section: the sortable table of front points and its CSV link."""
    metric_cols, head = _columns(info, keep)
    body, n_shown, n_front = _body(info, metric_cols)
    # pareto.csv holds the front of the study's objectives, not of those a redrawn report ranks by
    every = (
        "trials.parquet has every point and column (pareto.csv: the study's front)" if info.reranked else ""
    )
    more = ""
    if n_front > n_shown:
        rest = every or "pareto.csv has them all"
        more = f'<p class="note">First {n_shown} of {n_front} front points; {_esc(rest)}.</p>'
    if info.constant_metrics:
        same = ", ".join(
            f"{info.metric_units[m].title} {fmt_value(info.metric_units[m].convert_one(v))}"
            for m, v in info.constant_metrics.items()
        )
        more += f'<p class="note">Same for every point: {_esc(same)}.</p>'
    tools = (
        '<div class="table-tools"><a id="front-csv" href="#" download="front.csv">Download CSV</a>'
        " · parameters, then metrics (a percentile equal to its mean on every row, or the logged clock "
        f"equal to sm_clock_mhz, shows once; {_esc(every or 'pareto.csv has every column')}); first "
        f"sorted by {_esc(info.x.unit.label)}; click a header to sort (again to reverse)</div>"
    )
    return (
        f'<section id="front"><h2>The front ({n_front} points)</h2>{tools}'
        f'<div class="scroll"><table id="front-table"><thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(body)}</tbody></table></div>{more}<script>{_TABLE_JS}</script></section>"
    )
