"""Transfer validation: fit on some GPUs or generations, predict the others (DESIGN.md section 12).

    rows = validate_transfer()   # [{fit_on, predicted, metric, mape_pct, n, in_sample_pct}, ...]

Each row predicts data that no coefficient of the set used was fitted on, beside the in-sample figure of
the same data (the set fitted on that data itself, its held-out split where it has one):

- Ampere -> Hopper (power): the Ampere energies (EnergAIzer A100 whole models) moved to Hopper by
  `scale_generation`, predicting the H200 GEMM and decode-attention kernel tables (held-out rows).
  In-sample: the Hopper set, fitted on those tables' training rows.
- Hopper -> Ampere (power, latency): the Hopper energies moved to Ampere, and the Hopper latency
  coefficients, predicting the A100 whole models (held-out workloads, eager host queue).
- A100 -> A10 (power, latency): the Ampere sets and A100 host costs, unchanged (same generation).
- kernels -> whole models (latency): latency coefficients fitted on kernel tables only, with the host
  queue, predicting the A100 whole models (held-out workloads); in-sample: the host fit's own rows.
- Ampere -> Hopper, Hopper -> Ampere (kernel latency): one architecture's latency coefficients
  predicting the other's kernel tables (`dse.calibrate.validate.kernels`).
- H100 kernel fit -> H100 serving (power): the Hopper set (kernel tables only) predicting ML.ENERGY
  H100 serving power (`dse.calibrate.validate.serving`); there is no in-sample figure (no serving run
  enters any fit).

Generation scaling. The on-die energies (L2, shared memory, Tensor Cores, CUDA cores, SFU, clock tree
and gap terms) are switched capacitance times V^2; V^2 is already in the model (each GPU's V(f) table),
so moving a set between generations multiplies them by the ratio of switched capacitance per unit of
work of the two process nodes (`NODE_CAPACITANCE`). DRAM energy is the memory technology's e_bit, a
catalog value per GPU, so `dram_scale` (the PHY and controller share) moves unchanged.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from dse.calibrate.fit.power import mape
from dse.calibrate.fit.power_sets import (
    H200_GPU,
    a100_split,
    energaizer_frame,
    h200_split,
    h200_table,
)
from dse.calibrate.validate.power import energaizer_predictions, h200_predictions
from dse.hardware.catalog import load_gpu
from dse.perf.coeffs import PowerCoeffs, load_default_coeffs, load_power_coeffs
from dse.perf.dvfs import row_estimator

# Switched capacitance per unit of work relative to TSMC N7 (E). TSMC quotes N5 at ~30% less power than
# N7 at the same speed and voltage class, and 4N (an N5-family node) a few percent below N5: 0.7.
# Samsung 8N (A10) is taken equal to N7, as the shipped A10 forecast does (no A10 data enters any fit).
NODE_CAPACITANCE: dict[str, float] = {"ampere": 1.0, "hopper": 0.7}
_ON_DIE = (
    "l2_j_per_byte",
    "smem_j_per_byte",
    "tensor_j_per_flop",
    "cuda_j_per_flop",
    "sfu_j_per_op",
    "active_j_per_sm_cycle",
    "gap_j_per_sm_cycle",
)
KERNEL_FAMILIES: tuple[str, ...] = ("gemm", "attention_generation")


def scale_generation(pc: PowerCoeffs, to_arch: str) -> PowerCoeffs:
    """`pc` moved to architecture `to_arch` by the node capacitance ratio (module docstring)."""
    ratio = NODE_CAPACITANCE[to_arch] / NODE_CAPACITANCE[pc.architecture]
    scaled = {n: getattr(pc, n) * ratio for n in _ON_DIE}
    prov = {**pc.provenance, "scaled": f"{pc.architecture} -> {to_arch}, on-die energies x {ratio:.3g}"}
    return dataclasses.replace(pc, architecture=to_arch, provenance=prov, **scaled)


def _row(fit_on: str, predicted: str, metric: str, err: float, n: int, in_sample: float | None) -> dict:
    return {
        "fit_on": fit_on,
        "predicted": predicted,
        "metric": metric,
        "mape_pct": 100 * err,
        "n": int(n),
        "in_sample_pct": None if in_sample is None else 100 * in_sample,
    }


def _h200_power(pc: PowerCoeffs, tables: dict[str, Any]) -> tuple[float, int]:
    errs, n = [], 0
    for family in KERNEL_FAMILIES:
        _, test = h200_split(family)
        pred = h200_predictions(test, pc, tables[family])
        errs.append(np.abs(pred["pred_power_w"] / pred["power_w"] - 1.0))
        n += len(test)
    return float(np.mean(np.concatenate(errs))), n


def power_rows() -> list[dict]:
    """The EnergAIzer and H200 rows of the module docstring."""
    ampere, hopper = load_power_coeffs("ampere"), load_power_coeffs("hopper")
    gpu = load_gpu(H200_GPU)
    tables = {
        f: h200_table(h200_split(f)[1], gpu, load_default_coeffs(gpu), row_estimator(None))
        for f in KERNEL_FAMILIES
    }
    out = []
    err, n = _h200_power(scale_generation(ampere, "hopper"), tables)
    own, _ = _h200_power(hopper, tables)
    out.append(_row("A100 whole models (Ampere)", "H200 kernels", "kernel power", err, n, own))
    _, test = a100_split()
    memo: dict = {}
    own_pred = energaizer_predictions(test, ampere, cache_=memo)
    hop = energaizer_predictions(
        test, scale_generation(hopper, "ampere"), coeffs=load_default_coeffs("hopper")
    )
    for metric, col, meas in (
        ("power", "pred_power_w", "power_w"),
        ("latency", "pred_latency_s", "latency_s"),
    ):
        out.append(
            _row(
                "H200/H100 kernels (Hopper)",
                "A100 whole models",
                f"whole-model {metric}",
                mape(hop[col].to_numpy(), hop[meas].to_numpy()),
                len(test),
                mape(own_pred[col].to_numpy(), own_pred[meas].to_numpy()),
            )
        )
    a10 = energaizer_predictions(energaizer_frame("a10"), ampere, cache_=memo)
    for metric, col, meas in (
        ("power", "pred_power_w", "power_w"),
        ("latency", "pred_latency_s", "latency_s"),
    ):
        out.append(
            _row(
                "A100 whole models (Ampere)",
                "A10 whole models",
                f"whole-model {metric}",
                mape(a10[col].to_numpy(), a10[meas].to_numpy()),
                len(a10),
                mape(own_pred[col].to_numpy(), own_pred[meas].to_numpy()),
            )
        )
    out.append(
        _row(
            "A100 kernel tables + host fit",
            "A100 whole models (held out)",
            "whole-model latency",
            mape(own_pred["pred_latency_s"].to_numpy(), own_pred["latency_s"].to_numpy()),
            len(test),
            float(ampere.provenance.get("host_fit_mape", float("nan"))),
        )
    )
    return out


def kernel_latency_rows() -> list[dict]:
    """Kernel latency with the other architecture's latency coefficients (aiconfigurator tables)."""
    from dse.calibrate.validate.kernels import validate_kernels

    own = validate_kernels()
    ampere, hopper = load_default_coeffs("ampere"), load_default_coeffs("hopper")
    cross = validate_kernels({"ampere": hopper, "hopper": ampere})
    out = []
    for arch, fit_on in (("hopper", "A100 kernels (Ampere)"), ("ampere", "H100 kernels (Hopper)")):
        mine = [
            (o, c)
            for o, c in zip(own, cross, strict=True)
            if load_gpu(str(o["gpu"])).architecture == arch and o["source"] == "aiconfigurator"
        ]
        mine = [(o, c) for o, c in mine if "holdout" in str(o["split"])]
        sizes = np.array([o["n_test"] for o, _ in mine], dtype=float)
        n = int(sizes.sum())
        err = float(np.dot(np.array([c["mape_fitted"] for _, c in mine], dtype=float), sizes)) / n
        in_s = float(np.dot(np.array([o["mape_fitted"] for o, _ in mine], dtype=float), sizes)) / n
        gpus = "H100" if arch == "hopper" else "A100"
        out.append(_row(fit_on, f"{gpus} kernels", "kernel latency", err, n, in_s))
    return out


def serving_rows() -> list[dict]:
    """The Hopper set (kernel tables only) on ML.ENERGY H100 serving power."""
    from dse.calibrate.validate.serving import validate_serving

    rows = validate_serving(("mlenergy",))
    out = []
    for r in rows:
        if r["metric"] == "avg_power" and r["group"] == "all":
            out.append(
                _row(
                    "H200 kernels (Hopper)",
                    f"H100 serving (ML.ENERGY, {r['subset']})",
                    "serving power",
                    float(r["mape"]),  # type: ignore[arg-type]
                    int(r["n"]),  # type: ignore[call-overload]
                    None,
                )
            )
    return out


def validate_transfer(*, serving: bool = True, kernels: bool = True) -> list[dict]:
    """All transfer rows (module docstring); `serving` and `kernels` add the slower groups."""
    out = power_rows()
    if kernels:
        out += kernel_latency_rows()
    if serving:
        out += serving_rows()
    return out
