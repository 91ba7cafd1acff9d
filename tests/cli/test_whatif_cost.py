"""`dse whatif`'s cost view: a given price or rent priced per side and said, the board row that completes the
build cost, $ per million tokens to 3 significant figures, and the note for a change of the die alone."""

from __future__ import annotations

import json
from typing import Any

import pytest
from typer.testing import CliRunner

from dse.cli import app

runner = CliRunner()
WORK = ["--batch", "8", "--input-tokens", "256", "--output-tokens", "32"]
GDDR7 = [
    "whatif",
    "h100-sxm",
    "--memory",
    "gddr7",
    "--bus-width-bits",
    "512",
    "--data-rate-gbps",
    "32",
    *WORK,
]


def run_json(*args: str) -> dict[str, Any]:
    result = runner.invoke(app, [*args, "--json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert isinstance(out, dict)
    return out


def run_text(*args: str) -> str:
    result = runner.invoke(app, list(args))
    assert result.exit_code == 0, result.output
    return result.stdout


def flat(text: str) -> str:
    """`text` with every run of whitespace one space: rich folds a long line at the console's width."""
    return " ".join(text.split())


def test_a_given_price_is_the_baselines_and_the_changed_gpus_moves_with_its_build_cost() -> None:
    """One --gpu-price-usd on both sides priced the GDDR7 H100, 28% cheaper to build, at the HBM3 part's price
    (+36% $ per token). The changed side's price now keeps the baseline's ratio of price to build cost, the
    rule a catalog GPU's published price follows in the same what-if (27,500 $ for the H100)."""
    given = run_json(*GDDR7, "--gpu-price-usd", "30000")
    base, new = given["baseline"], given["changed"]
    assert base["gpu_price_usd"] == 30000
    build_ratio = new["gpu_cost_usd"] / base["gpu_cost_usd"]
    assert build_ratio < 0.8  # the memory and the interposer go: the what-if is the cheaper design
    assert new["gpu_price_usd"] == pytest.approx(30000 * build_ratio, rel=1e-12)
    published = run_json(*GDDR7)  # the published price moves by the same ratio
    assert published["changed"]["gpu_price_usd"] / published["baseline"]["gpu_price_usd"] == pytest.approx(
        build_ratio, rel=1e-12
    )
    text = flat(run_text(*GDDR7, "--gpu-price-usd", "30000"))
    assert "--gpu-price-usd 30,000 is the baseline's price; the changed GPU's, " in text
    assert "moves with its build cost" in text


def test_one_rent_for_both_sides_is_said_and_each_side_can_have_its_own() -> None:
    """One --gpu-usd-per-hour charged the cheaper GDDR7 part the HBM3 part's rent without a word: the line
    `dse compare` prints for one rent now follows the table, and baseline=X,changed=Y rents them apart."""
    one = flat(run_text(*GDDR7, "--gpu-usd-per-hour", "2.99"))
    assert (
        "cost and carbon: renter ($/GPU-hour given) view, mid prices: one $ per GPU-hour for every side"
        in one
    )
    assert "--gpu-usd-per-hour baseline=X,changed=Y prices each" in one
    out = run_json(*GDDR7, "--gpu-usd-per-hour", "baseline=2.99,changed=2.2")
    base, new = out["baseline"], out["changed"]
    assert (base["usd_per_gpu_hour"], new["usd_per_gpu_hour"]) == (2.99, 2.2)
    # the renter's ledger: the side's own rate over the tokens it makes in an hour
    expected = 2.2 / (new["output_tokens_per_s"] * 3600) * 1e6
    assert new["usd_per_million_output_tokens"] == pytest.approx(expected, rel=1e-12)
    own = flat(run_text(*GDDR7, "--gpu-usd-per-hour", "baseline=3,changed=2"))
    assert "each side at its own $ per GPU-hour" in own


@pytest.mark.parametrize(
    ("rent", "message"),
    [
        ("2.99,2.2", "name each side's price, baseline=2.99,changed=2.2"),  # which is which: said by name
        ("h100-sxm=2.99,changed=2.2", "h100-sxm is not a compared side (baseline, changed)"),
        ("baseline=2.99", "no price for changed"),
    ],
)
def test_a_rent_per_side_names_both_sides(rent: str, message: str) -> None:
    result = runner.invoke(app, [*GDDR7, "--gpu-usd-per-hour", rent])
    assert result.exit_code == 2 and message in result.stderr, result.output


def test_the_owners_cost_view_line_follows_the_table() -> None:
    # `dse predict`'s cost block names its view; whatif's table had no such line, owner or renter
    text = flat(run_text(*GDDR7))
    assert "cost and carbon: owner (price amortized + energy) view, mid prices" in text
    assert "the changed GPU's price is the baseline's published price moved with its build cost" in text


def test_the_listed_parts_add_up_to_the_build_cost() -> None:
    """A TDP what-if moved the build cost +27.5% with every listed part at +0.0%: the board row (6.14 $ per W
    of TDP, cost_facts board_usd_per_tdp_w) was missing. 700 W -> 4,298 $, 1000 W -> 6,140 $."""
    args = ["whatif", "h100-sxm", "--set", "power.tdp_w=1000", *WORK]
    text = run_text(*args)
    board = next(line for line in text.splitlines() if "board and server share ($)" in line)
    assert "4,298" in board and "6,140" in board
    out = run_json(*args)
    for side in (out["baseline"], out["changed"]):
        parts = sum(
            side[k] for k in ("die_cost_usd", "memory_cost_usd", "package_cost_usd", "board_cost_usd")
        )
        assert parts == pytest.approx(side["gpu_cost_usd"], rel=1e-12)


def test_dollars_per_million_tokens_show_three_significant_figures() -> None:
    """A 1B model at batch 256 costs ~0.003 $ per million tokens: `.3f` showed 0.003 on both sides of a
    what-if that moved it 0.7%. Below 0.01, three significant figures are five decimals."""
    args = ["whatif", "h100-sxm", "--model", "llama-3.2-1b", "--batch", "256", "--input-tokens", "128",
            "--output-tokens", "64", "--memory", "gddr7", "--bus-width-bits", "512",
            "--data-rate-gbps", "32"]  # fmt: skip
    out = run_json(*args)
    values = [out[side]["usd_per_million_output_tokens"] for side in ("baseline", "changed")]
    assert all(0.001 <= v < 0.01 for v in values), values
    row = next(line for line in run_text(*args).splitlines() if "$ per million output tokens" in line)
    assert all(f"{v:.5f}" in row for v in values), (row, values)


def test_a_change_of_the_die_alone_says_it_moves_area_and_cost_only() -> None:
    """An N7 H100 kept the 4N part's energy (+0.0%) and the output did not say why: the die feeds the cost
    model only. A change the performance model reads (SMs) gets no such note."""
    die = flat(run_text("whatif", "h100-sxm", "--set", "die.process_node=tsmc-n7", *WORK))
    assert "note: only die.* fields changed" in die and "build cost" in die
    assert "only die.* fields" not in run_text("whatif", "h100-sxm", "--set", "num_sms=100", *WORK)
