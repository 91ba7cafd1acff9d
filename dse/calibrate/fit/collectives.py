"""Fit the collective model (`dse.perf.collectives`) on the aiconfigurator communication tables.

One fit per (GPU, algorithm, collective) over every message size and GPU count of its table: a launch
cost, a per-step latency fraction, one bandwidth fraction per GPU count, and the ramp (size and
exponent), i.e. 4 + (number of GPU counts) parameters for 40-130 rows. The loss is a robust (soft-L1)
least squares on log(predicted / measured), so the relative error is what is minimised and the few
repeated-run outliers of the tables (README 5: up to x4 on small messages) do not pull the fit.
The shipped sets (`dse/perf/data/collectives_<arch>.json`) come from `scripts/fit_collective_coeffs.py`.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd
from scipy.optimize import least_squares

import dse
from dse.calibrate.data.aiconfigurator_comm import (
    load_comm_custom_all_reduce,
    load_comm_moe,
    load_comm_nccl,
)
from dse.calibrate.data.common import data_root
from dse.errors import ConfigError
from dse.hardware.spec import GpuSpec, InterconnectSpec
from dse.perf.coeffs import CollectiveCoeffs, CollectiveFit
from dse.perf.collectives import moe_exchange_bytes, time_from_fit, time_with_coeffs

# Catalog GPU of each aiconfigurator system, and the architecture its shipped set is filed under.
SYSTEM_GPUS: dict[str, str] = {"h100_sxm": "h100-sxm", "h200_sxm": "h200-sxm", "b200_sxm": "b200"}
# NOTE(collectives): the MoE payload dtype is not recorded (README 5); bf16 is assumed and the fitted
# bandwidth fraction absorbs the difference (an FP8 dispatch shows up as bw_eff about 2x higher).
MOE_BYTES_PER_ELEM = 2.0
_FILES = (
    "comm_nccl_h100_h200_b200.csv",
    "comm_custom_all_reduce_h100_h200_b200.csv",
    "comm_moe_alltoall_deepep_h100_h200_b200.csv",
)


def load_comm_samples() -> pd.DataFrame:
    """All three tables in one frame (`aiconfigurator_comm` columns), MoE rows with `message_bytes`."""
    moe = load_comm_moe()
    moe["message_bytes"] = [
        float(
            moe_exchange_bytes(
                r.num_tokens,
                hidden_size=r.hidden_size,
                topk=r.topk,
                num_experts=r.num_experts,
                ep_size=r.num_gpus,
                bytes_per_elem=MOE_BYTES_PER_ELEM,
            )
        )
        for r in moe.itertuples()
    ]
    frames = [load_comm_nccl(), load_comm_custom_all_reduce(), moe]
    return pd.concat(frames, ignore_index=True)


@dataclass(frozen=True, slots=True)
class CollectiveFitResult:
    """A fit and its in-sample error: mean absolute percentage error as a fraction, and rows used."""

    fit: CollectiveFit
    mape: float
    num_samples: int
    status: str


def _unpack(
    p: np.ndarray, counts: tuple[int, ...], num_samples: int = 0, mape: float | None = None
) -> CollectiveFit:
    return CollectiveFit(
        launch_s=float(p[0]) * 1e-6,
        latency_frac=float(p[1]),
        ramp_bytes=float(np.exp(p[2])),
        ramp_exp=float(p[3]),
        bw_eff=tuple(float(v) for v in p[4:]),
        bw_eff_num_gpus=counts,
        num_samples=num_samples,
        mape_train=mape,
    )


def fit_collective(samples: pd.DataFrame, link: InterconnectSpec, collective: str) -> CollectiveFitResult:
    """Fit one (algorithm, collective) on `samples` (message_bytes, num_gpus, latency_s) over `link`."""
    if samples.empty:
        raise ConfigError(f"no samples to fit {collective}")
    size = samples["message_bytes"].to_numpy(float)
    n = samples["num_gpus"].to_numpy(float)
    measured = samples["latency_s"].to_numpy(float)
    counts = tuple(int(c) for c in sorted(samples["num_gpus"].unique()))
    # p = launch (us), latency fraction, log ramp bytes, ramp exponent, bandwidth fraction per GPU count
    p0 = np.array([3.0, 0.1, np.log(1e6), 0.5, *([0.7] * len(counts))])
    lower = np.array([0.0, 0.0, 0.0, 0.01, *([0.02] * len(counts))])
    upper = np.array([1e3, 10.0, np.log(1e12), 1.0, *([4.0] * len(counts))])

    def residual(p: np.ndarray) -> np.ndarray:
        return np.log(time_from_fit(_unpack(p, counts), collective, size, n, link) / measured)

    sol = least_squares(residual, p0, bounds=(lower, upper), loss="soft_l1", f_scale=0.03, x_scale="jac")
    predicted = time_from_fit(_unpack(sol.x, counts), collective, size, n, link)
    mape = float(np.mean(np.abs(predicted / measured - 1.0)))
    status = "ok" if sol.success else f"not converged: {sol.message}"
    return CollectiveFitResult(_unpack(sol.x, counts, len(size), round(mape, 5)), mape, len(size), status)


def _mape(coeffs: CollectiveCoeffs, algorithm: str, rows: pd.DataFrame, link: InterconnectSpec) -> float:
    size, n = rows["message_bytes"].to_numpy(float), rows["num_gpus"].to_numpy(float)
    predicted = time_with_coeffs(coeffs, algorithm, "all_reduce", size, n, link)
    return float(np.mean(np.abs(predicted / rows["latency_s"].to_numpy(float) - 1.0)))


def fit_framework_all_reduce(
    rows: pd.DataFrame, link: InterconnectSpec, algorithm: str, nccl: CollectiveFit
) -> CollectiveFitResult:
    """A framework all-reduce: its own kernels up to a size limit, NCCL above (as the frameworks do).

    The limit is the table size (64 KiB and up) whose fit, with `nccl` above it, has the lowest error
    over all rows; the kernel is fitted on the rows at or below the limit only.
    """
    best: CollectiveFitResult | None = None
    for limit in sorted(rows["message_bytes"].unique()):
        below = rows[rows["message_bytes"] <= limit]
        if limit < 65536 or below["num_gpus"].nunique() < rows["num_gpus"].nunique():
            continue
        res = fit_collective(below, link, "all_reduce")
        fit = replace(res.fit, max_bytes=float(limit))
        trial = CollectiveCoeffs(
            architecture="", fits={"nccl:all_reduce": nccl, f"{algorithm}:all_reduce": fit}
        )
        mape = _mape(trial, algorithm, rows, link)
        if best is None or mape < best.mape:
            best = CollectiveFitResult(
                replace(fit, num_samples=len(rows), mape_train=round(mape, 5)), mape, len(rows), res.status
            )
    if best is None:
        raise ConfigError(f"{algorithm} all-reduce: no message sizes of 64 KiB or more to fit")
    return best


def fit_gpu_collectives(samples: pd.DataFrame, gpu: GpuSpec) -> dict[str, CollectiveFitResult]:
    """Every (algorithm, collective) of one system's rows, keyed `algorithm:collective`; framework
    all-reduces hand large messages to this system's NCCL all-reduce fit."""
    if gpu.interconnect is None:
        raise ConfigError(f"{gpu.name} has no interconnect section to fit collectives against")
    link = gpu.interconnect
    out = {}
    groups = samples.groupby(["algorithm", "collective"], sort=True)
    for (algorithm, collective), rows in groups:
        if algorithm == "nccl" or collective != "all_reduce":
            out[f"{algorithm}:{collective}"] = fit_collective(rows, link, str(collective))
    nccl = out.get("nccl:all_reduce")
    for (algorithm, collective), rows in groups:
        if algorithm != "nccl" and collective == "all_reduce":
            if nccl is None:
                raise ConfigError(f"{algorithm} all-reduce needs NCCL all-reduce rows of the same system")
            out[f"{algorithm}:{collective}"] = fit_framework_all_reduce(rows, link, str(algorithm), nccl.fit)
    return dict(sorted(out.items()))


