"""What the dataset readers share: the data root, cached CSV reads, dtype names and the hold-out split.

The files and their caveats are described in `shared/data/README.md`; read it before fitting anything.
Every loader converts units once and names the unit in the column (`latency_s`, `power_w`, `energy_j`,
`sm_clock_hz`); empty cells become NaN (or `<NA>` in integer columns). Parsed CSVs are cached per path and
each call returns a fresh copy, so callers may modify what they get.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

import numpy as np
import pandas as pd

from dse.errors import ConfigError

DATA_DIR_ENV = "DSE_DATA_DIR"

# Upstream dtype spellings -> `dse` names (fp8_block is block-scaled FP8, kept distinct from per-tensor fp8).
DTYPE_NAMES: dict[str, str] = {
    "bfloat16": "bf16",
    "bf16": "bf16",
    "float16": "fp16",
    "fp16": "fp16",
    "float32": "fp32",
    "fp32": "fp32",
    "fp8": "fp8",
    "fp8_block": "fp8_block",
}

_GIGA = 1e9
_TERA = 1e12


def data_root() -> Path:
    """Directory holding the measured datasets (the `shared/data` of the project).

    Raises:
        ConfigError: `$DSE_DATA_DIR` is set but not a directory, or no default location exists.
    """
    env = os.environ.get(DATA_DIR_ENV)
    if env:
        root = Path(env).expanduser()
        if not root.is_dir():
            raise ConfigError(f"{DATA_DIR_ENV}={env!r} is not a directory")
        return root.resolve()
    repo = Path(__file__).resolve().parents[3]  # <repo>/dse/calibrate/data/common.py
    candidates = (repo.parent / "shared" / "data", repo / "shared" / "data")
    for candidate in candidates:
        if candidate.is_dir():
            return candidate.resolve()
    looked = ", ".join(str(c) for c in candidates)
    raise ConfigError(f"measured data not found (looked in {looked}); set {DATA_DIR_ENV} to its directory")


@functools.cache
def _read_csv_cached(path: Path) -> pd.DataFrame:
    return pd.read_csv(path)


def read_data_csv(*parts: str) -> tuple[pd.DataFrame, Path]:
    path = data_root().joinpath(*parts)
    if not path.is_file():
        raise ConfigError(f"{path}: data file missing (is {DATA_DIR_ENV} or the data root right?)")
    return _read_csv_cached(path).copy(), path


def gpu_key(gpu: str) -> str:
    """aiconfigurator names systems `h100_sxm`; accept the catalog's hyphenated `h100-sxm` too."""
    return gpu.strip().lower().replace("-", "_")


def choose(what: str, value: str, allowed: dict[str, str]) -> str:
    if value not in allowed:
        raise ConfigError(f"unknown {what} {value!r}; allowed: {', '.join(sorted(allowed))}")
    return allowed[value]


def dtype_column(values: pd.Series, source: str) -> pd.Series:
    unknown = sorted(set(values.dropna().unique()) - DTYPE_NAMES.keys())
    if unknown:
        raise ConfigError(f"{source}: unknown dtype(s) {unknown}; known: {', '.join(DTYPE_NAMES)}")
    return values.map(DTYPE_NAMES)


def optional_column(df: pd.DataFrame, column: str) -> pd.Series:
    return df[column].astype(float) if column in df else pd.Series(np.nan, index=df.index)


def split_holdout(df: pd.DataFrame, frac: float = 0.2, seed: int = 0) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Deterministic random hold-out split: (train, test) with round(frac * len(df)) test rows.

    Rows are drawn by `numpy.random.default_rng(seed).permutation`; both parts keep the original row
    order and index.
    """
    if not 0.0 <= frac <= 1.0:
        raise ConfigError(f"hold-out fraction must be in [0, 1], got {frac}")
    order = np.random.default_rng(seed).permutation(len(df))
    num_test = round(frac * len(df))
    test_pos = np.sort(order[:num_test])
    train_pos = np.sort(order[num_test:])
    return df.iloc[train_pos].copy(), df.iloc[test_pos].copy()
