"""Cost and carbon through the CLI: the JSON keys of issue 23 in every predict mode, whatif's table,
`dse validate area`, `dse cost facts`, and the errors."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from dse.cli import app
from dse.cost.operation import COST_KEYS

runner = CliRunner()
BASE = [
    "predict",
    "--model",
    "llama-3.1-8b",
    "--gpu",
    "h100-sxm",
    "--input-tokens",
    "256",
    "--output-tokens",
    "32",
]


def run_json(*args: str) -> object:
    result = runner.invoke(app, [*args, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


@pytest.mark.parametrize(
    "flags",
    [
        [],
        ["--batch", "8"],
        ["--concurrency", "4", "--num-requests", "16"],
        ["--max-throughput", "--num-requests", "16"],
    ],
)
def test_predict_json_has_every_cost_key(flags: list[str]) -> None:
    out = run_json(*BASE, *flags)
    assert isinstance(out, dict)
    assert set(COST_KEYS) <= set(out)
    assert out["usd_per_million_output_tokens"] > 0 and out["gco2_per_output_token"] > 0
    assert out["die_area_mm2"] == 814.0  # H100's published area
    # the identity, from the JSON alone
    expected = out["usd_per_gpu_hour"] * out.get("num_gpus", 1) / (out["output_tokens_per_s"] * 3600) * 1e6
    assert out["usd_per_million_output_tokens"] == pytest.approx(expected, rel=1e-9)


def test_renter_view_scenario_and_cost_set() -> None:
    rent = run_json(*BASE, "--gpu-usd-per-hour", "2.0")
    assert rent["cost_view"] == "renter" and rent["usd_per_gpu_hour"] == 2.0
    cheap = run_json(*BASE, "--set", "cost.memory_usd_per_gb.hbm3=1")
    dear = run_json(*BASE, "--cost-scenario", "high")
    mid = run_json(*BASE)
    assert cheap["memory_cost_usd"] == pytest.approx(80 * 2**30 / 1e9)
    assert dear["gpu_cost_usd"] > mid["gpu_cost_usd"] > cheap["gpu_cost_usd"]
    france = run_json(*BASE, "--grid-gco2-per-kwh", "france")
    assert france["gco2_per_output_token"] < mid["gco2_per_output_token"]


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--set", "cost.memory_usd_per_gb.hbm9=1"], "no such cost fact"),
        (["--set", "cost.operation.pue=nan"], "finite number"),
        (["--set", "cost.pue=1.2"], "e.g. operation.pue"),
        (["--cost-scenario", "cheap"], "cost scenario"),
        (["--grid-gco2-per-kwh", "mars"], "neither a number nor a region"),
        (["--utilization", "2"], "--utilization"),
        (["--gpu-usd-per-hour", "-1"], "--gpu-usd-per-hour"),
        # the renter's rate replaces the owner's ledger: a price or a tariff beside it showed, unused
        (["--gpu-usd-per-hour", "2", "--gpu-price-usd", "1000"], "drop --gpu-price-usd"),
        (["--gpu-usd-per-hour", "2", "--electricity-usd-per-kwh", "0.5"], "drop --electricity-usd-per-kwh"),
    ],
)
def test_cost_errors_are_one_line(flags: list[str], message: str) -> None:
    result = runner.invoke(app, [*BASE, *flags])
    assert result.exit_code == 2, result.output
    assert message in result.output and "Traceback" not in result.output


@pytest.mark.parametrize(
    ("command", "assignment"),
    [
        (["whatif", "h100-sxm"], "operation.pue=20"),
        (BASE, "operation.pue=0.5"),
        (BASE, "operation.lifetime_years=0"),
        (BASE, "operation.lifetime_years=1000"),
        (BASE, "operation.utilization=2"),
        (BASE, "operation.electricity_usd_per_kwh=1e5"),
    ],
)
def test_an_operation_fact_out_of_range_names_the_set_path(command: list[str], assignment: str) -> None:
    """`--set cost.operation.pue=20` said `--pue must be in [1, 10]`: a flag the user never typed."""
    result = runner.invoke(app, [*command, "--set", f"cost.{assignment}"])
    path = "cost." + assignment.split("=")[0]
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith(f"error: override '{path}': must be in ["), result.stderr
    assert "--" not in result.stderr, result.stderr


@pytest.mark.parametrize(
    ("flag", "key", "value"), [("--pue", "pue", "2"), ("--utilization", "utilization", "0")]
)
def test_a_flag_and_a_set_of_the_same_operation_fact_are_refused(flag: str, key: str, value: str) -> None:
    """The flag won without a word (and an out-of-range `--set` value beside it was never checked)."""
    result = runner.invoke(app, [*BASE, flag, "0.5" if key == "utilization" else "1.5", "--set",
                                 f"cost.operation.{key}={value}"])  # fmt: skip
    assert result.exit_code == 2, result.output
    assert f"{flag} and --set cost.operation.{key} set the same fact" in result.stderr, result.stderr


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        # it said `override 'cost.operation.grid_gco2_per_kwh'`, a path the user never typed
        (["--grid-gco2-per-kwh", "-5"], "error: --grid-gco2-per-kwh: must be >= 0, got -5"),
        (["--grid-gco2-per-kwh", "nan"], "error: --grid-gco2-per-kwh: expected a finite number"),
        # the flag won over the fact without a word
        (["--grid-gco2-per-kwh", "france", "--set", "cost.operation.grid_gco2_per_kwh=100"],
         "error: --grid-gco2-per-kwh and --set cost.operation.grid_gco2_per_kwh set the same fact; give one"),
    ],
)  # fmt: skip
def test_a_grid_flag_error_names_the_flag(flags: list[str], message: str) -> None:
    result = runner.invoke(app, [*BASE, *flags, "--json"])
    assert result.exit_code == 2 and result.stderr.startswith(message), result.output


def test_whatif_gddr7_shows_cost_deltas_in_one_table() -> None:
    args = ["whatif", "h100-sxm", "--memory", "gddr7", "--bus-width-bits", "512", "--data-rate-gbps", "32"]
    result = runner.invoke(app, [*args, "--batch", "8", "--input-tokens", "256", "--output-tokens", "32"])
    assert result.exit_code == 0, result.output
    for label in ("output tokens/s", "energy per output token", "memory ($)", "package ($)", "GPU build cost",
                  "$ per million output tokens"):  # fmt: skip
        assert label in result.output
    out = run_json(*args, "--batch", "8", "--input-tokens", "256", "--output-tokens", "32")
    assert isinstance(out, dict)
    assert out["changed"]["package_cost_usd"] < out["baseline"]["package_cost_usd"]
    assert out["changed"]["memory_cost_usd"] < out["baseline"]["memory_cost_usd"]


def test_whatif_prices_a_cost_set_on_the_changed_side_only() -> None:
    # the same GPU on both sides: only the HBM3 price moves, so the memory cost doubles (15 -> 30 $/GB
    # over 80 GB) on the changed side while the speed and the baseline's ledger stay put
    args = ["whatif", "h100-sxm", "--batch", "8", "--input-tokens", "256", "--output-tokens", "32"]
    base = run_json(*args, "--set", "cost.memory_usd_per_gb.hbm3=15")
    out = run_json(*args, "--set", "cost.memory_usd_per_gb.hbm3=30")
    assert isinstance(out, dict) and isinstance(base, dict)
    assert out["baseline"]["memory_cost_usd"] == base["baseline"]["memory_cost_usd"]
    assert out["changed"]["memory_cost_usd"] == pytest.approx(2 * base["changed"]["memory_cost_usd"])
    assert out["changed"]["usd_per_million_output_tokens"] > out["baseline"]["usd_per_million_output_tokens"]
    assert out["changed"]["output_tokens_per_s"] == out["baseline"]["output_tokens_per_s"]


def test_whatif_without_a_change_says_what_the_flags_given_do() -> None:
    clock = runner.invoke(app, ["whatif", "h100-sxm", "--clock-mhz", "1000"])
    assert clock.exit_code == 2 and "both sides run at the --clock-mhz given" in clock.output
    bus = runner.invoke(app, ["whatif", "h100-sxm", "--bus-width-bits", "512"])
    assert bus.exit_code == 2 and "need --memory TECH" in bus.output


def test_validate_area_json_is_a_list_of_gpu_rows() -> None:
    rows = run_json("validate", "area")
    assert isinstance(rows, list) and rows
    assert all({"gpu", "published_mm2", "predicted_mm2", "error_pct"} <= set(r) for r in rows)
    b200 = next(r for r in rows if r["gpu"] == "b200")
    assert b200["published_mm2"] is None and b200["error_pct"] is None
    parts = run_json("validate", "area", "--components")
    assert isinstance(parts, list) and {r["component"] for r in parts} >= {"L2", "memory PHY"}
    text = runner.invoke(app, ["validate", "area"])
    assert text.exit_code == 0 and "GA100 by component" in text.output


def test_cost_facts_lists_every_path_with_its_source() -> None:
    rows = run_json("cost", "facts")
    assert isinstance(rows, list)
    paths = {r["path"] for r in rows}
    assert {"memory_usd_per_gb.gddr7", "nodes.tsmc-4n.wafer_usd", "operation.pue"} <= paths
    assert all(r["source"] for r in rows)
    text = runner.invoke(app, ["cost", "facts"], env={"COLUMNS": "250"})
    assert text.exit_code == 0 and "source" in text.output and "CSET" in text.output


def test_demo_prices_the_gddr7_what_if() -> None:
    result = runner.invoke(app, ["demo"])
    assert result.exit_code == 0, result.output
    for text in (
        "GPU catalog",
        "What if the H100 had GDDR7?",
        "memory $",
        "package $",
        "GPU build $",
        "llama-3.1-8b",
    ):
        assert text in result.output


@pytest.mark.parametrize(
    ("flag", "value", "allowed"),
    [
        ("--utilization", "-1", "[0.001, 1]"),
        ("--utilization", "0", "[0.001, 1]"),  # was first "must be >= 0", then 0 refused by another rule
        ("--pue", "-1", "[1, 10]"),
        ("--pue", "0.5", "[1, 10]"),
        ("--lifetime-years", "nan", "[0.01, 100]"),
        ("--electricity-usd-per-kwh", "-1", "[0, 1000]"),
    ],
)
def test_an_operating_flag_out_of_range_names_its_one_range(flag: str, value: str, allowed: str) -> None:
    result = runner.invoke(app, [*BASE, flag, value])
    assert result.exit_code == 2 and f"{flag} must be in {allowed}" in result.stderr, result.output
    assert ">= 0" not in result.stderr


def test_cost_facts_json_help_says_each_rows_unit() -> None:
    """`--json` said "SI-unit keys", but the rows carry the table's units (mm2, USD/wafer, kgCO2e/cm2)."""
    rows = run_json("cost", "facts")
    assert isinstance(rows, list)
    assert {"mm2", "USD/wafer"} <= {r["unit"] for r in rows}  # not SI: the help must not say so
    result = runner.invoke(app, ["cost", "facts", "--help"], env={"COLUMNS": "250"})
    assert result.exit_code == 0
    shown = " ".join(result.output.replace("│", " ").split())  # the help box, unfolded
    assert "SI-unit" not in shown and "unit (each fact's own" in shown