def _sources() -> list[dict[str, object]]:
    out: list[dict[str, object]] = []
    for name in _FILES:
        path = data_root() / "aiconfigurator" / name
        out.append(
            {"file": f"aiconfigurator/{name}", "sha256": hashlib.sha256(path.read_bytes()).hexdigest()}
        )
    return out


def build_collective_coeffs(
    system: str, architecture: str, samples: pd.DataFrame | None = None
) -> CollectiveCoeffs:
    """The shipped set of `architecture`, fitted on one aiconfigurator system's tables, with provenance."""
    from dse.hardware.catalog import load_gpu

    samples = load_comm_samples() if samples is None else samples
    gpu = load_gpu(SYSTEM_GPUS[system])
    results = fit_gpu_collectives(samples[samples["gpu"] == system], gpu)
    tables = sorted(samples.loc[samples["gpu"] == system, "table"].unique())
    provenance = {
        "gpu": gpu.name,
        "system": system,
        "link_bw_bytes_per_s": gpu.interconnect.link_bw_bytes_per_s if gpu.interconnect else None,
        "latency_s": gpu.interconnect.latency_s if gpu.interconnect else None,
        "tables": tables,
        "sources": _sources(),
        "method": "scipy least_squares, soft-L1 (f_scale 0.03) on log(pred / measured), per fit",
        "moe_bytes_per_elem": MOE_BYTES_PER_ELEM,
        "created": _dt.date.today().isoformat(),
        "dse_version": dse.__version__,
        "status": {k: r.status for k, r in results.items()},
    }
    fits = {k: r.fit for k, r in results.items()}
    return CollectiveCoeffs(architecture=architecture, fits=fits, provenance=provenance)
