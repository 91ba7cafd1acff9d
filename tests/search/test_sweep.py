"""`dse.search.sweep`: axis parsing, grids and rows built on the search's `evaluate_point`."""

from __future__ import annotations

import pytest

from dse.errors import ConfigError
from dse.search.objective import EvalContext
from dse.search.sweep import compare_gpus, linspace_values, parse_axis, run_sweep, sweep_points

CTX = EvalContext(gpu="h100-sxm", model="llama-3.1-8b", batch=8, input_tokens=128, output_tokens=16)


def test_linspace_rounds_integers_and_drops_duplicates() -> None:
    assert linspace_values(1000, 2000, 3, integer=False) == (1000.0, 1500.0, 2000.0)
    assert linspace_values(1, 3, 5, integer=True) == (1, 2, 3)  # 1, 1.5->2, 2, 2.5->2, 3
    assert linspace_values(7, 99, 1, integer=True) == (7,)


@pytest.mark.parametrize(
    ("spec", "values"),
    [
        ("sm_clock_mhz=1000:1980:3", (1000.0, 1490.0, 1980.0)),
        ("gpu.num_sms=66:132:3", (66, 99, 132)),
        ("batch=1:32:2", (1, 32)),
        ("gpu.sm.tensor_factor=0.5:1:2", (0.5, 1.0)),
        ("gpu.clocks.sm_clock_max_mhz=1500:2000:2", (1500.0, 2000.0)),  # human unit: a float
    ],
)
def test_parse_axis(spec: str, values: tuple) -> None:
    axis = parse_axis(spec, CTX)
    assert axis.path == spec.partition("=")[0]
    assert axis.values == values
    assert [type(v) for v in axis.values] == [type(v) for v in values]


@pytest.mark.parametrize("path", ["memory.bus_width_bits", "num_sms", "clocks.sm_clock_max_mhz"])
def test_a_gpu_field_as_dse_gpu_fields_lists_it_is_the_gpu_path(path: str) -> None:
    """`dse gpu fields` lists paths without `gpu.` and `--set` takes them so: a sweep did not."""
    assert parse_axis(f"{path}=1024:2048:2", CTX) == parse_axis(f"gpu.{path}=1024:2048:2", CTX)


@pytest.mark.parametrize(
    ("spec", "needle"),
    [
        ("sm_clock_mhz=1000:1980", "expected PATH=START:STOP:STEPS"),
        ("nonsense", "expected PATH=START:STOP:STEPS"),
        ("foo=1:2:3", "unknown parameter 'foo'"),
        ("gpu.nums=1:2:3", "'nums' is not a field of gpu"),
        ("gpu.memory.technology=1:2:2", "not a number"),
        ("batch=1:x:3", "STOP 'x' is not a number"),
        ("batch=1:4:0", "STEPS"),
        ("batch=1:4:2.5", "STEPS"),
        ("concurrency=1:4:2", "applies to mode concurrency, not static"),
    ],
)
def test_parse_axis_errors(spec: str, needle: str) -> None:
    with pytest.raises(ConfigError, match=None) as info:
        parse_axis(spec, CTX)
    assert needle in str(info.value)
    assert "\n" not in str(info.value)


def test_grid_is_the_product_on_top_of_the_base() -> None:
    axes = [parse_axis("batch=1:4:2", CTX), parse_axis("sm_clock_mhz=1000:1500:3", CTX)]
    points = sweep_points(axes, {"power_cap_w": 500})
    assert len(points) == 6
    assert points[0] == {"power_cap_w": 500, "batch": 1, "sm_clock_mhz": 1000.0}
    with pytest.raises(ConfigError, match="each parameter once"):
        sweep_points([axes[0], axes[0]])


def test_each_point_reports_its_progress() -> None:
    ctx = EvalContext(batch=1, input_tokens=128, output_tokens=8)
    seen: list[tuple[int, int]] = []
    rows = run_sweep(
        [parse_axis("batch=1:4:3", ctx)], ctx, on_point=lambda done, total: seen.append((done, total))
    )
    assert seen == [(1, 3), (2, 3), (3, 3)] and len(rows) == 3


def test_memory_data_rate_sweep_raises_throughput() -> None:
    rows = run_sweep([parse_axis("gpu.memory.data_rate_gbit_per_s=3.2:6.4:3", CTX)], CTX)
    assert [r["status"] for r in rows] == ["feasible"] * 3
    tput = [r["metrics"]["output_tokens_per_s"] for r in rows]
    assert tput == sorted(tput) and tput[0] < tput[-1]


