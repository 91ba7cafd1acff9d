"""Cost and carbon of training steps: issue 23's outputs for `dse predict --training` and training studies."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from dse.cli import app
from dse.search.objective import evaluate_point
from dse.search.study import study_from_dict

BASE = "predict --model llama-3-8b --gpu h100-sxm --training --num-gpus 8 --fsdp --seq-len 4096"
BASE += " --global-batch 64"


def _json(args: str) -> dict:
    result = CliRunner().invoke(app, [*args.split(), "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def test_renter_and_carbon_identities_per_trained_token() -> None:
    """Renter $/Mtoken = $/h x GPUs / (tokens/s x 3600) x 1e6; operational gCO2/token = J/token / 3.6e6 x
    PUE x g/kWh; $ per step = $/h x GPUs x step / 3600 (issue 23's identities, with trained tokens)."""
    out = _json(f"{BASE} --gpu-usd-per-hour 3 --pue 1.25 --grid-gco2-per-kwh 400")
    tokens_per_s = out["tokens_per_s_per_gpu"] * out["num_gpus"]
    assert out["usd_per_million_tokens"] == pytest.approx(3 * 8 / (tokens_per_s * 3600) * 1e6, rel=1e-12)
    assert out["gco2_per_token"] == pytest.approx(out["energy_per_token_j"] / 3.6e6 * 1.25 * 400, rel=1e-12)
    assert out["usd_per_step"] == pytest.approx(3 * 8 * out["step_time_s"] / 3600, rel=1e-12)
    assert out["cost_view"] == "renter" and out["energy_cost_fraction"] is None
    assert "usd_per_million_output_tokens" not in out  # a training step has no output tokens


def test_vision_steps_are_priced_per_sample_and_free_power_has_no_energy_share() -> None:
    out = _json("predict --model resnet-50 --training --micro-batch 64 --electricity-usd-per-kwh 0")
    assert out["usd_per_million_samples"] > 0 and out["gco2_per_sample"] > 0
    assert out["energy_cost_fraction"] == 0.0
    assert "usd_per_million_tokens" not in out


def test_a_step_that_does_not_fit_has_the_ledger_but_no_per_token_cost() -> None:
    out = _json("predict --model llama-3.1-70b --training --micro-batch 1 --seq-len 4096")
    assert not out["feasible"] and out["gpu_price_usd"] > 0
    assert out["usd_per_million_tokens"] is None and out["gco2_per_token"] is None


def test_text_output_has_the_cost_block() -> None:
    result = CliRunner().invoke(app, BASE.split())
    assert result.exit_code == 0, result.output
    assert "$ per million trained tokens" in result.output and "$ per step" in result.output


def test_a_training_study_can_minimise_dollars_per_token() -> None:
    study = {
        "name": "train-cost",
        "model": "mpt-1b",
        "gpu": "h100-sxm",
        "workload": {
            "mode": "training",
            "num_gpus": 8,
            "micro_batch": 4,
            "global_batch": 64,
            "seq_len": 2048,
        },
        "space": {"fsdp": {"values": [True]}},
        "objectives": {"usd_per_million_tokens": "minimize", "gco2_per_token": "minimize"},
        "constraints": ["usd_per_step <= 10"],
        "cost": {"gpu_usd_per_hour": 2.0},
        "search": {"sampler": "grid", "n_points": 2, "executor": "serial"},
    }
    cfg = study_from_dict(study)
    got = evaluate_point({"fsdp": True}, cfg.eval_context())
    tokens_per_s = got["tokens_per_s_per_gpu"] * 8
    assert got["usd_per_million_tokens"] == pytest.approx(2.0 * 8 / (tokens_per_s * 3600) * 1e6, rel=1e-12)