RENT = [*BASE, "--batch", "8", "--gpu-usd-per-hour", "2"]


@pytest.mark.parametrize(
    "command",
    [
        # a swept tariff ran three identical rows (exit 0): the renter's ledger never reads it
        ["sweep", "cost.operation.electricity_usd_per_kwh=0:0.2:3", *RENT[1:]],
        [*RENT, "--set", "cost.operation.server_power_multiplier=2"],  # accepted, and no effect
        [*RENT, "--set", "cost.gpu_price_usd.h100-sxm=20000"],
    ],
)
def test_the_renter_view_refuses_every_price_it_does_not_read(command: list[str]) -> None:
    result = runner.invoke(app, command)
    assert result.exit_code == 2, result.output
    path = next(a for a in command if a.startswith("cost.")).split("=")[0]
    assert result.stderr.startswith(
        "error: --gpu-usd-per-hour (the renter's view) replaces the owner's ledger"
    )
    assert path in result.stderr and result.stderr.count("\n") == 1, result.stderr


def test_the_renter_view_refuses_a_multiplier_and_still_takes_the_facts_of_carbon() -> None:
    """The server multiplier scales the owner's electricity bill alone (refused beside a rent); PUE also
    prices the operational carbon the renter's view reports, so it stays a renter's setting."""
    refused = runner.invoke(app, [*RENT, "--set", "cost.operation.server_power_multiplier=1.5"])
    assert refused.exit_code == 2 and "drop --set cost.operation.server_power_multiplier" in refused.stderr
    low, high = (run_json(*RENT, "--set", f"cost.operation.pue={pue}") for pue in (1.1, 1.5))
    assert isinstance(low, dict) and isinstance(high, dict)
    assert high["gco2_per_output_token"] / low["gco2_per_output_token"] == pytest.approx(1.5 / 1.1)
    assert high["usd_per_million_output_tokens"] == low["usd_per_million_output_tokens"]
