"""Transfer validation: fit on some GPUs or generations, predict the others (DESIGN.md section 12).

    rows = validate_transfer()   # [{fit_on, predicted, metric, mape_pct, n, in_sample_pct}, ...]

Each row predicts data that no coefficient of the set used was fitted on, beside the in-sample figure of
the same data (the set fitted on that data itself, its held-out split where it has one). Two families of
power sets are scored:

- joint (shipped, `dse.calibrate.fit.power_joint`): one set of shared N7 energies fitted on the A100
  whole models, the H200 kernel tables and the ML.ENERGY H100 serving runs together, scaled per
  generation. Its transfer rows refit the
  same method on one generation only (`power_hopper-loo`: A100 only; `power_ampere-loo`: H200 only) and
  predict the other; in-sample is the shipped joint set.
- v1 (`power_{ampere,hopper}-v1`, the previous independent fits, kept for comparison): each
  generation's set moved to the other by `scale_generation`.

Rows per family: A100 -> H200 kernels (power, held-out rows of GEMM and decode attention); H200 -> A100
whole models (power, and latency with the Hopper latency coefficients; held-out workloads, eager host
queue); the Ampere set -> A10 (no A10 data enters any fit). Also: kernel tables + host fit -> whole
models (latency); each architecture's latency coefficients on the other's kernel tables
(`dse.calibrate.validate.kernels`); the shipped Hopper set, whose fit includes the 30 ML.ENERGY H100 Qwen3
runs, on the ML.ENERGY rows no fit used (other models on H100, and B200) beside its in-sample figure. And
our H100 whole models (`dse/calibrate/measured`) from the joint fit without them (kernels -> whole models on
H100) and from the A100-only fit (Ampere -> Hopper).

Generation scaling (`dse.calibrate.fit.power_joint`): on-die energies are switched capacitance times V^2;
V^2 is in the model (each GPU's V(f) table), so between generations they scale by the node's switched
capacitance per unit of work (`NODE_CAPACITANCE`); DRAM energy is each memory technology's catalog e_bit,
so `dram_scale` (the PHY and controller share) is shared unchanged.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from dse.calibrate.fit.power import mape
from dse.calibrate.fit.power_joint import NODE_CAPACITANCE
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
    """The EnergAIzer and H200 rows of the module docstring: the joint sets, then the v1 sets."""
    gpu = load_gpu(H200_GPU)
    tables = {
        f: h200_table(h200_split(f)[1], gpu, load_default_coeffs(gpu), row_estimator(None))
        for f in KERNEL_FAMILIES
    }
    _, test = a100_split()
    memo: dict = {}
    out = []
    for tag in ("joint", "v1"):
        out += _power_rows_of(tag, tables, test, memo)
    return out


def _sets(tag: str) -> tuple[PowerCoeffs, PowerCoeffs, PowerCoeffs, PowerCoeffs, str]:
    """(ampere, hopper, A100-only hopper, H200-only ampere, label) of the joint or the v1 sets."""
    if tag == "joint":
        amp, hop = load_power_coeffs("ampere"), load_power_coeffs("hopper")
        return amp, hop, load_power_coeffs("hopper-loo"), load_power_coeffs("ampere-loo"), "joint"
    amp, hop = load_power_coeffs("ampere-v1"), load_power_coeffs("hopper-v1")
    return amp, hop, scale_generation(amp, "hopper"), scale_generation(hop, "ampere"), "v1"


def _power_rows_of(tag: str, tables: dict[str, Any], test: Any, memo: dict) -> list[dict]:
    ampere, hopper, from_a100, from_h200, label = _sets(tag)
    out = []
    err, n = _h200_power(from_a100, tables)
    own, _ = _h200_power(hopper, tables)
    only = " only" if tag == "joint" else ""
    out.append(_row(f"A100 whole models{only} ({label})", "H200 kernels", "kernel power", err, n, own))
    own_pred = energaizer_predictions(test, ampere, cache_=memo)
    hop = energaizer_predictions(test, from_h200, coeffs=load_default_coeffs("hopper"))
    a10 = energaizer_predictions(energaizer_frame("a10"), ampere, cache_=memo)
    both = "A100 + H200" if tag == "joint" else "A100"
    for fit_on, predicted, pred, size in (
        (f"H200/H100 kernels{only} ({label})", "A100 whole models", hop, len(test)),
        (f"{both} ({label}, Ampere set)", "A10 whole models", a10, len(a10)),
    ):
        for metric, col, meas in (
            ("power", "pred_power_w", "power_w"),
            ("latency", "pred_latency_s", "latency_s"),
        ):
            err = mape(pred[col].to_numpy(), pred[meas].to_numpy())
            in_s = mape(own_pred[col].to_numpy(), own_pred[meas].to_numpy())
            out.append(_row(fit_on, predicted, f"whole-model {metric}", err, size, in_s))
    if tag == "joint":
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


def own_h100_rows() -> list[dict]:
    """Our H100 whole models (`dse.calibrate.validate.own_h100`) from sets that never saw them: the joint
    fit without them (A100 + H200 + ML.ENERGY + our H100 kernels: kernels -> whole models on one GPU), and
    the A100-only fit scaled to Hopper by the prior ratio (Ampere -> Hopper); in-sample: the shipped set."""
    from dse.calibrate.validate.own_h100 import own_h100_model_predictions

    own = own_h100_model_predictions(load_power_coeffs("hopper"))
    out = []
    for fit_on, name in (
        ("A100 + H200 + ML.ENERGY + our H100 kernels (joint)", "hopper-kernels"),
        ("A100 whole models only (joint)", "hopper-loo"),
    ):
        pred = own_h100_model_predictions(load_power_coeffs(name))
        for metric, col, meas in (
            ("power", "pred_power_w", "avg_power_w"),
            ("energy", "pred_energy_j", "energy_j"),
        ):
            err = mape(pred[col].to_numpy(), pred[meas].to_numpy())
            in_s = mape(own[col].to_numpy(), own[meas].to_numpy())
            out.append(_row(fit_on, "our H100 whole models", f"whole-model {metric}", err, len(pred), in_s))
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
    """The shipped Hopper set (joint fit, with the 30 ML.ENERGY H100 Qwen3 runs) on the ML.ENERGY rows no
    fit used (`dse.calibrate.validate.mlenergy_transfer`): other models on H100, the GPU-bound B200 rows;
    in-sample: the 30 runs (the load model, as the transfer rows)."""
    from dse.calibrate.validate.serving import validate_serving

    rows = validate_serving(("mlenergy", "mlenergy_transfer"))

    def pick(source: str, subset: str, group: str) -> dict[str, Any]:
        key = (source, "avg_power_load", subset, group)
        (r,) = [r for r in rows if (r["source"], r["metric"], r["subset"], r["group"]) == key]
        return r

    fit_on = "A100 + H200 + ML.ENERGY H100 Qwen3 (joint, Hopper set)"
    in_sample = float(pick("mlenergy", "all", "all")["mape"])
    out = []
    for subset, group, predicted in (
        ("all", "gpu=h100-sxm", "H100 serving, other models (ML.ENERGY)"),
        ("gpu_bound", "gpu=b200", "B200 serving (ML.ENERGY, GPU-bound rows)"),
    ):
        r = pick("mlenergy_transfer", subset, group)
        out.append(_row(fit_on, predicted, "serving power", float(r["mape"]), int(r["n"]), in_sample))
    return out


def validate_transfer(*, serving: bool = True, kernels: bool = True) -> list[dict]:
    """All transfer rows (module docstring); `serving` and `kernels` add the slower groups."""
    out = power_rows() + own_h100_rows()
    if kernels:
        out += kernel_latency_rows()
    if serving:
        out += serving_rows()
    return out
