"""Collective-communication MAPE on the aiconfigurator tables (`dse validate collectives`).

Two fits are scored (`dse.calibrate.fit.collectives`):
- `in-sample`: each system (H100, H200, B200 SXM) fitted on its own tables, scored on the same rows;
- `h100-fit`: fitted on H100 only (as the shipped hopper set is) and scored on H200 and B200, which
  differ in link bandwidth (B200: 900 vs 450 GB/s per direction) through their `GpuSpec.interconnect`.
One row per (fit, table, GPU, algorithm, collective, GPU count) and one with `num_gpus` "all".
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from dse.calibrate.fit.collectives import SYSTEM_GPUS, fit_gpu_collectives, load_comm_samples
from dse.hardware.catalog import load_gpu
from dse.perf.coeffs import CollectiveCoeffs
from dse.perf.collectives import time_with_coeffs

TRANSFER_FROM = "h100_sxm"
TRANSFER_LABEL = "h100-fit"


def _coeffs(samples: pd.DataFrame, system: str) -> CollectiveCoeffs:
    results = fit_gpu_collectives(samples[samples["gpu"] == system], load_gpu(SYSTEM_GPUS[system]))
    return CollectiveCoeffs(architecture=system, fits={k: r.fit for k, r in results.items()})


def _ape(rows: pd.DataFrame, coeffs: CollectiveCoeffs, system: str) -> np.ndarray:
    link = load_gpu(SYSTEM_GPUS[system]).interconnect
    assert link is not None  # every catalog GPU with a table has one (tests/hardware)
    algorithm, collective = str(rows["algorithm"].iloc[0]), str(rows["collective"].iloc[0])
    size, n = rows["message_bytes"].to_numpy(float), rows["num_gpus"].to_numpy(float)
    predicted = time_with_coeffs(coeffs, algorithm, collective, size, n, link)
    return np.abs(predicted / rows["latency_s"].to_numpy(float) - 1.0)


def _score(samples: pd.DataFrame, coeffs: CollectiveCoeffs, system: str, fit: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    keys = ["table", "algorithm", "collective"]
    for (table, algorithm, collective), rows in samples[samples["gpu"] == system].groupby(keys, sort=True):
        ape = _ape(rows, coeffs, system)
        counts = rows["num_gpus"].to_numpy()
        base = {"fit": fit, "table": table, "gpu": system, "algorithm": algorithm, "collective": collective}
        for n in [*sorted(set(counts.tolist())), "all"]:
            sel = ape if n == "all" else ape[counts == n]
            row = {**base, "num_gpus": n, "n": len(sel)}
            row |= {
                "mape_pct": round(100 * float(sel.mean()), 2),
                "max_ape_pct": round(100 * float(sel.max()), 1),
            }
            out.append(row)
    return out


def validate_collectives(samples: pd.DataFrame | None = None) -> list[dict[str, Any]]:
    """MAPE rows (see the module docstring); needs the shared data (ConfigError without it)."""
    samples = load_comm_samples() if samples is None else samples
    systems = [s for s in SYSTEM_GPUS if (samples["gpu"] == s).any()]
    fitted = {s: _coeffs(samples, s) for s in systems}
    rows: list[dict[str, Any]] = []
    for system in systems:
        rows += _score(samples, fitted[system], system, "in-sample")
    if TRANSFER_FROM in fitted:
        for system in systems:
            if system != TRANSFER_FROM:
                rows += _score(samples, fitted[TRANSFER_FROM], system, TRANSFER_LABEL)
    return rows
