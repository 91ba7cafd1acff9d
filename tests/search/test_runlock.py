"""One dse run at a time per run directory (session 34: two `dse run` of one study at once both continued
its newest run directory, evaluated and logged every point twice and rewrote each other's tables)."""

from __future__ import annotations

import fcntl
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dse.cli import app
from dse.errors import ConfigError
from dse.search.runner import run_study
from tests.cli.fuzz_helpers import runner

from .test_runner import TESTS_DIR, read_log, zdt_study
from .toy import zdt1


def in_use(run_dir: Path, pid: int) -> str:
    return (
        f"run directory {run_dir} is in use by another dse run (pid {pid}); wait for it, or start a new run"
    )


def test_a_run_directory_held_by_another_process_is_neither_continued_nor_resumed(tmp_path: Path) -> None:
    """While another process holds run.lock (as a running `dse run` does), a rerun of the study and a
    --resume of the run are refused before they write anything; a report can still be made, --fresh
    starts its own directory, and once the holder lets go the run continues where it was."""
    study = zdt_study(tmp_path, 20)
    run_dir = run_study(study, out=tmp_path, evaluator=zdt1).run_dir
    files = {name: (run_dir / name).read_bytes() for name in ("points.jsonl", "summary.json", "env.json")}
    holder = (run_dir / "run.lock").open("a+")
    fcntl.flock(holder, fcntl.LOCK_EX | fcntl.LOCK_NB)
    holder.truncate(0)  # the lock file stays after a run, with its pid
    holder.write(f"{os.getpid()}\n")
    holder.flush()
    try:
        for kwargs in ({"study": study, "out": tmp_path}, {"resume": run_dir}):
            with pytest.raises(ConfigError) as refused:
                run_study(evaluator=zdt1, n_points=30, **kwargs)  # type: ignore[arg-type]
            assert in_use(run_dir, os.getpid()) in str(refused.value)
        result = runner.invoke(app, ["run", "--resume", str(run_dir), "--no-report"])
        assert result.exit_code == 2 and in_use(run_dir, os.getpid()) in " ".join(result.output.split())
        assert {name: (run_dir / name).read_bytes() for name in files} == files
        result = runner.invoke(app, ["report", str(run_dir)])  # reading takes no lock
        assert result.exit_code == 0 and (run_dir / "report.html").is_file(), result.output
        other = run_study(study, out=tmp_path, evaluator=zdt1, fresh=True)
        assert other.run_dir != run_dir and other.n_evaluated == 20
    finally:
        holder.close()
    more = run_study(resume=run_dir, evaluator=zdt1, n_points=30)
    assert more.n_cached == 20 and more.n_evaluated == 10
    ids = [r["point_id"] for r in read_log(run_dir)]
    assert len(ids) == len(set(ids)) == 30


def test_two_runs_of_one_study_at_once_do_not_share_its_run_directory(tmp_path: Path) -> None:
    """The reported case with two real runs: the second refuses at once, naming the first's pid; the first
    is then killed (SIGKILL, which leaves no chance to clean up) and the run is resumed: the log holds each
    point once."""
    n = 1000  # 20 ms a point: the first run is far from done when the second starts
    study = zdt_study(tmp_path, n)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS_DIR), os.environ.get("PYTHONPATH", "")])}
    command = [sys.executable, "-m", "search.toy", str(study), str(tmp_path / "out")]
    first = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        logs: list[Path] = []
        while time.monotonic() < deadline:
            logs = list((tmp_path / "out").glob("zdt/*/points.jsonl"))
            if logs and logs[0].read_text().count("\n") >= 5:
                break
            assert first.poll() is None, first.communicate()
            time.sleep(0.02)
        second = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
        assert first.poll() is None, "the first run ended before the second started"
        run_dir = logs[0].parent
        assert second.returncode != 0 and in_use(run_dir, first.pid) in second.stderr, second.stderr
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait(10)
    assert len(list((tmp_path / "out" / "zdt").iterdir())) == 1  # the second made no directory either
    resumed = run_study(resume=run_dir, evaluator=zdt1)  # the kill released the lock
    ids = [json.loads(line)["point_id"] for line in (run_dir / "points.jsonl").read_text().splitlines()]
    assert len(ids) == len(set(ids)) == n and resumed.n_cached + resumed.n_evaluated == n
