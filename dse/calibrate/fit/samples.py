"""Calibration from measured sample files (`dse calibrate`); their validation (`dse validate samples`) is
`dse.calibrate.validate.samples`.

Input: `KernelSample` files (`dse.calibrate.data.samples`, written by `dse measure kernels`, or converted
from `shared/data` by `dse.calibrate.validate.samples.samples_from_aiconfigurator`), read into a
`SampleSet` by `dse.calibrate.fit.sample_set`. Output: one JSON coefficient file that `load_coeffs` reads
as a `CoeffSet` (latency corrections) and `load_calibration` reads as that set plus the `PowerCoeffs` of
its `power` entry, with provenance (files and sha256, GPU, date, method, row counts, training and hold-out
MAPE).

Fits, the same as the shipped sets':
- latency: per kernel group, the cvxpy QP of `dse.calibrate.fit.latency.fit_group` (lambdas, eps, derate
  scan) on the model's phase times, groups with too few rows falling back to their parent key, GEMMs
  re-fitted over a few tile-selection rounds (`dse.calibrate.fit.kernels` does the same for
  `shared/data`). Every row is evaluated at its own clock: the measured mean SM clock, else the locked
  one, else (default clocks) the clock the model's cap rule gives it under the row's power limit
  (`with_default_clocks`; two passes, at the shipped corrections' clocks and then the first fit's), as
  `dse.calibrate.fit.kernels` evaluates the shared tables.
- power (rows with a measured mean power): the relative least squares of
  `dse.calibrate.fit.power.fit_power_rows` on the rows' energy features at their clock, with the latency
  model just fitted, bounded (dram_scale in [0.25, 4]) and pulled (`POWER_RIDGE`, on each coefficient's
  relative change) towards the shipped set of the GPU's architecture: energies that make a small share of
  the rows' power (a GEMM suite's L2, CUDA-core or DRAM energy) stay near it, coefficients that kernels in
  a loop cannot see (the host-gap term) keep it, and one the fit still pushes onto a bound is warned about.

Hold-out: per family, by distinct shape (`dse.calibrate.fit.sample_set.split_mask`); a shape measured at
several clocks lands on one side only. Families whose groups are not in the samples keep the shipped
set's coefficients (provenance `inherited`).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

import dse
from dse.calibrate.fit.kernels import MIN_FAMILY_SAMPLES, MIN_LATENCY_S, fit_buckets
from dse.calibrate.fit.power import PowerRows, fit_power_rows
from dse.calibrate.fit.sample_set import (
    FAMILIES,
    HOLDOUT_FRAC,
    SEED,
    SampleSet,
    load_sample_set,
    split_mask,
)
from dse.config.jsonio import with_nulls
from dse.errors import CalibrationError, ConfigError
from dse.hardware.spec import GpuSpec
from dse.perf import attention, elementwise, gemm, reduction
from dse.perf.coeffs import (
    CoeffSet,
    GroupInfo,
    PowerCoeffs,
    coeffs_from_dict,
    coeffs_to_dict,
    default_power_coeffs,
    load_default_coeffs,
)
from dse.perf.multiclock import family_arrays, op_rows
from dse.perf.power import gpu_power_terms, power_features
from dse.perf.types import CoeffTable, PhaseCoeffs
from dse.workload.ops import Op

logger = logging.getLogger(__name__)

# Families sharing one model function (and so one fallback tree) are fitted together.
_UNIT: dict[str, str] = {"softmax": "reduction", "layernorm": "reduction", "rmsnorm": "reduction"}
_GROUPS: dict[str, tuple[str, ...]] = {
    "gemm": gemm.GROUPS,
    "attention_flash": attention.FLASH_GROUPS,
    "attention_decode": attention.DECODE_GROUPS,
    "reduction": reduction.GROUPS,
    "elementwise": elementwise.GROUPS,
}
GEMM_ROUNDS = 3
HUBER_M = 0.05  # as the shipped fits: robust to the odd outlier row
# Ridge of the power fit towards the shipped set, on each coefficient's relative change: moving one by its
# own value (2x) costs what a 3% RMS power error over the rows does (sqrt(1e-3)). An energy that makes 1% of
# the rows' power must explain far more than that to move, so the ones the samples barely exercise stay
# near the shipped set. The first ridge (1e-4 in units of all the rows' dynamic power) let a GEMM suite move
# the L2 and CUDA-core energies 8x and 46x, the active one to ~0 and dram_scale to its bound: a DRAM-bound
# decode step rose from 524 W to 695 W.
POWER_RIDGE = 1e-3
DRAM_SCALE_BOUNDS = (0.25, 4.0)  # the catalog e_bit is a literature value: allow 4x either way
METHOD = (
    "dse.calibrate.fit.samples: latency per kernel group by dse.calibrate.fit.latency.fit_group "
    f"(cvxpy QP, Huber {HUBER_M}, derate scan, {GEMM_ROUNDS} GEMM tile rounds) at each row's clock; power by "
    f"fit.power.fit_power_rows (relative least squares, ridge {POWER_RIDGE} on the relative change from the "
    "shipped set)"
)


# ------------------------------------------------------------------------------------------- the model


def unit_arrays(
    unit: str, ops: Sequence[Op], gpu: GpuSpec, clock_hz: np.ndarray, coeffs: Any
) -> dict[str, np.ndarray]:
    """The family model's full output (latency_s, util [M, N], dram_bytes, group, timeline) for `ops`."""
    f = np.clip(np.asarray(clock_hz, dtype=float), gpu.clocks.sm_clock_min_hz, gpu.clocks.sm_clock_max_hz)
    return family_arrays(unit, ops, gpu, f, coeffs)


