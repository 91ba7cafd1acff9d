"""Acceptance: hold-out MAPE of the shipped coefficients (kernels >= 10 us, 20 % split, seed 0).

Targets (issue 3): H100 bf16 GEMM <= 8 %, fp8 GEMM <= 10 %, H100 context attention <= 10 %, generation
attention <= 10 %, A100 GEMM <= 10 %; H200 GEMM forecast from H100-only coefficients <= 12 %. The fitted
model must also beat the uncorrected one everywhere. Needs the measured data (`shared/data`); skipped
without it.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from dse.calibrate.fit.kernels import DatasetSpec
from dse.calibrate.validate.kernels import validate_dataset
from tests.shared_data import needs_shared_data

pytestmark = needs_shared_data

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
MISSED: dict[tuple[str, str, str], str] = {
    ("gemm", "h100_sxm", "bf16"): (
        "9.1% since the Hopper energies were fitted on our H100 GEMMs (2026-11-26): the cap rule now "
        "throttles 43% of the aiconfigurator rows, whose latencies imply less throttling than our board "
        "sustained (e.g. 4096^3: 166 us in the table, 205 us in our 1 s loop); 6.4% before"
    )
}


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


def _long_h100_gemms(n: int = 40):
    from dse.calibrate.fit.kernels import load_samples

    samples = load_samples(DatasetSpec(family="gemm", source=AIC, gpu_key="h100_sxm", label="bf16"))
    frame = samples.frame
    big = frame[(frame["m"] >= 4096) & (frame["n"] >= 4096) & (frame["k"] >= 4096)].head(n // 2)
    small = frame[(frame["m"] <= 16) & (frame["k"] >= 4096)].head(n // 2)  # weight streaming, memory-bound
    return samples.subset(pd.concat([big, small]).reset_index(drop=True))


def test_validation_predicts_each_kernel_as_dse_predict_does():
    """The scored latency of a GEMM row is what `dse predict` gives for that op at its default operating
    point (boost requested, TDP cap), throttled clocks included: the cap is counted once, on both paths. A
    kernel timed in a loop is a pass of one kernel (`dse.perf.pass_cap`): one graph per op."""
    from dse.calibrate.fit.kernels import evaluate_at_default_point, sample_ops
    from dse.hardware.catalog import load_gpu
    from dse.perf.coeffs import load_default_coeffs
    from dse.perf.predict import predict_graphs
    from dse.workload.graph import WorkloadGraph

    samples = _long_h100_gemms()
    gpu = load_gpu("h100-sxm")
    cs = load_default_coeffs(gpu)
    scored = evaluate_at_default_point(samples, gpu, cs)["latency_s"]
    graphs = [WorkloadGraph(name="row", ops=(op,)) for op in sample_ops(samples)]
    kernels = [p.kernels[0] for p in predict_graphs(graphs, gpu, coeffs=cs)]
    assert any(k.effective_clock_hz < gpu.clocks.boost_clock_hz for k in kernels)  # the cap binds
    np.testing.assert_allclose([k.latency_s for k in kernels], scored, rtol=1e-9)


def test_default_clock_throttles_compute_bound_kernels_only():
    """At 700 W the model throttles large bf16 GEMMs below boost (measured H100s run ~1.7 GHz there) and
    leaves weight-streaming GEMMs (a few tokens) at boost; lower energies never lower a clock."""
    from dse.calibrate.fit.kernels import default_clock_hz
    from dse.hardware.catalog import load_gpu
    from dse.perf.coeffs import PowerCoeffs, default_power_coeffs, load_default_coeffs

    samples = _long_h100_gemms()
    gpu = load_gpu("h100-sxm")
    cs = load_default_coeffs(gpu)
    clocks = default_clock_hz(samples, gpu, cs)
    big = samples.frame["m"].to_numpy() >= 4096
    boost = gpu.clocks.boost_clock_hz
    assert np.all(clocks[big] < boost) and np.all(clocks[big] >= 0.7 * boost)
    assert np.all(clocks[~big] == boost)
    pc = default_power_coeffs(gpu)
    cooler = PowerCoeffs.from_vector(pc.architecture, 0.8 * pc.vector())
    lighter = default_clock_hz(samples, gpu, cs, cooler)
    assert np.all(lighter >= clocks) and np.any(lighter[big] > clocks[big])


@pytest.mark.parametrize("spec", [s for s, _ in TARGETS], ids=lambda s: f"{s.family}-{s.gpu_key}-{s.label}")
def test_the_cap_rule_sees_the_kernel_that_is_scored(spec):
    """`default_clock_hz` decides each row's clock on `sample_ops` through `sample_rows_fn`; those rows must
    be the kernels `evaluate` scores (the H100 context table includes vLLM's KV-cache write), or the clock
    would be decided for another kernel than the one fitted and validated."""
    from dse.calibrate.fit.kernels import evaluate, load_samples, sample_ops, sample_rows_fn
    from dse.hardware.catalog import load_gpu
    from dse.perf.coeffs import load_default_coeffs

    samples = load_samples(spec)
    samples = samples.subset(samples.frame.sample(200, random_state=0).reset_index(drop=True))
    gpu = load_gpu(samples.gpu)
    cs = load_default_coeffs(gpu)
    clocks = np.linspace(gpu.clocks.sm_clock_max_hz, 0.6 * gpu.clocks.sm_clock_max_hz, len(samples.frame))
    scored = evaluate(samples, gpu, cs, clocks)["latency_s"]
    seen = sample_rows_fn(samples)(sample_ops(samples), gpu, clocks, cs)["latency_s"]
    np.testing.assert_allclose(seen, scored, rtol=1e-9)
