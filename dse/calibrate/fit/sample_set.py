"""Measured sample files as a `SampleSet` ready for fitting (`dse.calibrate.fit.samples` fits it).

`load_sample_set` reads `KernelSample` files (`dse.calibrate.data.samples`), checks they are all of one
GPU, builds each row's op and sets the clock each row is evaluated at: the measured mean SM clock, else
the locked one, else the boost clock (`with_default_clocks` in `dse.calibrate.fit.samples` moves those to
the clock the model's cap rule gives them).

Hold-out: per family, the distinct shapes (kind, dtype, variant, shape fields) are split by
`dataset.split_holdout(frac, seed)` (`split_mask`); a shape measured at several clocks lands on one side
only.

Rows a dry run made up (`dse.calibrate.data.samples.is_synthetic`) are no measurement: they are left out
(`SampleSet.synthetic` counts them per file), and a file of nothing else is refused.

Output dtype, weight sharing and KV-cache dtype are read from the samples (`out_dtype`, `b_shared`,
`kv_dtype`); files written before those columns existed are read with the kernel suites' conventions
(`dse.measure.suites`): fp8 / int8 GEMMs write bf16, a GEMM's B is a shared weight, `cast` writes fp32, the
KV cache has the attention dtype.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from dse.calibrate.data.common import split_holdout
from dse.calibrate.data.samples import (
    SHAPE_FIELDS,
    KernelSample,
    check_sample_values,
    is_synthetic,
    op_from_sample,
    read_samples,
    row_label,
    samples_frame,
)
from dse.errors import ConfigError
from dse.hardware.catalog import gpu_matches, load_gpu, recorded_gpu_name
from dse.hardware.spec import GpuSpec
from dse.perf.dvfs import power_cap_w
from dse.perf.types import OperatingPoint
from dse.workload.ops import ElementwiseOp, GemmOp, Op

# Sample kinds fitted here (attention_eager is a composite of GEMM and softmax kernels; `model` rows are
# whole forward passes): they are read but neither fitted nor scored.
FAMILIES: tuple[str, ...] = (
    "gemm",
    "attention_flash",
    "attention_decode",
    "softmax",
    "layernorm",
    "rmsnorm",
    "elementwise",
)
HOLDOUT_FRAC = 0.2
SEED = 0
_KEY_COLUMNS: tuple[str, ...] = ("kind", "dtype", "variant", "causal", *SHAPE_FIELDS)


@dataclass(frozen=True, slots=True, kw_only=True)
class SampleSet:
    """Kernel samples of one GPU ready for fitting: a frame of the sample fields plus `family`,
    `clock_hz` (what the model is evaluated at), `clock` (table label) and `file`, and the ops (aligned)."""

    gpu: GpuSpec
    frame: pd.DataFrame
    ops: tuple[Op, ...]
    sources: tuple[dict[str, Any], ...]
    skipped: dict[str, int] = field(default_factory=dict, hash=False)
    synthetic: dict[str, int] = field(default_factory=dict, hash=False)  # rows left out, per file

    def take(self, mask: np.ndarray) -> SampleSet:
        idx = np.nonzero(mask)[0]
        return dataclasses.replace(
            self, frame=self.frame.iloc[idx].reset_index(drop=True), ops=tuple(self.ops[i] for i in idx)
        )

    @property
    def latency_s(self) -> np.ndarray:
        return self.frame["latency_s"].to_numpy(dtype=float)


def file_sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def read_sample_file(path: str | Path) -> list[KernelSample]:
    """`read_samples` with every failure as one ConfigError naming the file."""
    path = Path(path)
    try:
        samples = read_samples(path)  # names a missing file, a directory or a pipe
    except ConfigError:
        raise
    except Exception as exc:  # pyarrow / pandas / field conversion: the file is not ours
        kind = type(exc).__name__
        raise ConfigError(
            f"{path}: not a samples file (.parquet or .csv written by `dse measure kernels`): {kind}"
        ) from None
    if not samples:
        raise ConfigError(f"{path}: no sample rows")
    return samples


def _op(sample: KernelSample) -> Op:
    """The op a sample measured; the suites' conventions fill fields an older file did not record."""
    op = op_from_sample(sample)
    if isinstance(op, GemmOp):
        out = op.out_dtype or (None if sample.out_dtype or op.dtype not in ("fp8", "int8") else "bf16")
        shared = True if sample.b_shared is None else op.b_shared
        return dataclasses.replace(op, out_dtype=out, b_shared=shared)
    if isinstance(op, ElementwiseOp) and op.kind == "cast" and not sample.out_dtype:
        return dataclasses.replace(op, out_dtype="fp32")
    return op


