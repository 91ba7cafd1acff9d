"""A fuzzer's cost findings (session 36): a purchase price per compared GPU, where each side's price came
from, one price given twice, a swept catalog price, a die no wafer holds beside a given price, carbon in a
sweep's table, a refused price named as given, and absurd values printed with an exponent."""

from __future__ import annotations

import json
from typing import Any

import pytest
from typer.testing import CliRunner

from dse.cli import app
from dse.cost.operation import HOURS_PER_YEAR
from tests.cli.fuzz_helpers import refused

runner = CliRunner()
WORK = ["--model", "llama-3.1-8b", "--batch", "8", "--input-tokens", "256", "--output-tokens", "32"]
WHATIF = ["whatif", "h100-sxm", *WORK[2:]]
COMPARE = ["compare", "h100-sxm", "a100-sxm-80gb", *WORK]
PREDICT = ["predict", "--gpu", "h100-sxm", *WORK]
HUGE_DIE = ["--set", "die.published_area_mm2=100000"]  # no 300 mm wafer holds it (README: cost_note)
SET_PRICE = ["--set", "cost.gpu_price_usd.h100-sxm=1000"]


def invoke(*args: str) -> Any:
    result = runner.invoke(app, list(args), env={"COLUMNS": "250"})  # a sweep's table unfolded
    assert result.exit_code == 0, result.output
    return result


def as_json(*args: str) -> Any:
    return json.loads(invoke(*args, "--json").stdout)


def flat(text: str) -> str:
    """`text` with every run of whitespace one space: rich folds a long line at the console's width."""
    return " ".join(text.split())


def test_compare_moves_one_price_with_build_cost_and_takes_one_price_per_gpu() -> None:
    """`--gpu-price-usd 30000` priced an A100 at an H100's price, unsaid, and NAME=PRICE was refused as not a
    number. One price is now the first GPU's and the others' keep its ratio of price to build cost, the rule
    `dse whatif` moves its changed side's price by; NAME=PRICE gives each its own."""
    rows = {r["params"]["gpu"]: r["metrics"] for r in as_json(*COMPARE, "--gpu-price-usd", "30000")["gpus"]}
    h100, a100 = rows["h100-sxm"], rows["a100-sxm-80gb"]
    assert h100["gpu_price_usd"] == 30000
    assert a100["gpu_cost_usd"] < h100["gpu_cost_usd"]  # a different build cost, so a different price
    assert a100["gpu_price_usd"] == pytest.approx(30000 * a100["gpu_cost_usd"] / h100["gpu_cost_usd"])
    text = flat(invoke(*COMPARE, "--gpu-price-usd", "30000").stdout)
    assert "--gpu-price-usd 30,000 is h100-sxm's price; each other GPU's moves with its build cost" in text
    each = ["--gpu-price-usd", "h100-sxm=30000,a100-sxm-80gb=10000"]
    rows = {r["params"]["gpu"]: r["metrics"] for r in as_json(*COMPARE, *each)["gpus"]}
    assert (rows["h100-sxm"]["gpu_price_usd"], rows["a100-sxm-80gb"]["gpu_price_usd"]) == (30000, 10000)
    # the owner's ledger: the price over 5 years of hours (the default lifetime) plus the same energy bill,
    # so the A100's $ per GPU-hour moves by the price it was given, amortized
    moved = {r["params"]["gpu"]: r["metrics"] for r in as_json(*COMPARE, "--gpu-price-usd", "30000")["gpus"]}
    a100_moved, a100_given = moved["a100-sxm-80gb"], rows["a100-sxm-80gb"]
    assert a100_moved["usd_per_gpu_hour"] - a100_given["usd_per_gpu_hour"] == pytest.approx(
        (a100_moved["gpu_price_usd"] - 10000) / (5 * HOURS_PER_YEAR)
    )
    assert "each GPU at its own --gpu-price-usd" in flat(invoke(*COMPARE, *each).stdout)
    refused([*COMPARE, "--gpu-price-usd", "h100-sxm=30000"], "no price for a100-sxm-80gb")
    refused([*PREDICT, "--gpu-price-usd", "h100-sxm=30000"], "NAME=PRICE prices each GPU of `dse compare`")


