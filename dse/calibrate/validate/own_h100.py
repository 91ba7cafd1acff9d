"""Our H100 measurements (`dse/calibrate/measured`) against the model, as a user would run it.

    frame = own_h100_model_predictions()      # one row per whole-model run: measured and predicted
    rows = own_h100_rows()                     # PowerValidationRow per group (kernels, whole models)

Whole models: each run's kernel list (the EnergAIzer artifact's JSON of the same model and shape, re-typed
for fp32 runs) predicted as `dse predict --kernels LIST --gpu h100-sxm --precision P` does: eager launches,
the GPU's default boost clock under its 700 W cap (the runs were not clock-locked). Wall time, GPU busy time
(the profiler's summed kernel time against the model's kernel time), average power and energy per pass.
Host-bound runs (GPU busy under half the wall time) are their own group: their wall time is the host's, and
it varied by up to 70% between the two machines of the same kind (README of the data).

Kernels: the 32 samples at their recorded clock (the GEMMs under the cap ran at 1270-1470 MHz), as
`dse validate samples` predicts them.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from dse.calibrate.fit.power import mape
from dse.calibrate.fit.power_sets import DEFAULT, latency_coeffs
from dse.calibrate.validate.power import PowerValidationRow
from dse.perf.coeffs import PowerCoeffs

HOST_BOUND_BUSY_SHARE = 0.5  # a run whose kernels fill less than this share of its wall time


def own_h100_model_predictions(power: PowerCoeffs | None = None, latency: Any = DEFAULT) -> pd.DataFrame:
    """Measured and predicted wall time, busy time, power and energy of every run with a kernel list, with
    the `power` energies (default: the shipped Hopper set) and `latency` corrections (default: shipped; None:
    the uncorrected kernel model)."""
    from dse.calibrate.measured import H100_GPU, load_own_h100_whole_models
    from dse.hardware.catalog import load_gpu
    from dse.perf.predict import predict_graphs
    from dse.perf.types import OperatingPoint
    from dse.workload.energaizer import as_precision, load_kernel_list

    gpu = load_gpu(H100_GPU)
    df = load_own_h100_whole_models()
    df = df[df["workload_path"].notna() & (df["attention"] != "sdpa")].reset_index(drop=True)
    graphs = [
        as_precision(load_kernel_list(path), precision)
        for path, precision in zip(df["workload_path"], df["precision"], strict=True)
    ]
    coeffs = latency_coeffs(latency, gpu)
    preds = predict_graphs(graphs, gpu, OperatingPoint(), coeffs, power, launch="eager")
    out = df.assign(
        pred_latency_s=[p.latency_s for p in preds],
        pred_busy_s=[p.busy_s for p in preds],
        pred_power_w=[p.avg_power_w for p in preds],
    )
    out["pred_energy_j"] = out["pred_power_w"] * out["pred_latency_s"]
    out["host_bound"] = out["gpu_busy_s"] < HOST_BOUND_BUSY_SHARE * out["latency_s"]
    return out


def _row(dataset: str, group: str, frame: pd.DataFrame, coeffs: str, busy: bool) -> PowerValidationRow:
    def err(pred: str, meas: str) -> float:
        return mape(frame[pred].to_numpy(), frame[meas].to_numpy()) if len(frame) else float("nan")

    return PowerValidationRow(
        dataset=dataset,
        split="own data" if not busy else "own data (latency: GPU busy)",
        group=group,
        num_samples=len(frame),
        power_mape=err("pred_power_w", "avg_power_w"),
        latency_mape=err("pred_busy_s", "gpu_busy_s") if busy else err("pred_latency_s", "latency_s"),
        energy_mape=err("pred_energy_j", "energy_j"),
        coeffs=coeffs,
    )


def own_h100_kernel_predictions(power: PowerCoeffs | None = None, latency: Any = DEFAULT) -> pd.DataFrame:
    """The kernel samples with the model's latency and power at each one's recorded clock."""
    from dse.calibrate.fit.sample_set import load_sample_set
    from dse.calibrate.fit.samples import predict
    from dse.calibrate.measured import H100_GPU, own_h100_kernels_path
    from dse.hardware.catalog import load_gpu
    from dse.perf.coeffs import default_power_coeffs

    gpu = load_gpu(H100_GPU)
    ss = load_sample_set([own_h100_kernels_path()], gpu)
    lat, pw, energy = predict(ss, latency_coeffs(latency, gpu), power or default_power_coeffs(gpu))
    frame = pd.read_csv(own_h100_kernels_path())
    return frame.assign(pred_latency_s=lat, pred_power_w=pw, pred_energy_j=energy)


def own_h100_rows(power: PowerCoeffs | None = None, latency: Any = DEFAULT) -> list[PowerValidationRow]:
    """Rows per group: whole models (all, GPU-bound, host-bound, bf16, fp32) and kernels (bf16 GEMMs under
    the cap, fp8 GEMMs, the rest)."""
    tag = str((power.provenance.get("name") if power is not None else None) or "hopper")
    models = own_h100_model_predictions(power, latency)
    gpu_bound = models[~models["host_bound"]]
    out = [
        _row("h100_own_models", "all", models, tag, busy=False),
        _row("h100_own_models", "GPU-bound", gpu_bound, tag, busy=False),
        _row("h100_own_models", "host-bound", models[models["host_bound"]], tag, busy=False),
        _row("h100_own_models", "all", models, tag, busy=True),
    ]
    for precision, part in models.groupby("precision"):
        out.append(_row("h100_own_models", f"{precision}, GPU-bound", part[~part["host_bound"]], tag, False))
    kernels = own_h100_kernel_predictions(power, latency)
    groups: dict[str, Any] = {
        "bf16 GEMMs, M >= 1024 (at the cap)": kernels["name"].str.match(r"gemm_bf16_(1024|4096|16384)x"),
        "bf16 GEMMs, M = 16": kernels["name"].str.startswith("gemm_bf16_16x"),
        "fp8 GEMMs (at the cap)": kernels["name"].str.startswith("gemm_fp8_"),
        "memory-bound and attention": ~kernels["name"].str.startswith("gemm_"),
    }
    out.append(_row("h100_own_kernels", "all", kernels, tag, busy=False))
    for group, mask in groups.items():
        out.append(_row("h100_own_kernels", group, kernels[mask], tag, busy=False))
    return out
