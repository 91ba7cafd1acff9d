"""What a run reuses from its directory: its study only while study.resolved.yaml is the study the run was
made with, and only the log lines that are points of that study (session 34: an edited resolved study, or
a hand-edited line, was reused "from the log" and mixed into one front)."""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path

import pandas as pd
import pytest

from dse.cli import app
from dse.errors import ConfigError
from dse.search.rundir import STUDY_FILE
from dse.search.runner import run_study
from dse.search.space import SearchSpace, point_id
from dse.search.study import load_study
from tests.cli.fuzz_helpers import runner

from .test_runner import read_log
from .toy import zdt1

# x0 on a 0.05 grid, x1 a choice, x2 an int grid that exists only when x1 is 0.5
STUDY = """\
name: guard
space:
  x0: {type: float, low: 0, high: 1, step: 0.05}
  x1: {values: [0.0, 0.5, 1.0]}
  x2: {type: int, low: 0, high: 8, step: 2, when: {x1: 0.5}}
objectives: {f1: minimize, f2: minimize}
search: {sampler: random, n_points: 20, executor: serial, seed: 3}
"""


def first_run(tmp_path: Path) -> tuple[Path, Path]:
    study = tmp_path / "guard.yaml"
    study.write_text(STUDY)
    return study, run_study(study, out=tmp_path, evaluator=zdt1).run_dir


def space(folder: Path) -> SearchSpace:
    path = folder / "space.yaml"
    path.write_text(STUDY)
    return load_study(path, evaluator=zdt1).config.search_space()


@pytest.mark.parametrize(
    ("edit", "old", "new"),
    [
        ("a narrowed space", "high: 8\n", "high: 4\n"),
        ("another model", "model: llama-3.1-8b", "model: gpt2"),
        ("another objective", "f2: minimize", "f2: maximize"),
        ("another choice", "values: [0.0, 0.5, 1.0]", "values: [0.0, 0.5, 2.0]"),
    ],
)  # fmt: skip
def test_a_run_whose_resolved_study_was_edited_is_not_continued(
    tmp_path: Path, edit: str, old: str, new: str
) -> None:
    """The run id's hash is the study's: a study.resolved.yaml that no longer hashes to it proposes and
    judges points by another study, while the log holds the first study's; neither --resume nor a rerun of
    the study file continues it, and nothing of the run is rewritten."""
    study, run_dir = first_run(tmp_path)
    resolved = run_dir / STUDY_FILE
    assert old in resolved.read_text(), edit
    resolved.write_text(resolved.read_text().replace(old, new))
    log_before, study_before = (run_dir / "points.jsonl").read_bytes(), resolved.read_bytes()
    for kwargs in ({"resume": run_dir, "n_points": 30}, {"study": study, "out": tmp_path}):
        with pytest.raises(
            ConfigError, match=f"{resolved}, or a GPU file or model config it names, was edited"
        ):
            run_study(evaluator=zdt1, **kwargs)  # type: ignore[arg-type]
    assert (run_dir / "points.jsonl").read_bytes() == log_before and resolved.read_bytes() == study_before
    # the file as the run wrote it is continued again: the check compares content, not a timestamp
    resolved.write_text(resolved.read_text().replace(new, old))
    again = run_study(resume=run_dir, evaluator=zdt1)
    assert again.n_cached == 20 and again.n_evaluated == 0


def test_a_resume_of_a_run_whose_model_was_edited_is_exit_2_naming_the_file(tmp_path: Path) -> None:
    """The newcomer's case with the real model: llama-3.1-8b points reused as gpt2 ones, one front."""
    study = tmp_path / "s.yaml"
    study.write_text(
        "name: m\nmodel: llama-3.1-8b\ngpu: h100-sxm\n"
        "workload: {batch: 8, input_tokens: 64, output_tokens: 8}\n"
        "space: {sm_clock_mhz: {values: [1005, 1500, 1980]}}\n"
        "objectives: {e2e_latency_s: minimize, energy_per_output_token_j: minimize}\n"
        "search: {sampler: grid, n_points: 3, executor: serial}\n"
    )
    result = runner.invoke(app, ["run", str(study), "--out", str(tmp_path), "--no-report"])
    assert result.exit_code == 0, result.output
    (run_dir,) = (tmp_path / "m").iterdir()
    resolved = run_dir / STUDY_FILE
    resolved.write_text(resolved.read_text().replace("model: llama-3.1-8b", "model: gpt2"))
    result = runner.invoke(app, ["run", "--resume", str(run_dir), "--n-points", "6", "--no-report"])
    assert result.exit_code == 2, result.output
    assert f"{resolved}, or a GPU file or model config it names, was edited" in " ".join(
        result.output.split()
    )
    assert "Traceback" not in result.output and len(read_log(run_dir)) == 3


