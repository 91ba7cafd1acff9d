"""Cost and carbon in studies: objectives, constraints, searchable cost facts, the `cost:` section and
its errors, and the shipped memory-cost study."""

from __future__ import annotations

from pathlib import Path

import pytest

from dse.errors import ConfigError
from dse.search.objective import EvalContext, evaluate_point, serving_metric_names
from dse.search.runner import run_study
from dse.search.study import load_study, study_from_dict

REPO = Path(__file__).resolve().parents[2]
STUDY = {
    "name": "cost",
    "gpu": "h100-sxm",
    "workload": {"batch": 8, "input_tokens": 256, "output_tokens": 32},
    "space": {"cost.memory_usd_per_gb.hbm3": {"values": [5.0, 20.0]}, "batch": {"values": [8, 32]}},
    "objectives": {"usd_per_million_output_tokens": "minimize", "energy_per_output_token_j": "minimize"},
    "constraints": ["gpu_cost_usd <= 25000"],
    "cost": {"scenario": "mid", "electricity_usd_per_kwh": 0.1, "facts": {"operation.pue": 1.2}},
    "search": {"sampler": "grid", "n_points": 10, "executor": "serial"},
}


def test_cost_keys_are_metrics_of_every_mode() -> None:
    for key in ("usd_per_million_output_tokens", "gpu_cost_usd", "gco2_per_output_token"):
        assert key in serving_metric_names(["static"]) and key in serving_metric_names(["concurrency"])


def test_a_searched_price_moves_cost_and_nothing_else() -> None:
    cfg = study_from_dict(STUDY)
    ctx = cfg.eval_context()
    cheap = evaluate_point({"cost.memory_usd_per_gb.hbm3": 5.0, "batch": 8}, ctx)
    dear = evaluate_point({"cost.memory_usd_per_gb.hbm3": 20.0, "batch": 8}, ctx)
    assert dear["memory_cost_usd"] == pytest.approx(4 * cheap["memory_cost_usd"])
    assert dear["usd_per_million_output_tokens"] > cheap["usd_per_million_output_tokens"]
    assert dear["energy_per_output_token_j"] == cheap["energy_per_output_token_j"]
    # the study's cost section reached the point: PUE 1.2 from `facts`
    ctx_default = EvalContext(batch=8, input_tokens=256, output_tokens=32)
    plain = evaluate_point({}, ctx_default)
    assert cheap["gco2_per_output_token"] / cheap["energy_per_output_token_j"] == pytest.approx(
        plain["gco2_per_output_token"] / plain["energy_per_output_token_j"] * 1.2 / 1.3
    )


def test_study_runs_with_cost_objectives(tmp_path: Path) -> None:
    cfg = study_from_dict(STUDY)
    summary = run_study(cfg, out=tmp_path)
    assert (summary.n_points, summary.n_failed, summary.n_feasible) == (4, 0, 4)  # all under $25k
    assert summary.front_size >= 1
    # the report can put any two logged metrics on its axes, e.g. $ against carbon
    from dse.report import write_html_report

    picked = [("usd_per_million_output_tokens", "minimize"), ("gco2_per_output_token", "minimize")]
    page = write_html_report(summary.run_dir, objectives=picked).read_text()
    assert "gco2_per_output_token (minimize)" in page
    with pytest.raises(ConfigError, match="no such metric"):
        write_html_report(summary.run_dir, objectives=[("usd_per_mill", "minimize"), ("ttft_s", "minimize")])
    twice = [("gco2_per_output_token", "minimize"), ("gco2_per_output_token", "maximize")]
    with pytest.raises(ConfigError, match="given twice"):  # a fuzzer's finding: accepted before
        write_html_report(summary.run_dir, objectives=twice)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"cost": {"facts": {"memory_usd_per_gb.hbm9": 1}}}, "no such cost fact"),
        ({"cost": {"grid_gco2_per_kwh": "mars"}}, "neither a number nor a region"),
        ({"space": {"cost.nodes.tsmc-4n.wafer_usdd": {"values": [1.0]}}}, "no such cost fact"),
        ({"cost": {"pue": 0.5}}, "pue"),
        # values the ledger cannot take are refused at load, not as points dying of ZeroDivisionError
        ({"space": {"cost.yield.clustering_alpha": {"values": [0, 3]}}}, "clustering_alpha.*must be > 0"),
        ({"space": {"cost.area.scale": {"values": [1.0, 1e308]}}}, "over 1000 x the top of its range"),
    ],
)
def test_cost_section_errors_name_the_field(change: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        study_from_dict({**STUDY, **change})


def test_the_memory_cost_study_loads() -> None:
    loaded = load_study(REPO / "studies" / "memory_cost.yaml")
    assert "usd_per_million_output_tokens" in loaded.config.objectives
