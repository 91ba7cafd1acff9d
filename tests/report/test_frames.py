"""Reading run directories: parquet first, the JSONL log when the run was killed."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dse.errors import ConfigError
from dse.report.frames import Objective, load_run, point_params, read_points_jsonl

from .runs import write_run


def test_load_run_prefers_parquet_and_reads_summary(small_run: Path) -> None:
    run = load_run(small_run)
    assert run.source == "trials.parquet"
    assert run.complete
    assert len(run.trials) == 300
    assert run.objectives == (
        Objective("metric.e2e_latency_s", "minimize"),
        Objective("metric.energy_per_output_token_j", "minimize"),
    )
    kinds = {p.path: p.kind for p in run.parameters}
    assert kinds == {
        "gpu.num_sms": "int",
        "sm_clock_mhz": "int",
        "precision": "categorical",
        "gpu.memory.technology": "categorical",
        "batch": "int",
        "workload.seq_len": "constant",
        "gpu.memory.energy_factor": "float",
        "gpu.memory.data_rate_gbit_per_s": "float",
    }
    by_path = {p.path: p for p in run.parameters}
    assert by_path["precision"].categories == ("bf16", "fp8", "fp16")  # the declared order, not sorted
    assert by_path["workload.seq_len"].constant_value == 4096
    assert run.breakdowns is not None and run.study_yaml and run.env


def test_fallback_to_jsonl_matches_parquet(tmp_path: Path) -> None:
    run_dir = write_run(tmp_path, 200, parquet=False, summary=False)
    with (run_dir / "points.jsonl").open("a") as fh:
        fh.write('{"point_id": "torn-by-kil')  # a run killed mid-write
    run = load_run(run_dir)
    assert run.source == "points.jsonl"
    assert not run.complete
    assert len(run.trials) == 200
    # Objectives come from study.resolved.yaml's mapping spelling.
    assert [o.column for o in run.objectives] == ["metric.e2e_latency_s", "metric.energy_per_output_token_j"]
    reference = pd.read_parquet(write_run(tmp_path / "ref", 200) / "trials.parquet")
    for col in [c for c in reference.columns if c.startswith(("param.", "metric."))]:
        a, b = run.trials[col].to_numpy(), reference[col].to_numpy()
        if a.dtype.kind in "fc":
            np.testing.assert_allclose(a, b.astype(float), equal_nan=True)
        else:
            assert list(a) == list(b), col


def test_jsonl_keeps_the_last_record_of_a_point(tmp_path: Path) -> None:
    log = tmp_path / "points.jsonl"
    recs = [
        {
            "point_id": "a",
            "params": {"gpu": {"num_sms": 100}},
            "metrics": {"energy_j": 1.0},
            "feasible": True,
        },
        {
            "point_id": "a",
            "params": {"gpu": {"num_sms": 100}},
            "metrics": {"energy_j": 2.0},
            "feasible": True,
        },
    ]
    log.write_text("".join(json.dumps(r) + "\n" for r in recs))
    df = read_points_jsonl(log)
    assert len(df) == 1
    assert df.loc[0, "metric.energy_j"] == 2.0
    assert "param.gpu.num_sms" in df.columns  # nested params flatten to dotted paths


def test_a_hand_edited_infinity_is_not_a_best_point(tmp_path: Path) -> None:
    log = tmp_path / "points.jsonl"
    lines = [
        '{"point_id": "a", "metrics": {"energy_j": -Infinity}}',
        '{"point_id": "b", "metrics": {"energy_j": 2}}',
    ]
    log.write_text("\n".join(lines) + "\n")
    df = read_points_jsonl(log)
    assert df["metric.energy_j"].isna().tolist() == [True, False]


def test_point_params_gives_python_scalars(small_run: Path) -> None:
    run = load_run(small_run)
    params = point_params(run.trials.iloc[0].to_dict(), run.parameters)
    assert set(params) == {p.path for p in run.parameters}
    assert type(params["gpu.num_sms"]) is int
    assert isinstance(params["precision"], str)


def test_not_a_run_directory(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not a directory"):
        load_run(tmp_path / "missing")
    with pytest.raises(ConfigError, match="no trials.parquet or points.jsonl"):
        load_run(tmp_path)


def test_the_cli_shows_the_warning_with_its_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The package logs the edited line; the command line (its callback) prints it as `warning: ...`."""
    from dse.cli import _show_warnings

    _show_warnings()
    log = tmp_path / "points.jsonl"
    log.write_text(
        '{"point_id": "a", "metrics": {"energy_j": 1}}\n{"point_id": "b", "metrics": {"energy_j": NaN}}\n'
    )
    read_points_jsonl(log)
    assert f"warning: {log}:2: NaN or Infinity read as null" in capsys.readouterr().err


def test_a_log_newer_than_the_table_is_read(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A resumed run killed before it rewrote trials.parquet: the report showed the old table's points (and
    none of the ones logged since) without a word; the newer log is read, with a warning."""
    import os

    from dse.report.frames import read_trials

    run = write_run(tmp_path, 50)
    log = run / "points.jsonl"
    log.write_text(log.read_text() + '{"point_id": "extra", "metrics": {"energy_j": 1.0}}\n')
    table = run / "trials.parquet"
    os.utime(table, (table.stat().st_atime, log.stat().st_mtime - 10))  # the table from the earlier end
    trials, source = read_trials(run)
    assert source == "points.jsonl" and "extra" in set(trials["point_id"])
    assert "trials.parquet lacks 1 point(s) of" in caplog.text


def test_a_copied_run_reads_its_table_whatever_the_file_times(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """`cp -r` (rsync without -t, an archive without times) may write the table before the log: the report
    said the run "stopped before writing" it and read the log. The log holds no point the table lacks, a
    point logged twice included, so the table is read without a word."""
    import os

    from dse.report.frames import read_trials

    run = write_run(tmp_path, 50)
    log, table = run / "points.jsonl", run / "trials.parquet"
    lines = log.read_text().splitlines(keepends=True)
    log.write_text("".join(lines) + lines[7])  # a point logged again (a resumed run): 51 lines, 50 points
    os.utime(table, (table.stat().st_atime, log.stat().st_mtime - 10))
    trials, source = read_trials(run)
    assert source == "trials.parquet" and len(trials) == 50
    assert not caplog.text
