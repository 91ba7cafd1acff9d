"""Help text describes what a command does: `dse sweep`, `compare` and `whatif` refuse --training, so their
help does not describe it; `dse predict --help` gives --pp's training meaning and MFU's denominator
(session 36 newcomer report, findings 2 and 4)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from dse.cli import app


def _help(*command: str) -> str:
    result = CliRunner().invoke(app, [*command, "--help"], terminal_width=200)
    assert result.exit_code == 0, result.output
    return " ".join(result.output.replace("│", " ").split())


@pytest.mark.parametrize("command", ["sweep", "compare", "whatif"])
def test_a_serving_command_does_not_describe_training(command: str) -> None:
    refused = CliRunner().invoke(app, [command, "--training"])
    assert refused.exit_code == 2  # the premise: the flag is not theirs
    assert "--training" not in _help(command)


def test_predict_help_gives_pp_for_a_training_step_too() -> None:
    # a training step runs global batch / (micro-batch x dp) micro-batches through the pipeline, not one
    pp = _help("predict").split("--pp ", 1)[1].split(" --ep ", 1)[0]
    assert "one micro-batch per step" in pp and "--training" in pp and "global batch" in pp


def test_predict_help_states_the_mfu_denominator_the_step_uses() -> None:
    """--help says fp8 MFU divides by the fp8 peak; the step's numbers agree: MFU x the fp8 dense peak is its
    model FLOP/s per GPU, and the fp8 peak is twice the bf16 one (so bf16 and fp8 MFUs do not compare)."""
    from dse.hardware.catalog import load_gpu

    text = _help("predict").split("--training ", 1)[1]
    assert "fp8 peak" in text[:400] and "model TFLOP/s per GPU" in text[:400]
    args = ["predict", "--model", "gpt2", "--gpu", "h100-sxm", "--training", "--micro-batch", "4"]
    out = json.loads(CliRunner().invoke(app, [*args, "--precision", "fp8", "--json"]).stdout)
    gpu = load_gpu("h100-sxm")
    peak = gpu.tensor_peak_flop_per_s("fp8")
    assert out["mfu"] * peak == pytest.approx(out["model_tflops_per_gpu"] * 1e12, rel=1e-9)
    assert peak == pytest.approx(2 * gpu.tensor_peak_flop_per_s("bf16"), rel=1e-12)
