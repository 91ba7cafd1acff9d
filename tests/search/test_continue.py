"""A finished run continued with a larger budget keeps every logged point and extends the same search.

The study is small and discrete (21 x 5 points, NSGA-II population 10), so NSGA-II proposes many
duplicates: a budget of 35 points ends within the sixth generation (batch), after 56 asks. The old driver
cut the fifth batch at 9 asks (35 - 26 known), 4 of them duplicates, and told it before two more batches
(4 and 3 asks) crossed into the sixth generation; a larger budget's replay asked all ten of the fifth at
once and then another sixth generation, and lost 2 of the 35 logged points.
"""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dse.search.pareto import pareto_mask
from dse.search.runner import RunSummary, run_study
from dse.search.space import point_id

from .test_runner import comparable, read_log
from .toy import zdt1

DISCRETE = """\
name: grid-zdt
space:
  x0: {type: float, low: 0, high: 1, step: 0.05}
  x1: {values: [0.0, 0.25, 0.5, 0.75, 1.0]}
objectives: {f1: minimize, f2: minimize}
search: {sampler: {kind: nsga2, population: 10}, n_points: N_POINTS, executor: serial, seed: 0}
"""
FIRST, MORE = 35, 43


def discrete_study(folder: Path, n_points: int) -> Path:
    path = folder / "grid_zdt.yaml"
    path.write_text(DISCRETE.replace("N_POINTS", str(n_points)))
    return path


def assert_results_hold_the_log(summary: RunSummary) -> None:
    """trials.parquet, summary.json and pareto.csv hold every logged point, and the front is the log's."""
    log = read_log(summary.run_dir)
    trials = pd.read_parquet(summary.run_dir / "trials.parquet")
    assert sorted(trials["point_id"]) == sorted(r["point_id"] for r in log)
    assert json.loads((summary.run_dir / "summary.json").read_text())["n_points"] == len(log)
    # The front, from the log alone with the one Pareto implementation, is what the run's tables mark.
    values = np.array([[r["metrics"]["f1"], r["metrics"]["f2"]] for r in log])
    on_log_front = {r["point_id"] for r, keep in zip(log, pareto_mask(values), strict=True) if keep}
    assert set(trials.loc[trials["on_front"], "point_id"]) == on_log_front
    assert set(pd.read_csv(summary.run_dir / "pareto.csv")["point_id"]) == on_log_front


@pytest.mark.parametrize("how", ["rerun", "resume"])
@pytest.mark.parametrize("executor", ["serial", "process"])
def test_a_larger_budget_keeps_every_logged_point(tmp_path: Path, executor: str, how: str) -> None:
    first = run_study(discrete_study(tmp_path, FIRST), out=tmp_path, evaluator=zdt1)
    logged = {r["point_id"] for r in read_log(first.run_dir)}
    assert first.n_points == len(logged) == FIRST
    if how == "rerun":  # `dse run STUDY --n-points 43` finds the run and continues it
        more = run_study(
            discrete_study(tmp_path, FIRST), out=tmp_path, evaluator=zdt1, n_points=MORE, executor=executor
        )
    else:
        more = run_study(resume=first.run_dir, evaluator=zdt1, n_points=MORE, executor=executor)
    assert more.run_dir == first.run_dir
    # Every logged point is met again (none re-evaluated) and the budget is filled with new ones.
    assert more.n_cached == FIRST and more.n_evaluated == MORE - FIRST and more.n_points == MORE
    trials = set(pd.read_parquet(more.run_dir / "trials.parquet")["point_id"])
    assert logged <= trials
    assert_results_hold_the_log(more)
    # The sampler was told every logged point in the order it first saw them: the continued run is the
    # run that had the larger budget from the start (the same points, sequence numbers and results).
    straight = run_study(discrete_study(tmp_path, MORE), out=tmp_path / "straight", evaluator=zdt1)
    assert comparable(read_log(more.run_dir)) == comparable(read_log(straight.run_dir))
    assert more.front_size == straight.front_size and more.hypervolume == straight.hypervolume


def test_continuing_twice_is_one_run(tmp_path: Path) -> None:
    """35 -> 43 -> 61 points: each continuation extends the one search (no second replay drifts)."""
    for n_points in (FIRST, MORE, 61):
        last = run_study(discrete_study(tmp_path, n_points), out=tmp_path, evaluator=zdt1)
    assert last.n_points == 61 and last.n_evaluated == 61 - MORE and last.n_cached == MORE
    straight = run_study(discrete_study(tmp_path, 61), out=tmp_path / "straight", evaluator=zdt1)
    assert comparable(read_log(last.run_dir)) == comparable(read_log(straight.run_dir))


def test_a_run_stopped_before_its_replay_ends_keeps_the_log(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A continued run whose time budget is spent before it has met the logged points again (here at once:
    setting up the sampler takes longer than 1 ns, which 1 ms was not always once Optuna was loaded) stops
    there; its tables still hold every logged point."""
    first = run_study(discrete_study(tmp_path, FIRST), out=tmp_path, evaluator=zdt1)
    with caplog.at_level(logging.WARNING, logger="dse.search.runner"):
        stopped = run_study(resume=first.run_dir, evaluator=zdt1, n_points=MORE, time_budget_s=1e-9)
    assert stopped.stop_reason == "time budget reached (1e-09 s)"
    assert stopped.n_evaluated == 0 and stopped.n_cached == stopped.n_points == FIRST
    assert_results_hold_the_log(stopped)
    # how many batches the sampler re-asked before the first budget check depends on the machine's speed
    missed = re.search(r"(\d+) points of the log were not proposed again", caplog.text)
    assert missed is not None and 0 < int(missed.group(1)) <= FIRST
    assert stopped.front_size == first.front_size


def test_a_logged_point_the_sampler_no_longer_proposes_stays_in_the_results(tmp_path: Path) -> None:
    """A point in the log that the replay never meets (here written by hand; an Optuna upgrade that changes
    NSGA-II's proposals does the same) is kept in the results after the run's own points."""
    first = run_study(discrete_study(tmp_path, FIRST), out=tmp_path, evaluator=zdt1)
    params = {"x0": 0.0, "x1": 0.0}  # zdt1: f1 = 0, f2 = 1, on every front (no point has f1 < 0)
    assert params not in [r["params"] for r in read_log(first.run_dir)]
    pid = point_id(params)  # its own id: a line with another point's id is a hand edit, skipped on resume
    foreign = {"point_id": pid, "params": params, "metrics": zdt1(params, None)}
    record = {**foreign, "feasible": True, "reason": "", "error": None, "t_eval_s": 0.0, "seq": 7}
    with (first.run_dir / "points.jsonl").open("a") as fh:
        fh.write(json.dumps(record) + "\n")
    more = run_study(resume=first.run_dir, evaluator=zdt1, n_points=MORE)
    assert more.n_evaluated == MORE - FIRST and more.n_cached == FIRST + 1 and more.n_points == MORE + 1
    assert_results_hold_the_log(more)
    trials = pd.read_parquet(more.run_dir / "trials.parquet").set_index("point_id")
    assert trials.loc[pid, "seq"] == MORE  # after the run's own points, numbered on
    assert trials.loc[pid, "on_front"]
