"""Flags outside their mode are one clear error: serving and load flags with --training."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from dse.cli import app

TRAIN = ["predict", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--training", "--num-gpus", "8", "--fsdp"]


@pytest.mark.parametrize(
    ("extra", "named"),
    [
        (["--ep", "2"], "--ep"),
        (["--dp", "2"], "--dp"),
        (["--concurrency", "4"], "load mode"),
        (["--input-tokens", "128", "--output-tokens", "16"], "--input-tokens"),
        (["--engine", "vllm"], "--engine"),
    ],
)
def test_serving_flags_are_refused_in_training(extra, named):
    result = CliRunner().invoke(app, [*TRAIN, *extra])
    assert result.exit_code == 2
    assert named in result.output and "not for --training" in result.output


def test_a_plain_training_step_still_runs():
    result = CliRunner().invoke(app, [*TRAIN, "--micro-batch", "1", "--seq-len", "2048", "--json"])
    assert result.exit_code == 0, result.output
    assert '"step_time_s"' in result.output
