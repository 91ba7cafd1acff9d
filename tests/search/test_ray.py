"""The one test that starts a real (local) Ray instance: same points and front as the serial executor."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dse.search.runner import run_study

from .test_runner import comparable, read_log, zdt_study
from .toy import zdt1

pytest.importorskip("ray")


def test_ray_executor_matches_serial(tmp_path: Path) -> None:
    study = zdt_study(tmp_path, 96)
    serial = run_study(study, out=tmp_path / "serial", evaluator=zdt1)
    ray_run = run_study(study, out=tmp_path / "ray", evaluator=zdt1, executor="ray", workers=2)
    assert ray_run.executor == "ray" and ray_run.stop_reason == serial.stop_reason
    assert comparable(read_log(ray_run.run_dir)) == comparable(read_log(serial.run_dir))
    assert json.loads((ray_run.run_dir / "summary.json").read_text())["front_size"] == serial.front_size
    import ray

    assert not ray.is_initialized()  # the executor shut down the instance it started
