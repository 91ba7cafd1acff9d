"""`dse report --objective A --objective B`: the page ranks by the objectives it draws, not the study's.

A newcomer's redrawn reports (mfu against J/token, $ against CO2, TTFT against TPOT) kept the log's
`on_front`, computed for the study's objectives: the front, its table, the "best ..." points and the
hypervolume were the study's, and 115 of 118 "front" points were dominated under the objectives drawn.
The expected fronts here come from points.jsonl by brute-force dominance (`naive_front`), not from the
front code the report uses.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dse.report.frames import load_run
from dse.report.html import natural_direction, write_html_report

from .runs import naive_front, write_run


def _logged(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "points.jsonl").read_text().splitlines()]


def _front_rows(page: str) -> list[tuple[str, str]]:
    """(point id, selection label) of each row of the page's front table."""
    table = page[page.index('id="front-table"') :]
    table = table[: table.index("</table>")]
    return re.findall(r'<tr(?: class="sel")?><td class="text">(\w+)</td><td class="text">([^<]*)</td>', table)


def _area_by_cells(points: np.ndarray, ref: np.ndarray) -> float:
    """Area dominated by `points` (minimised) inside `ref`, summed over the grid their coordinates cut."""
    xs = np.unique(np.append(points[:, 0], ref[0]))
    ys = np.unique(np.append(points[:, 1], ref[1]))
    area = 0.0
    for x0, x1 in zip(xs[:-1], xs[1:], strict=True):
        for y0, y1 in zip(ys[:-1], ys[1:], strict=True):
            if np.any((points[:, 0] <= x0) & (points[:, 1] <= y0)):
                area += (x1 - x0) * (y1 - y0)
    return area


def test_a_report_for_other_objectives_shows_their_front(tmp_path: Path) -> None:
    run_dir = write_run(tmp_path, 300)
    # no directions given: a throughput is maximized and a power minimized (README, `dse report`)
    page = write_html_report(
        run_dir, objectives=[("output_tokens_per_s", ""), ("avg_power_w", "")]
    ).read_text()

    ok = [r for r in _logged(run_dir) if r["feasible"] and not r["error"]]
    tps = np.array([r["metrics"]["output_tokens_per_s"] for r in ok])
    power_w = np.array([r["metrics"]["avg_power_w"] for r in ok])
    ids = np.array([r["point_id"] for r in ok])
    expected = set(ids[naive_front(np.column_stack([-tps, power_w]))])
    assert expected != _study_front(run_dir)  # the study's front is another set: the test tells them apart

    rows = _front_rows(page)
    assert {pid for pid, _ in rows} == expected and len(rows) == len(expected)
    assert f"The front ({len(expected)} points)" in page
    labels = {label: pid for pid, label in rows if label}
    assert labels["best output tokens per s"] == ids[np.argmax(tps)]  # the feasible points' best
    assert labels["best avg power"] == ids[np.argmin(power_w)]
    assert "Ranked by output_tokens_per_s (maximize), avg_power_w (minimize) instead of the study" in page

    # Hypervolume of that front, bounded by the feasible points' worst values pushed out 10% of their range
    v = np.column_stack([-tps, power_w])
    ref = v.max(axis=0) + 0.1 * (v.max(axis=0) - v.min(axis=0))
    area = _area_by_cells(v[naive_front(v)], ref)
    shown = re.search(r"<td>hypervolume</td><td>([^<]+)</td>", page)
    assert shown is not None and float(shown.group(1).replace(",", "")) == pytest.approx(area, rel=1e-3)
    study_front = len(_study_front(run_dir))
    assert (
        f"<td>study&#x27;s front (e2e_latency_s, energy_per_output_token_j)</td>"
        f"<td>{study_front} points, hypervolume 0.8123</td>"
    ) in page
    assert "pareto.csv has every column" not in page  # pareto.csv is the study's front


def _study_front(run_dir: Path) -> set[str]:
    """The study's front as the run logged it (trials.parquet's on_front)."""
    trials = load_run(run_dir).trials
    return set(trials.loc[trials["on_front"].astype(bool), "point_id"])


def test_the_log_front_is_kept_only_for_the_studys_own_objectives(tmp_path: Path) -> None:
    run_dir = write_run(tmp_path, 300)
    # the study's objectives in the other order: the log's front and the summary's hypervolume
    swapped = [("energy_per_output_token_j", ""), ("e2e_latency_s", "")]
    page = write_html_report(run_dir, objectives=swapped).read_text()
    assert {pid for pid, _ in _front_rows(page)} == _study_front(run_dir)
    assert "Ranked by" not in page and "<td>hypervolume</td><td>0.8123</td>" in page
    # the same metrics with latency maximized: another front, brute-forced from the log
    flipped = [("e2e_latency_s", "maximize"), ("energy_per_output_token_j", "")]
    page = write_html_report(run_dir, objectives=flipped).read_text()
    ok = [r for r in _logged(run_dir) if r["feasible"] and not r["error"]]
    v = np.array([[-r["metrics"]["e2e_latency_s"], r["metrics"]["energy_per_output_token_j"]] for r in ok])
    expected = {r["point_id"] for r, on in zip(ok, naive_front(v), strict=True) if on}
    assert {pid for pid, _ in _front_rows(page)} == expected != _study_front(run_dir)


def test_a_metric_named_without_a_direction_takes_its_natural_one() -> None:
    # a capacity is more-is-better (it was minimized: `--objective memory_capacity_bytes` called the
    # smallest best); the memory a point uses stays minimized
    assert natural_direction("memory_capacity_bytes") == natural_direction("kv_capacity_tokens") == "maximize"
    assert natural_direction("memory_bytes") == natural_direction("kv_cache_bytes") == "minimize"
    # throughput, goodput and utilization are maximized, time, cost and carbon minimized (README)
    for metric in ("output_tokens_per_s", "goodput_requests_per_s", "tokens_per_s_per_gpu", "mfu"):
        assert natural_direction(metric) == "maximize", metric
    for metric in ("ttft_s", "usd_per_million_output_tokens", "gco2_per_output_token", "energy_per_token_j"):
        assert natural_direction(metric) == "minimize", metric


def test_a_redrawn_front_holds_feasible_points_only(tmp_path: Path) -> None:
    run_dir = write_run(tmp_path, 300)
    trials = pd.read_parquet(run_dir / "trials.parquet")
    ok = (trials["feasible"] & trials["error"].isna()).to_numpy().copy()
    tps = trials["metric.output_tokens_per_s"].to_numpy(float)
    power_w = trials["metric.avg_power_w"].to_numpy(float)
    # the fastest feasible point heads the front; logged as infeasible, it must leave it (and "best")
    fastest = int(np.flatnonzero(ok)[np.argmax(tps[ok])])
    trials.loc[fastest, ["feasible", "reason"]] = [False, "ttft_p90_s 0.6 s > 0.5 s"]
    trials.to_parquet(run_dir / "trials.parquet", index=False)
    ok[fastest] = False
    page = write_html_report(
        run_dir, objectives=[("output_tokens_per_s", ""), ("avg_power_w", "")]
    ).read_text()
    ids = trials["point_id"].to_numpy()
    expected = set(ids[ok][naive_front(np.column_stack([-tps, power_w])[ok])])
    rows = _front_rows(page)
    assert {pid for pid, _ in rows} == expected and ids[fastest] not in expected
    assert {label: pid for pid, label in rows}["best output tokens per s"] == ids[ok][np.argmax(tps[ok])]