def test_log_lines_that_are_no_points_of_the_study_are_skipped_and_evaluated_again(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Each hand edit below makes a line that dse never writes for this study; a resume warns, naming the
    line, skips it and evaluates that point again, so the run ends with the first run's own records (the
    evaluator is deterministic), not the edited ones."""
    _, run_dir = first_run(tmp_path)
    original = read_log(run_dir)
    by_seq = {r["seq"]: r for r in original}
    # point_id kept: the line claims to be the point the sampler proposes again
    edits = {
        "params.x0: 5 is outside [0, 1]": ("params", "x0", 5),
        "params.x0: 'abc' is not a finite number": ("params", "x0", "abc"),
        "params.x0: 0.33 is not 0 + a multiple of its step 0.05": ("params", "x0", 0.33),
        "params.x1: 0.25 is not one of its values (0.0, 0.5, 1.0)": ("params", "x1", 0.25),
        "feasible: 'yes' is not true or false": ("feasible", None, "yes"),
        "metrics.f1: [1] is not a number": ("metrics", "f1", [1]),
        "point_id: not that of its params": ("params", "x0", None),  # moved to another grid value
    }
    lines = []
    for i, (message, (key, sub, value)) in enumerate(edits.items()):
        rec = json.loads(json.dumps(by_seq[i]))
        if message.startswith("point_id"):
            rec["params"]["x0"] = 0.05 if rec["params"]["x0"] != 0.05 else 0.1
        elif sub is None:
            rec[key] = value
        else:
            rec[key][sub] = value
        lines.append(rec)
    log = [*lines, *(r for r in original if r["seq"] >= len(edits))]
    (run_dir / "points.jsonl").write_text("".join(json.dumps(r) + "\n" for r in log))
    with caplog.at_level(logging.WARNING, logger="dse.search.rundir"):
        again = run_study(resume=run_dir, evaluator=zdt1)
    for lineno, message in enumerate(edits, 1):
        needle = f"points.jsonl:{lineno}: {message}; no point of this study (a hand-edited run log?)"
        assert needle in caplog.text
    assert again.n_evaluated == len(edits) and again.n_cached == 20 - len(edits)
    trials = pd.read_parquet(run_dir / "trials.parquet").set_index("point_id")
    assert sorted(trials.index) == sorted(r["point_id"] for r in original)
    for rec in original:
        assert trials.loc[rec["point_id"], "metric.f1"] == rec["metrics"]["f1"]
        assert trials.loc[rec["point_id"], "param.x0"] == rec["params"]["x0"]


@pytest.mark.parametrize(
    ("point", "problem"),
    [
        ({"x0": 0.35, "x1": 0.0}, None),
        ({"x0": 0.1 + 0.2, "x1": 0.0}, None),  # 0.30000000000000004: a sampler's low + k * step
        ({"x0": 1, "x1": 1.0}, None),  # JSON's 1 for 1.0: the same number
        ({"x0": 0.35, "x1": 0.5, "x2": 4}, None),
        ({"x0": 0.35, "x1": 0.5}, "x2: missing"),  # x1 = 0.5 makes x2 active
        ({"x0": 0.35, "x1": 0.0, "x2": 4}, "x2: no parameter of the study sets it here"),  # inactive
        ({"x0": 0.35, "x1": 0.5, "x2": 3}, "x2: 3 is not 0 + a multiple of its step 2"),
        ({"x0": 0.35, "x1": 0.5, "x2": 10}, "x2: 10 is outside [0, 8]"),
        ({"x0": 0.35, "x1": 0.5, "x2": 4.0}, "x2: 4.0 is not an integer"),
        ({"x0": 0.35, "x1": 0.5, "x2": True}, "x2: True is not an integer"),
        ({"x0": 0.35, "x1": False}, "x1: False is not one of its values (0.0, 0.5, 1.0)"),  # False == 0.0
        ({"x0": -0.05, "x1": 0.0}, "x0: -0.05 is outside [0, 1]"),
        ({"x1": 0.0}, "x0: missing"),
    ],
)
def test_a_logged_point_is_checked_against_every_parameter_it_sets(
    tmp_path: Path, point: dict, problem: str | None
) -> None:
    assert space(tmp_path).point_problem(point) == problem


def test_points_the_run_writes_are_points_of_its_space(tmp_path: Path) -> None:
    """The check's other side: every point a run logs passes it (no run would skip its own lines)."""
    _, run_dir = first_run(tmp_path)
    logged = read_log(run_dir)
    assert len(logged) == 20 and any("x2" in r["params"] for r in logged)
    checked = space(tmp_path)
    for rec in logged:
        assert checked.point_problem(rec["params"]) is None and rec["point_id"] == point_id(rec["params"])


