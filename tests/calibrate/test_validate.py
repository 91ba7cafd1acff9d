"""Acceptance: hold-out MAPE of the shipped coefficients (kernels >= 10 us, 20 % split, seed 0).

Targets (issue 3): H100 bf16 GEMM <= 8 %, fp8 GEMM <= 10 %, H100 context attention <= 10 %, generation
attention <= 10 %, A100 GEMM <= 10 %; H200 GEMM forecast from H100-only coefficients <= 12 %. The fitted
model must also beat the uncorrected one everywhere. Needs the measured data (`shared/data`); skipped
without it.
"""

from __future__ import annotations

import pytest

from dse.calibrate.dataset import data_root
from dse.calibrate.kernel_fit import DatasetSpec
from dse.calibrate.validate import validate_dataset
from dse.errors import ConfigError

try:
    data_root()
    HAVE_DATA = True
except ConfigError:
    HAVE_DATA = False

pytestmark = pytest.mark.skipif(not HAVE_DATA, reason="measured data (shared/data) not available")

AIC = "aiconfigurator"
TARGETS = [
    (DatasetSpec(family="gemm", source=AIC, gpu_key="h100_sxm", label="bf16"), 0.08),
    (DatasetSpec(family="gemm", source=AIC, gpu_key="h100_sxm", label="fp8"), 0.10),
    (DatasetSpec(family="attention_flash", source=AIC, gpu_key="h100_sxm", label="context"), 0.10),
    (DatasetSpec(family="attention_decode", source=AIC, gpu_key="h100_sxm", label="generation"), 0.10),
    (DatasetSpec(family="gemm", source=AIC, gpu_key="a100_sxm", label="bf16"), 0.10),
    (DatasetSpec(family="gemm", source=AIC, gpu_key="h200_sxm", label="bf16"), 0.12),
]
# Targets the shipped model misses today (strict xfail: fixing one turns its test red until removed here).
# None since the refit of 2026-11-22 (PackGQA + KV-cache write in context attention, fp8 quantization passes).
MISSED: dict[tuple[str, str, str], str] = {}


@pytest.mark.parametrize(
    ("spec", "target"),
    TARGETS,
    ids=lambda x: getattr(x, "label", None) and f"{x.family}-{x.gpu_key}-{x.label}",
)
def test_holdout_mape_meets_target(spec, target, request):
    key = (spec.family, spec.gpu_key, spec.label)
    if key in MISSED:
        request.applymarker(pytest.mark.xfail(reason=MISSED[key], strict=True))
    row = validate_dataset(spec)
    assert row["n_test"] > 100
    assert row["mape_fitted"] < row["mape_analytical"]
    assert row["mape_fitted"] <= target, f"{key}: MAPE {row['mape_fitted']:.3f} > target {target}"


def test_validation_row_schema():
    row = validate_dataset(
        DatasetSpec(family="softmax", source="llmcompass", gpu_key="a100_80gb", label="softmax")
    )
    assert {"family", "gpu", "dtype", "n_test", "mape_fitted", "mape_analytical"} <= set(row)
    assert row["gpu"] == "a100-sxm-80gb" and row["split"].startswith("holdout")
