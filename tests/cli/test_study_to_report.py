"""End to end: `dse run` on the shipped llm_serving study, then the report's data opened as a reader would.

The hand-off checked here is search -> run directory -> report: the front the runner logged is the front the
report shows, every front point's row reaches the HTML table, and the energy breakdown is recomputed for
the points the page highlights.
"""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import pandas as pd
from typer.testing import CliRunner

from dse.cli import app
from dse.report.figures.pareto import build_pareto_info
from dse.report.frames import load_run

STUDY = Path(__file__).resolve().parents[2] / "studies" / "llm_serving.yaml"


def test_dse_run_writes_a_report_whose_data_is_the_runs(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        app, ["run", str(STUDY), "--n-points", "40", "--executor", "serial", "--out", str(tmp_path)]
    )
    assert result.exit_code == 0, result.output
    reports = list(tmp_path.glob("*/*/report.html"))
    # The run ends with where the report is (rich may wrap the long path: compare without whitespace).
    assert len(reports) == 1 and f"report:{reports[0]}" in "".join(result.output.split())
    run_dir = reports[0].parent

    # What the runner wrote.
    summary = json.loads((run_dir / "summary.json").read_text())
    trials = pd.read_parquet(run_dir / "trials.parquet")
    logged_front = set(trials.loc[trials["on_front"], "point_id"])
    assert summary["n_points"] == len(trials) == 40 and summary["front_size"] == len(logged_front) >= 1

    # What the report reads: the same points, the same front, classified the same way.
    run = load_run(run_dir)
    assert run.complete and set(run.trials["point_id"]) == set(trials["point_id"])
    info = build_pareto_info(run.trials, run.objectives, parameters=run.parameters)
    shown_front = set(info.points.loc[list(info.front_order), "point_id"])
    assert shown_front == logged_front
    assert info.count("front") == summary["front_size"]
    assert {o.column for o in info.objectives} == {f"metric.{o['metric']}" for o in summary["objectives"]}

    # What the page shows: every front point in the table, the figure's front trace, and breakdowns.
    page = reports[0].read_text(encoding="utf-8")
    table = page[page.index('<table id="front-table">') : page.index("</table>", page.index("front-table"))]
    ids_in_table = {html.unescape(m) for m in re.findall(r'<td class="text">([0-9a-f]{6,})</td>', table)}
    assert ids_in_table == logged_front
    assert f"Pareto front ({len(logged_front)})" in page
    assert '<section id="breakdown">' in page and "Energy by hardware module" in page
