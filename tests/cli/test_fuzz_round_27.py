"""A CLI fuzzer's findings (session 27): each was a traceback, an exit code 0 for bad input or a message
naming a value the user did not write. Each now gives one clear line naming the flag and exit code 2."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from dse.cli import app

runner = CliRunner()
SERVE = ["--model", "llama-3.1-8b", "--input-tokens", "128", "--output-tokens", "16"]
COMPARE = ["compare", "h100-sxm", "a100-sxm-80gb", *SERVE]
SWEEP = ["sweep", *SERVE, "sm_clock_mhz=1000:1500:2"]
LOAD = ["--concurrency", "4", "--num-requests", "8"]


def refused(args: list[str], *needles: str) -> str:
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output and "internal error" not in result.output, result.output
    for needle in needles:
        assert needle in result.output, result.output
    return result.output


@pytest.mark.parametrize(
    ("flags", "needles"),
    [
        (["--attention", "foo"], ["attention 'foo'", "flash, eager"]),
        (["--engine", "foo"], ["--engine 'foo'"]),
        (["--sampling", "foo"], ["--sampling 'foo'"]),
        (["--kv-dtype", "foo"], ["--kv-dtype 'foo'"]),
        (["--precision", "foo"], ["precision 'foo'"]),
        (["--precision", "mxfp4"], ["mxfp4", "no experts"]),
        (["--batch", "0"], ["--batch", "got 0"]),
        (["--tp", "3"], ["--tp 3", "32 attention heads"]),
        (["--batch", "3", "--dp", "2"], ["--dp 2 must divide the batch of 3"]),
    ],
)
@pytest.mark.parametrize("command", [COMPARE, SWEEP], ids=["compare", "sweep"])
def test_a_static_workload_flag_every_point_refuses_is_an_error_up_front(
    command: list[str], flags: list[str], needles: list[str]
) -> None:
    """A table of failed rows and exit code 0 before: only the load modes were checked once."""
    refused([*command, *flags], *needles)


@pytest.mark.parametrize("flags", [["--tp", "3"], ["--precision", "mxfp4"]])
@pytest.mark.parametrize("command", [COMPARE, SWEEP], ids=["compare", "sweep"])
def test_a_layout_or_precision_the_model_refuses_under_load_is_an_error_up_front(
    command: list[str], flags: list[str]
) -> None:
    refused([*command, *LOAD, *flags], " ".join(flags).lstrip("-"))


def test_a_swept_batch_is_not_checked_against_dp_at_the_base_batch() -> None:
    result = runner.invoke(app, ["sweep", *SERVE, "--dp", "2", "batch=2:4:2", "--json"])
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize(
    "command", [["predict", *SERVE], COMPARE, SWEEP], ids=["predict", "compare", "sweep"]
)
def test_an_unknown_attention_under_load_is_named_as_written(command: list[str]) -> None:
    """--attention foo under load said '--attention eager applies to a static batch'."""
    output = refused([*command, *LOAD, "--attention", "foo"], "'foo'", "flash, eager")
    assert "eager applies" not in output
