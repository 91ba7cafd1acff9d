"""A given purchase price in a sweep or study is the base GPU's: each design moves it with its build cost,
as `dse whatif` and `dse compare` do (session 36 review: one price for every design favoured the dearest to
build, e.g. an H100 with 8,192 HBM bits at the H100's price)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from dse.cli import app

WORKLOAD = ["--model", "llama-3.1-8b", "--input-tokens", "256", "--output-tokens", "32"]


def _sweep(*flags: str) -> list[dict]:
    args = ["sweep", "gpu.memory.bus_width_bits=4096:5120:2", *WORKLOAD, "--batch", "8"]
    result = CliRunner().invoke(app, [*args, *flags, "--json"])
    assert result.exit_code == 0, result.output
    return [p["metrics"] for p in json.loads(result.stdout)]


def test_a_given_price_is_the_base_gpus_and_moves_with_each_points_build_cost() -> None:
    """5,120 bits is the catalog H100 (the base): it takes the price as given; the 4,096-bit design keeps
    the base's price-to-build-cost ratio, so price / 30,000 = its build cost / the base's (both reported)."""
    narrow, base = _sweep("--gpu-price-usd", "30000")
    assert base["gpu_price_usd"] == pytest.approx(30000.0, rel=1e-12)
    assert narrow["gpu_cost_usd"] < base["gpu_cost_usd"]
    ratio = narrow["gpu_cost_usd"] / base["gpu_cost_usd"]
    assert narrow["gpu_price_usd"] == pytest.approx(30000.0 * ratio, rel=1e-9)
    # the same as giving the base's price as a fact, which every what-if of it moves with its build cost
    as_fact = _sweep("--set", "cost.gpu_price_usd.h100-sxm=30000")
    assert [m["gpu_price_usd"] for m in as_fact] == pytest.approx([narrow["gpu_price_usd"], 30000.0])


def test_a_point_that_changes_no_build_cost_takes_the_price_as_given() -> None:
    result = CliRunner().invoke(
        app, ["sweep", "batch=1:8:2", *WORKLOAD, "--gpu-price-usd", "30000", "--json"]
    )
    assert result.exit_code == 0, result.output
    assert [p["metrics"]["gpu_price_usd"] for p in json.loads(result.stdout)] == [30000.0, 30000.0]


def test_one_rent_over_swept_gpu_designs_is_warned_and_a_workload_sweep_is_not() -> None:
    """One hourly rate for every design ranks them by speed alone (`dse compare` says so for several GPUs)."""
    args = [*WORKLOAD, "--gpu-usd-per-hour", "2"]
    runner = CliRunner()
    designs = runner.invoke(app, ["sweep", "gpu.memory.bus_width_bits=4096:5120:2", "--batch", "8", *args])
    assert designs.exit_code == 0 and "one $ per GPU-hour for every swept GPU design" in designs.stderr
    batches = runner.invoke(app, ["sweep", "batch=1:8:2", *args])
    assert batches.exit_code == 0 and "one $ per GPU-hour" not in batches.stderr