def _units(frame: pd.DataFrame) -> dict[str, np.ndarray]:
    fam = frame["family"].to_numpy()
    out = {}
    for unit in dict.fromkeys(_UNIT.get(f, f) for f in FAMILIES):
        pos = np.nonzero([_UNIT.get(f, f) == unit for f in fam])[0]
        if pos.size:
            out[unit] = pos
    return out


def model_rows(ss: SampleSet, coeffs: Any) -> dict[str, np.ndarray]:
    """latency_s, util [N, M], dram_bytes, tensor_flop and clock_hz (clamped) of every row of `ss`."""
    rows = op_rows(ss.ops, ss.gpu, ss.frame["clock_hz"].to_numpy(float), coeffs)
    return {**rows, "clock_hz": rows["sm_clock_hz"]}


# ------------------------------------------------------------------------------------------- the fits


def fit_unit(
    unit: str,
    ops: Sequence[Op],
    clock_hz: np.ndarray,
    latency_s: np.ndarray,
    gpu: GpuSpec,
    min_latency_s: float = MIN_LATENCY_S,
) -> tuple[dict[str, tuple[PhaseCoeffs, GroupInfo]], float]:
    """Fit one model function's groups on its rows; returns the groups and the training MAPE."""
    mask = latency_s >= min_latency_s
    table = CoeffTable()
    best: tuple[float, dict] | None = None
    for _ in range(GEMM_ROUNDS if unit == "gemm" else 1):
        out = unit_arrays(unit, ops, gpu, clock_hz, table)
        fits = fit_buckets(out, latency_s, mask, _GROUPS[unit], HUBER_M)
        table = CoeffTable(groups={k: v[0] for k, v in fits.items()})
        pred = unit_arrays(unit, ops, gpu, clock_hz, table)["latency_s"]
        err = mape(pred[mask], latency_s[mask])
        if best is None or err < best[0]:
            best = (err, fits)
    assert best is not None
    return best[1], best[0]


def mape(predicted: np.ndarray, measured: np.ndarray) -> float:
    """Mean absolute relative error as a fraction (NaN when there are no rows)."""
    p, m = np.asarray(predicted, dtype=float), np.asarray(measured, dtype=float)
    return float(np.mean(np.abs(p / m - 1.0))) if m.size else math.nan


def power_mask(frame: pd.DataFrame) -> np.ndarray:
    """Rows with a usable measured mean power (and, when recorded, a stable window)."""
    p = frame["avg_power_w"].to_numpy(float)
    stable = frame["stable"].fillna(True).to_numpy(bool)
    return np.isfinite(p) & (p > 0) & stable


def power_rows(ss: SampleSet, latency_coeffs: Any) -> PowerRows:
    """The linear system of the power fit for every row of `ss` (measured power may be NaN)."""
    rows = model_rows(ss, latency_coeffs)
    terms = gpu_power_terms(ss.gpu)
    f = rows["clock_hz"]
    feats = power_features(
        rows["util"], rows["latency_s"], rows["dram_bytes"], f, terms, tensor_flop=rows["tensor_flop"]
    )
    p = ss.frame["avg_power_w"].to_numpy(float)
    return PowerRows(
        features_j=feats,
        wall_s=rows["latency_s"],
        idle_w=terms.idle_power_w(f),
        power_w=np.where(np.isfinite(p) & (p > 0), p, 1.0),  # placeholders; callers mask
    )