def load_sample_set(
    paths: Sequence[str | Path], gpu: str | GpuSpec | None = None, families: Iterable[str] | None = None
) -> SampleSet:
    """Read sample files, check they are all of one GPU (`gpu`, or the one they name), and build the ops.

    Raises:
        ConfigError: a missing or foreign file, an unknown GPU, samples of another GPU, a row that is not
            a valid op, an unknown family, or no kernel rows left.
    """
    if not paths:
        raise ConfigError("give at least one samples file (.parquet or .csv from `dse measure kernels`)")
    wanted = tuple(families) if families is not None else FAMILIES
    unknown = sorted(set(wanted) - set(FAMILIES))
    if unknown:
        raise ConfigError(f"--families: unknown {', '.join(unknown)}; allowed: {', '.join(FAMILIES)}")
    per_file = [(Path(p), read_sample_file(p)) for p in paths]
    if gpu is None:
        names = sorted({s.gpu for _, ss in per_file for s in ss})
        if len(names) != 1:
            raise ConfigError(f"the samples name several GPUs ({', '.join(names)}): pass --gpu NAME")
        gpu = recorded_gpu_name(names[0])
    spec = gpu if isinstance(gpu, GpuSpec) else load_gpu(gpu)
    frames, ops, sources = [], [], []
    skipped: dict[str, int] = {}
    synthetic: dict[str, int] = {}
    seen: dict[str, Path] = {}
    for path, samples in per_file:
        digest = file_sha256(path)
        if digest in seen:  # one file twice (or a copy of it) counted its rows twice: weighted 2x silently
            again = "given twice" if path.resolve() == seen[digest].resolve() else f"a copy of {seen[digest]}"
            raise ConfigError(f"{path}: {again}; give each samples file once (its rows counted twice)")
        seen[digest] = path
        foreign = sorted({s.gpu for s in samples if not gpu_matches(s.gpu, spec)})
        if foreign:
            raise ConfigError(
                f"{path}: samples of {', '.join(repr(g) for g in foreign)}, not of --gpu {spec.name}"
            )
        keep, rows, other_kinds, made_up = _rows_to_fit(path, samples, wanted)
        for kind, n in other_kinds.items():
            skipped[kind] = skipped.get(kind, 0) + n
        if made_up:
            synthetic[path.name] = made_up
        for s in keep:
            try:
                ops.append(_op(s))
            except ConfigError as exc:
                raise ConfigError(f"{path}: {exc}") from None
        df = samples_frame(keep)
        df["file"] = path.name
        df["row"] = rows
        frames.append(df)
        sources.append({"file": path.name, "sha256": digest, "rows": len(samples)})
    frame = pd.concat(frames, ignore_index=True)
    if frame.empty:
        raise ConfigError(
            f"no kernel rows of the families {', '.join(wanted)} in {', '.join(str(p) for p, _ in per_file)}"
        )
    check_sample_values(frame, spec.power.tdp_w, (spec.clocks.sm_clock_min_hz, spec.clocks.sm_clock_max_hz))
    _check_settable_limits(frame, spec)
    frame["family"] = frame["kind"]
    avg = frame["avg_sm_clock_hz"].to_numpy(float)
    locked = frame["sm_clock_hz"].to_numpy(float)
    boost = spec.clocks.boost_clock_hz
    frame["clock_hz"] = np.where(
        np.isfinite(avg) & (avg > 0), avg, np.where(np.isfinite(locked), locked, boost)
    )
    frame["clock_known"] = (np.isfinite(avg) & (avg > 0)) | np.isfinite(locked)
    frame["clock"] = [f"{f / 1e6:.0f} MHz" if np.isfinite(f) else "default" for f in locked]
    return SampleSet(
        gpu=spec, frame=frame, ops=tuple(ops), sources=tuple(sources), skipped=skipped, synthetic=synthetic
    )


def _rows_to_fit(
    path: Path, samples: Sequence[KernelSample], wanted: tuple[str, ...]
) -> tuple[list[KernelSample], list[int], dict[str, int], int]:
    """One file's measured rows of the `wanted` kinds and their row numbers, the rows of other kinds per
    kind, and how many rows were made up (`is_synthetic`: left out; a file of nothing else is refused)."""
    made_up = [is_synthetic(s) for s in samples]
    if all(made_up):
        raise ConfigError(
            f"{path}: every row is synthetic (source '{samples[0].source}'): `dse measure --dry-run` made "
            "the numbers up, no GPU measured them; give samples measured on a GPU"
        )
    keep: list[KernelSample] = []
    rows: list[int] = []
    other_kinds: dict[str, int] = {}
    for row, (s, fake) in enumerate(zip(samples, made_up, strict=True), start=1):
        if fake:
            continue
        if s.kind in wanted:
            keep.append(s)
            rows.append(row)
        else:
            other_kinds[s.kind] = other_kinds.get(s.kind, 0) + 1
    return keep, rows, other_kinds, sum(made_up)


def _check_settable_limits(frame: pd.DataFrame, spec: GpuSpec) -> None:
    """ConfigError naming the first row whose recorded power limit the GPU cannot be set to (below its
    minimum settable limit: the model's cap rule refused it with no file or row); `check_sample_values`
    has refused limits that are not positive or above the TDP."""
    limit = frame["power_limit_w"].to_numpy(float)
    for value in np.unique(limit[np.isfinite(limit)]):
        try:
            power_cap_w(spec, OperatingPoint(power_cap_w=float(value)))
        except ConfigError as exc:
            i = int(np.nonzero(limit == value)[0][0])
            raise ConfigError(
                f"{row_label(frame, i)}, column power_limit_w: {value:.4g} W is no limit {spec.name} can be "
                f"set to: {exc}"
            ) from None


def split_mask(frame: pd.DataFrame, frac: float = HOLDOUT_FRAC, seed: int = SEED) -> np.ndarray:
    """True for hold-out rows: per family, `split_holdout` over the sorted distinct shapes."""
    is_test = np.zeros(len(frame), dtype=bool)
    keys = np.array(["|".join(map(str, t)) for t in frame[list(_KEY_COLUMNS)].itertuples(index=False)])
    for family in sorted(frame["family"].unique()):
        pos = np.nonzero(frame["family"].to_numpy() == family)[0]
        uniq = pd.DataFrame({"key": sorted(set(keys[pos]))})
        _, test = split_holdout(uniq, frac=frac, seed=seed)
        chosen = set(test["key"])
        is_test[pos] = [k in chosen for k in keys[pos]]
    return is_test
