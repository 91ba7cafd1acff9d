"""Human units on the page: SI suffixes and the cost and carbon keys get a label and a unit."""

from __future__ import annotations

import numpy as np
import pytest

from dse.report.display import DisplayUnit, display_unit


@pytest.mark.parametrize(
    ("column", "values", "title", "shown"),
    [
        ("metric.e2e_latency_s", [0.002], "e2e latency (ms)", 2.0),
        ("metric.energy_per_output_token_j", [0.18], "energy per output token (mJ)", 180.0),
        ("metric.gpu_cost_usd", [6700.0], "gpu cost ($)", 6700.0),
        ("metric.die_area_mm2", [814.0], "die area (mm²)", 814.0),
        ("metric.usd_per_million_output_tokens", [0.07], "cost per million output tokens ($)", 0.07),
        ("metric.gco2_per_output_token", [3e-5], "CO2 per output token (µg)", 30.0),
        ("metric.energy_cost_fraction", [0.13], "energy share of cost (%)", 13.0),
        ("param.gpu.memory.bus_width_bits", [512.0], "gpu.memory.bus_width_bits", 512.0),
        # memory in binary units, as the CLI prints it: an H100's 80 GiB, not "85.9 GB"
        ("metric.memory_capacity_bytes", [80 * 2.0**30], "memory capacity (GiB)", 80.0),
        ("metric.memory_bw_bytes_per_s", [3.35e12], "memory bw (TB/s)", 3.35),
        # a training step's ledger per trained token or sample (its report printed raw grams, no unit)
        ("metric.gco2_per_token", [6.3e-6], "CO2 per trained token (µg)", 6.3),
        ("metric.usd_per_million_samples", [0.5], "cost per million trained samples ($)", 0.5),
        ("metric.usd_per_step", [0.02], "cost per step ($)", 0.02),
    ],
)
def test_display_units(column: str, values: list[float], title: str, shown: float) -> None:
    unit = display_unit(column, np.array(values))
    assert unit.title == title
    assert unit.convert_one(values[0]) == pytest.approx(shown)


def test_the_scatter_heading_names_its_objectives() -> None:
    """Energy against a rate is not 'Energy versus latency' (`output_tokens_per_s` ends in `_s` too)."""
    from types import SimpleNamespace

    from dse.report.frames import Objective
    from dse.report.html import _pareto_title

    def title(*metrics: str) -> str:
        objs = tuple(Objective(f"metric.{m}", "minimize") for m in metrics)
        return _pareto_title(SimpleNamespace(objectives=objs))  # type: ignore[arg-type]  # what it reads

    assert title("energy_per_output_token_j", "e2e_latency_s") == "Energy versus latency"
    assert title("energy_per_output_token_j", "output_tokens_per_s") == (
        "Energy per output token versus output tokens per s"
    )


def test_a_value_that_overflows_its_display_unit_is_no_warning() -> None:
    # a hand-edited 1e308 s shown in ms leaked numpy's "overflow encountered in divide" from `dse report`
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        shown = DisplayUnit("e2e latency", "ms", 1e-3).convert(np.array([1e308, 0.25]))
    assert np.isinf(shown[0]) and shown[1] == pytest.approx(250.0)