def fit_power(ss: SampleSet, latency_coeffs: Any) -> tuple[PowerCoeffs, float]:
    """Energy coefficients from the rows with measured power; returns them and the training power MAPE.

    Each row is fitted at its `clock_hz` as given: `calibrate` first sets the rows without a recorded
    clock to the one the model's cap rule gives them under their power limit (`with_default_clocks`, as
    for the latency fit); a raw `load_sample_set` has them at boost. Where the model's cap rule is wrong
    about such a row, the coefficients absorb it: record clocks (the harness does) for coefficients that
    travel.
    """
    sel = power_mask(ss.frame)
    sub = ss.take(sel)
    rows = power_rows(sub, latency_coeffs)
    prior = default_power_coeffs(ss.gpu)
    names = PowerCoeffs.coeff_names()
    lower, upper = np.zeros(len(names)), np.full(len(names), np.inf)
    j = names.index("dram_scale")
    lower[j], upper[j] = DRAM_SCALE_BOUNDS
    fit = fit_power_rows(
        rows, lower=lower, upper=upper, prior=prior.vector(), ridge=POWER_RIDGE, prior_scale=prior.vector()
    )
    pc = PowerCoeffs.from_vector(
        ss.gpu.architecture,
        fit.coeffs,
        provenance={
            "name": f"calibrated-{ss.gpu.name}",
            "gpu": ss.gpu.name,
            "method": "fit.power.fit_power_rows at each row's clock (the cap rule's clock under the first "
            f"fit's corrections where none was recorded), ridge {POWER_RIDGE} on each coefficient's change "
            f"relative to the shipped set, dram_scale in {list(DRAM_SCALE_BOUNDS)}",
            "prior": str(prior.provenance.get("name", prior.architecture)),
            "num_rows": int(sel.sum()),
            "num_rows_without_clock": int((~sub.frame["clock_known"]).sum()),
            "fit_power_mape": fit.mape,
            "solver_status": fit.status,
            "at_bound": at_bounds(fit.coeffs, lower, upper, prior.vector()),
        },
    )
    return pc, fit.mape


def at_bounds(coeffs: np.ndarray, lower: np.ndarray, upper: np.ndarray, prior: np.ndarray) -> list[str]:
    """Coefficients a fit pushed onto a bound, away from their prior (within 0.1%): the rows could not
    place them, and predictions of work the rows do not cover inherit the guess."""
    tol = 1e-3 * np.maximum(np.abs(prior), np.abs(np.where(np.isfinite(upper), upper, lower)))
    on = (coeffs - lower <= tol) | (np.isfinite(upper) & (upper - coeffs <= tol))
    moved = np.abs(coeffs - prior) > tol
    return [name for name, hit in zip(PowerCoeffs.coeff_names(), on & moved, strict=True) if hit]


# ---------------------------------------------------------------------------------------- calibration


@dataclass(frozen=True, slots=True, kw_only=True)
class Calibration:
    """A calibrated coefficient set: latency (`coeffs`) and, where power was measured, energy (`power`)."""

    coeffs: CoeffSet
    power: PowerCoeffs | None
    info: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        out = coeffs_to_dict(self.coeffs)
        out["power"] = None if self.power is None else self.power.to_dict()
        out["calibration"] = self.info
        return out

    def save(self, path: str | Path) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        # A number with no value (no power rows to take a MAPE over) is null: JSON has no NaN, and
        # `--coeffs` refuses a file with one. The round trip turns numpy scalars into floats first.
        plain = with_nulls(json.loads(json.dumps(self.to_dict(), default=float)))
        path.write_text(json.dumps(plain, indent=1, allow_nan=False) + "\n")
        return path


def warn_synthetic(ss: SampleSet) -> None:
    """A warning per file whose made-up rows (a dry run's) were left out."""
    for name, n in ss.synthetic.items():
        logger.warning(
            "%s: %d synthetic rows left out (made up by `dse measure --dry-run`, not measured)", name, n
        )


