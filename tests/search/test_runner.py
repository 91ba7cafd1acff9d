"""The driver end to end with toy evaluators: run-dir format, failures, infeasibility, stops, resume."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dse.errors import ConfigError, SearchError
from dse.search.pareto import pareto_mask
from dse.search.progress import ProgressState
from dse.search.rundir import STUDY_FILE, PointLog, PointRecord, model_fingerprint, tree_fingerprint
from dse.search.runner import run_study

from .toy import ctrl_c_after_40, die_once, flat, schaffer, zdt1

TESTS_DIR = Path(__file__).resolve().parents[1]
RECORD_KEYS = {"point_id", "params", "metrics", "feasible", "reason", "error", "t_eval_s", "seq"}
SUMMARY_KEYS = {
    "study",
    "run_id",
    "objectives",
    "constraints",
    "parameters",
    "n_points",
    "n_feasible",
    "n_failed",
    "front_size",
    "hypervolume",
    "reference_point",
    "stop_reason",
    "elapsed_s",
    "points_per_s",
    "sampler",
    "executor",
    "seed",
}

ZDT = """\
name: zdt
space:
  x0: {type: float, low: 0, high: 1}
  x1: {type: float, low: 0, high: 1}
  x2: {type: float, low: 0, high: 1}
objectives: {f1: minimize, f2: minimize}
search: {sampler: {kind: nsga2, population: 16}, n_points: N_POINTS, executor: serial, seed: 7}
"""


def zdt_study(tmp_path: Path, n_points: int = 160, name: str = "zdt.yaml") -> Path:
    path = tmp_path / name
    path.write_text(ZDT.replace("N_POINTS", str(n_points)))
    return path


def read_log(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "points.jsonl").read_text().splitlines()]


def comparable(records: list[dict]) -> list[tuple]:
    return sorted(
        (
            r["seq"],
            r["point_id"],
            json.dumps(r["params"], sort_keys=True),
            json.dumps(r["metrics"], sort_keys=True),
            r["feasible"],
            r["reason"],
            r["error"],
        )
        for r in records
    )


def test_run_dir_format(tmp_path: Path) -> None:
    states: list[ProgressState] = []
    s = run_study(zdt_study(tmp_path), out=tmp_path / "res", evaluator=zdt1, progress=states.append)
    run_dir = s.run_dir
    assert run_dir.parent == tmp_path / "res" / "zdt"
    assert {p.name for p in run_dir.iterdir()} >= {
        "study.resolved.yaml",
        "env.json",
        "points.jsonl",
        "trials.parquet",
        "pareto.csv",
        "summary.json",
    }
    log = read_log(run_dir)
    assert len(log) == 160 and all(set(r) == RECORD_KEYS for r in log)
    assert sorted(r["seq"] for r in log) == list(range(160))
    summary = json.loads((run_dir / "summary.json").read_text())
    assert set(summary) >= SUMMARY_KEYS
    assert summary["stop_reason"].startswith("point budget reached")
    assert summary["objectives"] == [
        {"metric": "f1", "direction": "minimize"},
        {"metric": "f2", "direction": "minimize"},
    ]
    assert [p["path"] for p in summary["parameters"]] == ["x0", "x1", "x2"]
    df = pd.read_parquet(run_dir / "trials.parquet")
    assert list(df.columns) == [
        "point_id",
        "seq",
        "param.x0",
        "param.x1",
        "param.x2",
        "metric.f1",
        "metric.f2",
        "metric.g",
        "feasible",
        "reason",
        "error",
        "on_front",
    ]
    expected = pareto_mask(df[["metric.f1", "metric.f2"]].to_numpy())
    assert np.array_equal(df["on_front"].to_numpy(), expected)
    front = pd.read_csv(run_dir / "pareto.csv")
    assert len(front) == summary["front_size"] == expected.sum()
    assert front["metric.f1"].is_monotonic_increasing
    assert states[-1].done and states[-1].n_points == 160 and states[-1].front_size == summary["front_size"]
    env = json.loads((run_dir / "env.json").read_text())
    assert env["cpus"] and env["packages"]["optuna"] and env["evaluator"].endswith("toy.zdt1")


def test_nsga2_approaches_the_known_front(tmp_path: Path) -> None:
    s = run_study(zdt_study(tmp_path, 1600), out=tmp_path, evaluator=zdt1)
    front = pd.read_csv(s.run_dir / "pareto.csv")
    gap = front["metric.f2"] - (1 - np.sqrt(front["metric.f1"]))
    assert gap.min() >= -1e-12 and gap.median() < 0.5
    assert s.hypervolume > 0


def test_serial_and_process_executors_agree(tmp_path: Path) -> None:
    a = run_study(zdt_study(tmp_path, 96), out=tmp_path / "a", evaluator=zdt1)
    b = run_study(zdt_study(tmp_path, 96), out=tmp_path / "b", evaluator=zdt1, executor="process", workers=2)
    assert comparable(read_log(a.run_dir)) == comparable(read_log(b.run_dir))
    assert a.hypervolume == b.hypervolume and b.executor == "process"


SCHAFFER = """\
name: schaffer
space:
  x: {type: float, low: -1, high: 3, step: 0.25}
  mode: {values: [ok, ok2, boom, tight]}
  budget: {value: 2.0}
