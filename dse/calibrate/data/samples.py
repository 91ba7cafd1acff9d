"""`KernelSample`: one measured kernel (or whole forward pass) at one operating point, and its files.

One row per (op, clock) in SI units. Column names follow `dse.calibrate.data`, so measured files and
the third-party data in `shared/data` read the same way: `gpu, m, n, k, dtype, latency_s, power_w,
power_limit_w, sm_clock_hz, avg_sm_clock_hz, energy_j ...`. `power_w` is written as an alias of
`avg_power_w` (the aiconfigurator loaders call mean power `power_w`; EnergAIzer calls it `avg_power_w`).

    write_samples("h100.parquet", samples)   # .parquet or .csv, chosen by suffix
    samples = read_samples("h100.parquet")   # list[KernelSample]
    frame = samples_frame(samples)           # pandas DataFrame, the same columns as the file

Shape fields that do not apply to an op are None (empty in CSV, null in parquet).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast, get_args

import numpy as np
import pandas as pd

from dse.errors import ConfigError
from dse.workload.ops import (
    AttentionBackend,
    AttentionOp,
    Dtype,
    ElementwiseOp,
    GemmOp,
    NormKind,
    NormOp,
    Op,
    SoftmaxOp,
    op_kind,
)

SHAPE_FIELDS: tuple[str, ...] = (
    "m",
    "n",
    "k",
    "batch",
    "rows",
    "cols",
    "num_elements",
    "seq_len_q",
    "seq_len_kv",
    "num_heads",
    "num_kv_heads",
    "head_dim",
)
# Every `kind` a sample file holds: an op's `op_kind`, or `model` (a whole forward pass). Another value is a
# typo that calibrate left out as "a family not fitted" (`gemmm`, exit 0).
SAMPLE_KINDS: tuple[str, ...] = (
    "gemm",
    *(f"attention_{b}" for b in get_args(AttentionBackend)),
    "softmax",
    *get_args(NormKind),
    "elementwise",
    "model",
)
# Aliases written next to the canonical columns for the loaders of `shared/data`; ignored on read.
ALIASES: dict[str, str] = {"power_w": "avg_power_w", "power_cap_w": "power_limit_w", "avg_temp_c": "temp_c"}


@dataclass(frozen=True, slots=True, kw_only=True)
class KernelSample:
    """One measurement: an op (or a whole forward pass, `kind="model"`) at one SM clock.

    Per-call quantities (`latency_s`, `energy_j`) are window totals divided by the calls in the window.
    `energy_j` is whole-board energy, idle included; `dynamic_energy_j` subtracts `idle_power_w`.
    `sm_clock_hz` is the requested lock (None: not locked, `--no-lock`); `avg_sm_clock_hz` is what the
    GPU reported during the window (lower than the lock when a power or thermal limit clamps it).
    `energy_method` says where `energy_j` came from: `counter` (NVML total-energy counter deltas),
    `trace` (integrated power samples), `replay` (a dry run's copy of a recorded row) or `synthetic` (made
    up by a dry run: `is_synthetic`, which calibration refuses).
    """

    gpu: str
    kind: str
    name: str = ""
    dtype: str = ""
    variant: str = ""  # elementwise kind (gelu, add ...), attention backend, norm kind; GEMM: "act_quant"
    out_dtype: str = ""  # GEMM / cast output dtype when it differs from `dtype` ("": the op's default)
    kv_dtype: str = ""  # attention KV-cache dtype when it differs from `dtype` ("": same)
    b_shared: bool | None = None  # GEMM: B is one weight shared by all batch entries
    causal: bool | None = None
    m: int | None = None
    n: int | None = None
    k: int | None = None
    batch: int | None = None
    rows: int | None = None
    cols: int | None = None
    num_elements: int | None = None
    seq_len_q: int | None = None
    seq_len_kv: int | None = None
    num_heads: int | None = None
    num_kv_heads: int | None = None
    head_dim: int | None = None
    sm_clock_hz: float | None = None
    avg_sm_clock_hz: float = math.nan
    avg_mem_clock_hz: float = math.nan
    power_limit_w: float = math.nan
    latency_s: float
    avg_power_w: float
    energy_j: float
    trace_energy_j: float = math.nan
    idle_power_w: float = math.nan
    num_calls: int = 1
    num_repeats: int = 1
    latency_rel_std: float = math.nan
    energy_rel_std: float = math.nan
    stable: bool = True
    num_samples: int = 0
    temp_c: float = math.nan
    throttle_reasons: str = ""  # comma-separated NVML clock-event reasons seen in the windows
    kernel_name: str = ""
    tile: str = ""  # "128x256x64" where the kernel name shows it (dse.measure.names)
    stages: int | None = None
    warp_specialized: bool | None = None
    split_k: bool | None = None
    energy_method: str = "counter"
    source: str = ""

    @property
    def dynamic_energy_j(self) -> float:
        """Energy above idle for one call (NaN when idle power was not measured)."""
        return self.energy_j - self.idle_power_w * self.latency_s

    @property
    def dynamic_power_w(self) -> float:
        return self.avg_power_w - self.idle_power_w


FIELD_NAMES: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(KernelSample))
_INT_FIELDS = frozenset({*SHAPE_FIELDS, "num_calls", "num_repeats", "num_samples", "stages"})
_BOOL_FIELDS = frozenset({"causal", "b_shared", "stable", "warp_specialized", "split_k"})
_STR_FIELDS = frozenset(
    {
        "gpu",
        "kind",
        "name",
        "dtype",
        "variant",
        "out_dtype",
        "kv_dtype",
        "throttle_reasons",
        "kernel_name",
        "tile",
        "energy_method",
        "source",
    }
)


def op_fields(op: Op) -> dict[str, Any]:
    """The sample fields describing an op: kind, name, dtype, variant and the shape fields that apply."""
    fields: dict[str, Any] = {"kind": op_kind(op), "name": op.name, "dtype": op.dtype}
    if isinstance(op, GemmOp):
        fields |= {"m": op.m, "n": op.n, "k": op.k, "batch": op.batch, "b_shared": op.b_shared}
        fields |= {"out_dtype": op.out_dtype or "", "variant": "act_quant" if op.act_quant else ""}
    elif isinstance(op, AttentionOp):
        fields |= {
            "kv_dtype": op.kv_dtype or "",
            "batch": op.batch,
            "seq_len_q": op.seq_len_q,
            "seq_len_kv": op.seq_len_kv,
            "num_heads": op.num_heads,
            "num_kv_heads": op.num_kv_heads,
            "head_dim": op.head_dim,
            "causal": op.causal,
            "variant": op.backend,
        }
    elif isinstance(op, SoftmaxOp):
        fields |= {"rows": op.rows, "cols": op.cols}
    elif isinstance(op, NormOp):
        fields |= {"rows": op.rows, "cols": op.cols, "variant": op.kind}
    elif isinstance(op, ElementwiseOp):
        # A batch norm's launch fields (bn_layout...) are not sample fields: the harness runs no batch-norm
        # kernels (`dse.measure.suites`), so no sample has them.
        fields |= {"num_elements": op.num_elements, "variant": op.kind, "out_dtype": op.out_dtype or ""}
    return fields


def is_synthetic(sample: KernelSample) -> bool:
    """Whether a dry run made the sample's numbers up (`energy_method` `synthetic`; before dry runs marked
    them, every dry-run row had a `source` of `dry-run:...`, its replayed rows too). Rows a dry run replays
    from a recorded file are `energy_method` `replay`, `source` `replay:<file>`."""
    return sample.energy_method == "synthetic" or sample.source.startswith("dry-run:")


# The op constructors validate shapes, dtypes and backends (ValueError, turned into ConfigError below),
# so these casts only tell the type checker what the sample's loosely typed fields hold.
def _dim(value: int | None) -> int:
    return cast(int, value)


def _dtype(value: str) -> Dtype:
    return cast(Dtype, value)


def _opt_dtype(value: str) -> Dtype | None:
    return cast(Dtype, value) if value else None


def op_from_sample(sample: KernelSample) -> Op:
    """Rebuild the op a sample measured (the inverse of `op_fields`).

    Raises:
        ConfigError: the sample is a whole-model row or misses a shape field.
    """
    s = sample
    try:
        if s.kind == "gemm":
            return GemmOp(
                name=s.name,
                m=_dim(s.m),
                n=_dim(s.n),
                k=_dim(s.k),
                batch=1 if s.batch is None else s.batch,  # 0 is a damaged row, not "unbatched"
                dtype=_dtype(s.dtype),
                out_dtype=_opt_dtype(s.out_dtype),
                b_shared=bool(s.b_shared),
                act_quant=s.variant == "act_quant",
            )
        if s.kind.startswith("attention"):
            return AttentionOp(
                name=s.name,
                batch=_dim(s.batch),
                num_heads=_dim(s.num_heads),
                num_kv_heads=_dim(s.num_kv_heads),
                head_dim=_dim(s.head_dim),
                seq_len_q=_dim(s.seq_len_q),
                seq_len_kv=_dim(s.seq_len_kv),
                causal=bool(s.causal),
                backend=cast(AttentionBackend, s.variant or s.kind.removeprefix("attention_")),
                dtype=_dtype(s.dtype),
                kv_dtype=_opt_dtype(s.kv_dtype),
            )
        if s.kind == "softmax":
            return SoftmaxOp(name=s.name, rows=_dim(s.rows), cols=_dim(s.cols), dtype=_dtype(s.dtype))
        if s.kind in ("layernorm", "rmsnorm"):
            kind = cast(NormKind, s.kind)
            return NormOp(name=s.name, rows=_dim(s.rows), cols=_dim(s.cols), kind=kind, dtype=_dtype(s.dtype))
        if s.kind == "elementwise":
            return ElementwiseOp(
                name=s.name,
                kind=s.variant,
                num_elements=_dim(s.num_elements),
                dtype=_dtype(s.dtype),
                out_dtype=_opt_dtype(s.out_dtype),
            )
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"sample '{s.name}' ({s.kind}) does not describe a valid op: {exc}") from exc
    raise ConfigError(f"sample '{s.name}' of kind '{s.kind}' is not a single kernel")


def samples_frame(samples: Iterable[KernelSample]) -> pd.DataFrame:
    """Samples as a DataFrame: one column per field (nullable ints for shapes) plus the alias columns."""
    rows = [dataclasses.asdict(s) for s in samples]
    frame = pd.DataFrame(rows, columns=list(FIELD_NAMES))
    for name in FIELD_NAMES:
        if name in _INT_FIELDS:
            frame[name] = frame[name].astype("Int64")
        elif name in _BOOL_FIELDS:
            frame[name] = frame[name].astype("boolean")
        elif name in _STR_FIELDS:
            frame[name] = frame[name].astype(object)
        else:
            frame[name] = frame[name].astype("float64")
    for alias, canonical in ALIASES.items():
        frame[alias] = frame[canonical]
    return frame


def write_samples(path: str | Path, samples: Sequence[KernelSample]) -> Path:
    """Write samples to `.parquet` or `.csv` (by suffix); parent folders are created. Returns the path."""
    path = Path(path)
    frame = samples_frame(samples)
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix == ".parquet":
        frame.to_parquet(path, index=False)
    elif path.suffix == ".csv":
        frame.to_csv(path, index=False)
    else:
        raise ConfigError(f"{path}: samples are written as .parquet or .csv")
    return path


# Integer cells stop at 2^53 (a float holds every integer below it; 2^70 overflowed the int64 column of
# `samples_frame`: a traceback). Counts of a measurement start at their least possible value (num_samples:
# 0 where no power trace was sampled); shapes are checked by the op they build.
MAX_INT_CELL = 2**53
_COUNT_MIN: dict[str, int] = {"num_calls": 1, "num_repeats": 1, "num_samples": 0, "stages": 1}


def _cell(name: str, value: Any) -> Any:
    missing = value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value))
    if name == "kind":
        kind = "" if missing else str(value)
        if kind not in SAMPLE_KINDS:
            raise ValueError(f"unknown kind {kind!r} (known: {', '.join(SAMPLE_KINDS)})")
        return kind
    if missing:
        if name in _STR_FIELDS:
            return ""
        if name in _INT_FIELDS or name in _BOOL_FIELDS or name == "sm_clock_hz":
            return None
        return math.nan
    if name in _INT_FIELDS:
        number = float(value)  # "1.5" or 1.5 is no count: refused, not truncated to 1
        if not number.is_integer():
            raise ValueError(f"not an integer: {value!r}")
        shown = f"{value:g}" if isinstance(value, float) else str(value)
        if name in _COUNT_MIN and not _COUNT_MIN[name] <= number < MAX_INT_CELL:
            raise ValueError(f"{shown} is not a count in [{_COUNT_MIN[name]}, 2^53)")
        if not abs(number) < MAX_INT_CELL:
            raise ValueError(f"{shown} is not an integer below 2^53")
        return int(number)
    if name in _BOOL_FIELDS:
        text = str(value).strip().lower()
        if text not in ("true", "false", "1", "0", "1.0", "0.0"):
            raise ValueError(f"not true or false: {value!r}")
        return text in ("true", "1", "1.0")
    if name in _STR_FIELDS:
        return str(value)
    return float(value)


def read_samples(path: str | Path) -> list[KernelSample]:
    """Read samples written by `write_samples` (alias and unknown columns are ignored).

    Raises:
        ConfigError: missing file, unknown suffix, or a required column (gpu, kind, latency_s,
            avg_power_w or power_w, energy_j) absent.
    """
    path = Path(path)
    if not path.is_file():  # a directory or a pipe exists but holds no samples table
        what = "no such samples file" if not path.exists() else "not a file (a directory or a pipe)"
        raise ConfigError(f"{path}: {what}; samples are a .csv or .parquet file")
    if path.suffix not in (".parquet", ".csv"):
        raise ConfigError(f"{path}: samples are read from .parquet or .csv")
    try:
        frame = (
            pd.read_parquet(path) if path.suffix == ".parquet" else pd.read_csv(path, keep_default_na=True)
        )
    except Exception as exc:  # pyarrow / pandas parse errors, an empty file: the file is not ours
        detail = f"{type(exc).__name__}: {str(exc)[:200]}".rstrip(": ")
        raise ConfigError(
            f"{path}: not a samples file (.parquet or .csv written by `dse measure kernels`): {detail}"
        ) from None
    if "avg_power_w" not in frame and "power_w" in frame:
        frame["avg_power_w"] = frame["power_w"]
    missing = [c for c in ("gpu", "kind", "latency_s", "avg_power_w", "energy_j") if c not in frame]
    if missing:
        raise ConfigError(f"{path}: missing column(s) {', '.join(missing)}")
    columns = [c for c in FIELD_NAMES if c in frame]
    out = []
    for row, record in enumerate(frame[columns].to_dict(orient="records")):
        cells: dict[str, Any] = {}
        for name, value in record.items():
            try:
                cells[name] = _cell(name, value)
            except (ValueError, TypeError, OverflowError) as exc:
                raise ConfigError(f"{path}: row {row + 1}, column {name}: {exc}") from None
        out.append(KernelSample(**cells))
    return out


# A mean power above this multiple of the board's power limit, or an energy that disagrees with power x
# latency by more than ENERGY_SLACK, is a damaged or hand-edited row. NVML's averages overshoot the limit by
# a few % on short kernels; the slack is wide because model-generated files (locked clocks, no cap) may
# run above the limit, as the test suite's synthetic samples do (up to 2.2x). The two energies (counter,
# power x time) agree within ~20% on our measurements.
POWER_LIMIT_SLACK = 3.0
ENERGY_SLACK = 2.0
# A recorded SM clock outside (0, 10 GHz] is a damaged row (`dse measure --clocks-mhz` takes at most 10,000).
MAX_SM_CLOCK_HZ = 1e10


def _check_power(frame: pd.DataFrame, tdp_w: float) -> None:
    """ConfigError for the first row whose measured power cannot be: negative, far above the GPU's power
    limit, or not the energy over the latency (NaN power means none was measured and is allowed)."""
    power = frame["avg_power_w"].to_numpy(float)
    limit = (
        frame["power_limit_w"].to_numpy(float) if "power_limit_w" in frame else np.full(len(frame), np.nan)
    )
    limit = np.where(np.isfinite(limit) & (limit > 0), limit, tdp_w)
    energy = frame["energy_j"].to_numpy(float)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):  # 1e308 s x W: inf, no warning
        implied = power * frame["latency_s"].to_numpy(float)
        ratio = energy / implied
    measured = np.isfinite(ratio) & (power > 0)  # NaN power: none measured, nothing to compare
    checks = (
        (power < 0, "a negative avg_power_w"),
        (energy < 0, "a negative energy_j"),
        (np.isinf(energy), "an infinite energy_j"),  # NaN is "not measured"; inf was taken for it
        (power > POWER_LIMIT_SLACK * limit, f"avg_power_w over {POWER_LIMIT_SLACK:g} x the power limit"),
        (
            measured & ((ratio > ENERGY_SLACK) | (ratio < 1 / ENERGY_SLACK)),
            f"energy_j that is not avg_power_w x latency_s (within {ENERGY_SLACK:g}x)",
        ),
    )
    for bad, what in checks:
        if bad.any():
            i = int(np.nonzero(bad)[0][0])
            raise ConfigError(
                f"{row_label(frame, i)} has {what}: avg_power_w {power[i]:.4g}, latency_s "
                f"{frame['latency_s'].iloc[i]:.4g}, energy_j {energy[i]:.4g}"
            )


def _check_clocks(frame: pd.DataFrame, clock_range_hz: tuple[float, float] | None) -> None:
    """ConfigError for the first row whose requested or reported SM clock is not in (0, MAX_SM_CLOCK_HZ]
    (NaN: not locked, or not reported): a -1 Hz lock was fitted and validated as a "-0 MHz" clock; nor,
    given the GPU's `clock_range_hz`, within CLOCK_RANGE_SLACK of it (1 MHz or 5 GHz on an H100, or MHz
    written in a Hz column, were fitted)."""
    lo, hi = (0.0, MAX_SM_CLOCK_HZ) if clock_range_hz is None else clock_range_hz
    lo, hi = lo / CLOCK_RANGE_SLACK, min(hi * CLOCK_RANGE_SLACK, MAX_SM_CLOCK_HZ)
    for column in ("sm_clock_hz", "avg_sm_clock_hz"):
        clock = frame[column].to_numpy(float)
        bad = ~np.isnan(clock) & ~((clock > 0) & (clock >= lo) & (clock <= hi))
        if bad.any():
            i = int(np.nonzero(bad)[0][0])
            where = "(0, 1e+10] Hz" if clock_range_hz is None else "the GPU's SM clock range"
            raise ConfigError(
                f"{row_label(frame, i)} has {column} {clock[i]:.4g}, not a clock in {where} "
                f"({lo / 1e6:.0f}-{hi / 1e6:.0f} MHz)"
            )


# A recorded clock may lie a little outside the catalog's range (an unlisted supported clock), not 2x.
CLOCK_RANGE_SLACK = 1.5


# A kernel or forward pass timed for over an hour per call is a damaged row (1e308 s was fitted).
MAX_LATENCY_S = 3600.0
# A recorded power limit may read a little over the catalog TDP (rounding), not above it.
POWER_LIMIT_TDP_SLACK = 1.01


def row_label(frame: pd.DataFrame, i: int) -> str:
    """The label of row `i` of a checked frame, `FILE: row R, sample 'NAME'` (`row`: the row in its file,
    where the frame records it)."""
    row = f"row {frame['row'].iloc[i]}, " if "row" in frame else ""
    return f"{frame['file'].iloc[i]}: {row}sample '{frame['name'].iloc[i]}'"


def _check_latency_and_limit(frame: pd.DataFrame, tdp_w: float) -> None:
    latency = frame["latency_s"].to_numpy(float)
    bad = ~(np.isfinite(latency) & (latency > 0))
    if bad.any():
        raise ConfigError(f"{row_label(frame, int(np.nonzero(bad)[0][0]))} has no positive latency_s")
    limit = (
        frame["power_limit_w"].to_numpy(float) if "power_limit_w" in frame else np.full(len(frame), np.nan)
    )
    checks = (
        ("latency_s", latency, latency > MAX_LATENCY_S, f"s is over {MAX_LATENCY_S:g} s (an hour) per call"),
        # NaN: no limit recorded (the TDP applies); inf, 0 or -1 were taken for the TDP without a word
        (
            "power_limit_w",
            limit,
            ~np.isnan(limit) & ~((limit > 0) & (limit <= tdp_w * POWER_LIMIT_TDP_SLACK)),
            f"W is not a power limit in (0, {tdp_w:g}] W (up to the GPU's TDP)",
        ),
    )
    for column, values, bad, what in checks:
        if bad.any():
            i = int(np.nonzero(bad)[0][0])
            raise ConfigError(f"{row_label(frame, i)}, column {column}: {values[i]:.4g} {what}")


def check_sample_values(
    frame: pd.DataFrame, tdp_w: float, clock_range_hz: tuple[float, float] | None = None
) -> None:
    """ConfigError naming the file, row and sample of the first row no measurement gives: a latency that is
    not a positive number of at most an hour, a power limit that is not positive or above `tdp_w`, an
    impossible power or energy (`_check_power`, against `tdp_w` where a row records no power limit) or
    SM clock (given the GPU's `clock_range_hz`, one it cannot run within CLOCK_RANGE_SLACK). `frame`:
    `samples_frame` rows with the `file` each came from (and its `row` there, named where given)."""
    _check_latency_and_limit(frame, tdp_w)
    _check_power(frame, tdp_w)
    _check_clocks(frame, clock_range_hz)
