"""A CLI fuzzer's findings (session 27): each was a traceback, an exit code 0 for bad input or a message
naming a value the user did not write. Each now gives one clear line naming the flag and exit code 2."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

from dse.cli import app
from tests.cli.fuzz_helpers import SERVE, gemm_samples, refused, runner

COMPARE = ["compare", "h100-sxm", "a100-sxm-80gb", *SERVE]
SWEEP = ["sweep", *SERVE, "sm_clock_mhz=1000:1500:2"]
LOAD = ["--concurrency", "4", "--num-requests", "8"]


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


@pytest.mark.parametrize(
    ("fields", "needle"),
    [
        # were fitted and validated at that clock: a "-0 MHz" row at 199% MAPE, coefficients written
        ({"sm_clock_hz": "-1"}, "sm_clock_hz"),
        ({"sm_clock_hz": "1e30"}, "sm_clock_hz"),
        ({"avg_sm_clock_hz": "1e30"}, "avg_sm_clock_hz"),
        # an infinite energy or power was read as "not measured" and left out without a word
        ({"energy_j": "inf"}, "energy_j"),
        ({"avg_power_w": "inf", "power_w": "inf"}, "avg_power_w"),
    ],
)
@pytest.mark.parametrize("command", ["calibrate", "validate"])
def test_impossible_sample_clocks_and_infinite_readings_are_refused(
    tmp_path: Path, command: str, fields: dict, needle: str
) -> None:
    path = str(gemm_samples(tmp_path, **fields))
    args = {
        "calibrate": ["calibrate", path, "--gpu", "h100-sxm", "-o", str(tmp_path / "c.json")],
        "validate": ["validate", "samples", path],
    }[command]
    refused(args, "s.csv", "sample 'g'", needle)


def test_a_latency_that_overflows_power_x_latency_is_one_line(tmp_path: Path) -> None:
    """A RuntimeWarning (overflow in multiply) with its source line was printed before the error."""
    path = str(gemm_samples(tmp_path, latency_s="1e308"))
    warnings.simplefilter("error")  # pytest keeps warnings off the output: make one fail the command
    output = refused(["calibrate", path, "--gpu", "h100-sxm", "-o", str(tmp_path / "c.json")], "s.csv")
    assert "RuntimeWarning" not in output and len(output.strip().splitlines()) == 1, output


@pytest.mark.parametrize(
    "override",
    [
        "sm.smem_bytes_per_clk=1e-300",  # an internal error (inf in the result) after overflow warnings
        "l2.l2_bytes_per_clk=1e-300",  # likewise
        "sm.tensor_flop_per_clk.bf16=1e-300",  # likewise
        "sm.fp32_flop_per_clk=1e-300",  # overflow warnings, then a 1e295 s answer with exit code 0
        "sm.sfu_op_per_clk=1e-300",
        "clocks.sm_clock_step_hz=1e-300",  # a ValueError traceback (a clock grid of 1e308 points)
        "sm.tensor_factor=1e-300",
    ],
)
def test_a_vanishing_gpu_rate_or_clock_step_is_refused_by_field(override: str) -> None:
    field = override.partition("=")[0].rpartition(".")[2]
    refused(["predict", *SERVE, "--set", override, "--json"], field)


HUGE = str(10**30)


@pytest.mark.parametrize(
    ("flags", "needle"),
    [
        # 10^30 GPUs ran: 1.2e32 W and 3e29 $ per million tokens, exit code 0
        ([*SERVE, *LOAD, "--dp", HUGE], "--dp"),
        ([*SERVE, *LOAD, "--dp", "5000", "--tp", "8", "--pp", "32", "--model", "llama-3.1-70b"], "GPUs"),
        (["--model", "llama-3.1-8b", "--training", "--num-gpus", HUGE], "--num-gpus"),
        # a 10^30 global batch ran (a 10^19 s step); 10^308 was a traceback after overflow warnings
        (["--model", "llama-3.1-8b", "--training", "--global-batch", HUGE], "--global-batch"),
        (["--model", "llama-3.1-8b", "--training", "--micro-batch", HUGE], "--micro-batch"),
    ],
)
def test_absurd_gpu_counts_and_batches_are_refused(flags: list[str], needle: str) -> None:
    refused(["predict", *flags, "--json"], needle)


@pytest.mark.parametrize(
    ("entry", "needle"),
    [
        (
            {"batch": 1, "dimM": 8, "dimN": 8, "dimK": 8, "precM": ["bf16"], "useTensorCore": True},
            "precM ['bf16']",
        ),
        ({"batch": 8, "dim": 8, "prec": {"a": 1}}, "prec {'a': 1}"),
        ({"dim": 8, "op": ["scalar_mul"], "prec": "bf16"}, "unknown elementwise op ['scalar_mul']"),
    ],
)
def test_a_kernel_list_field_of_the_wrong_type_is_named(tmp_path: Path, entry: dict, needle: str) -> None:
    """These read 'entry 0: unhashable type: 'list'', naming no field."""
    import json

    kind = "gemm" if "dimM" in entry else "elementwise" if "op" in entry else "softmax"
    path = tmp_path / "k.json"
    path.write_text(json.dumps([[entry, [kind]]]))
    output = refused(["predict", "--kernels", str(path)], "entry 0", needle)
    assert "unhashable" not in output