objectives: {f1: minimize, f2: minimize}
constraints: [f1 <= budget]
search: {sampler: grid, n_points: 1000, executor: serial}
"""


def test_failed_and_infeasible_points_are_logged_with_reasons(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(SCHAFFER)
    states: list[ProgressState] = []
    s = run_study(path, out=tmp_path, evaluator=schaffer_ok2, progress=states.append)
    log = {(r["params"]["x"], r["params"]["mode"]): r for r in read_log(s.run_dir)}
    assert len(log) == 17 * 4 and s.stop_reason.startswith("search space exhausted")
    # the progress bar's total is the grid's 68 points, not n_points (1,000): it ends full
    assert {st.n_target for st in states} == {17 * 4} and states[-1].n_points == 17 * 4
    boom = log[(1.0, "boom")]
    assert boom["error"] == "ValueError: boom at x=1" and boom["reason"] == "error" and not boom["feasible"]
    tight = log[(1.0, "tight")]
    assert tight["reason"] == "model: does not fit" and not tight["feasible"] and tight["error"] is None
    hot = log[(2.0, "ok")]
    assert not hot["feasible"] and hot["reason"] == "f1 4 violates <= budget 2"
    assert log[(1.0, "ok")]["feasible"]
    assert s.n_failed == 17 and s.n_feasible == 2 * 10  # x in -1..1.25 (x^2 <= 2), modes ok and ok2
    df = pd.read_parquet(s.run_dir / "trials.parquet")
    assert not df.loc[~df["feasible"], "on_front"].any()
    assert df.loc[df["on_front"], "param.x"].between(0, 1.25).all()


def schaffer_ok2(params: dict, ctx: object) -> dict:
    return schaffer({**params, "mode": "ok" if params["mode"] == "ok2" else params["mode"]}, ctx)


schaffer_ok2.metric_names = schaffer.metric_names  # type: ignore[attr-defined]


def test_duplicates_are_answered_from_the_run_and_a_finite_space_ends(tmp_path: Path) -> None:
    path = tmp_path / "d.yaml"
    path.write_text(
        textwrap.dedent("""\
        name: dup
        space: {x: {values: [0.0, 0.5, 1.0, 1.5, 2.0]}}
        objectives: {f1: minimize, f2: minimize}
        search: {sampler: random, n_points: 100, batch_size: 4, executor: serial}
    """)
    )
    s = run_study(path, out=tmp_path, evaluator=schaffer)
    assert s.n_points == 5 and "exhausted" in s.stop_reason
    assert len(read_log(s.run_dir)) == 5


def test_patience_stops_a_stalled_search(tmp_path: Path) -> None:
    text = ZDT.replace("N_POINTS", "1000").replace("seed: 7}", "seed: 7, patience: 3}")
    (tmp_path / "p.yaml").write_text(text)
    s = run_study(tmp_path / "p.yaml", out=tmp_path, evaluator=flat)
    assert s.stop_reason.startswith("hypervolume stalled for 3 batches")
    assert 16 * 3 < s.n_points <= 16 * 4  # 1 + 3 batches (NSGA-II may propose a few duplicates)


def test_time_budget(tmp_path: Path) -> None:
    # The budget counts from the runner's start (set-up included): 0.3 s evaluated nothing on a loaded VM.
    # 100,000 points take minutes (Optuna's ask/tell alone ~1 ms each), so 3 s always stops it early.
    s = run_study(zdt_study(tmp_path, 100000), out=tmp_path, evaluator=zdt1, time_budget_s=3.0)
    assert s.stop_reason == "time budget reached (3 s)" and 0 < s.n_points < 100000


def test_rerun_continues_the_same_run_without_reevaluating(tmp_path: Path) -> None:
    first = run_study(zdt_study(tmp_path, 64), out=tmp_path, evaluator=zdt1)
    again = run_study(zdt_study(tmp_path, 64), out=tmp_path, evaluator=zdt1)
    assert again.run_dir == first.run_dir and again.n_evaluated == 0 and again.n_cached == 64
    more = run_study(zdt_study(tmp_path, 128), out=tmp_path, evaluator=zdt1)
    assert more.run_dir == first.run_dir and more.n_evaluated == 64 and more.n_cached == 64
    fresh = run_study(zdt_study(tmp_path, 128), out=tmp_path / "fresh", evaluator=zdt1)
    assert comparable(read_log(fresh.run_dir)) == comparable(read_log(more.run_dir))
    assert len(read_log(more.run_dir)) == 128


def _stamp_other_model(run_dir: Path) -> None:
    """Make a run look as if an older dse (other coefficients or code) had produced it."""
    env_path = run_dir / "env.json"
    env = json.loads(env_path.read_text())
    assert env["model_fingerprint"] == model_fingerprint()
    env["model_fingerprint"] = "000000000000"
    env_path.write_text(json.dumps(env))


def test_points_of_another_model_version_are_not_reused(tmp_path: Path) -> None:
    first = run_study(zdt_study(tmp_path, 32), out=tmp_path, evaluator=zdt1)
    _stamp_other_model(first.run_dir)
    again = run_study(zdt_study(tmp_path, 32), out=tmp_path, evaluator=zdt1)
    assert again.run_dir != first.run_dir and again.n_evaluated == 32 and again.n_cached == 0
    assert len(read_log(first.run_dir)) == 32  # the old run's points stay where they were
    # An explicit resume of the old run refuses to mix the two models' points, naming both fingerprints.
    with pytest.raises(ConfigError, match="another version of the dse model.*000000000000"):
        run_study(resume=first.run_dir, evaluator=zdt1)


def test_fingerprint_changes_with_code_and_data_but_not_caches(tmp_path: Path) -> None:
    (tmp_path / "perf" / "data").mkdir(parents=True)
    (tmp_path / "__pycache__").mkdir()
    (tmp_path / "model.py").write_text("X = 1\n")
    coeffs = tmp_path / "perf" / "data" / "coeffs.json"
    coeffs.write_text('{"lambda": 1.0}')
    base = tree_fingerprint(tmp_path)
    (tmp_path / "__pycache__" / "model.cpython-312.pyc").write_bytes(b"\0")
    (tmp_path / "notes.txt").write_text("not part of the model")
    assert tree_fingerprint(tmp_path) == base
    coeffs.write_text('{"lambda": 1.1}')  # a refit
    refit = tree_fingerprint(tmp_path)
    assert refit != base
    (tmp_path / "model.py").write_text("X = 2\n")  # a code change
    assert tree_fingerprint(tmp_path) not in {base, refit}
    assert len(model_fingerprint()) == 12


def test_lost_worker_is_retried(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DSE_TEST_MARKER", str(tmp_path / "marker"))
    s = run_study(zdt_study(tmp_path, 32), out=tmp_path, evaluator=die_once, executor="process", workers=2)
    assert (tmp_path / "marker").exists()
    assert s.n_points == 32 and s.n_failed == 0


def test_torn_last_line_is_dropped(tmp_path: Path) -> None:
    path = tmp_path / "points.jsonl"
    good = {
        "point_id": "a",
        "params": {},
        "metrics": {},
        "feasible": True,
        "reason": "",
        "error": None,
        "t_eval_s": 0.0,
        "seq": 0,
    }
    path.write_text(json.dumps(good) + "\n" + '{"point_id": "b", "par')
    log = PointLog(path)
    assert list(log.records) == ["a"]
    assert log.records["a"] == PointRecord(point_id="a", feasible=True)
    log.append([PointRecord(point_id="c", seq=1)])
    log.close()
    assert [json.loads(x)["point_id"] for x in path.read_text().splitlines()] == ["a", "c"]
    assert PointLog(path).records["c"].to_json() == {**good, "point_id": "c", "feasible": False, "seq": 1}


def test_nan_and_infinity_in_the_log_are_missing_values(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """NaN / Infinity are not JSON: a hand-edited log's values count as missing, with the line named, and
    what dse writes stays JSON (a non-finite metric is written as null)."""
    path = tmp_path / "points.jsonl"
    path.write_text('{"point_id": "a", "metrics": {"energy_j": -Infinity, "latency_s": NaN, "x": 1e999}}\n')
    log = PointLog(path)
    assert log.records["a"].metrics == {"energy_j": None, "latency_s": None, "x": None}
    assert "points.jsonl:1: NaN or Infinity" in caplog.text
    log.append([PointRecord(point_id="b", metrics={"energy_j": float("inf"), "x": np.float32("nan")})])
    log.close()
    last = path.read_text().splitlines()[-1]
    assert json.loads(last, parse_constant=lambda c: pytest.fail(f"{c} written"))["metrics"] == {
        "energy_j": None, "x": None,
    }  # fmt: skip


def test_a_negative_metric_in_the_log_is_a_missing_value(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Every metric dse writes is >= 0: a hand-edited -1 J/token won the resumed run's front silently."""
    from dse.report.frames import read_points_jsonl

    path = tmp_path / "points.jsonl"
    path.write_text(
        '{"point_id": "a", "metrics": {"energy_per_token_j": 0.5}}\n'
        '{"point_id": "b", "metrics": {"energy_per_token_j": -1.0, "latency_s": 2, "ok": false}}\n'
    )
    assert PointLog(path).records["b"].metrics == {"energy_per_token_j": None, "latency_s": 2, "ok": False}
    assert "points.jsonl:2: negative energy_per_token_j read as null" in caplog.text
    frame = read_points_jsonl(path)  # the report's reader of the same log
    assert frame["metric.energy_per_token_j"].isna().tolist() == [False, True]


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('{"params": {}}', "without point_id"),
        ("[1, 2]", "not an object"),
        ('{"point_id": "a", "params": [1]}', "must be objects"),
        ('{"point_id": "a", "seq": "first"}', "malformed record"),
    ],
)
def test_a_damaged_log_is_one_error_naming_the_line(tmp_path: Path, line: str, message: str) -> None:
    path = tmp_path / "points.jsonl"
    path.write_text(line + "\n")
    with pytest.raises(SearchError, match=f"points.jsonl:1: .*{message}|points.jsonl.*{message}"):
        PointLog(path)


