"""Serving runs as rows of the joint power fit: ML.ENERGY H100 runs through the load model.

    rows = serving_power_rows(requests)      # PowerRows on the shared (N7) energies

A run's energy over its measurement window is linear in the energies `e_m` at fixed clocks (every step's
energy is idle power x time plus work x e_m, `dse.perf.power`), so its average power is

    P = P_idle,run + sum_k W_k c_k

with W_k the power one unit of energy k adds. The load model (`dse.serving.load.predict_load`) gives P at
any coefficient set; W_k is read off by doubling one energy at a time (a finite difference) and the rest,
P - sum_k W_k c_k, is the run's idle part. Columns are then moved to the shared N7 energies by the
generation's node scale (`power_joint.generation_scale`). Linear only while the clocks stay put: at a
doubled energy the power cap (each step's mean, `dse.serving.step_table`; each kernel's own when the shipped
energies were fitted) binds on more steps of the larger runs (fewer tokens per second), so a slope can
differ from the +1% one by up to ~25% on a 256-sequence row. What the fit needs holds: rows linearized at
the previous set predicted the load model at the refitted set within 0.1-2 W (<= 0.4%).

Each row costs one load simulation per energy (9 per row): about 10 s for the 30 ML.ENERGY rows' smaller
runs and up to a minute for the 512-sequence ones; fit scripts compute them once.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from dse.calibrate.fit.power import PowerRows
from dse.calibrate.fit.power_joint import NAMES, generation_scale
from dse.calibrate.validate.common import load_metrics
from dse.perf.coeffs import PowerCoeffs
from dse.serving.load import LoadRequest

# Perturbation of a zero-valued energy (the gap term): J per SM cycle, small against the active term.
_ZERO_STEP = 1e-10


@dataclass(frozen=True, slots=True, kw_only=True)
class ServingRun:
    """One measured serving run: catalog model and GPU, the load request, and its measured power."""

    model: str
    gpu: str
    load: LoadRequest
    power_w: float


def serving_power_rows(runs: Sequence[ServingRun], base: PowerCoeffs, arch: str = "hopper") -> PowerRows:
    """PowerRows of `runs` on the shared (N7) energies of the joint fit (module docstring), linearized at
    `base` (the generation's set, `arch`)."""
    x = np.zeros((len(runs), len(NAMES)))
    idle = np.zeros(len(runs))
    for i, run in enumerate(runs):
        p0 = _power(run, base)
        for k, name in enumerate(NAMES):
            value = float(getattr(base, name))
            step = value if value > 0 else _ZERO_STEP
            raised = PowerCoeffs.from_dict({**base.to_dict(), name: value + step})
            x[i, k] = (_power(run, raised) - p0) / step
        idle[i] = p0 - x[i] @ base.vector()
    return PowerRows(
        features_j=x * generation_scale(arch),  # wall_s = 1: features are W per unit energy
        wall_s=np.ones(len(runs)),
        idle_w=idle,
        power_w=np.array([r.power_w for r in runs], dtype=float),
    )


def _power(run: ServingRun, coeffs: PowerCoeffs) -> float:
    value = load_metrics(run.model, run.gpu, run.load, power_coeffs=coeffs)["avg_power_w"]
    return float(value)


__all__ = ["ServingRun", "serving_power_rows"]