def warn_replayed(ss: SampleSet) -> None:
    """A warning per file of rows a `--replay` dry run copied: they keep the recorded latency and power but
    carry the dry run's clock, so power-capped rows recorded at 1.27-1.47 GHz were fitted at 1.98 GHz and
    the calibrated H100 stopped throttling (the replayed file does not say which clock they ran at)."""
    replayed = ss.frame.loc[ss.frame["energy_method"] == "replay", "file"]
    for name, n in replayed.value_counts(sort=False).items():
        logger.warning(
            "%s: %d replayed rows fitted at the dry run's clock, not the clock they were measured at "
            "(`dse measure --dry-run --replay` keeps only latency and power); fit the recorded file instead",
            name,
            n,
        )


def _check_sizes(train: SampleSet, min_latency_s: float) -> None:
    fam = train.frame["family"].to_numpy()
    long_enough = train.latency_s >= min_latency_s
    for family in sorted(set(fam)):
        n = int(np.sum((fam == family) & long_enough))
        if n < MIN_FAMILY_SAMPLES:
            raise ConfigError(
                f"family '{family}': {n} training rows of >= {min_latency_s * 1e6:.0f} us, a fit needs at "
                f"least {MIN_FAMILY_SAMPLES} (measure more shapes, or leave it out with --families)"
            )


def _fit_latency(
    train: SampleSet, default: CoeffSet, min_latency_s: float, progress: Callable[[str], None] | None
) -> tuple[CoeffTable, dict[str, GroupInfo], dict[str, float]]:
    """Every model function's groups on the training rows; families not sampled keep the shipped set."""
    groups: dict[str, tuple[PhaseCoeffs, GroupInfo]] = {}
    unit_mape: dict[str, float] = {}
    for unit, pos in _units(train.frame).items():
        fits, err = fit_unit(
            unit,
            [train.ops[i] for i in pos],
            train.frame["clock_hz"].to_numpy(float)[pos],
            train.latency_s[pos],
            train.gpu,
            min_latency_s,
        )
        for name, value in fits.items():
            groups.setdefault(name, value)
        unit_mape[unit] = err
        if progress:
            progress(f"{unit}: {len(fits)} groups from {pos.size} rows, train MAPE {100 * err:.1f}%")
    if not groups:
        raise CalibrationError("no kernel group had enough rows to fit")
    fitted_tops = {name.split("/")[0] for name in groups}
    table = {name: c for name, (c, _) in groups.items()}
    infos = {name: info for name, (_, info) in groups.items()}
    for name, c in default.table.groups.items():
        if name.split("/")[0] not in fitted_tops:
            table[name] = c
            infos[name] = GroupInfo(
                num_samples=0, provenance=f"inherited from the shipped set '{default.name}'"
            )
    return CoeffTable(groups=table), infos, unit_mape


def calibrate(
    paths: Sequence[str | Path],
    gpu: str | GpuSpec,
    *,
    holdout_frac: float = HOLDOUT_FRAC,
    seed: int = SEED,
    families: Iterable[str] | None = None,
    min_latency_s: float = MIN_LATENCY_S,
    progress: Callable[[str], None] | None = None,
) -> Calibration:
    """Fit latency (and power) coefficients on the training split of the samples (module docstring).

    Raises:
        ConfigError: bad files, GPU or families (`load_sample_set`), a family with too few rows.
        CalibrationError: a fit that does not converge.
    """
    raw = load_sample_set(paths, gpu, families)
    warn_synthetic(raw)
    warn_replayed(raw)
    if raw.skipped and progress:
        kinds = ", ".join(f"{n} {kind}" for kind, n in sorted(raw.skipped.items()))
        progress(f"left out: rows of kinds outside the families fitted ({kinds})")
    default = load_default_coeffs(raw.gpu)
    default_power = default_power_coeffs(raw.gpu)
    is_test = split_mask(raw.frame, holdout_frac, seed)
    _check_sizes(raw.take(~is_test), min_latency_s)
    # Rows without a recorded clock are fitted at the clock the model's cap rule gives them, in two passes
    # as the shipped sets (`scripts/fit_default_coeffs.py`): at the shipped corrections' clocks, then at
    # those of the first pass's corrections (what prediction with the result will use).
    ss = with_default_clocks(raw, default, default_power)
    train, test = ss.take(~is_test), ss.take(is_test)
    latency, infos, unit_mape = _fit_latency(train, default, min_latency_s, progress)
    if not raw.frame["clock_known"].all():
        ss = with_default_clocks(raw, latency, default_power)
        train, test = ss.take(~is_test), ss.take(is_test)
        latency, infos, unit_mape = _fit_latency(train, default, min_latency_s, progress)
    n_power = int(power_mask(train.frame).sum())
    power: PowerCoeffs | None = None
    power_err = math.nan
    if n_power >= MIN_FAMILY_SAMPLES:
        power, power_err = fit_power(train, latency)
        if progress:
            progress(f"power: {n_power} rows, train MAPE {100 * power_err:.1f}%")
        _warn_at_bounds(power, default_power)
    cs = _calibrated_set(ss, train, test, latency, infos, holdout_frac, seed, min_latency_s)
    held = _holdout_summary(test, latency, default, power, min_latency_s)
    info = {
        "gpu": ss.gpu.name,
        "holdout_frac": holdout_frac,
        "seed": seed,
        "split": "by distinct shape within each family (dataset.split_holdout)",
        "min_latency_s": min_latency_s,
        "families": sorted(set(ss.frame["family"])),
        "rows": {
            "total": len(ss.frame),
            "train": len(train.frame),
            "test": len(test.frame),
            "train_with_power": n_power,
            "skipped_kinds": dict(ss.skipped),
            "synthetic_left_out": dict(ss.synthetic),
        },
        "train_mape_by_unit": unit_mape,
        "power_train_mape": power_err,
        "holdout": held,
    }
    return Calibration(coeffs=cs, power=power, info=info)