@pytest.mark.parametrize("junk", [b"\xe9\xe9", b"[" * 100_000 + b"]" * 100_000], ids=["latin1", "deep"])
def test_hostile_lines_in_the_log_are_damaged_lines(tmp_path: Path, junk: bytes) -> None:
    """Bytes that are not UTF-8 and nesting too deep to parse are damaged lines like any other: dropped as
    a torn last line, one error naming the line elsewhere (they were a UnicodeDecodeError or RecursionError
    traceback, in `--resume` and in `dse report` alike; a fuzzer's finding)."""
    from dse.report.frames import read_points_jsonl

    good = json.dumps({"point_id": "a", "params": {"x": 1}, "metrics": {"f1": 1.0}}).encode()
    path = tmp_path / "points.jsonl"
    path.write_bytes(good + b"\n" + junk + b"\n")
    assert list(PointLog(path).records) == ["a"]  # the last line: torn, dropped
    assert path.read_bytes() == good + b"\n"
    path.write_bytes(good + b"\n" + junk + b"\n" + good + b"\n")
    with pytest.raises(SearchError, match="points.jsonl:2: not JSON"):
        PointLog(path)
    assert list(read_points_jsonl(path)["point_id"]) == ["a"]  # the report skips it (and the duplicate)


def test_sigkill_and_resume_loses_nothing_and_reevaluates_nothing(tmp_path: Path) -> None:
    """Kill a run (SIGKILL) mid-way, resume it, and compare with an uninterrupted run of the same seed."""
    n = 160
    study = zdt_study(tmp_path, n)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS_DIR), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.Popen(
        [sys.executable, "-m", "search.toy", str(study), str(tmp_path / "killed")],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 60
        logs: list[Path] = []
        while time.monotonic() < deadline:
            logs = list((tmp_path / "killed").glob("zdt/*/points.jsonl"))
            if logs and logs[0].read_text().count("\n") >= 40:
                break
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.02)
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    finally:
        if proc.poll() is None:
            proc.kill()
    run_dir = logs[0].parent
    before = read_log(run_dir)
    assert 40 <= len(before) < n and not (run_dir / "summary.json").exists()

    resumed = run_study(resume=run_dir, evaluator=zdt1)
    after = read_log(run_dir)
    assert after[: len(before)] == before  # nothing lost or rewritten: the log is append-only
    assert len(after) == n and len({r["point_id"] for r in after}) == n  # nothing evaluated twice
    assert resumed.n_evaluated == n - len(before) and resumed.n_cached == len(before)

    straight = run_study(study, out=tmp_path / "straight", evaluator=zdt1)
    assert comparable(after) == comparable(read_log(straight.run_dir))
    front_a = pd.read_csv(run_dir / "pareto.csv")
    front_b = pd.read_csv(straight.run_dir / "pareto.csv")
    pd.testing.assert_frame_equal(front_a.drop(columns=["seq"]), front_b.drop(columns=["seq"]))
    assert resumed.hypervolume == straight.hypervolume


