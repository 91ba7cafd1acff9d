"""Cost and carbon in studies: objectives, constraints, searchable cost facts, the `cost:` section and
its errors, and the shipped memory-cost study."""

from __future__ import annotations

import re
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
    # without a direction (`--objective METRIC`): a throughput is maximized, a cost minimized; a newcomer
    # found every bare metric minimized, the study's maximized ones included
    bare = [("output_tokens_per_s", ""), ("usd_per_million_output_tokens", "")]
    page = write_html_report(summary.run_dir, objectives=bare).read_text()
    assert "output_tokens_per_s (maximize)" in page
    assert "usd_per_million_output_tokens (minimize)" in page


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


PUE_SEARCHED = {"space": {"cost.operation.pue": {"values": [1.1, 1.2]}, "batch": {"values": [8]}}}


@pytest.mark.parametrize(
    ("change", "message"),
    [
        # a field and a fact of the same quantity: the field won, the fact (30: never checked) was ignored
        ({"facts": {"operation.pue": 30}, "pue": 1.5},
         "cost.facts.operation.pue: cost.pue and cost.facts.operation.pue set the same fact; give one"),
        ({"facts": {"cost.operation.utilization": 0.5}, "utilization": 0.9},
         "cost.facts.cost.operation.utilization: cost.utilization and cost.facts.cost.operation.utilization"),
        ({"facts": {"operation.pue": 30}}, "cost.facts.operation.pue: must be in [1, 10]"),
        # the given price replaces every published one: the fact was ignored, as `--set` beside the flag
        ({"facts": {"gpu_price_usd.h100-sxm": 1000}, "gpu_price_usd": 30000},
         "cost.gpu_price_usd and cost.facts.gpu_price_usd.h100-sxm set the same fact; give one"),
        # a study field is named as the study writes it, not as the flag `--pue`
        ({"pue": 20}, "cost.pue: must be in [1, 10] (facility power over IT power), got 20"),
        ({"lifetime_years": 1000}, "cost.lifetime_years: must be in [0.01, 100]"),
        ({"gpu_usd_per_hour": 2, "gpu_price_usd": 1000}, "cost.gpu_usd_per_hour: the renter's rate replaces"),
        ({"grid_gco2_per_kwh": "mars"}, "cost.grid_gco2_per_kwh: 'mars' is neither a number nor a region"),
        ({"grid_gco2_per_kwh": -5}, "cost.grid_gco2_per_kwh: must be >= 0, got -5"),
    ],
)  # fmt: skip
def test_a_cost_field_error_names_the_study_field(change: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        study_from_dict({**STUDY, "cost": change})


@pytest.mark.parametrize(
    ("cost", "message"),
    [
        ({"pue": 1.5}, "space.cost.operation.pue: cost.operation.pue is searched here and fixed by cost.pue"),
        (
            {"facts": {"operation.pue": 1.5}},
            "is searched here and fixed by cost.facts.operation.pue; give one",
        ),
    ],
)
def test_a_searched_cost_fact_that_is_also_fixed_is_refused(cost: dict, message: str) -> None:
    """The fixed `cost.pue` won over every searched value (a fixed fact lost to them): one was ignored."""
    with pytest.raises(ConfigError, match=re.escape(message)):
        study_from_dict({**STUDY, **PUE_SEARCHED, "cost": cost})
    study_from_dict({**STUDY, **PUE_SEARCHED, "cost": {}})  # searched alone it is a parameter


def test_a_searched_published_price_beside_a_given_price_is_refused() -> None:
    # every point was priced at `cost.gpu_price_usd`, the searched price unread (the `--set` rule of the CLI)
    searched = {"space": {"cost.gpu_price_usd.h100-sxm": {"values": [1e4, 2e4]}, "batch": {"values": [8]}}}
    message = "cost.gpu_price_usd.h100-sxm is searched here and fixed by cost.gpu_price_usd; give one"
    with pytest.raises(ConfigError, match=re.escape(message)):
        study_from_dict({**STUDY, **searched, "cost": {"gpu_price_usd": 30000}})
    study_from_dict({**STUDY, **searched, "cost": {}})


def test_a_searched_operation_fact_is_checked_against_its_range() -> None:
    space = {"space": {"cost.operation.pue": {"values": [1.1, 20]}, "batch": {"values": [8]}}}
    with pytest.raises(ConfigError, match=re.escape("space.cost.operation.pue.values.1: must be in [1, 10]")):
        study_from_dict({**STUDY, **space, "cost": {}})


def test_a_training_study_checks_its_cost_section(tmp_path: Path) -> None:
    """A training step is priced too; its study's `cost: pue: 20` was accepted unchecked."""
    text = (REPO / "studies" / "training.yaml").read_text() + "cost:\n  pue: 20\n"
    (tmp_path / "t.yaml").write_text(text)
    line = len(text.splitlines())
    with pytest.raises(ConfigError, match=re.escape(f"t.yaml:{line}: cost.pue: must be in [1, 10]")):
        load_study(tmp_path / "t.yaml")


def test_each_memory_cost_study_puts_its_own_model_on_the_front(tmp_path: Path) -> None:
    """An architect's finding: memory_cost.yaml searched `model` (8B and 70B) against $/Mtoken and J/token,
    so every 70B point was dominated by the 8B ones and no 70B design reached the front it promised. One
    study per model: the 70B one's front is a design that holds the model (~70 GB in fp8) in HBM."""
    import pandas as pd

    fronts = {}
    for name in ("memory_cost.yaml", "memory_cost_70b.yaml"):
        config = load_study(REPO / "studies" / name).config
        assert "model" not in config.space and "usd_per_million_output_tokens" in config.objectives
        summary = run_study(REPO / "studies" / name, out=tmp_path, executor="serial")
        trials = pd.read_parquet(Path(summary.run_dir) / "trials.parquet")
        fronts[config.model] = trials[trials["on_front"]]
        gddr7 = trials[trials["param.gpu.memory.technology"] == "gddr7"]
        if config.model == "llama-3.1-70b":
            # GDDR7's widest bus holds 16 x 4 GiB = 64 GiB, less than the 70B model's fp8 weights
            assert not gddr7["feasible"].any()
            assert gddr7["reason"].str.contains("no memory for a KV cache").all()
    assert set(fronts) == {"llama-3.1-8b", "llama-3.1-70b"} and all(len(f) for f in fronts.values())
    assert set(fronts["llama-3.1-70b"]["param.gpu.memory.technology"]) <= {"hbm3", "hbm3e"}


RENTED = {"gpu_usd_per_hour": 2.5}


@pytest.mark.parametrize(
    ("change", "message"),
    [
        # a searched tariff beside the renter's rate: every point priced alike, read as "it does not matter"
        ({"space": {"cost.operation.electricity_usd_per_kwh": {"values": [0.0, 0.3]},
                    "batch": {"values": [8]}}, "cost": RENTED},
         "space.cost.operation.electricity_usd_per_kwh: cost.gpu_usd_per_hour (the renter's rate) replaces "
         "the owner's ledger (purchase price and electricity): drop the searched "
         "cost.operation.electricity_usd_per_kwh"),
        ({"cost": {**RENTED, "facts": {"operation.server_power_multiplier": 2}}},
         "cost.facts.operation.server_power_multiplier: cost.gpu_usd_per_hour (the renter's rate) replaces"),
        ({"space": {"cost.gpu_price_usd.h100-sxm": {"values": [20000, 30000]}, "batch": {"values": [8]}},
          "cost": RENTED}, "drop the searched cost.gpu_price_usd.h100-sxm"),
    ],
)  # fmt: skip
def test_a_renter_study_refuses_the_prices_only_an_owner_pays(change: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        study_from_dict({**STUDY, "cost": {}, **change})
    # the same search priced by an owner is a parameter
    study_from_dict({**STUDY, **change, "cost": {}})


def test_a_renter_study_that_searches_the_gpu_warns_that_one_rate_favours_the_fastest(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """One hourly rate for every design ranks them by throughput alone (`dse compare` says so for one rent
    over several GPUs); a search over workload settings on one GPU is not warned."""
    gpu_space = {"gpu.memory.bus_width_bits": {"values": [4096, 5120]}, "batch": {"values": [8]}}
    with caplog.at_level("WARNING"):
        study_from_dict({**STUDY, "space": gpu_space, "cost": RENTED})
    assert any("rents every searched GPU design at one rate" in r.getMessage() for r in caplog.records)
    caplog.clear()
    with caplog.at_level("WARNING"):
        study_from_dict({**STUDY, "space": {"batch": {"values": [8, 32]}}, "cost": RENTED})
        study_from_dict({**STUDY, "space": gpu_space})
    assert not any("one rate" in r.getMessage() for r in caplog.records)