def _warn_at_bounds(power: PowerCoeffs, shipped: PowerCoeffs) -> None:
    for name in power.provenance["at_bound"]:
        logger.warning(
            "power fit: %s is at a bound (%.3g; shipped %.3g): the samples cannot place it, so predictions "
            "of work they do not cover (other kernel families) may be off",
            name,
            getattr(power, name),
            getattr(shipped, name),
        )


def _calibrated_set(
    ss: SampleSet,
    train: SampleSet,
    test: SampleSet,
    latency: CoeffTable,
    infos: dict[str, GroupInfo],
    holdout_frac: float,
    seed: int,
    min_latency_s: float,
) -> CoeffSet:
    """The fitted latency table as a coefficient set, with its sources and training error."""
    created = datetime.now(UTC).isoformat(timespec="seconds")
    return CoeffSet(
        name=f"calibrated-{ss.gpu.name}",
        architecture=ss.gpu.architecture,
        table=latency,
        gpu=ss.gpu.name,
        created=created,
        dse_version=dse.__version__,
        sources=tuple(
            src
            | {
                "train_rows": int((train.frame["file"] == src["file"]).sum()),
                "test_rows": int((test.frame["file"] == src["file"]).sum()),
            }
            for src in ss.sources
        ),
        method=METHOD,
        notes=f"hold-out: {holdout_frac:g} of each family's distinct shapes (seed {seed}); "
        "unfitted families inherit the shipped set",
        fit_error={
            f: _family_mape(train, f, latency, min_latency_s) for f in sorted(set(train.frame["family"]))
        },
        group_info=infos,
    )


def _family_mape(ss: SampleSet, family: str, coeffs: Any, min_latency_s: float) -> float:
    """Training-fit latency MAPE of one family at the rows' clocks (as fitted)."""
    sub = ss.take((ss.frame["family"] == family).to_numpy() & (ss.latency_s >= min_latency_s))
    return mape(model_rows(sub, coeffs)["latency_s"], sub.latency_s) if len(sub.frame) else math.nan


def _holdout_summary(
    test: SampleSet, latency: Any, default: CoeffSet, power: PowerCoeffs | None, min_latency_s: float
) -> dict[str, dict[str, float]]:
    """Hold-out MAPE as the prediction path gives it (`predict`): calibrated vs the shipped sets."""
    default_power = default_power_coeffs(test.gpu)
    ours = predict(test, latency, power or default_power)
    theirs = predict(test, default, default_power)
    fam = test.frame["family"].to_numpy()
    lat = test.latency_s
    out: dict[str, dict[str, float]] = {}
    for family in sorted(set(fam)):
        sel = (fam == family) & (lat >= min_latency_s)
        out[family] = {
            "n": int(sel.sum()),
            "latency_mape": mape(ours[0][sel], lat[sel]),
            "latency_mape_default": mape(theirs[0][sel], lat[sel]),
        }
    sel = power_mask(test.frame)
    if sel.any():
        measured = test.frame["avg_power_w"].to_numpy(float)[sel]
        out["power"] = {
            "n": int(sel.sum()),
            "power_mape": mape(ours[1][sel], measured),
            "power_mape_default": mape(theirs[1][sel], measured),
            "fitted": power is not None,
        }
    return out


