"""The `moe` family of `dse validate kernels`: aiconfigurator's vLLM fused-MoE layers (needs shared data).

Recorded 2026-11-26 (H100 fit, 20 % hold-out; H200 all rows): bf16 15.0 % / 17.3 %, fp8_block 12.2 % /
16.1 %, mxfp4 15.1 % / 18.4 %; the bounds below leave a few points of slack.
"""

from __future__ import annotations

import pytest

from dse.calibrate.validate.kernels import validate_moe_layers
from tests.shared_data import needs_shared_data

pytestmark = needs_shared_data


@pytest.mark.parametrize(
    ("gpu_key", "label", "bound"),
    [("h100_sxm", "bf16", 0.18), ("h100_sxm", "mxfp4", 0.20), ("h200_sxm", "fp8_block", 0.20)],
)
def test_moe_layers_fit_and_transfer(gpu_key, label, bound):
    row = validate_moe_layers(gpu_key, label)
    assert row["family"] == "moe" and row["n_test"] > 50
    assert row["split"].startswith("holdout" if gpu_key == "h100_sxm" else "all rows")
    assert row["mape_fitted"] < row["mape_no_moe"] < row["mape_analytical"]
    assert row["mape_fitted"] <= bound