def test_failed_and_infeasible_points_do_not_abort() -> None:
    rows = run_sweep([parse_axis("gpu.memory.data_rate_gbit_per_s=5:9:2", CTX)], CTX)
    assert [r["status"] for r in rows] == ["feasible", "failed"]
    assert "outside" in rows[1]["reason"]
    assert not rows[1]["reason"].startswith("ConfigError")  # the user's message, not the exception's class
    big = EvalContext(gpu="h100-sxm", model="llama-3.1-70b", batch=1, input_tokens=128, output_tokens=16)
    row = run_sweep([parse_axis("batch=1:2:1", big)], big)[0]
    assert row["status"] == "infeasible" and row["reason"]


def test_load_mode_sweep() -> None:
    ctx = EvalContext(
        gpu="h100-sxm", model="llama-3.1-8b", mode="concurrency", input_tokens=128, output_tokens=16,
        num_requests=8,
    )  # fmt: skip
    rows = run_sweep([parse_axis("concurrency=1:8:2", ctx)], ctx)
    assert [r["params"]["concurrency"] for r in rows] == [1, 8]
    assert rows[1]["metrics"]["output_tokens_per_s"] > rows[0]["metrics"]["output_tokens_per_s"]


def test_compare_gpus() -> None:
    rows = compare_gpus(["h100-sxm", "a100-sxm-80gb"], CTX)
    assert [r["params"]["gpu"] for r in rows] == ["h100-sxm", "a100-sxm-80gb"]
    assert rows[0]["metrics"]["tpot_s"] < rows[1]["metrics"]["tpot_s"]
    with pytest.raises(ConfigError):
        compare_gpus(["h100-sxm"], CTX)


def test_compare_gpus_prices_each_gpu_at_its_own_rent() -> None:
    """A renter's price per GPU (`cost_by_gpu`): each row's $ per GPU-hour is its own, and its $ per million
    output tokens is that rate over the tokens the GPU makes in an hour (the renter's ledger)."""
    rent_usd_per_h = {"h100-sxm": 2.99, "a100-sxm-80gb": 1.2}
    costs = {name: (("gpu_usd_per_hour", rate),) for name, rate in rent_usd_per_h.items()}
    rows = compare_gpus(list(rent_usd_per_h), CTX, None, costs)
    for row in rows:
        m, rate = row["metrics"], rent_usd_per_h[row["params"]["gpu"]]
        assert m["usd_per_gpu_hour"] == rate
        assert m["usd_per_million_output_tokens"] == pytest.approx(
            rate / 3600 / m["output_tokens_per_s"] * 1e6
        )


def test_a_sweep_past_ten_thousand_points_is_refused() -> None:
    """Two 1,000-step axes made a million points that ran for hours with no output (a fuzzer's finding)."""
    axes = [parse_axis("sm_clock_mhz=1000:1980:1000", CTX), parse_axis("power_cap_w=200:700:1000", CTX)]
    with pytest.raises(ConfigError, match="1,000,000 points is over 10,000"):
        sweep_points(axes)
    assert len(sweep_points(axes[:1])) == 1000


def test_compare_reports_the_cap_in_force_on_each_gpu() -> None:
    """A 600 W cap does not bind on a 150 W A10: its row says 150 W, not 600 (a fuzzer's finding)."""
    rows = compare_gpus(["h100-sxm", "a10"], CTX, {"power_cap_w": 600.0})
    caps = {r["params"]["gpu"]: r["metrics"]["power_cap_w"] for r in rows}
    assert caps == {"h100-sxm": 600.0, "a10": 150.0}


def test_load_rows_carry_the_engine_limits_each_point_ran_with() -> None:
    # vLLM's defaults follow the GPU's memory (its arg_utils: >= 70 GiB -> 1024 sequences and 8192 tokens a
    # step for the API server, else 256 and 2048): a bus-width sweep of an H100 crosses it at 4 stacks
    # (64 GiB), which changed TTFT 2x with nothing in the rows saying why
    ctx = EvalContext(gpu="h100-sxm", model="llama-3.1-8b", mode="concurrency", concurrency=8,
                      input_tokens=128, output_tokens=16, num_requests=16, engine="vllm")  # fmt: skip
    rows = run_sweep([parse_axis("memory.bus_width_bits=4096:5120:2", ctx)], ctx)
    limits = [(r["engine"]["max_num_seqs"], r["engine"]["max_batched_tokens"]) for r in rows]
    assert limits == [(256, 2048), (1024, 8192)]
    assert [(r["metrics"]["max_num_seqs"], r["metrics"]["max_batched_tokens"]) for r in rows] == limits
    static = run_sweep([parse_axis("batch=1:2:2", CTX)], CTX)
    assert all("engine" not in r and "max_num_seqs" not in r["metrics"] for r in static)