def load_calibration(path: str | Path) -> tuple[CoeffSet, PowerCoeffs | None, dict[str, Any]]:
    """A coefficient file: its latency set, its power set (None when it has none) and calibration info.

    Plain `dse.coeffs/1` files (the shipped sets) load too, with no power and empty info.
    """
    from dse.config.jsonio import read_json_file

    data = read_json_file(path, "coefficient file", expect=dict)
    cs = coeffs_from_dict(data, str(path))  # what `load_coeffs` builds, from the one read
    raw = data.get("power")
    power = None if raw is None else PowerCoeffs.from_dict(raw, f"{path}: power")
    info = data.get("calibration") or {}
    return cs, power, info if isinstance(info, dict) else {}


def check_generation(path: str | Path, latency: CoeffSet, gpu: GpuSpec) -> None:
    """Refuse a coefficient file of another kernel-library generation than `gpu`'s (`arch_family`'s rule):
    corrections and energies are per generation, another one's would be silently wrong (`dse predict`,
    `dse validate samples --coeffs`)."""
    from dse.perf.rates import arch_family

    family = arch_family(gpu)
    # A set is stamped with its GPU's architecture (ada, blackwell, ...): compare generations.
    stamped = "hopper" if latency.architecture.lower() in ("hopper", "blackwell") else "ampere"
    if stamped != family:
        raise ConfigError(
            f"{path}: coefficients for {latency.architecture} GPUs ({latency.gpu or 'unnamed GPU'}) cannot "
            f"predict {gpu.name} ({family} generation); calibrate on {family} samples or drop --coeffs"
        )


# --------------------------------------------------------------------------- rows at their default clocks


def _capped(
    ss: SampleSet, latency_coeffs: Any, power_coeffs: PowerCoeffs
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Rows without a known clock at the boost clock under their power limit (else the TDP), by the
    model's cap rule: their positions, latency, power and effective clock."""
    from dse.perf.dvfs import capped_rows
    from dse.perf.types import OperatingPoint

    unknown = ~ss.frame["clock_known"].to_numpy(bool)
    limit = ss.frame["power_limit_w"].to_numpy(float)
    cap = np.where(np.isfinite(limit) & (limit > 0), limit, ss.gpu.power.tdp_w)
    terms = gpu_power_terms(ss.gpu)
    parts = []
    for c in np.unique(cap[unknown]):
        pos = np.nonzero(unknown & (cap == c))[0]
        capped = capped_rows(
            [ss.ops[i] for i in pos],
            ss.gpu,
            OperatingPoint(power_cap_w=float(c)),
            latency_coeffs,
            power_coeffs,
            terms,
        )
        parts.append((pos, capped.rows["latency_s"], capped.power["total"], capped.rows["sm_clock_hz"]))
    if not parts:
        return np.zeros(0, dtype=int), np.zeros(0), np.zeros(0), np.zeros(0)
    pos, latency, power, clock = (np.concatenate(x) for x in zip(*parts, strict=True))
    return pos, latency, power, clock


def with_default_clocks(ss: SampleSet, latency_coeffs: Any, power_coeffs: PowerCoeffs) -> SampleSet:
    """`ss` with each row without a known clock at the clock the model's cap rule gives it (boost
    requested, the row's power limit, else the TDP, as the cap) under these coefficients."""
    pos, _, _, clock = _capped(ss, latency_coeffs, power_coeffs)
    if not pos.size:
        return ss
    f = ss.frame["clock_hz"].to_numpy(float).copy()
    f[pos] = clock
    return dataclasses.replace(ss, frame=ss.frame.assign(clock_hz=f))


def predict(ss: SampleSet, latency_coeffs: Any, power_coeffs: PowerCoeffs) -> tuple[np.ndarray, ...]:
    """Predicted latency, power and energy per row, as the prediction path would give them.

    Rows with a known clock are predicted there. Rows without one (not locked, no clock recorded) ran at
    the default boost clock under the row's power limit (else the TDP): they are predicted at the clock
    the model's cap rule gives them under these coefficients, as `dse predict` does, and as the latency
    corrections were fitted (`with_default_clocks`).
    """
    rows = power_rows(ss, latency_coeffs)
    lat, power = rows.wall_s.copy(), rows.predict_w(power_coeffs.vector())
    pos, c_lat, c_power, _ = _capped(ss, latency_coeffs, power_coeffs)
    lat[pos] = c_lat
    power[pos] = c_power
    return lat, power, power * lat
