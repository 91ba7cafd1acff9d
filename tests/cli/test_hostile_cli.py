"""Non-finite numbers and impossible GPUs at the CLI: one clear line and exit code 2, never NaN in JSON."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from dse.cli import app
from dse.cli.common import print_json, strict_json
from dse.config.jsonio import with_nulls

runner = CliRunner()
H100_YAML = Path(__file__).resolve().parents[2] / "dse" / "hardware" / "data" / "gpus" / "h100-sxm.yaml"
SERVE = ["predict", "--model", "llama-3.1-8b", "--input-tokens", "128", "--output-tokens", "8"]


def one_line_error(args: list[str], *needles: str) -> None:
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output and "NaN" not in result.output and "Infinity" not in result.output
    for needle in needles:
        assert needle in result.output, result.output


@pytest.mark.parametrize("mode", [[], ["--concurrency", "4", "--num-requests", "8"]])
def test_a_gpu_that_cannot_run_a_kernel_is_an_error_not_infinity(mode: list[str]) -> None:
    one_line_error([*SERVE, *mode, "--set", "sm.max_threads=1", "--json"], "cannot run on this GPU", "sm.")


@pytest.mark.parametrize("field", ["sm.registers=1", "sm.smem_bytes=1"])
def test_an_sm_too_small_for_every_gemm_tile_is_refused_in_one_line(field: str) -> None:
    # The first kernel refused is the QKV projection: the embedding before it holds no accumulators nor
    # pipeline stages, and a norm's block still runs alone on any SM (`dse.perf.reduction`).
    result = runner.invoke(app, [*SERVE, "--set", field])
    assert result.exit_code == 2, result.output
    assert result.output.count("\n") == 1
    assert "kernel 'llama-3.1-8b/layer[0-31]/attn/qkv_proj' cannot run on this GPU" in result.output


@pytest.mark.parametrize("value", [".inf", ".nan", "-.inf"])
def test_non_finite_fields_in_a_gpu_file_are_refused(tmp_path: Path, value: str) -> None:
    path = tmp_path / "h100-inf.yaml"
    path.write_text(H100_YAML.read_text().replace("tdp_w: 700", f"tdp_w: {value}"))
    one_line_error([*SERVE, "--gpu", str(path)], "h100-inf.yaml", "tdp_w", "finite")
    one_line_error([*SERVE, "--set", f"power.tdp_w={value}"], "tdp_w", "finite")


def test_scientific_notation_is_a_number_in_set() -> None:
    result = runner.invoke(app, [*SERVE, "--set", "power.tdp_w=6.5e2", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["feasible"] in (True, False)


def test_json_output_is_strict(capsys: pytest.CaptureFixture[str]) -> None:
    print_json({"ok": 1.5})
    assert json.loads(capsys.readouterr().out) == {"ok": 1.5}
    with pytest.raises(typer.Exit) as info:
        print_json({"bad": float("nan")})
    assert info.value.exit_code == 1 and capsys.readouterr().out == ""  # nothing half-printed
    assert with_nulls({"rows": [{"mape": float("nan"), "n": 3}]}) == {"rows": [{"mape": None, "n": 3}]}


def test_a_text_output_refuses_the_non_finite_numbers_json_does(capsys: pytest.CaptureFixture[str]) -> None:
    """`strict_json` guards the text tables too (a training step's text once showed inf and nan, exit 0)."""
    assert json.loads(strict_json({"step_time_s": 2.0})) == {"step_time_s": 2.0}
    with pytest.raises(typer.Exit) as info:
        strict_json({"step_time_s": float("inf")})
    assert info.value.exit_code == 1 and "non-finite" in capsys.readouterr().err
