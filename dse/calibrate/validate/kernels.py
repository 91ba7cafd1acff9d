"""Kernel-model validation: MAPE per family and GPU on held-out data, fitted and uncorrected.

`validate_kernels()` returns one row per dataset of `dse.calibrate.fit.kernels.kernel_datasets()`:

- datasets the shipped coefficients were fitted on (H100 GEMM bf16 / fp8, H100 context and generation
  attention, A100 GEMM, LLMCompass A100 softmax / layernorm / GELU): the 20 % hold-out of the seed-0
  split (`dse.calibrate.fit.kernels.train_test`), never seen by the fit;
- forecast datasets (H200 GEMM and attention, fitted on H100 only; LLMCompass A100 matmul, measured with
  host overhead): all their rows.

`validate_moe()` adds the `moe` family: aiconfigurator's vLLM fused-MoE layers (router excluded) per GPU,
dtype and split (`dse.calibrate.fit.moe`): the H100 layers without expert parallelism that the MoE set was
fitted on are scored on their 20 % hold-out; H200 (transfer), per-tensor fp8 and the EP shards on all rows.

Only kernels of at least `min_latency_s` (10 us, the acceptance filter) are scored. `mape_fitted` uses
the GPU's default coefficient set (`load_default_coeffs`, or the sets passed in), `mape_analytical` the
uncorrected model (lambda = 1, eps = 0). Each row is predicted as `dse predict` predicts it at the
default operating point: boost clock requested, lowered by the power cap rule to fit the GPU's TDP
(`dse.calibrate.fit.kernels.evaluate_at_default_point`, with the set being scored), as the data were taken
at default clocks and power limits.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from typing import Any

import numpy as np

from dse.calibrate.fit.kernels import (
    FIT_DATASETS,
    MIN_LATENCY_S,
    DatasetSpec,
    evaluate_at_default_point,
    kernel_datasets,
    load_samples,
    train_test,
)
from dse.hardware.catalog import load_gpu
from dse.perf.coeffs import CoeffSet, load_default_coeffs

_FITTED = {(f, s, g, label) for sets in FIT_DATASETS.values() for f, s, g, label in sets}


def _mape(pred: np.ndarray, meas: np.ndarray) -> float:
    return float(np.mean(np.abs(pred / meas - 1.0))) if meas.size else float("nan")


def validate_dataset(
    spec: DatasetSpec, coeffs: CoeffSet | None = None, *, min_latency_s: float = MIN_LATENCY_S
) -> dict[str, object]:
    """One validation row (see the module docstring)."""
    samples = load_samples(spec)
    fitted = (spec.family, spec.source, spec.gpu_key, spec.label) in _FITTED
    test = train_test(samples)[1] if fitted else samples
    keep = test.latency_s >= min_latency_s
    test = test.subset(test.frame[keep])
    gpu = load_gpu(test.gpu)
    cs = coeffs if coeffs is not None else load_default_coeffs(gpu)
    meas = test.latency_s
    fitted_out = evaluate_at_default_point(test, gpu, cs)
    analytical_out = evaluate_at_default_point(test, gpu, None)
    return {
        "family": spec.family,
        "gpu": test.gpu,
        "dtype": spec.label,
        "source": spec.source,
        "split": "holdout 20% seed 0" if fitted else "all rows (not fitted)",
        "coeffs": cs.name,
        "n_test": int(meas.size),
        "mape_fitted": _mape(fitted_out["latency_s"], meas),
        "mape_analytical": _mape(analytical_out["analytical_s"], meas),
    }


def validate_kernels(
    coeffs: dict[str, CoeffSet] | None = None,
    *,
    datasets: Iterable[DatasetSpec] | None = None,
    min_latency_s: float = MIN_LATENCY_S,
) -> list[dict[str, object]]:
    """Rows {family, gpu, dtype, source, split, coeffs, n_test, mape_fitted, mape_analytical}.

    Args:
        coeffs: coefficient set per architecture (`hopper`, `ampere`); default: the shipped sets.
        datasets: which datasets (default: all of `kernel_datasets()`).
        min_latency_s: only kernels at least this long are scored.
    """
    rows = []
    for spec in datasets if datasets is not None else kernel_datasets():
        cs = None
        if coeffs is not None:
            arch = load_gpu(load_samples(spec).gpu).architecture
            cs = coeffs.get(arch)
        rows.append(validate_dataset(spec, cs, min_latency_s=min_latency_s))
    if datasets is None:
        rows += validate_moe((coeffs or {}).get("hopper"), min_latency_s=min_latency_s)
    return rows


def validate_moe_layers(
    gpu_key: str,
    label: str,
    *,
    expert_parallel: bool = False,
    coeffs: CoeffSet | None = None,
    min_latency_s: float = MIN_LATENCY_S,
) -> dict[str, object]:
    """One `moe` validation row (module docstring). `mape_no_moe` scores the shipped dense corrections
    without the MoE set (the model before it), `mape_analytical` the uncorrected model."""
    from dse.calibrate.fit import moe as fit_moe  # scipy: only when the MoE family is asked for

    layers = fit_moe.load_moe_layers(
        gpu_key, label, expert_parallel=expert_parallel, min_latency_s=min_latency_s
    )
    fitted = gpu_key == fit_moe.FIT_GPU and not expert_parallel and fit_moe.MOE_LABELS[label][2]
    if fitted:
        layers = fit_moe.train_test(layers)[1]
    gpu = load_gpu(layers.gpu)
    cs = coeffs if coeffs is not None else load_default_coeffs(gpu)
    meas = layers.latency_s
    pred = {
        name: fit_moe.predict_layers(layers, c, gpu)["latency_s"]
        for name, c in (("fitted", cs), ("no_moe", replace(cs, moe=None)), ("analytical", None))
    }
    return {
        "family": "moe" + ("_ep" if expert_parallel else ""),
        "gpu": layers.gpu,
        "dtype": label,
        "source": "aiconfigurator",
        "split": "holdout 20% seed 0" if fitted else "all rows (not fitted)",
        "coeffs": cs.name,
        "n_test": int(meas.size),
        "mape_fitted": _mape(pred["fitted"], meas),
        "mape_analytical": _mape(pred["analytical"], meas),
        "mape_no_moe": _mape(pred["no_moe"], meas),
    }


def validate_moe(
    coeffs: CoeffSet | None = None, *, min_latency_s: float = MIN_LATENCY_S
) -> list[dict[str, object]]:
    """`moe` rows for H100 and H200, every dtype of `MOE_LABELS`, without and with expert parallelism."""
    from dse.calibrate.fit.moe import MOE_LABELS

    return [
        validate_moe_layers(g, label, expert_parallel=ep, coeffs=coeffs, min_latency_s=min_latency_s)
        for ep in (False, True)
        for g in ("h100_sxm", "h200_sxm")
        for label in MOE_LABELS
    ]


def format_rows(rows: list[dict[str, Any]]) -> str:
    """A plain-text table of validation rows (for the CLI and scripts)."""
    head = f"{'family':<18} {'gpu':<14} {'dtype':<11} {'n':>6} {'fitted':>8} {'analytical':>10}  split"
    lines = [head, "-" * len(head)]
    for r in rows:
        lines.append(
            f"{r['family']:<18} {r['gpu']:<14} {r['dtype']:<11} {r['n_test']:>6} "
            f"{100 * r['mape_fitted']:>7.1f}% {100 * r['mape_analytical']:>9.1f}%  {r['split']}"
        )
    return "\n".join(lines)