def test_reading_a_long_log_takes_time_in_proportion_to_it(tmp_path: Path) -> None:
    """Every rerun of a study reads its whole log: each line's number was counted from the file's start,
    so 4,000 lines of a serving study (2 KB each) took 4.7 s to read and 40,000 short lines far longer;
    read line by line, 40,000 lines take about half a second here."""
    from dse.search.rundir import PointLog

    path = tmp_path / "points.jsonl"
    path.write_text("".join(f'{{"point_id": "p{i}", "metrics": {{"f1": {i}}}}}\n' for i in range(40_000)))
    start_s = time.perf_counter()
    log = PointLog(path)
    log.close()
    assert len(log.records) == 40_000 and time.perf_counter() - start_s < 5.0


def test_an_edited_gpu_file_starts_a_new_run_and_refuses_the_old_ones_resume(tmp_path: Path) -> None:
    """A GPU file a study names, edited between two runs (a 700 W TDP made 350 W), was continued: the old
    points and the new in one log and one front. Its content is part of the study's hash now."""
    gpu = tmp_path / "mygpu.yaml"
    gpu.write_text((Path(__file__).resolve().parents[2] / "dse/hardware/data/gpus/h100-sxm.yaml").read_text())
    study = tmp_path / "s.yaml"
    study.write_text(
        f"name: gpufile\nmodel: llama-3.1-8b\ngpu: {gpu}\n"
        "workload: {batch: 8, input_tokens: 128, output_tokens: 16}\n"
        "space:\n  sm_clock_mhz: {type: int, low: 1005, high: 1980, step: 15}\n"
        "objectives: {e2e_latency_s: minimize, energy_per_output_token_j: minimize}\n"
        "search: {sampler: random, n_points: 6, executor: serial, seed: 0}\n"
    )
    first = run_study(study, out=tmp_path / "out")
    gpu.write_text(gpu.read_text().replace("  tdp_w: 700 ", "  tdp_w: 350 "))
    second = run_study(study, out=tmp_path / "out")
    assert second.run_dir != first.run_dir and second.n_cached == 0
    with pytest.raises(ConfigError, match="or a GPU file or model config it names, was edited"):
        run_study(resume=first.run_dir)


def test_an_edited_model_config_named_in_the_space_starts_a_new_run(tmp_path: Path, monkeypatch) -> None:
    """A `model:` value of the space is read from the working directory as a relative path: its edits were
    not in the hash (review: 0 evaluated, 4 from the log, the old layers' latencies)."""
    monkeypatch.chdir(tmp_path)
    config = Path(__file__).resolve().parents[2] / "dse/workload/data/models/gpt2.json"
    (tmp_path / "m1.json").write_text(config.read_text())
    study = tmp_path / "s.yaml"
    study.write_text(
        "name: spmodel\nmodel: gpt2\ngpu: h100-sxm\n"
        "workload: {batch: 8, input_tokens: 64, output_tokens: 8}\n"
        "space:\n  model: {values: [m1.json, gpt2]}\n"
        "objectives: {e2e_latency_s: minimize, energy_per_output_token_j: minimize}\n"
        "search: {sampler: grid, n_points: 2, executor: serial}\n"
    )
    first = run_study(study, out=tmp_path / "out")
    (tmp_path / "m1.json").write_text(config.read_text().replace('"n_layer": 12', '"n_layer": 24'))
    second = run_study(study, out=tmp_path / "out")
    assert second.run_dir != first.run_dir and second.n_cached == 0
