"""MPT catalog entries against published parameter counts; `dse validate training` on the shared data."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from dse.cli import app
from dse.workload.models import list_models, load_model_config
from tests.shared_data import needs_shared_data


@pytest.mark.parametrize(
    ("model", "published"),
    # llm-foundry benchmark README `NumParams` at seq 2048 (learned positions included): shared data notes
    [("mpt-70b", 64_862_437_376), ("mpt-1b", 1_315_950_592)],
)
def test_mpt_param_counts(model: str, published: int) -> None:
    assert model in list_models()
    assert load_model_config(model).num_params == pytest.approx(published, rel=0.002)


@needs_shared_data
def test_validate_training_llm_rows() -> None:
    from dse.calibrate.validate.training import validate_training

    result = validate_training()
    mpt = next(r for r in result["rows"] if r["source"] == "llm-foundry-mpt-benchmarks")
    assert mpt["n"] > 150 and mpt["mape"] < 0.15
    assert sum(result["skipped"]["llm"].values()) > 0
    by_source = {r["source"]: r for r in result["rows"] if r["metric"] == "images_per_s_per_gpu"}
    # the depthwise weight gradient's per-tap re-reads: EfficientNet was ~2x too fast (MAPE 116%) without them
    assert by_source["nvidia-deeplearningexamples-convnets/efficientnet-b0"]["mape"] < 0.5
    assert by_source["timm-rtx3090-nchw"]["mape"] < 0.1


@needs_shared_data
def test_validate_training_cli() -> None:
    result = CliRunner().invoke(app, ["validate", "training", "--json"])
    assert result.exit_code == 0, result.output