def test_rich_progress_bar_on_a_console(tmp_path: Path) -> None:
    import io

    from rich.console import Console

    buf = io.StringIO()
    console = Console(file=buf, force_terminal=True, width=160)
    s = run_study(zdt_study(tmp_path, 64), out=tmp_path, evaluator=zdt1, progress=console)
    text = buf.getvalue()
    assert "64/64" in text and "pt/s" in text and f"front {s.front_size}" in text and "HV" in text


def test_ctrl_c_writes_outputs_and_the_run_resumes(tmp_path: Path) -> None:
    stopped = run_study(zdt_study(tmp_path, 96), out=tmp_path, evaluator=ctrl_c_after_40)
    assert stopped.stop_reason.startswith("interrupted") and (stopped.run_dir / "summary.json").exists()
    assert 0 < stopped.n_points < 96
    done = run_study(resume=stopped.run_dir, evaluator=zdt1)
    assert done.n_points == 96 and done.n_cached == stopped.n_points


def test_resume_refuses_the_flags_of_a_new_run(tmp_path: Path) -> None:
    """--fresh and --out say where a new run goes; with --resume they were ignored without a word."""
    done = run_study(zdt_study(tmp_path, 8), out=tmp_path, evaluator=zdt1)
    with pytest.raises(ConfigError, match="--fresh: for a new run; --resume continues"):
        run_study(resume=done.run_dir, evaluator=zdt1, fresh=True)
    with pytest.raises(ConfigError, match="--fresh and --out .*: for a new run"):
        run_study(resume=done.run_dir, evaluator=zdt1, fresh=True, out=tmp_path / "elsewhere")
    with pytest.raises(ConfigError, match="--out .*: for a new run"):
        run_study(resume=done.run_dir, evaluator=zdt1, out=tmp_path / "elsewhere")
    assert not (tmp_path / "elsewhere").exists()
    # the root the run is in is where it stays: a script that always passes --out still resumes
    assert run_study(resume=done.run_dir, evaluator=zdt1, out=tmp_path).n_cached == done.n_points
    assert run_study(resume=done.run_dir, evaluator=zdt1).n_cached == done.n_points


