"""ParetoInfo (data, tested in full) and plot_pareto (smoke test)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import numpy as np
import pytest

from dse.errors import ConfigError
from dse.report.display import display_unit
from dse.report.figures.pareto import build_pareto_info, plot_pareto
from dse.report.frames import load_run
from dse.search.runner import run_study

from ..search.toy import zdt1
from .runs import write_run


def test_build_pareto_info_classifies_and_counts(small_run: Path) -> None:
    run = load_run(small_run)
    info = build_pareto_info(run.trials, run.objectives, parameters=run.parameters)
    t = run.trials
    assert info.n_points == run.summary["n_points"] == len(t)
    assert info.count("front") == run.summary["front_size"] == int(t["on_front"].sum())
    assert info.count("front") + info.count("dominated") == run.summary["n_feasible"]
    assert info.count("failed") == run.summary["n_failed"]
    assert info.count("infeasible") == int((~t["feasible"] & t["error"].isna()).sum())
    np.testing.assert_array_equal(info.points["status"] == "front", t["on_front"])
    assert info.n_plotted == info.n_points - info.count("failed")
    assert info.front_from_log
    # Axes: latency on x in seconds-family units, energy per token on y.
    assert info.x.column == "metric.e2e_latency_s" and info.y.column == "metric.energy_per_output_token_j"
    assert info.y.unit.unit == "mJ"
    # Front sorted along x, y falling: a staircase.
    fx = info.points.loc[list(info.front_order), "_x"].to_numpy()
    fy = info.points.loc[list(info.front_order), "_y"].to_numpy()
    assert np.all(np.diff(fx) >= 0) and np.all(np.diff(fy) <= 0)
    assert list(info.selected)[0] == "best e2e latency"
    assert info.selected["best e2e latency"] == info.front_order[0]
    assert info.selected["best energy per output token"] == info.front_order[-1]
    assert all(info.points.loc[i, "status"] == "front" for i in info.selected.values())


def test_front_is_computed_when_the_log_has_none(tmp_path: Path) -> None:
    run = load_run(write_run(tmp_path, 300, parquet=False, summary=False))
    assert "on_front" not in run.trials
    info = build_pareto_info(run.trials, run.objectives)
    assert not info.front_from_log
    reference = load_run(write_run(tmp_path / "ref", 300)).trials
    np.testing.assert_array_equal(
        (info.points["status"] == "front").to_numpy(), reference["on_front"].to_numpy()
    )


def test_color_by_accepts_a_path_and_rejects_unknown(small_run: Path) -> None:
    run = load_run(small_run)
    info = build_pareto_info(run.trials, run.objectives, parameters=run.parameters, color_by="precision")
    assert info.color_by == "param.precision"
    with pytest.raises(ConfigError, match="no such parameter"):
        build_pareto_info(run.trials, run.objectives, color_by="gpu.nope")


def test_color_by_takes_the_study_names_of_a_path(tmp_path: Path) -> None:
    """`lo` and `hi` set one path, x0, under disjoint `when`s (as `gddr_bus` and `hbm_bus` set the bus
    width); the log keys the points by path, and the report refused `--color-by lo`. A study's name picks
    its path, and the error lists the names beside the path."""
    study = tmp_path / "alias.yaml"
    study.write_text(
        textwrap.dedent(
            """\
            name: alias
            space:
              side: {values: [lo, hi]}
              lo: {path: x0, type: float, low: 0.0, high: 0.5, when: {side: lo}}
              hi: {path: x0, type: float, low: 0.5, high: 1.0, when: {side: hi}}
              x1: {type: float, low: 0.0, high: 1.0}
            objectives: {f1: minimize, f2: minimize}
            search: {sampler: random, n_points: 20, executor: serial}
            """
        )
    )
    run = load_run(run_study(study, out=tmp_path, evaluator=zdt1).run_dir)
    for name in ("lo", "hi", "x0", "param.x0"):
        info = build_pareto_info(run.trials, run.objectives, parameters=run.parameters, color_by=name)
        assert info.color_by == "param.x0"
    with pytest.raises(
        ConfigError, match=r"'mid': no such parameter in this run \(known: side, x0 \(lo, hi\), x1\)"
    ):
        build_pareto_info(run.trials, run.objectives, parameters=run.parameters, color_by="mid")


def test_plot_pareto_smoke(small_run: Path) -> None:
    run = load_run(small_run)
    info = build_pareto_info(run.trials, run.objectives, parameters=run.parameters, color_by="precision")
    fig = plot_pareto(info)
    names = [t.name for t in fig.data]
    assert names[:3] == ["dominated", "infeasible", "front line"] and names[3].startswith("Pareto front")
    assert {t.type for t in fig.data} == {"scattergl"}
    drawn = sum(len(t.x) for t in fig.data if t.name != "front line")
    assert drawn == info.n_plotted
    front = fig.data[3]
    assert len(front.marker.color) == info.count("front")
    assert list(front.marker.colorbar.ticktext) == ["bf16", "fp8", "fp16"]
    for path in (
        "gpu.num_sms",
        "sm_clock_mhz (MHz)",
        "precision",
        "gpu.memory.technology",
        "workload.seq_len",
    ):
        assert path in front.hovertemplate
    assert "avg power (W)" in front.hovertemplate and "memory (GiB)" in front.hovertemplate
    assert "infeasible:" in fig.data[1].hovertemplate
    assert fig.data[2].line.shape == "hv"


def test_missing_values_show_as_a_dash_in_hover_data(small_run: Path) -> None:
    from dse.report.figures.pareto import MISSING, build_customdata, customdata_columns

    run = load_run(small_run)
    t = run.trials.copy()
    t.loc[0, "param.precision"] = None
    t.loc[0, "metric.ttft_s"] = np.nan
    t.loc[0, "param.gpu.num_sms"] = np.nan
    info = build_pareto_info(t, run.objectives, parameters=run.parameters)
    cols = customdata_columns(info)
    row = build_customdata(info, info.points.iloc[[0, 1]])
    for col in ("param.precision", "metric.ttft_s", "param.gpu.num_sms"):
        assert row[0, cols.index(col)] == MISSING
        assert row[1, cols.index(col)] != MISSING
    assert row[1, cols.index("metric.ttft_s")] == 20  # 0.02 s shown as 20 ms, rounded


def test_units_follow_the_data_when_no_point_is_feasible(small_run: Path) -> None:
    """With no feasible point the units were picked from no data, so a run showed weights in bytes and
    bandwidth in MB/s (1.6e+10 B); they now come from every point, as the front's would."""
    run = load_run(small_run)
    trials = run.trials.copy()
    trials["feasible"] = False
    trials["on_front"] = False
    info = build_pareto_info(trials, run.objectives)
    assert info.count("front") == 0
    shown = [display_unit(a.column, run.trials[a.column].to_numpy(float)).unit for a in (info.x, info.y)]
    assert [info.x.unit.unit, info.y.unit.unit] == shown
    assert shown != [display_unit(a.column).unit for a in (info.x, info.y)]  # not the no-data fallback
