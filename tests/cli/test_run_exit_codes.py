"""`dse run` exit codes (README "Errors and exit codes"): 0 ok, 1 run failed, 2 bad input, 130 interrupted."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from typer.testing import CliRunner

from dse.cli import app

REPO = Path(__file__).resolve().parents[2]
runner = CliRunner()


def study_copy(tmp_path: Path, old: str, new: str) -> Path:
    (tmp_path / "studies").mkdir()
    shutil.copytree(REPO / "spaces", tmp_path / "spaces")
    path = tmp_path / "studies" / "llm_serving.yaml"
    text = (REPO / "studies" / "llm_serving.yaml").read_text()
    assert old in text
    path.write_text(text.replace(old, new))
    return path


def test_a_run_without_any_feasible_point_exits_1_and_says_why(tmp_path: Path) -> None:
    study = study_copy(tmp_path, "avg_power_w <= tdp_w", "avg_power_w <= 1")
    result = runner.invoke(
        app, ["run", str(study), "--executor", "serial", "--n-points", "6", "--out", str(tmp_path / "out")]
    )
    assert result.exit_code == 1, result.output
    assert "no feasible point" in result.output and "report:" in " ".join(result.output.split())


def test_bad_input_exits_2() -> None:
    result = runner.invoke(app, ["run", str(REPO / "studies" / "llm_serving.yaml"), "--seed", "-1"])
    assert result.exit_code == 2 and "--seed -1" in result.output


def test_an_empty_out_is_refused_not_read_as_the_working_directory(tmp_path: Path, monkeypatch) -> None:
    """`--out ""` (an unset shell variable) became Path("") == "." and wrote the run into the working
    directory; `dse report --out ""` said "report .: is a directory"."""
    monkeypatch.chdir(tmp_path)
    study = str(REPO / "studies" / "llm_serving.yaml")
    for args in (
        ["run", study, "--executor", "serial", "--n-points", "2", "--out", ""],
        ["report", ".", "--out", " "],
    ):
        result = runner.invoke(app, args)
        assert result.exit_code == 2 and "--out is empty" in result.output, result.output
    assert list(tmp_path.iterdir()) == []


def test_sigterm_stops_the_run_with_its_summary_and_exit_130(tmp_path: Path) -> None:
    out = tmp_path / "out"
    env = {**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "200"}
    args = [sys.executable, "-m", "dse", "run", str(REPO / "studies" / "llm_serving.yaml"), "--executor",
            "serial", "--n-points", "3000", "--out", str(out), "--no-report"]  # fmt: skip
    proc = subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            logs = list(out.glob("*/*/points.jsonl"))
            if logs and logs[0].read_text().count("\n") >= 20:
                break
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.1)
        proc.send_signal(signal.SIGTERM)
        output, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, output
    assert "interrupted" in output and (logs[0].parent / "summary.json").exists()