def test_a_resumed_budget_below_the_logged_points_is_refused(tmp_path: Path) -> None:
    """--resume with --n-points 8 on a 32-point run rewrote its tables, front and report for 8 points."""
    done = run_study(zdt_study(tmp_path, 32), out=tmp_path, evaluator=zdt1)
    study_text = (done.run_dir / STUDY_FILE).read_text()
    with pytest.raises(ConfigError, match="--n-points 8: the run .* has 32 points logged"):
        run_study(resume=done.run_dir, evaluator=zdt1, n_points=8)
    assert (done.run_dir / STUDY_FILE).read_text() == study_text  # nothing rewritten
    # so is a rerun that would continue it (it summed 32 points under "point budget reached (8 points)")
    with pytest.raises(ConfigError, match="has 32 points logged; give at least that many, or --fresh"):
        run_study(zdt_study(tmp_path, 8), out=tmp_path, evaluator=zdt1)
    assert run_study(resume=done.run_dir, evaluator=zdt1, n_points=40).n_points == 40


def test_a_reference_point_no_point_beats_is_warned_of_and_does_not_stall_patience(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """ZDT1's points have f2 >= 1 - sqrt(f1), so f1 < 0.1 means f2 > 0.68 and none beats (0.1, 0.1): the
    hypervolume is 0 throughout. Patience counted every such batch as stalled and stopped NSGA-II after 2
    of 10 generations, its front still moving; a changing front is progress, and the run says why its
    hypervolume is 0, at its end and in summary.json."""
    text = ZDT.replace("N_POINTS", "160").replace("seed: 7}", "seed: 7, patience: 2}")
    (tmp_path / "ref.yaml").write_text(text + "reference_point: {f1: 0.1, f2: 0.1}\n")
    s = run_study(tmp_path / "ref.yaml", out=tmp_path, evaluator=zdt1)
    # the same run without the reference point (a default one, hypervolume > 0) is never stalled for 2
    (tmp_path / "free.yaml").write_text(text.replace("name: zdt", "name: free"))
    free = run_study(tmp_path / "free.yaml", out=tmp_path, evaluator=zdt1)
    assert free.stop_reason.startswith("point budget reached") and free.hypervolume > 0
    assert s.stop_reason == free.stop_reason and s.n_points == free.n_points == 160
    assert s.hypervolume == 0 and s.front_size == free.front_size
    warning = "no feasible point is better than the reference point in every objective (f1 0.1, f2 0.1"
    assert warning in caplog.text
    summary = json.loads((s.run_dir / "summary.json").read_text())
    assert summary["warnings"] and warning in summary["warnings"][0]
    assert summary["reference_point_source"] == "study" and free.extra["warnings"] == []


def test_patience_still_stops_a_front_that_no_longer_moves_outside_the_reference_box(tmp_path: Path) -> None:
    """Every point of `flat` is (1, 1), outside the box of (0.5, 0.5): the first batch makes the front, and
    the points after it repeat its value, which is no progress, so patience stops the run 3 batches later."""
    text = ZDT.replace("N_POINTS", "1000").replace("seed: 7}", "seed: 7, patience: 3}")
    (tmp_path / "p.yaml").write_text(text + "reference_point: {f1: 0.5, f2: 0.5}\n")
    s = run_study(tmp_path / "p.yaml", out=tmp_path, evaluator=flat)
    assert s.stop_reason.startswith("hypervolume stalled for 3 batches")
    assert 16 * 3 < s.n_points <= 16 * 4  # 1 + 3 batches (NSGA-II may propose a few duplicates)