def test_whatif_takes_a_purchase_price_per_side() -> None:
    out = as_json(*WHATIF, "--memory", "gddr7", "--gpu-price-usd", "baseline=30000,changed=20000")
    assert (out["baseline"]["gpu_price_usd"], out["changed"]["gpu_price_usd"]) == (30000, 20000)
    text = flat(
        invoke(*WHATIF, "--memory", "gddr7", "--gpu-price-usd", "baseline=30000,changed=20000").stdout
    )
    assert "each side at its own --gpu-price-usd" in text


def test_a_set_price_is_said_as_set_not_as_the_published_one() -> None:
    """`--set cost.gpu_price_usd.h100-sxm=1000` made the changed side -82% per token, and the line and JSON
    credited the published price moved with the build cost: the what-if's `--set cost.*` prices the changed
    side only (README), so the baseline keeps the published 27,500 and the changed side is the set 1,000,
    moved with its build cost (a GDDR7 part: 1,000 x its build cost ratio)."""
    out = as_json(*WHATIF, *SET_PRICE, "--memory", "gddr7")
    base, new = out["baseline"], out["changed"]
    assert (base["gpu_price_basis"], new["gpu_price_basis"]) == ("published", "set")
    assert new["gpu_price_usd"] == pytest.approx(1000 * new["gpu_cost_usd"] / base["gpu_cost_usd"])
    text = flat(invoke(*WHATIF, *SET_PRICE).stdout)
    assert (
        "the changed GPU's price is --set cost.gpu_price_usd.h100-sxm=1,000 moved with its build cost" in text
    )
    assert "published price" not in text
    assert as_json(*PREDICT, *SET_PRICE)["gpu_price_basis"] == "set"


@pytest.mark.parametrize("command", [PREDICT, WHATIF, COMPARE])
def test_a_price_flag_beside_a_set_price_is_refused(command: list[str]) -> None:
    # the flag won and the --set went unread, exit 0; `--pue` beside its --set is refused the same way
    refused(
        [*command, "--gpu-price-usd", "30000", *SET_PRICE],
        "--gpu-price-usd and --set cost.gpu_price_usd.h100-sxm set the same fact; give one",
    )


def test_a_catalog_price_with_a_dash_in_its_name_is_swept() -> None:
    """`cost.gpu_price_usd.h100-sxm=...` was refused as bad syntax (the axis path took no '-'), so no catalog
    price but b200's could be swept. Each row's $ per GPU-hour now moves by the price step over the 5-year
    lifetime's hours, and the renter's view refuses the swept price by name."""
    sweep = ["sweep", "cost.gpu_price_usd.h100-sxm=10000:30000:3", *WORK]
    rows = as_json(*sweep)
    assert [r["params"]["cost.gpu_price_usd.h100-sxm"] for r in rows] == [10000, 20000, 30000]
    rates = [r["metrics"]["usd_per_gpu_hour"] for r in rows]
    step = 10000 / (5 * HOURS_PER_YEAR)
    assert [b - a for a, b in zip(rates, rates[1:], strict=False)] == pytest.approx([step, step])
    refused([*sweep, "--gpu-usd-per-hour", "2"], "drop the swept cost.gpu_price_usd.h100-sxm")
    refused([*sweep, "--gpu-price-usd", "30000"], "--gpu-price-usd and the swept cost.gpu_price_usd.h100-sxm")


