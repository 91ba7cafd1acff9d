"""`dse compare`: what `--set` changed, per-GPU rental prices and the cost basis; the help texts newcomers
read for `--num-requests` and the per-token prices."""

from __future__ import annotations

import json

import pytest
import typer
from typer.testing import CliRunner

from dse.cli import app

runner = CliRunner()
WORKLOAD = ["--model", "llama-3.1-8b", "--input-tokens", "128", "--output-tokens", "16", "--batch", "4"]


def _compare(*args: str) -> tuple[str, dict]:
    """(the text output with its wrapping undone, the --json document) of one comparison."""
    text = runner.invoke(app, ["compare", *args])
    assert text.exit_code == 0, text.output
    data = runner.invoke(app, ["compare", *args, "--json"])
    assert data.exit_code == 0, data.output
    return " ".join(text.stdout.split()), json.loads(data.stdout)


def test_compare_says_what_set_changed_in_title_columns_and_json() -> None:
    """An L4 with 100 SMs was shown as "l4": the title, each column and the JSON name the change as written,
    as `dse gpu show` does ("changed: --set ..."); a comparison of catalog GPUs says nothing changed."""
    text, data = _compare("h100-sxm", "l4", *WORKLOAD, "--set", "gpu.num_sms=100")
    assert "every GPU changed: --set gpu.num_sms=100" in text
    assert "h100-sxm (changed)" in text and "l4 (changed)" in text
    assert data["changed"] == ["--set gpu.num_sms=100"]
    text, data = _compare("h100-sxm", "l4", *WORKLOAD)
    assert "changed" not in text and data["changed"] == []
    # a price (`cost.` path) changes no GPU: an H100 was labelled changed by a GDDR6 price (review)
    text, data = _compare("h100-sxm", "l4", *WORKLOAD, "--set", "cost.memory_usd_per_gb.gddr6=5")
    assert "changed" not in text and data["changed"] == []


def test_compare_prices_each_gpu_at_its_own_rent_and_shows_the_rate() -> None:
    """`--gpu-usd-per-hour h100-sxm=2.99,l40s=0.9` (a list was refused as not a number): each GPU's row
    shows its own rate, and its $ per million output tokens is that rate over the tokens it makes in an hour
    (the renter's ledger)."""
    rent_usd_per_h = {"h100-sxm": 2.99, "l40s": 0.9}
    text, data = _compare("h100-sxm", "l40s", *WORKLOAD, "--gpu-usd-per-hour", "h100-sxm=2.99,l40s=0.9")
    assert data["cost_view"] == "renter"
    for row in data["gpus"]:
        m, rate = row["metrics"], rent_usd_per_h[row["params"]["gpu"]]
        assert m["usd_per_gpu_hour"] == rate
        assert m["usd_per_million_output_tokens"] == pytest.approx(
            rate / 3600 / m["output_tokens_per_s"] * 1e6
        )
    assert "$ per GPU-hour │ 2.99 │ 0.900" in text  # three significant figures, as $ per token
    assert "each GPU at its own $ per GPU-hour" in text


def test_one_rent_for_every_gpu_is_shown_and_said() -> None:
    """One `--gpu-usd-per-hour` applied to every GPU silently, with only the purchase prices in the table:
    the rate is a row now, and the line under the table says one rate priced them all."""
    text, data = _compare("h100-sxm", "l40s", *WORKLOAD, "--gpu-usd-per-hour", "2.99")
    assert [row["metrics"]["usd_per_gpu_hour"] for row in data["gpus"]] == [2.99, 2.99]
    assert "$ per GPU-hour │ 2.99 │ 2.99" in text
    assert "one $ per GPU-hour for every GPU (--gpu-usd-per-hour NAME=PRICE,... prices each)" in text
    assert "the GPU price row is not in the cost" in text


@pytest.mark.parametrize(
    ("rent", "message"),
    [
        ("2.99,0.9", "name each GPU's price, h100-sxm=2.99,l40s=0.9"),
        ("h100-sxm=2.99", "no price for l40s"),
        ("h100-sxm=2.99,l40=0.9", "l40 is not a compared GPU (h100-sxm, l40s)"),
        ("h100-sxm=2.99,h100-sxm=3,l40s=0.9", "h100-sxm is priced twice"),
        ("h100-sxm=2.99,l40s=cheap", "--gpu-usd-per-hour l40s=cheap: 'cheap' is not a number"),
        ("h100-sxm=2.99,l40s=-1", "--gpu-usd-per-hour l40s=-1: must be in [0, 1e+06], got -1"),
    ],
)
def test_a_per_gpu_rent_error_names_the_gpu(rent: str, message: str) -> None:
    result = runner.invoke(app, ["compare", "h100-sxm", "l40s", *WORKLOAD, "--gpu-usd-per-hour", rent])
    assert result.exit_code == 2 and message in " ".join(result.stderr.split()), result.output


def test_predict_refuses_a_rent_per_named_gpu() -> None:
    result = runner.invoke(app, ["predict", *WORKLOAD, "--gpu-usd-per-hour", "h100-sxm=2.99"])
    assert result.exit_code == 2 and "NAME=PRICE prices each GPU of `dse compare`" in result.stderr


def _option_help(command: str, flag: str) -> str:
    group = typer.main.get_command(app)
    cmd = group.commands[command]  # type: ignore[attr-defined]
    return next(p.help for p in cmd.params if flag in getattr(p, "opts", ()))


@pytest.mark.parametrize("command", ["predict", "compare", "sweep"])
def test_num_requests_help_gives_each_modes_default(command: str) -> None:
    """The help gave the closed-loop default only (10 x concurrency), where a rate runs 500 requests and
    offline 4 x max_num_seqs: the numbers of `dse.serving.load.default_num_requests`."""
    from dse.serving.load import MIN_REQUESTS, RATE_REQUESTS, WAVES

    text = _option_help(command, "--num-requests")
    assert f"{WAVES} x concurrency, >= {MIN_REQUESTS} (--concurrency)" in text
    assert f"{RATE_REQUESTS} (--request-rate)" in text
    assert "4 x max_num_seqs, >= 1,000 (--max-throughput)" in text
    assert "1 + CV^2 of the lengths" in text


def test_a_rate_runs_the_requests_its_help_states() -> None:
    result = runner.invoke(app, ["predict", *WORKLOAD[:6], "--request-rate", "50", "--json"])
    assert result.exit_code == 0, result.output
    assert "500 (--request-rate)" in _option_help("predict", "--num-requests")
    assert json.loads(result.stdout)["num_requests"] == 500


def test_predict_help_says_the_token_prices_are_not_additive() -> None:
    """Pricing input tokens at the input price and output tokens at the output price counted a static
    batch's prefill twice (1.24x its cost): the help says what each covers."""
    group = typer.main.get_command(app)
    text = " ".join(str(group.commands["predict"].help).split())  # type: ignore[attr-defined]
    assert "$ per million output tokens is all-in" in text
    assert "so the two do not add up" in text
