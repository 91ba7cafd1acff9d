"""`dse bench --json`: the entries issue 21 names, each with CPU medians (timings are not asserted: the
machines are shared; the benchmark is the place for numbers)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from dse.cli import app


def test_bench_json_names_every_entry() -> None:
    result = CliRunner().invoke(app, ["bench", "--repeats", "1", "--json"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)["results"]
    names = [r["name"] for r in rows]
    wanted = ("predict_serving", "evaluate_point", "cost_of_point", "serving_load_1000", "serving_moe_tp8")
    for prefix in (*wanted, "training_step"):
        assert any(n.startswith(prefix) for n in names), prefix
    assert all(r["cpu_s_median"] > 0 and r["repeats"] >= 1 for r in rows)


@pytest.mark.parametrize("repeats", ["0", "-1", "100000"])
def test_bench_repeats_out_of_range_is_one_error(repeats: str) -> None:
    """--repeats 0 took the median of nothing: a StatisticsError traceback (a fuzzer's finding)."""
    result = CliRunner().invoke(app, ["bench", "--repeats", repeats])
    assert result.exit_code == 2 and "--repeats must be in [1, 10000]" in result.stderr