@pytest.mark.parametrize("price", [["--gpu-price-usd", "30000"], ["--gpu-usd-per-hour", "2"]])
def test_a_die_no_wafer_holds_keeps_its_note_whatever_price_is_given(price: list[str]) -> None:
    """A 100,000 mm² die lost its "does not fit" warning and `cost_note` once a price or rent was given,
    and read as a cost-neutral what-if; a die just past the reticle kept its own warning."""
    out = as_json(*WHATIF, *HUGE_DIE, *price)
    assert "does not fit on a 300 mm wafer" in out["changed"]["cost_note"]
    assert out["changed"]["gpu_cost_usd"] is None and out["baseline"].get("cost_note") is None
    text = flat(invoke(*WHATIF, *HUGE_DIE, *price).stdout)
    assert (
        "changed: warning: build cost and embodied carbon not priced: a 100000 mm² die does not fit" in text
    )
    predicted = flat(invoke(*PREDICT, *HUGE_DIE, *price).stdout)
    assert "warning: build cost and embodied carbon not priced" in predicted


def test_a_side_with_no_price_is_not_said_to_have_one() -> None:
    # the line claimed the changed GPU's price was the published one moved, for a side with no price
    result = invoke(*WHATIF, *HUGE_DIE)
    text = flat(result.stdout)
    assert "the changed GPU is not priced" in text and "published price" not in text
    assert "changed: warning: not priced: a 100000 mm² die does not fit" in flat(result.stderr)


def test_a_swept_carbon_fact_shows_carbon_per_token(monkeypatch: pytest.MonkeyPatch) -> None:
    """A renter's PUE sweep printed rows equal in every column: operational gCO2 per token, which PUE
    scales (J / 3.6e6 x PUE x grid), is a column of the table when a cost fact is swept."""
    import io

    from rich.console import Console

    import dse.cli.sweep as cli_sweep

    def table(*args: str) -> str:
        screen = io.StringIO()  # wide enough that no cell folds
        monkeypatch.setattr(cli_sweep, "console", Console(file=screen, width=400))
        invoke(*args)
        return screen.getvalue()

    sweep = ["sweep", "cost.operation.pue=1:2:2", *WORK, "--gpu-usd-per-hour", "2"]
    low, high = (r["metrics"]["gco2_per_output_token"] for r in as_json(*sweep))
    assert high == pytest.approx(2 * low)
    text = table(*sweep)
    assert "gCO2 per output token (operational)" in text
    assert f"{low:.3g}" in text and f"{high:.3g}" in text
    assert "gCO2" not in table("sweep", "batch=1:2:2", *WORK[:2], *WORK[4:])  # no cost axis


def test_a_moved_price_past_the_flags_range_names_the_price_given_and_derived() -> None:
    """`--gpu-price-usd 9.9e9` (in range) was refused as "got 2.16529e+12", a number never typed: the
    changed side's price moved with a build cost 218x the baseline's (HBM3 at 17,000 $/GB)."""
    dear = ["--set", "cost.memory_usd_per_gb.hbm3=17000"]
    out = as_json(*WHATIF, *dear)
    ratio = out["changed"]["gpu_cost_usd"] / out["baseline"]["gpu_cost_usd"]
    refused(
        [*WHATIF, *dear, "--gpu-price-usd", "9.9e9"],
        "--gpu-price-usd 9.9e+09 is the baseline's price",
        f"to {9.9e9 * ratio:.3g}, past the flag's range [0, 1e+10]",
    )


def test_an_absurd_change_is_printed_with_an_exponent() -> None:
    """A rent of 1e-6 against 1 printed +99999900.0% (and 1e-300 a 300-digit change); the $ per GPU-hour
    row read 0.000 for any rent under 5e-4, hiding the input."""
    args = [*WHATIF, "--memory", "gddr7", "--gpu-usd-per-hour", "baseline=1e-6,changed=1"]
    row = next(line for line in invoke(*args).stdout.splitlines() if "$ per GPU-hour" in line)
    # (1 - 1e-6) / 1e-6 = 999,999 times: +99,999,900%, 1.00e+08 to three figures
    assert "1.00e-06" in row and "+1.00e+08%" in row, row
